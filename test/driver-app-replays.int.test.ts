import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { presenceIndex } from '../shared/services/dispatch.ts';
import { insertOfferedBooking } from './helpers/bookings.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * The driver app's API through real HTTP with a driver's bearer token, where a request repeats
 * or half-repeats an earlier one: `completed` sent again with another payment (409, never a
 * silent 200), going off duty with no position (a phone without a fix), 0,0 as a position,
 * and progress or a hand-back on an offer not accepted yet (409, not a misleading 404).
 */
let env: TestEnv;
let srv: Served;

beforeAll(async () => {
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000' } });
  srv = await serve(await appFor(env));
});
afterAll(async () => {
  await srv?.close();
  await env?.cleanup();
});

// biome-ignore lint/suspicious/noExplicitAny: answers read back in assertions
type Json = Record<string, any>;

async function call(method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${srv.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as Json, text };
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const newReference = () =>
  `${env.config.bookings.referencePrefix}-${Array.from({ length: 6 }, () => CROCKFORD[randomInt(32)]).join('')}`;

const status = (ref: string, token: string, body: Json) =>
  call('POST', `/api/public/v1/jobs/${ref}/status`, token, body);
const presence = (token: string, body: Json) => call('POST', '/api/public/v1/driver/presence', token, body);

/** A job offered to the driver, accepted and driven to the passenger on board. */
async function onBoard(driver: { id: string; token: string }, paymentMethod?: string) {
  const b = await insertOfferedBooking(env.rt.db, newReference(), { driverId: driver.id });
  if (paymentMethod) await env.rt.db('bookings').where({ id: b.id }).update({ payment_method: paymentMethod });
  const accepted = await call('POST', `/api/public/v1/jobs/${b.reference}/accept`, driver.token);
  expect(accepted.status, accepted.text).toBe(200);
  const boarded = await status(b.reference, driver.token, { status: 'passenger_on_board' });
  expect(boarded.status, boarded.text).toBe(200);
  return b;
}

const records = (bookingId: string) =>
  env.rt
    .db('settlement_records')
    .where({ booking_id: bookingId })
    .orderBy('id')
    .select('id', 'kind', 'method', 'amount_pence', 'processor_fee_pence');

const completions = async (bookingId: string) =>
  (await env.rt.db('booking_status_history').where({ booking_id: bookingId, status: 'completed' })).length;

describe('completed reported again', () => {
  it('answers 200 only for the payment recorded (or none), and 409 naming it for another', async () => {
    const d = await approvedDriver(env.rt.db);
    const b = await onBoard(d, 'account');
    const first = await status(b.reference, d.token, {
      status: 'completed',
      payment: { method: 'account', amountGBP: 0 },
    });
    expect(first.status, first.text).toBe(200);
    const [recorded] = await records(b.id);
    expect(recorded).toMatchObject({ kind: 'account_charged', method: 'account', amount_pence: 0 });

    // A retry of the same report, and one without a payment: the same answer, nothing new.
    for (const again of [
      { status: 'completed', payment: { method: 'account', amountGBP: 0 } },
      { status: 'completed' },
    ]) {
      const r = await status(b.reference, d.token, again);
      expect(r.status, r.text).toBe(200);
      expect(r.json).toEqual({ bookingReference: b.reference, status: 'completed' });
    }

    // Another payment: refused, saying what was recorded and how a correction is made.
    const other = await status(b.reference, d.token, {
      status: 'completed',
      payment: { method: 'cash', amountGBP: 30 },
    });
    expect(other.status, other.text).toBe(409);
    expect(other.json.error.code).toBe('conflict');
    expect(other.json.error.message).toBe(
      `${b.reference} was completed with £0.00 on account recorded (settlement record ${recorded.id}), not £30.00 in cash. ` +
        `A recorded payment is never changed or replaced: to correct it, ask the operators to append a correction to record ${recorded.id} ` +
        `(admin CLI: settlement record --booking ${b.reference} --kind correction --corrects ${recorded.id}).`,
    );
    expect(other.json.error.details).toEqual([
      { field: '/payment', problem: 'differs from the payment recorded: £0.00 on account' },
    ]);
    // The same method with another amount is another payment too.
    const more = await status(b.reference, d.token, {
      status: 'completed',
      payment: { method: 'account', amountGBP: 42 },
    });
    expect(more.status, more.text).toBe(409);

    expect(await records(b.id)).toEqual([recorded]);
    expect(await completions(b.id)).toBe(1);
  });

  it('compares the card processing fee too, and still refuses a payment that could never be recorded', async () => {
    const d = await approvedDriver(env.rt.db);
    const b = await onBoard(d);
    const paid = { status: 'completed', payment: { method: 'card', amountGBP: 28.4, processorFeeGBP: 0.45 } };
    expect((await status(b.reference, d.token, paid)).status).toBe(200);
    expect((await status(b.reference, d.token, paid)).status).toBe(200);
    const fee = await status(b.reference, d.token, {
      status: 'completed',
      payment: { method: 'card', amountGBP: 28.4, processorFeeGBP: 0.5 },
    });
    expect(fee.status, fee.text).toBe(409);
    expect(fee.json.error.details).toEqual([
      { field: '/payment', problem: 'differs from the payment recorded: £28.40 by card (fee £0.45)' },
    ]);
    // Invalid whatever was recorded: the same 400 as on the first report.
    const cashFee = await status(b.reference, d.token, {
      status: 'completed',
      payment: { method: 'cash', amountGBP: 28.4, processorFeeGBP: 0.45 },
    });
    expect(cashFee.status, cashFee.text).toBe(400);
    expect(await records(b.id)).toEqual([
      expect.objectContaining({ kind: 'card_paid', amount_pence: 2840, processor_fee_pence: 45 }),
    ]);
    expect(await completions(b.id)).toBe(1);
  });

  it('does not add a payment to a job completed without one (409), nor refuse a report without one', async () => {
    const d = await approvedDriver(env.rt.db);
    const b = await onBoard(d);
    // Completed some other way than this API (no settlement record of the driver's).
    await env.rt.db('bookings').where({ id: b.id }).update({ status: 'completed' });
    const paid = await status(b.reference, d.token, {
      status: 'completed',
      payment: { method: 'cash', amountGBP: 30 },
    });
    expect(paid.status, paid.text).toBe(409);
    expect(paid.json.error).toMatchObject({
      code: 'conflict',
      details: [{ field: '/payment', problem: 'the job is completed; no payment was recorded with it' }],
    });
    expect(paid.json.error.message).toContain(`settlement record --booking ${b.reference}`);
    expect((await status(b.reference, d.token, { status: 'completed' })).status).toBe(200);
    expect(await records(b.id)).toEqual([]);
  });
});

describe('presence', () => {
  const MANCHESTER = { lat: 53.4774, lng: -2.2309 };
  const live = async (driverId: string) =>
    (await presenceIndex(env.rt.redis, env.config).positions([driverId], Date.now())).get(driverId);
  const row = (driverId: string) =>
    env.rt.db('drivers').where({ id: driverId }).first('available', 'last_lat', 'last_lng');

  it('goes off duty without a position: off the map at once, the last known location kept', async () => {
    const d = await approvedDriver(env.rt.db);
    const on = await presence(d.token, { available: true, ...MANCHESTER });
    expect(on.status, on.text).toBe(200);
    expect(await live(d.id)).toBeDefined();
    const off = await presence(d.token, { available: false });
    expect(off.status, off.text).toBe(200);
    expect(off.json).toMatchObject({ available: false });
    expect(await live(d.id)).toBeUndefined();
    expect(await row(d.id)).toEqual({ available: false, last_lat: MANCHESTER.lat, last_lng: MANCHESTER.lng });
    // Off again with the "no fix" position: answered the same, 0,0 not kept as where they were.
    const noFix = await presence(d.token, { available: false, lat: 0, lng: 0 });
    expect(noFix.status, noFix.text).toBe(200);
    expect(await row(d.id)).toEqual({ available: false, last_lat: MANCHESTER.lat, last_lng: MANCHESTER.lng });
  });

  it('needs a position to take jobs, and refuses 0,0 (no location fix), but not other places', async () => {
    const d = await approvedDriver(env.rt.db);
    const none = await presence(d.token, { available: true });
    expect(none.status, none.text).toBe(400);
    expect(none.json.error.code).toBe('invalid_input');
    expect(none.json.error.details).toEqual([
      { field: '/lat', problem: 'is required' },
      { field: '/lng', problem: 'is required' },
    ]);
    const zero = await presence(d.token, { available: true, lat: 0, lng: 0 });
    expect(zero.status, zero.text).toBe(400);
    expect(zero.json.error.code).toBe('invalid_input');
    expect(zero.json.error.message).toMatch(/^Latitude 0, longitude 0 is what a phone without a location fix reports/);
    expect(zero.json.error.details.map((x: Json) => x.field)).toEqual(['/lat', '/lng']);
    expect(await live(d.id)).toBeUndefined();
    expect(await row(d.id)).toMatchObject({ available: false, last_lat: null });
    // Only exactly 0,0: the equator or the meridian elsewhere, or a driver abroad, is a position.
    for (const at of [
      { lat: 0, lng: -2.2 },
      { lat: 51.48, lng: 0 },
      { lat: 40.7128, lng: -74.006 },
    ]) {
      const r = await presence(d.token, { available: true, ...at });
      expect(r.status, r.text).toBe(200);
    }
    expect(await live(d.id)).toBeDefined();
    expect((await presence(d.token, { available: false })).status).toBe(200);
    expect(await live(d.id)).toBeUndefined();
  });

  it('documents lat and lng as required only when available is true', async () => {
    const res = await fetch(`${srv.url}/api/public/openapi.json`);
    const doc = (await res.json()) as Json;
    const schema = doc.paths['/api/public/v1/driver/presence'].post.requestBody.content['application/json'].schema;
    expect(schema.required).toEqual(['available']);
    expect(schema.if).toEqual({ properties: { available: { const: true } }, required: ['available'] });
    expect(schema.then).toEqual({ required: ['lat', 'lng'] });
    expect(schema.properties.lat.description).toMatch(/^Required when available is true/);
  });
});

describe('an offer not accepted yet', () => {
  it('is 409 conflict for progress and hand-back (accept or decline it), and a job never offered stays 404', async () => {
    const d = await approvedDriver(env.rt.db);
    const stranger = await approvedDriver(env.rt.db);
    const b = await insertOfferedBooking(env.rt.db, newReference(), { driverId: d.id });
    const feed = await call('GET', '/api/public/v1/jobs', d.token);
    expect(feed.json.jobs).toEqual([expect.objectContaining({ bookingReference: b.reference, state: 'offered' })]);

    const enRoute = await status(b.reference, d.token, { status: 'driver_en_route' });
    expect(enRoute.status, enRoute.text).toBe(409);
    expect(enRoute.json.error).toEqual({
      code: 'conflict',
      message: `${b.reference} is offered to you, not accepted yet: accept the offer first (POST /api/public/v1/jobs/${b.reference}/accept), then report progress.`,
      details: [{ field: '/ref', problem: 'the offer has not been accepted' }],
    });
    // In lower case, as the API reads a reference: the same.
    expect((await status(b.reference.toLowerCase(), d.token, { status: 'driver_en_route' })).status).toBe(409);
    const back = await call('POST', `/api/public/v1/jobs/${b.reference}/hand-back`, d.token, {});
    expect(back.status, back.text).toBe(409);
    expect(back.json.error).toMatchObject({
      code: 'conflict',
      message: `${b.reference} is offered to you, not accepted: there is nothing to hand back. Decline the offer instead (POST /api/public/v1/jobs/${b.reference}/decline).`,
    });

    // Someone it was never offered to learns nothing of it.
    for (const r of [
      await status(b.reference, stranger.token, { status: 'driver_en_route' }),
      await call('POST', `/api/public/v1/jobs/${b.reference}/hand-back`, stranger.token, {}),
    ]) {
      expect(r.status, r.text).toBe(404);
      expect(r.json.error).toMatchObject({ code: 'job_not_found', message: `No job ${b.reference} for you.` });
    }

    // Nothing changed: still dispatching, still offered.
    expect(await env.rt.db('bookings').where({ id: b.id }).first('status', 'driver_id')).toEqual({
      status: 'dispatching',
      driver_id: null,
    });
    expect(await env.rt.db('dispatch_offers').where({ id: b.offerId }).first('state')).toEqual({ state: 'offered' });

    // Accepted, progress goes ahead.
    expect((await call('POST', `/api/public/v1/jobs/${b.reference}/accept`, d.token)).status).toBe(200);
    // found in a probe: a payment sent with another step was neither checked nor recorded, and the step taken
    const withPayment = await status(b.reference, d.token, {
      status: 'driver_en_route',
      payment: { method: 'card', amountGBP: 5, processorFeeGBP: 4 },
    });
    expect(withPayment.status, withPayment.text).toBe(400);
    expect(withPayment.json.error).toMatchObject({
      code: 'invalid_input',
      details: [{ field: '/payment', problem: 'only allowed when status is completed' }],
    });
    expect((await env.rt.db('bookings').where({ id: b.id }).first('status')).status).toBe('driver_assigned');
    expect((await status(b.reference, d.token, { status: 'driver_en_route' })).status).toBe(200);

    // found in a probe: a hand-back sent again (its answer lost) was 404 "no job"
    for (let i = 0; i < 2; i++) {
      const handed = await call('POST', `/api/public/v1/jobs/${b.reference}/hand-back`, d.token, {
        reason: 'car broke',
      });
      expect(handed.status, handed.text).toBe(200);
      expect(handed.json).toEqual({ bookingReference: b.reference, state: 'handed_back' });
    }
    const history = await env.rt
      .db('booking_status_history')
      .where({ booking_id: b.id })
      .orderBy('seq')
      .pluck('status');
    expect(history.filter((s: string) => s === 'dispatching').length).toBe(1);
    // Handed back, the job is not theirs: progress is 404 as for a job never theirs.
    expect((await status(b.reference, d.token, { status: 'driver_arrived' })).status).toBe(404);
    // Someone it was never offered to still learns nothing.
    expect((await call('POST', `/api/public/v1/jobs/${b.reference}/hand-back`, stranger.token, {})).status).toBe(404);
    // found in review: an offer declined with a reason that reads "handed back" is no hand-back
    const declined = await insertOfferedBooking(env.rt.db, newReference(), { driverId: stranger.id });
    const no = await call('POST', `/api/public/v1/jobs/${declined.reference}/decline`, stranger.token, {
      reason: 'handed back to base',
    });
    expect(no.status, no.text).toBe(200);
    expect((await call('POST', `/api/public/v1/jobs/${declined.reference}/hand-back`, stranger.token, {})).status).toBe(
      404,
    );
  });

  it('stays 404 once the offer is no longer open (expired): the job is not in the feed', async () => {
    const d = await approvedDriver(env.rt.db);
    const b = await insertOfferedBooking(env.rt.db, newReference(), { driverId: d.id });
    await env.rt
      .db('dispatch_offers')
      .where({ id: b.offerId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    expect((await call('GET', '/api/public/v1/jobs', d.token)).json.jobs).toEqual([]);
    const r = await status(b.reference, d.token, { status: 'driver_en_route' });
    expect(r.status, r.text).toBe(404);
    expect(r.json.error.code).toBe('job_not_found');
  });
});
