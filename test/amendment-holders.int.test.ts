import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendStatus } from '../shared/db/bookings.ts';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { readSigned } from './helpers/signed-webhook.ts';
import { webhookEventChecker } from './helpers/webhook-schemas.ts';

/**
 * A partner's amendment reaches whoever holds the job, through partner intake over HTTP: an
 * open offer made with the old details is withdrawn (the driver texted) and the job offered
 * again; an assigned driver is texted; an amendment the assigned driver's vehicle cannot take
 * is refused 409 and changes nothing; a partner operator holding it gets a signed
 * `booking.amended` webhook, checked by the independent `standardwebhooks` library.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let partnerKey: string;
let hooks: http.Server;
let hooksUrl: string;
/** What the operator's webhook endpoint received: the body and whether its signature verified. */
const received: { body: string; verified: boolean }[] = [];
let operatorSecret = '';

beforeAll(async () => {
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', QUOTE_LIMIT_PER_HOUR: '100000' } });
  await syncBuiltInTariffs(env.rt.db);
  hooks = http.createServer(async (req, res) => {
    const { body, verified } = await readSigned(req, [operatorSecret]);
    received.push({ body, verified });
    res.statusCode = 204;
    res.end();
  });
  hooks.listen(0, '127.0.0.1');
  await once(hooks, 'listening');
  hooksUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/operator-hooks`;
  roles = startRoles(['pricing', 'outbox-relay', 'fanout'], env.rt);
  api = await serve(await appFor(env));
  partnerKey = (await createPartner(env.rt.db, env.config, { name: 'Amending Partner', actor: 'test' })).apiKey;
}, 60_000);
afterAll(async () => {
  await roles?.close();
  hooks?.close();
  await api?.close();
  await env?.cleanup();
});

const pickupAt = new Date(Date.now() + 2 * 3600_000).toISOString();

async function send(jobRef: string, change: Record<string, unknown> = {}, action?: 'amend') {
  const res = await fetch(`${api.url}/api/public/v1/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${partnerKey}` },
    body: JSON.stringify({
      jobRef,
      ...(action ? { action } : {}),
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      pickupTime: pickupAt,
      passengerName: 'Ada Lovelace',
      passengerPhone: '07700 900123',
      vehicleType: 'saloon',
      ...change,
    }),
  });
  const body = (await res.json()) as {
    results: { bookingReference: string; outcome: string; status: number; error: { code: string } | null }[];
  };
  return { status: res.status, result: body.results[0] as (typeof body.results)[number] };
}

async function bookingOf(jobRef: string, change: Record<string, unknown> = {}) {
  const { result } = await send(jobRef, change);
  expect(result.outcome).toBe('created');
  return env.rt.db('bookings').where({ reference: result.bookingReference }).first();
}

/** The booking being dispatched, with an open offer to the driver (as dispatch would have made it). */
async function openOffer(bookingId: string, driverId: string): Promise<string> {
  const id = uuidv7();
  await env.rt.db('bookings').where({ id: bookingId }).update({ status: 'dispatching' });
  await env.rt.db('dispatch_offers').insert({
    id,
    booking_id: bookingId,
    tier: 1,
    attempt: 1,
    driver_id: driverId,
    state: 'offered',
    offered_at: new Date(),
    expires_at: new Date(Date.now() + 10 * 60_000),
  });
  return id;
}

const changedTexts = (bookingId: string) =>
  env.rt.db('outbound_messages').where({ booking_id: bookingId, purpose: 'job_changed' }).orderBy('created_at');

describe('an amendment reaches whoever holds the job', () => {
  it('withdraws an open offer made with the old details, texts its driver and offers the job again', async () => {
    const driver = await approvedDriver(env.rt.db);
    // Picked up in 20 minutes: inside the lead time, so being dispatched, as it would be.
    const soon = { pickupTime: new Date(Date.now() + 20 * 60_000).toISOString() };
    const booking = await bookingOf('AMEND-OFFER', soon);
    const offerId = await openOffer(booking.id, driver.id);

    const { result } = await send('AMEND-OFFER', { ...soon, passengers: 3 }, 'amend');
    expect(result.outcome).toBe('amended');
    expect((await env.rt.db('dispatch_offers').where({ id: offerId }).first('state')).state).toBe('withdrawn');
    const texts = await changedTexts(booking.id);
    // By SMS and WhatsApp, as its job card went.
    expect(texts.map((m) => [m.driver_id, m.channel]).sort()).toEqual([
      [driver.id, 'sms'],
      [driver.id, 'whatsapp'],
    ]);
    expect(texts[0]?.body).toContain('withdrawn');
    // The next step is queued at once, to offer the job as it now is.
    const step = await env.rt
      .db('outbox')
      .where({ job_name: 'dispatch-booking' })
      .where('job_id', 'like', `dispatch-${booking.id}-amended-%`)
      .first('run_at');
    expect(step).toBeDefined();
    expect(step.run_at).toBeNull();
  });

  it('puts a booking being dispatched back to pending, offers withdrawn, when its pickup moves days later', async () => {
    const driver = await approvedDriver(env.rt.db);
    const booking = await bookingOf('AMEND-LATER');
    const offerId = await openOffer(booking.id, driver.id);
    const later = new Date(Date.now() + 2 * 24 * 3600_000);
    later.setUTCSeconds(0, 0);
    const { result } = await send('AMEND-LATER', { pickupTime: later.toISOString() }, 'amend');
    expect(result.outcome).toBe('amended');
    expect((await env.rt.db('dispatch_offers').where({ id: offerId }).first('state')).state).toBe('withdrawn');
    expect((await env.rt.db('bookings').where({ id: booking.id }).first('status')).status).toBe('pending');
    const dispatchAt = later.getTime() - env.config.bookings.dispatchLeadMinutes * 60_000;
    const job = await env.rt
      .db('outbox')
      .where({ job_id: `dispatch-${booking.id}-at-${dispatchAt}` })
      .first('run_at');
    expect(job?.run_at?.getTime()).toBe(dispatchAt);
    // Not offered again now.
    expect(
      await env.rt.db('outbox').where('job_id', 'like', `dispatch-${booking.id}-amended-%`).first(),
    ).toBeUndefined();
  });

  it('texts an assigned driver when the journey changes, not for the passenger’s own details', async () => {
    const driver = await approvedDriver(env.rt.db);
    const vehicle = await env.rt.db('vehicles').where({ driver_id: driver.id }).first('id');
    const booking = await bookingOf('AMEND-ASSIGNED');
    await env.rt
      .db('bookings')
      .where({ id: booking.id })
      .update({ status: 'driver_assigned', driver_id: driver.id, vehicle_id: vehicle.id });

    expect((await send('AMEND-ASSIGNED', { notes: 'Gate code 1234' }, 'amend')).result.outcome).toBe('amended');
    expect(await changedTexts(booking.id)).toEqual([]);

    const later = new Date(Date.now() + 3 * 3600_000).toISOString();
    expect((await send('AMEND-ASSIGNED', { pickupTime: later }, 'amend')).result.outcome).toBe('amended');
    const texts = await changedTexts(booking.id);
    expect(texts.map((m) => [m.driver_id, m.channel]).sort()).toEqual([
      [driver.id, 'sms'],
      [driver.id, 'whatsapp'],
    ]);
    expect(texts[0]?.body).toContain(booking.reference);
  });

  it('refuses 409 an amendment the assigned driver’s vehicle cannot take, and changes nothing', async () => {
    const driver = await approvedDriver(env.rt.db);
    const vehicle = await env.rt.db('vehicles').where({ driver_id: driver.id }).first('id');
    const booking = await bookingOf('AMEND-TOO-MANY');
    await env.rt
      .db('bookings')
      .where({ id: booking.id })
      .update({ status: 'driver_assigned', driver_id: driver.id, vehicle_id: vehicle.id });

    // Six passengers in an MPV: the driver's four-seat saloon cannot take them.
    const { result } = await send('AMEND-TOO-MANY', { passengers: 6, vehicleType: 'mpv' }, 'amend');
    expect(result.status).toBe(409);
    expect(result.error?.code).toBe('conflict');
    const after = await env.rt.db('bookings').where({ id: booking.id }).first();
    expect(after).toMatchObject({ passengers: 1, vehicle_type: 'saloon', fare_pence: booking.fare_pence });
    expect(await env.rt.db('booking_amendments').where({ booking_id: booking.id })).toEqual([]);
    expect(await changedTexts(booking.id)).toEqual([]);
  });

  it('sends a partner operator holding the job a signed booking.amended webhook with the job as it now is', async () => {
    const operator = await createPartner(env.rt.db, env.config, {
      name: 'Holding Operator',
      webhookUrl: hooksUrl,
      operator: { fleetClasses: ['saloon', 'estate', 'mpv'], fleetCapacity: 5 },
      actor: 'test',
    });
    operatorSecret = operator.webhookSecret as string;
    const booking = await bookingOf('AMEND-OPERATOR');
    // The operator accepts as it does through its feed: the assignment is a status change, and
    // its status webhook to the operator holds the booking's current sequence.
    await env.rt.db.transaction(async (trx) => {
      await trx('bookings').where({ id: booking.id }).update({ operator_partner_id: operator.id, dispatch_tier: 3 });
      await appendStatus(trx, booking.id, 'driver_assigned', 'test');
    });
    await eventually(async () => expect(received).toHaveLength(1));
    expect(JSON.parse(received[0]?.body as string).type).toBe('booking.status');
    // Each event is what the OpenAPI document's `webhooks` says it is, field for field.
    const statusEvent = await webhookEventChecker(api.url, 'bookingStatus');
    expect(statusEvent(JSON.parse(received[0]?.body as string))).toEqual([]);
    // found in a probe: the operator was sent the booking partner's own jobRef
    expect(JSON.parse(received[0]?.body as string).data).toMatchObject({
      bookingReference: booking.reference,
      jobRef: null,
    });
    received.length = 0;

    const later = new Date(Date.now() + 5 * 3600_000);
    later.setUTCSeconds(0, 0);
    const amended = await send(
      'AMEND-OPERATOR',
      { pickupTime: later.toISOString(), passengers: 3, notes: 'Two suitcases' },
      'amend',
    );
    expect(amended.result.outcome).toBe('amended');
    const after = await env.rt.db('bookings').where({ id: booking.id }).first('fare_pence');
    await eventually(async () => expect(received).toHaveLength(1));
    expect(received[0]?.verified).toBe(true);
    const event = JSON.parse(received[0]?.body as string);
    expect(event.type).toBe('booking.amended');
    expect((await webhookEventChecker(api.url, 'bookingAmended'))(event)).toEqual([]);
    expect(event.data).toMatchObject({
      bookingReference: booking.reference,
      // the booker's reference is the booker's: the operator knows the job by ours
      jobRef: null,
      status: 'driver_assigned',
      changed: expect.arrayContaining(['pickupTime', 'passengers', 'notes']),
      job: {
        pickupTime: later.toISOString(),
        passengers: 3,
        vehicleType: 'saloon',
        fareGBP: after.fare_pence / 100,
        passenger: { name: 'Ada Lovelace' },
        notes: 'Two suitcases',
      },
    });
    expect(event.data.job.pickup.name).toContain('Piccadilly');
    expect(await changedTexts(booking.id)).toEqual([]);

    // A change the operator cannot see (the passenger's e-mail) sends nothing.
    const emailOnly = await send(
      'AMEND-OPERATOR',
      { pickupTime: later.toISOString(), passengers: 3, notes: 'Two suitcases', passengerEmail: 'ada@example.org' },
      'amend',
    );
    expect(emailOnly.result.outcome).toBe('amended');
    // A second amendment is delivered too (both leave the status, and its sequence, as it was).
    const again = await send(
      'AMEND-OPERATOR',
      { pickupTime: later.toISOString(), passengers: 2, notes: 'Two suitcases', passengerEmail: 'ada@example.org' },
      'amend',
    );
    expect(again.result.outcome).toBe('amended');
    await eventually(async () => expect(received).toHaveLength(2));
    expect(JSON.parse(received[1]?.body as string).data).toMatchObject({
      changed: expect.arrayContaining(['passengers']),
      job: { passengers: 2 },
    });
    const deliveries = await env.rt.db('webhook_deliveries').where({ booking_id: booking.id }).orderBy('created_at');
    expect(deliveries.map((d) => d.event_type)).toEqual(['booking.status', 'booking.amended', 'booking.amended']);

    // A wheelchair-accessible vehicle, which this operator's fleet (saloon, estate, MPV) has
    // none of: refused 409 as a driver's vehicle's mismatch is, and nothing changes or is sent.
    const before = await env.rt.db('bookings').where({ id: booking.id }).first('vehicle_type', 'fare_pence');
    const wav = await send(
      'AMEND-OPERATOR',
      {
        pickupTime: later.toISOString(),
        passengers: 2,
        notes: 'Two suitcases',
        passengerEmail: 'ada@example.org',
        vehicleType: 'wav',
      },
      'amend',
    );
    expect(wav.result).toMatchObject({ outcome: 'rejected', status: 409 });
    expect(wav.result.error).toMatchObject({
      code: 'conflict',
      details: [{ field: '/vehicleType', problem: 'wrong class' }],
    });
    expect(await env.rt.db('bookings').where({ id: booking.id }).first('vehicle_type', 'fare_pence')).toEqual(before);
    expect(await env.rt.db('webhook_deliveries').where({ booking_id: booking.id }).count({ n: '*' })).toEqual([
      { n: 3 },
    ]);
  });

  it('sends a partner operator holding the job a signed booking.status webhook when the passenger cancels it', async () => {
    const operator = await createPartner(env.rt.db, env.config, {
      name: 'Cancelled Operator',
      webhookUrl: hooksUrl,
      operator: { fleetClasses: ['saloon'], fleetCapacity: 5 },
      actor: 'test',
    });
    operatorSecret = operator.webhookSecret as string;
    received.length = 0;
    const booking = await bookingOf('CANCEL-OPERATOR', { passengerEmail: 'ada.cancels@example.org' });
    await env.rt.db.transaction(async (trx) => {
      await trx('bookings').where({ id: booking.id }).update({ operator_partner_id: operator.id, dispatch_tier: 3 });
      await appendStatus(trx, booking.id, 'driver_assigned', 'test');
    });
    await eventually(async () => expect(received).toHaveLength(1));

    // The passenger cancels through the lookup-and-cancel route, with the e-mail in another case.
    const cancel = await fetch(`${api.url}/api/public/v1/booking/${booking.reference}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'cancel', email: 'Ada.Cancels@Example.org' }),
    });
    expect(cancel.status, await cancel.clone().text()).toBe(200);
    await eventually(async () => expect(received).toHaveLength(2));
    expect(received[1]?.verified).toBe(true);
    const event = JSON.parse(received[1]?.body as string);
    expect(event.type).toBe('booking.status');
    expect(event.data).toMatchObject({ bookingReference: booking.reference, status: 'cancelled' });
    const deliveries = await env.rt.db('webhook_deliveries').where({ booking_id: booking.id }).orderBy('created_at');
    expect(deliveries.map((d) => d.event_type)).toEqual(['booking.status', 'booking.status']);
  });
});
