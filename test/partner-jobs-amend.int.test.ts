import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../shared/errors.ts';
import { loadPartner, processJobs } from '../shared/services/intake.ts';
import { type CreatedPartner, createPartner } from '../shared/services/partners.ts';
import type { PricingClient } from '../shared/services/pricing-client.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * A partner's `amend` through real HTTP, HMAC-signed (x-partner, x-signature) as partners send
 * it: it changes what it sends and keeps what it leaves out (a merge over the job as last
 * received); a clearable field sent as null is cleared; pickup, dropoff and pickupTime are
 * required for `new` only; an amendment that changes nothing is `unchanged` and tells nobody;
 * the job is re-priced only when what its price depends on changes; concurrent amendments of
 * different fields both stand.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let partner: CreatedPartner;
let farePartner: CreatedPartner;

type Result = {
  index: number;
  jobRef: string | null;
  action: string | null;
  outcome: string;
  status: number;
  bookingReference: string | null;
  error: { code: string; message: string; details: Array<{ field: string; problem: string }> } | null;
};
type Json = { results: Result[]; summary: { received: number; succeeded: number; failed: number } };

const inHours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();
const PICKUP_TIME = inHours(6);
const JOURNEY = { pickup: 'Manchester Piccadilly', dropoff: 'Manchester Airport', pickupTime: PICKUP_TIME };

beforeAll(async () => {
  env = await createTestEnv({
    env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', RATE_LIMIT_PER_KEY_PER_MINUTE: '100000' },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env));
  partner = await createPartner(env.rt.db, env.config, { name: 'Amend Travel', actor: 'test' });
  farePartner = await createPartner(env.rt.db, env.config, { name: 'Amend Fares', canSetFares: true, actor: 'test' });
}, 60_000);
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

/** One request, signed over its raw body with the partner's signing secret. */
async function signed(body: unknown, p: CreatedPartner = partner) {
  const raw = JSON.stringify(body);
  const res = await fetch(`${api.url}/api/public/v1/jobs`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-partner': p.id,
      'x-signature': createHmac('sha256', p.signingSecret).update(raw).digest('hex'),
    },
    body: raw,
  });
  const text = await res.text();
  const json = JSON.parse(text) as Json;
  return { status: res.status, text, json, result: json.results?.[0] as Result };
}

const bookingOfJob = async (jobRef: string, partnerId = partner.id) => {
  const j = await env.rt.db('partner_jobs').where({ partner_id: partnerId, job_ref: jobRef }).first('booking_id');
  return env.rt.db('bookings').where({ id: j.booking_id }).first();
};
const amendments = (bookingId: string) => env.rt.db('booking_amendments').where({ booking_id: bookingId });
const changedTexts = (bookingId: string) =>
  env.rt.db('outbound_messages').where({ booking_id: bookingId, purpose: 'job_changed' });

describe('an amend changes what it sends and keeps what it leaves out', () => {
  it('keeps the passenger’s name and phone (and notes and flight) an amendment of the journey leaves out', async () => {
    const made = await signed({
      jobRef: 'am-2',
      ...JOURNEY,
      passengerName: 'Ann Amend',
      passengerPhone: '+447700900111',
      passengerEmail: 'ann@example.com',
      flightNumber: 'BA 123',
      notes: 'Meet at arrivals',
    });
    expect(made.status, made.text).toBe(201);
    const amend = { jobRef: 'am-2', action: 'amend', ...JOURNEY, passengers: 2 };
    const amended = await signed(amend);
    expect(amended.status, amended.text).toBe(200);
    expect(amended.result).toMatchObject({ outcome: 'amended', bookingReference: made.result.bookingReference });
    const after = await bookingOfJob('am-2');
    expect(after).toMatchObject({
      passengers: 2,
      passenger_name: 'Ann Amend',
      passenger_phone: '+447700900111',
      passenger_email: 'ann@example.com',
      flight_number: 'BA 123',
      notes: 'Meet at arrivals',
    });
    // The amendment is recorded as what it changed: the passengers (and the fare they cost),
    // nothing of what it left out.
    const [recorded] = await amendments(after.id);
    const fields = (recorded.changes as { field: string }[]).map((c) => c.field);
    expect(fields).toContain('passengers');
    for (const left of ['passengerName', 'passengerPhone', 'passengerEmail', 'flightNumber', 'notes']) {
      expect(fields).not.toContain(left);
    }

    // The same amendment again, or one that restates part of the job as it stands: unchanged.
    const again = await signed(amend);
    expect(again.result).toMatchObject({ outcome: 'unchanged', status: 200 });
    const restated = await signed({ jobRef: 'am-2', action: 'amend', passengerName: 'Ann Amend', passengers: 2 });
    expect(restated.result.outcome).toBe('unchanged');
    expect(await amendments(after.id)).toHaveLength(1);

    // Only the notes: the rest stays.
    const notes = await signed({ jobRef: 'am-2', action: 'amend', notes: 'Gate 5' });
    expect(notes.result.outcome, notes.text).toBe('amended');
    expect(await bookingOfJob('am-2')).toMatchObject({
      passengers: 2,
      passenger_name: 'Ann Amend',
      passenger_phone: '+447700900111',
      flight_number: 'BA 123',
      notes: 'Gate 5',
      pickup_time: new Date(PICKUP_TIME),
    });
  });

  it('clears a field sent as null (to its default) and refuses null where a job cannot be without it', async () => {
    const made = await signed({
      jobRef: 'am-null',
      ...JOURNEY,
      passengerName: 'Bea Null',
      passengerPhone: '+447700900222',
      passengerEmail: 'bea@example.com',
      flightNumber: 'EZY 45',
      notes: 'Child seat',
      vehicleType: 'estate',
    });
    expect(made.status, made.text).toBe(201);
    const cleared = await signed({
      jobRef: 'am-null',
      action: 'amend',
      passengerName: null,
      passengerPhone: null,
      passengerEmail: null,
      flightNumber: null,
      notes: null,
      vehicleType: null,
    });
    expect(cleared.result.outcome, cleared.text).toBe('amended');
    const after = await bookingOfJob('am-null');
    expect(after).toMatchObject({
      passenger_name: 'Passenger',
      passenger_phone: null,
      passenger_email: null,
      flight_number: null,
      notes: null,
      vehicle_type: 'saloon',
    });
    // Cleared again: nothing to change.
    expect((await signed({ jobRef: 'am-null', action: 'amend', notes: null })).result.outcome).toBe('unchanged');

    // pickup, dropoff, pickupTime and passengers cannot be cleared: the job is refused, nothing changes.
    const refused = await signed([
      { jobRef: 'am-null', action: 'amend', pickup: null },
      { jobRef: 'am-null', action: 'amend', pickupTime: null, passengers: null },
      { jobRef: 'am-null', action: 'amend', dropoff: '   ' },
    ]);
    expect(refused.status, refused.text).toBe(207);
    expect(refused.json.results.map((r) => [r.outcome, r.error?.code, r.error?.details.map((d) => d.field)])).toEqual([
      ['rejected', 'invalid_input', ['/pickup']],
      ['rejected', 'invalid_input', ['/pickupTime', '/passengers']],
      ['rejected', 'invalid_input', ['/dropoff']],
    ]);
    expect(refused.json.results[2]?.error?.details).toEqual([{ field: '/dropoff', problem: 'must not be blank' }]);
    expect(await amendments(after.id)).toHaveLength(1);
  });

  it('requires pickup, dropoff and pickupTime of a new job only', async () => {
    const fresh = await signed({ jobRef: 'am-req', pickup: 'Manchester Piccadilly' });
    expect(fresh.status).toBe(400);
    expect(fresh.result.error?.details).toEqual([
      { field: '/dropoff', problem: 'is required for action new' },
      { field: '/pickupTime', problem: 'is required for action new' },
    ]);
    expect((await signed({ jobRef: 'am-req', ...JOURNEY })).status).toBe(201);
    const later = inHours(8);
    const moved = await signed({ jobRef: 'am-req', action: 'amend', pickupTime: later });
    expect(moved.result.outcome, moved.text).toBe('amended');
    expect(await bookingOfJob('am-req')).toMatchObject({ pickup_time: new Date(later) });
    // An amend of a jobRef never received is still 404, whatever it leaves out.
    const unknown = await signed({ jobRef: 'am-none', action: 'amend', notes: 'x' });
    expect(unknown.status).toBe(404);
    expect(unknown.result.error?.code).toBe('job_not_found');
  });
});

describe('what an amendment re-prices and whom it tells', () => {
  it('keeps the partner’s fare and the quote when the journey is not amended; a fare sent as null is priced on the tariffs', async () => {
    const made = await signed({ jobRef: 'am-fare', ...JOURNEY, fare: 40 }, farePartner);
    expect(made.status, made.text).toBe(201);
    const before = await bookingOfJob('am-fare', farePartner.id);
    expect(before.fare_pence).toBe(4000);

    const named = await signed({ jobRef: 'am-fare', action: 'amend', passengerName: 'Cy Fare' }, farePartner);
    expect(named.result.outcome, named.text).toBe('amended');
    const kept = await bookingOfJob('am-fare', farePartner.id);
    expect(kept).toMatchObject({ fare_pence: 4000, quote_id: before.quote_id, passenger_name: 'Cy Fare' });
    expect(kept.applied_rules).toEqual([expect.objectContaining({ code: 'partner_fare', amountPence: 4000 })]);

    // A journey change sent with a fare: re-priced at that fare.
    const movedAt = await signed({ jobRef: 'am-fare', action: 'amend', passengers: 3, fare: 45 }, farePartner);
    expect(movedAt.result.outcome, movedAt.text).toBe('amended');
    const repriced = await bookingOfJob('am-fare', farePartner.id);
    expect(repriced.quote_id).not.toBe(before.quote_id);
    expect(repriced).toMatchObject({ fare_pence: 4500, passengers: 3 });

    // A journey change that leaves the fare out: the fare agreed for the old journey is not
    // carried over (the driver is paid it); the new journey is priced on the published tariffs.
    const moved = await signed({ jobRef: 'am-fare', action: 'amend', passengers: 4 }, farePartner);
    expect(moved.result.outcome, moved.text).toBe('amended');
    const priced = await bookingOfJob('am-fare', farePartner.id);
    expect(priced.quote_id).not.toBe(repriced.quote_id);
    expect(priced.passengers).toBe(4);
    expect(priced.applied_rules.some((r: { code: string }) => r.code === 'partner_fare')).toBe(false);
    const quote = await env.rt.db('quotes').where({ id: priced.quote_id }).first('fare_pence');
    expect(priced.fare_pence).toBe(quote.fare_pence);

    // The fare sent again, then cleared: priced on the published tariffs once more.
    expect((await signed({ jobRef: 'am-fare', action: 'amend', fare: 45 }, farePartner)).result.outcome).toBe(
      'amended',
    );
    expect((await bookingOfJob('am-fare', farePartner.id)).fare_pence).toBe(4500);
    const tariff = await signed({ jobRef: 'am-fare', action: 'amend', fare: null }, farePartner);
    expect(tariff.result.outcome, tariff.text).toBe('amended');
    const cleared = await bookingOfJob('am-fare', farePartner.id);
    expect(cleared.applied_rules.some((r: { code: string }) => r.code === 'partner_fare')).toBe(false);
    const clearedQuote = await env.rt.db('quotes').where({ id: cleared.quote_id }).first('fare_pence');
    expect(cleared.fare_pence).toBe(clearedQuote.fare_pence);
  });

  it('prices a changed journey on the tariffs when the amendment leaves the fare out, the permission to set fares withdrawn too', async () => {
    const revoked = await createPartner(env.rt.db, env.config, {
      name: 'Amend Revoked',
      canSetFares: true,
      actor: 'test',
    });
    const made = await signed({ jobRef: 'am-revoked', ...JOURNEY, fare: 30 }, revoked);
    expect(made.status, made.text).toBe(201);
    const before = await bookingOfJob('am-revoked', revoked.id);
    expect(before.fare_pence).toBe(3000);
    await env.rt.db('partners').where({ id: revoked.id }).update({ can_set_fares: false });

    // The journey unchanged: nothing re-prices, the fare agreed for it stays.
    const notes = await signed({ jobRef: 'am-revoked', action: 'amend', notes: 'Ring on arrival' }, revoked);
    expect(notes.result.outcome, notes.text).toBe('amended');
    expect(await bookingOfJob('am-revoked', revoked.id)).toMatchObject({
      fare_pence: 3000,
      quote_id: before.quote_id,
    });

    // The journey moved with the fare left out: priced on the tariffs, not the old local fare.
    const moved = await signed({ jobRef: 'am-revoked', action: 'amend', pickup: 'Leeds', dropoff: 'York' }, revoked);
    expect(moved.result.outcome, moved.text).toBe('amended');
    const priced = await bookingOfJob('am-revoked', revoked.id);
    const quote = await env.rt.db('quotes').where({ id: priced.quote_id }).first('fare_pence');
    expect(priced.quote_id).not.toBe(before.quote_id);
    expect(priced.pickup.name).toBe('Leeds');
    expect(priced.fare_pence).toBe(quote.fare_pence);
    expect(priced.fare_pence).not.toBe(3000);
    expect(priced.applied_rules.some((r: { code: string }) => r.code === 'partner_fare')).toBe(false);
    const [, recorded] = await amendments(priced.id).orderBy('created_at');
    expect(recorded).toMatchObject({ fare_pence_before: 3000, fare_pence_after: quote.fare_pence });
    // The job as stored has no fare any more: a later amendment does not bring the old one back.
    const job = await env.rt.db('partner_jobs').where({ partner_id: revoked.id, job_ref: 'am-revoked' }).first();
    expect(job.payload).toMatchObject({ pickup: 'Leeds', dropoff: 'York', farePence: null, notes: 'Ring on arrival' });
    const later = await signed({ jobRef: 'am-revoked', action: 'amend', passengerName: 'Rev Oked' }, revoked);
    expect(later.result.outcome, later.text).toBe('amended');
    expect(await bookingOfJob('am-revoked', revoked.id)).toMatchObject({
      fare_pence: priced.fare_pence,
      quote_id: priced.quote_id,
    });
    // Sending a fare is refused, as for any partner that may not set one.
    const fare = await signed({ jobRef: 'am-revoked', action: 'amend', pickup: 'York', fare: 30 }, revoked);
    expect(fare.status, fare.text).toBe(403);
  });

  it('a partner that may not set fares keeps its tariff fare when it amends; sending a fare is still refused', async () => {
    expect((await signed({ jobRef: 'am-nofare', ...JOURNEY })).status).toBe(201);
    const before = await bookingOfJob('am-nofare');
    const notes = await signed({ jobRef: 'am-nofare', action: 'amend', notes: 'Ring on arrival' });
    expect(notes.result.outcome, notes.text).toBe('amended');
    expect(await bookingOfJob('am-nofare')).toMatchObject({ fare_pence: before.fare_pence, quote_id: before.quote_id });
    const fare = await signed({ jobRef: 'am-nofare', action: 'amend', fare: 12 });
    expect(fare.status).toBe(403);
    expect(fare.result.error?.details).toEqual([{ field: '/fare', problem: 'not allowed for this partner' }]);
  });

  it('texts the assigned driver only for an amendment that changes the journey, never for one that changes nothing', async () => {
    const driver = await approvedDriver(env.rt.db);
    const vehicle = await env.rt.db('vehicles').where({ driver_id: driver.id }).first('id');
    expect((await signed({ jobRef: 'am-driver', ...JOURNEY, flightNumber: 'BA 123', notes: 'Gate 2' })).status).toBe(
      201,
    );
    const booking = await bookingOfJob('am-driver');
    await env.rt
      .db('bookings')
      .where({ id: booking.id })
      .update({ status: 'driver_assigned', driver_id: driver.id, vehicle_id: vehicle.id });

    // The journey as it is with new notes: the flight number it leaves out (a journey field the
    // driver hears of) is kept, not cleared, so the driver is not texted.
    const notes = await signed({ jobRef: 'am-driver', action: 'amend', ...JOURNEY, notes: 'Gate 7' });
    expect(notes.result.outcome, notes.text).toBe('amended');
    expect((await bookingOfJob('am-driver')).flight_number).toBe('BA 123');
    expect(await changedTexts(booking.id)).toEqual([]);
    // The journey as it stands: unchanged, nobody told, nothing recorded.
    const same = await signed({ jobRef: 'am-driver', action: 'amend', ...JOURNEY, flightNumber: 'BA 123' });
    expect(same.result.outcome).toBe('unchanged');
    expect(await changedTexts(booking.id)).toEqual([]);
    expect(await amendments(booking.id)).toHaveLength(1);
    // The flight changes: the driver is texted (SMS and WhatsApp).
    const flight = await signed({ jobRef: 'am-driver', action: 'amend', flightNumber: 'BA 456' });
    expect(flight.result.outcome, flight.text).toBe('amended');
    expect((await changedTexts(booking.id)).map((m) => m.channel).sort()).toEqual(['sms', 'whatsapp']);
  });

  it('applies concurrent amendments of different fields both, neither undoing the other', async () => {
    expect((await signed({ jobRef: 'am-race', ...JOURNEY, passengerName: 'Dee Race' })).status).toBe(201);
    const changes = [
      { notes: 'Two cases' },
      { passengerPhone: '+447700900333' },
      { flightNumber: 'LS 201' },
      { passengerEmail: 'dee@example.com' },
    ];
    const answers = await Promise.all(changes.map((c) => signed({ jobRef: 'am-race', action: 'amend', ...c })));
    for (const a of answers) expect(a.result.outcome, a.text).toBe('amended');
    expect(await bookingOfJob('am-race')).toMatchObject({
      passenger_name: 'Dee Race',
      notes: 'Two cases',
      passenger_phone: '+447700900333',
      flight_number: 'LS 201',
      passenger_email: 'dee@example.com',
    });
    // What is stored is the merged job: the four changes again are unchanged, one by one.
    for (const c of changes) {
      expect((await signed({ jobRef: 'am-race', action: 'amend', ...c })).result.outcome).toBe('unchanged');
    }
  });
});

describe('a refusal shared by jobs', () => {
  it('names each refused amendment’s own booking when one pricing failure refuses them all', async () => {
    const a = await signed({ jobRef: 'shared-fail-a', ...JOURNEY });
    const b = await signed({ jobRef: 'shared-fail-b', ...JOURNEY });
    expect([a.status, b.status], a.text + b.text).toEqual([201, 201]);
    // A pricing batch that fails rejects every request in it with one and the same error.
    const failure = new AppError('service_unavailable', 'Pricing is briefly unavailable; retry.');
    // Both asked before either is answered, as requests arriving together share a job.
    const waiting: (() => void)[] = [];
    const pricing: PricingClient = {
      price: () =>
        new Promise((_, reject) => {
          waiting.push(() => reject(failure));
          if (waiting.length === 2) for (const fail of waiting) fail();
        }),
      close: async () => {},
    };
    const intakePartner = await loadPartner(env.rt.db, partner.id);
    const { results } = await processJobs(
      { ...env.rt, pricing },
      { partner: intakePartner ?? null, apiKeyId: null, testMode: false, scope: `partner:${partner.id}` },
      [
        { jobRef: 'shared-fail-a', action: 'amend', pickup: 'Leeds' },
        { jobRef: 'shared-fail-b', action: 'amend', pickup: 'York' },
      ],
      'http://localhost:3000',
    );
    expect(results.map((r) => [r.outcome, r.error?.code, r.bookingReference])).toEqual([
      ['rejected', 'service_unavailable', a.result.bookingReference],
      ['rejected', 'service_unavailable', b.result.bookingReference],
    ]);
  });
});
