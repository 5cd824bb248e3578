import type { Knex } from 'knex';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendStatus } from '../shared/db/bookings.ts';
import { enqueueJob } from '../shared/db/outbox.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { suspendDriver } from '../shared/services/drivers.ts';
import { createPartner } from '../shared/services/partners.ts';
import { REDACTED_BODY } from '../workers/notify/send-message.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { insertOfferedBooking } from './helpers/bookings.ts';
import { approvedDriver, type TestDriverOptions } from './helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { startTs } from './helpers/process.ts';
import { mailText, startSmtpCapture } from './helpers/smtp-capture.ts';
import { startTwilioStub } from './helpers/twilio-stub.ts';

/**
 * Dispatch end to end, through HTTP, real Postgres and Redis, the real workers and a local
 * Twilio stand-in: offers go to the nearest eligible local driver, then on decline or
 * timeout to the next, then to national network drivers (tier 2) and partner operators
 * (tier 3); job cards go by SMS and WhatsApp; accept, progress and settlement.
 */
let env: TestEnv;
let srv: Served;
let roles: RunningRoles;
let dispatchRole: RunningRoles;
let twilio: Awaited<ReturnType<typeof startTwilioStub>>;
let smtp: Awaited<ReturnType<typeof startSmtpCapture>>;
const SID = 'AC11111111111111111111111111111111';

// Real places: Manchester Piccadilly 53.4774,-2.2309; Birmingham New Street 52.4778,-1.8990.
const MANCHESTER = { lat: 53.4774, lng: -2.2309 };
const near = (km: number) => ({ lat: MANCHESTER.lat + km / 111.2, lng: MANCHESTER.lng });

const driver = (name: string, opts: Omit<TestDriverOptions, 'name'> = {}) =>
  approvedDriver(env.rt.db, { name, ...opts });

async function call(method: string, path: string, token: string | null, body?: unknown) {
  const res = await fetch(`${srv.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as Row, text, headers: res.headers };
}

const presence = (token: string, at: { lat: number; lng: number }, available = true) =>
  call('POST', '/api/public/v1/driver/presence', token, { available, ...at });

async function book(body: Record<string, unknown>): Promise<string> {
  const r = await call('POST', '/api/public/v1/booking', null, {
    departAt: new Date(Date.now() + 20 * 60_000).toISOString(),
    passengerPhone: '+447700900999',
    ...body,
  });
  expect(r.status, r.text).toBe(201);
  return r.json.bookingReference as string;
}

// biome-ignore lint/suspicious/noExplicitAny: rows read back in assertions
type Row = Record<string, any>;

async function liveOffer(reference: string): Promise<Row> {
  return eventually(
    async () =>
      (await env.rt
        .db('dispatch_offers as o')
        .join('bookings as b', 'b.id', 'o.booking_id')
        .where({ 'b.reference': reference, 'o.state': 'offered' })
        .first('o.*')) as Row | undefined,
  );
}

/** Each test takes its drivers off the map afterwards, so tests do not see each other's. */
async function offline(...tokens: string[]) {
  for (const t of tokens) await presence(t, MANCHESTER, false);
}

/** Cancel a booking as its passenger, so it is dispatched no further and takes no driver from later tests. */
async function cancelled(reference: string, email: string): Promise<void> {
  const r = await call('POST', `/api/public/v1/booking/${reference}`, null, { action: 'cancel', email });
  expect(r.status, r.text).toBe(200);
}

/**
 * Wait until `n` sessions wait for the transaction `trx`: directly, or behind another session
 * in the lock queue of a row it holds (a row's later waiters wait for its first waiter);
 * counting only those whose statement is like `statementLike`.
 */
async function waitersOn(trx: Knex.Transaction, n = 1, statementLike = '%'): Promise<void> {
  const { rows } = await trx.raw<{ rows: { pid: number }[] }>('select pg_backend_pid() as pid');
  await eventually(async () => {
    const waiting = await env.rt.db.raw<{ rows: { n: number }[] }>(
      `with recursive w(pid) as (
         select pid from pg_stat_activity where ? = any(pg_blocking_pids(pid))
         union
         select a.pid from pg_stat_activity a join w on w.pid = any(pg_blocking_pids(a.pid))
       ) select count(*)::int as n from w join pg_stat_activity a using (pid) where a.query ilike ?`,
      [rows[0]?.pid ?? null, statementLike],
    );
    return (waiting.rows[0]?.n ?? 0) >= n;
  });
}

beforeAll(async () => {
  twilio = await startTwilioStub();
  smtp = await startSmtpCapture();
  env = await createTestEnv({
    env: {
      SMTP_URL: smtp.url,
      TWILIO_API_BASE_URL: twilio.url,
      TWILIO_ACCOUNT_SID: SID,
      TWILIO_AUTH_TOKEN: 'secret-token',
      OFFER_TIMEOUT_SECONDS: '2',
      OUTBOX_POLL_MS: '100',
      WORKER_LOCK_MS: '1500',
      RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
      QUOTE_LIMIT_PER_HOUR: '100000',
    },
  });
  srv = await serve(await appFor(env));
  roles = startRoles(['pricing', 'notify', 'outbox-relay'], env.rt);
  dispatchRole = startRoles(['dispatch'], env.rt);
}, 60_000);

afterAll(async () => {
  await dispatchRole?.close();
  await roles?.close();
  await srv?.close();
  await twilio?.close();
  await smtp?.close();
  await env?.cleanup();
});

describe('dispatch', () => {
  it('offers to the nearest eligible local driver, not to one offline or too small, and sends the job card by SMS and WhatsApp', async () => {
    const off = await driver('Offline Olly', { cls: 'mpv', seats: 8 });
    const small = await driver('Small Sam', { cls: 'saloon' });
    const big = await driver('Big Bea', { cls: 'mpv', seats: 8 });
    await presence(off.token, near(0.3), false);
    await presence(small.token, near(0.6));
    await presence(big.token, near(2));
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Group Greta',
      passengerEmail: 'greta@example.org',
      passengers: 6,
      vehicleType: 'mpv',
    });
    const offer = await liveOffer(ref);
    expect(offer.driver_id).toBe(big.id);
    expect(offer.tier).toBe(1);
    const cards = await eventually(async () => {
      const got = twilio.requests.filter((r) => r.form.Body?.includes(ref));
      return got.length >= 2 ? got : null;
    });
    expect(cards.map((c) => c.form.To).sort()).toEqual([big.phone, `whatsapp:${big.phone}`].sort());
    for (const c of cards) {
      expect(c.method).toBe('POST');
      expect(c.path).toBe(`/2010-04-01/Accounts/${SID}/Messages.json`);
      expect(c.authorization).toBe(`Basic ${Buffer.from(`${SID}:secret-token`).toString('base64')}`);
      expect(c.form.Body).toContain('/o/');
      expect(c.form.Body).not.toContain('Greta');
    }
    expect(cards.find((c) => c.form.To?.startsWith('whatsapp:'))?.form.From).toMatch(/^whatsapp:\+/);
    // The card's link opens with the driver's token too (a driver app sends it with every request).
    const linkPath = /\/o\/[A-Za-z0-9_-]+/.exec(cards[0]?.form.Body ?? '')?.[0] as string;
    const opened = await call('GET', linkPath, big.token);
    expect(opened.status, opened.text).toBe(200);
    expect(opened.json.job.bookingReference).toBe(ref);
    // The feed shows the offer; accepting, progressing and completing appends a settlement.
    const feed = await call('GET', '/api/public/v1/jobs', big.token);
    expect(feed.status).toBe(200);
    expect(feed.json.jobs).toEqual([
      expect.objectContaining({ bookingReference: ref, state: 'offered', passengers: 6, vehicleType: 'mpv' }),
    ]);
    expect(feed.json.jobs[0].passenger).toBeUndefined();
    const acc = await call('POST', `/api/public/v1/jobs/${ref}/accept`, big.token);
    expect(acc.status, acc.text).toBe(200);
    expect(acc.json.deadMiles).toBeGreaterThan(0);
    const after = await call('GET', '/api/public/v1/jobs', big.token);
    expect(after.json.jobs[0]).toMatchObject({ state: 'accepted', passenger: { name: 'Group Greta' } });
    for (const status of ['driver_en_route', 'driver_arrived', 'passenger_on_board']) {
      const r = await call('POST', `/api/public/v1/jobs/${ref}/status`, big.token, { status });
      expect(r.status, r.text).toBe(200);
    }
    const noPay = await call('POST', `/api/public/v1/jobs/${ref}/status`, big.token, { status: 'completed' });
    expect(noPay.status).toBe(400);
    // A fee over the amount paid (45 typed for 0.45) would be passed through as it is, for good.
    const typo = await call('POST', `/api/public/v1/jobs/${ref}/status`, big.token, {
      status: 'completed',
      payment: { method: 'card', amountGBP: 30.5, processorFeeGBP: 45 },
    });
    expect(typo.status, typo.text).toBe(400);
    expect(typo.json.error.details).toEqual([
      { field: '/payment/processorFeeGBP', problem: 'must not exceed amountGBP' },
    ]);
    // A card fee sent with cash is refused, not dropped (the driver page refuses it too).
    const cashFee = await call('POST', `/api/public/v1/jobs/${ref}/status`, big.token, {
      status: 'completed',
      payment: { method: 'cash', amountGBP: 30.5, processorFeeGBP: 0.5 },
    });
    expect(cashFee.status, cashFee.text).toBe(400);
    expect(cashFee.json.error.details).toEqual([
      { field: '/payment/processorFeeGBP', problem: 'only for method card' },
    ]);
    const done = await call('POST', `/api/public/v1/jobs/${ref}/status`, big.token, {
      status: 'completed',
      payment: { method: 'card', amountGBP: 30.5, processorFeeGBP: 0.45 },
    });
    expect(done.status, done.text).toBe(200);
    const back = await call('POST', `/api/public/v1/jobs/${ref}/status`, big.token, { status: 'driver_en_route' });
    expect(back.status).toBe(409);
    const booking = await env.rt.db('bookings').where({ reference: ref }).first();
    expect(booking).toMatchObject({ status: 'completed', driver_id: big.id, dispatch_tier: 1 });
    expect(booking.vehicle_id).toBeTruthy();
    const settlement = await env.rt.db('settlement_records').where({ booking_id: booking.id });
    expect(settlement).toEqual([
      expect.objectContaining({ kind: 'card_paid', amount_pence: 3050, processor_fee_pence: 45, driver_id: big.id }),
    ]);
    const history = await env.rt
      .db('booking_status_history')
      .where({ booking_id: booking.id })
      .orderBy('seq')
      .pluck('status');
    expect(history).toEqual([
      'pending',
      'dispatching',
      'driver_assigned',
      'driver_en_route',
      'driver_arrived',
      'passenger_on_board',
      'completed',
    ]);
    // Another driver's token cannot touch the job.
    const other = await call('POST', `/api/public/v1/jobs/${ref}/status`, small.token, { status: 'completed' });
    expect(other.status).toBe(404);
    expect(other.json.error.message).toBe(`No job ${ref} for you.`);
    // A path that cannot be a reference is not repeated back (bidi overrides would reorder the message).
    const odd = await call('POST', `/api/public/v1/jobs/${encodeURIComponent('\u202eDTN-ZATE01')}/accept`, small.token);
    expect(odd.status).toBe(404);
    expect(odd.json.error.message).toBe('No job with that reference for you.');
    await offline(small.token, big.token);
  });

  it('passes over a driver who is full and one without wheelchair access for a wheelchair booking', async () => {
    const full = await driver('Full Fay', { cls: 'wav', wav: true });
    const plain = await driver('Plain Pat', { cls: 'mpv', seats: 8 });
    const wav = await driver('Ramp Ray', { cls: 'wav', wav: true });
    // Fay already has a job in hand (max_concurrent_jobs is 1).
    const busy = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Earlier Ed',
      passengerEmail: 'ed@example.org',
    });
    await env.rt.db('bookings').where({ reference: busy }).update({ driver_id: full.id, status: 'driver_assigned' });
    await presence(full.token, near(0.2));
    await presence(plain.token, near(0.4));
    await presence(wav.token, near(3));
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Wheel Wendy',
      passengerEmail: 'wendy@example.org',
      vehicleType: 'wav',
    });
    const offer = await liveOffer(ref);
    expect(offer.driver_id).toBe(wav.id);
    await offline(full.token, plain.token, wav.token);
  });

  it('moves on after a decline and a timeout, to tier 2 for a distance hire and then to a partner operator', async () => {
    const local = await driver('Local Lou');
    const network = await driver('Network Nia', { corridor: ['Manchester', 'London'], home: 'Birmingham' });
    const { id: partnerId } = await createPartner(env.rt.db, env.config, {
      name: 'Fleet Ltd',
      canSetFares: false,
      dailyLimit: null,
      webhookUrl: null,
      actor: 'test',
    });
    await env.rt
      .db('partners')
      .where({ id: partnerId })
      .update({ is_operator: true, fleet_classes: ['saloon', 'mpv'], fleet_capacity: 5 });
    const partnerKey = await createApiKey(env.rt.db, { serviceCode: env.config.serviceCode, name: 'fleet', partnerId });
    await presence(local.token, near(1));
    await presence(network.token, { lat: 52.4778, lng: -1.899 }); // Birmingham, on the corridor
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'London Euston',
      passengerName: 'Long Lena',
      passengerEmail: 'lena@example.org',
    });
    const first = await liveOffer(ref);
    expect(first).toMatchObject({ driver_id: local.id, tier: 1 });
    const declined = await call('POST', `/api/public/v1/jobs/${ref}/decline`, local.token, { reason: 'too far' });
    expect(declined.status, declined.text).toBe(200);
    const second = await eventually(async () => {
      const o = await liveOffer(ref);
      return o.driver_id === network.id ? o : null;
    });
    expect(second.tier).toBe(2);
    // Nobody answers: after the 2-second time-out the partner operator gets it.
    const third = await eventually(async () => {
      const o = await liveOffer(ref);
      return o.partner_id === partnerId ? o : null;
    });
    expect(third.tier).toBe(3);
    const late = await call('POST', `/api/public/v1/jobs/${ref}/accept`, network.token);
    expect(late.status).toBe(409);
    expect(late.json.error.code).toBe('offer_unavailable');
    // It is being offered on: said so.
    expect(late.json.error.message).toBe('This offer has expired and gone to another driver.');
    const partnerFeed = await call('GET', '/api/public/v1/jobs', partnerKey.key);
    expect(partnerFeed.json.jobs.map((j: { bookingReference: string }) => j.bookingReference)).toContain(ref);
    const won = await call('POST', `/api/public/v1/jobs/${ref}/accept`, partnerKey.key);
    expect(won.status, won.text).toBe(200);
    const booking = await env.rt.db('bookings').where({ reference: ref }).first();
    expect(booking).toMatchObject({
      status: 'driver_assigned',
      operator_partner_id: partnerId,
      dispatch_tier: 3,
      driver_id: null,
    });
    const states = await env.rt
      .db('dispatch_offers')
      .where({ booking_id: booking.id })
      .orderBy('attempt')
      .pluck('state');
    expect(states).toEqual(['declined', 'expired', 'accepted']);
    await offline(local.token, network.token);
    // Its fleet takes no more jobs in this file: later tests dispatch to drivers only.
    await env.rt.db('partners').where({ id: partnerId }).update({ fleet_capacity: 0 });
  });

  it('lets exactly one of two simultaneous accepts win', async () => {
    const a = await driver('Racer Ann');
    const b = await driver('Racer Ben');
    await presence(a.token, near(0.5));
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Race Rosa',
      passengerEmail: 'rosa@example.org',
    });
    const offer = await liveOffer(ref);
    expect(offer.driver_id).toBe(a.id);
    // A second open offer for the same booking (as if a stale offer were still open).
    await env.rt.db('dispatch_offers').insert({
      id: '01930000-0000-7000-8000-0000000000b1',
      booking_id: offer.booking_id,
      tier: 1,
      attempt: 99,
      driver_id: b.id,
      state: 'offered',
      expires_at: new Date(Date.now() + 60_000),
    });
    const results = await Promise.all([
      call('POST', `/api/public/v1/jobs/${ref}/accept`, a.token),
      call('POST', `/api/public/v1/jobs/${ref}/accept`, b.token),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(
      await env.rt.db('dispatch_offers').where({ booking_id: offer.booking_id, state: 'accepted' }).count({ n: '*' }),
    ).toEqual([{ n: 1 }]);
    // The winner's accept, retried, answers the same; once the passenger cancels, it is refused.
    const winner = results[0]?.status === 200 ? a : b;
    const first = results.find((r) => r.status === 200);
    const retried = await call('POST', `/api/public/v1/jobs/${ref}/accept`, winner.token);
    expect(retried.status).toBe(200);
    expect(retried.json).toEqual(first?.json);
    const cancelled = await call('POST', `/api/public/v1/booking/${ref}`, null, {
      action: 'cancel',
      email: 'rosa@example.org',
    });
    expect(cancelled.status, cancelled.text).toBe(200);
    const after = await call('POST', `/api/public/v1/jobs/${ref}/accept`, winner.token);
    expect(after.status).toBe(409);
    expect(after.json.error).toMatchObject({
      code: 'offer_unavailable',
      message: 'This job was cancelled by the passenger.',
      // Its detail says the same, not what the offer's row says ("accepted", "expired").
      details: [{ field: '/ref', problem: 'job cancelled' }],
    });
    await offline(a.token, b.token);
  });

  it('does not offer a job to a driver whose suspension commits while the step is choosing them', async () => {
    const sid = await driver('Suspended Sid');
    const nia = await driver('Next Nia');
    await presence(sid.token, near(0.2));
    await presence(nia.token, near(1.5));
    // An operator's suspension in flight (the first steps of `suspendDriver`): it holds Sid's
    // row and has changed his status, but not yet committed, so the dispatch step reads him as
    // an approved candidate, the nearest.
    const suspension = await env.rt.db.transaction();
    let ref: string;
    try {
      await suspension('drivers').where({ id: sid.id }).forUpdate().first('id');
      await suspension('drivers')
        .where({ id: sid.id })
        .update({ status: 'suspended', token_hash: null, token_prefix: null, available: false });
      ref = await book({
        pickup: 'Manchester Piccadilly',
        dropoff: 'Manchester Airport',
        passengerName: 'Waiting Wren',
        passengerEmail: 'wren@example.org',
      });
      // The step has chosen Sid and waits for his row.
      await waitersOn(suspension);
      await suspension.commit();
    } catch (err) {
      await suspension.rollback();
      throw err;
    }
    const offer = await liveOffer(ref);
    expect(offer.driver_id).toBe(nia.id);
    const offered = await env.rt
      .db('dispatch_offers as o')
      .join('bookings as b', 'b.id', 'o.booking_id')
      .where({ 'b.reference': ref })
      .pluck('o.driver_id');
    expect(offered).toEqual([nia.id]);
    // No job card went to Sid.
    await eventually(async () => twilio.requests.some((r) => r.form.Body?.includes(ref) && r.form.To === nia.phone));
    expect(twilio.requests.filter((r) => r.form.Body?.includes(ref) && r.form.To?.endsWith(sid.phone))).toEqual([]);
    await cancelled(ref, 'wren@example.org');
    await offline(nia.token);
  });

  it('suspends a driver who is accepting a job at that moment without a deadlock, and hands the job back', async () => {
    const ivy = await driver('Accepting Ivy');
    await presence(ivy.token, near(0.4));
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Caught Carl',
      passengerEmail: 'carl@example.org',
    });
    const offer = await liveOffer(ref);
    expect(offer.driver_id).toBe(ivy.id);
    // The accept's steps (acceptOffer): the booking locked first, then written with the driver,
    // which takes a key-share lock on the driver's row through the foreign key.
    const accept = await env.rt.db.transaction();
    try {
      await accept('bookings').where({ id: offer.booking_id }).forUpdate().first('id');
      // Meanwhile an operator suspends Ivy: it waits for the booking the accept holds.
      const suspended = suspendDriver(env.rt.db, ivy.id, 'test');
      suspended.catch(() => {});
      await waitersOn(accept);
      await accept('dispatch_offers').where({ id: offer.id }).update({ state: 'accepted', responded_at: new Date() });
      await accept('bookings').where({ id: offer.booking_id }).update({ driver_id: ivy.id, dispatch_tier: 1 });
      await appendStatus(accept, offer.booking_id, 'driver_assigned', 'driver');
      await accept.commit();
      // Both complete: the accept stands until the suspension hands the job back.
      expect(await suspended).toMatchObject({ status: 'suspended', jobsHandedBack: [ref], ridesInProgress: [] });
    } catch (err) {
      await accept.rollback().catch(() => {});
      throw err;
    }
    const booking = await env.rt.db('bookings').where({ id: offer.booking_id }).first('status', 'driver_id');
    expect(booking.driver_id).toBeNull();
    expect(['dispatching', 'no_driver_available']).toContain(booking.status);
    await cancelled(ref, 'carl@example.org');
  });

  it('offers a driver who takes one job at a time only one of two bookings dispatched at the same moment', async () => {
    const una = await driver('Single Una');
    await presence(una.token, near(0.3));
    // Both steps must read Una's load before either offers: her row is held (as a foreign key
    // check or a lock of hers would hold it) until both are waiting for it.
    const hold = await env.rt.db.transaction();
    let refs: string[];
    try {
      await hold('drivers').where({ id: una.id }).forUpdate().first('id');
      refs = await Promise.all(
        ['Twin Tom', 'Twin Tia'].map((name, i) =>
          book({
            pickup: 'Manchester Piccadilly',
            dropoff: 'Manchester Airport',
            passengerName: name,
            passengerEmail: `twin${i}@example.org`,
          }),
        ),
      );
      await waitersOn(hold, 2);
      await hold.commit();
    } catch (err) {
      await hold.rollback().catch(() => {});
      throw err;
    }
    const offered = async () =>
      env.rt
        .db('dispatch_offers as o')
        .join('bookings as b', 'b.id', 'o.booking_id')
        .whereIn('b.reference', refs)
        .where({ 'o.driver_id': una.id })
        .pluck('b.reference');
    await eventually(async () => (await offered()).length > 0);
    // The other booking's step, after waiting, counted Una's new offer and passed her over.
    await eventually(async () => {
      const rows = await env.rt.db('bookings').whereIn('reference', refs).pluck('status');
      return rows.includes('no_driver_available');
    });
    // Never two at once. (The first offer times out after 2 s here; a step that runs after
    // that may rightly offer Una the other booking.)
    const offers = await env.rt
      .db('dispatch_offers as o')
      .join('bookings as b', 'b.id', 'o.booking_id')
      .whereIn('b.reference', refs)
      .where({ 'o.driver_id': una.id })
      .orderBy('o.offered_at')
      .select('o.offered_at', 'o.expires_at', 'o.responded_at');
    expect(offers.length).toBeGreaterThan(0);
    const [first, second] = offers;
    if (second) {
      const firstEnded = Math.min(
        first.expires_at.getTime(),
        first.responded_at?.getTime() ?? Number.POSITIVE_INFINITY,
      );
      expect(second.offered_at.getTime()).toBeGreaterThanOrEqual(firstEnded);
    }
    for (const [i, r] of refs.entries()) await cancelled(r, `twin${i}@example.org`);
    await offline(una.token);
  });

  it("lets go of a full first choice's row, and waits for the next choice's row while another step holds it", async () => {
    const first = await driver('First Fran');
    const second = await driver('Second Sol');
    await presence(first.token, near(0.2));
    await presence(second.token, near(0.9));
    // Another booking, written straight to the table (no dispatch job of its own to run meanwhile).
    const other = await insertOfferedBooking(env.rt.db, `${env.config.bookings.referencePrefix}-OTHER1`, {
      driverId: second.id,
    });
    await env.rt.db('dispatch_offers').where({ id: other.offerId }).update({ state: 'withdrawn' });
    await env.rt.db('bookings').where({ id: other.id }).update({ status: 'cancelled' });
    // Fran is being given another job (her row held, the offer not yet committed); Sol's row is
    // held by a slower step.
    const giving = await env.rt.db.transaction();
    const slow = await env.rt.db.transaction();
    let ref = '';
    try {
      await giving('drivers').where({ id: first.id }).forNoKeyUpdate().first('id');
      await giving('dispatch_offers').insert({
        id: uuidv7(),
        booking_id: other.id,
        tier: 1,
        attempt: 9,
        driver_id: first.id,
        state: 'offered',
        expires_at: new Date(Date.now() + 60_000),
      });
      await slow('drivers').where({ id: second.id }).forNoKeyUpdate().first('id');
      ref = await book({
        pickup: 'Manchester Piccadilly',
        dropoff: 'Manchester Airport',
        passengerName: 'Passed Pam',
        passengerEmail: 'pam@example.org',
      });
      // Pam's step has chosen Fran and waits for her row; then Fran is full.
      await waitersOn(giving, 1, '%for no key update%');
      await giving.commit();
      // The step passed over Fran and waits for Sol's row...
      await waitersOn(slow, 1, '%for no key update%');
      // ...without holding Fran's: another step could lock it at once.
      await env.rt.db.transaction((t) =>
        t.raw('select id from drivers where id = ? for no key update nowait', [first.id]),
      );
      await slow.rollback();
      // Sol, free again and with room, gets the job.
      expect((await liveOffer(ref)).driver_id).toBe(second.id);
    } finally {
      await giving.rollback().catch(() => {});
      await slow.rollback().catch(() => {});
    }
    await cancelled(ref, 'pam@example.org');
    await env.rt.db('dispatch_offers').where({ booking_id: other.id }).update({ state: 'withdrawn' });
    await offline(first.token, second.token);
  });

  it("answers another driver's booking 404 at once, without waiting for its lock", async () => {
    const stranger = await driver('Stranger Stan');
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Locked Lily',
      passengerEmail: 'lily@example.org',
    });
    const busy = await env.rt.db.transaction();
    try {
      // The booking's row is held (a dispatch step, an accept): Stan has nothing to do with it.
      await busy('bookings').where({ reference: ref }).forUpdate().first('id');
      const answer = await Promise.race([
        call('POST', `/api/public/v1/jobs/${ref}/accept`, stranger.token),
        new Promise<'waited'>((r) => setTimeout(() => r('waited'), 5_000)),
      ]);
      expect(answer).not.toBe('waited');
      expect((answer as { status: number }).status).toBe(404);
    } finally {
      await busy.rollback();
    }
    await cancelled(ref, 'lily@example.org');
  });

  it('marks a booking no_driver_available when every tier is exhausted and e-mails operators', async () => {
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Lonely Lara',
      passengerEmail: 'lara@example.org',
      vehicleType: 'wav',
    });
    const row = await eventually(async () => {
      const b = await env.rt.db('bookings').where({ reference: ref }).first();
      return b?.status === 'no_driver_available' ? b : null;
    });
    const alert = await env.rt.db('outbound_messages').where({ booking_id: row.id, purpose: 'operator_alert' });
    expect(alert).toHaveLength(1);
    expect(alert[0].recipient).toBe(env.config.dispatch.operatorEmail);
    // The passenger is told too, once: still looking, when we try again, and how to cancel.
    const told = await env.rt.db('outbound_messages').where({ booking_id: row.id, purpose: 'no_driver_yet' });
    expect(told).toHaveLength(1);
    expect(told[0]).toMatchObject({
      channel: 'email',
      recipient: 'lara@example.org',
      subject: `Your taxi ${ref}: still looking for a driver`,
    });
    // What Lara receives (the stored copy's body is redacted once sent: it carries her tracking link).
    const mail = await eventually(async () =>
      smtp.mails.find((m) => m.to.includes('lara@example.org') && mailText(m).includes('still looking for a driver')),
    );
    const text = mailText(mail).replace(/\r\n/g, '\n');
    expect(text).toContain(`every ${env.config.dispatch.retryMinutes} minutes until your pickup time`);
    expect(text).toMatch(/Track your ride: http:\/\/localhost:3000\/track\/[A-Za-z0-9_-]{20,}\n/);
    await eventually(async () => {
      const stored = await env.rt.db('outbound_messages').where({ id: told[0].id }).first('body', 'state');
      return stored?.state === 'sent' && stored.body === REDACTED_BODY;
    });
    // The last try before pickup finds nobody either: told we would keep asking, Lara is told
    // we have stopped (a try that comes while a next one is still due tells her nothing).
    await env.rt.db.transaction(async (trx) => {
      await trx('bookings')
        .where({ id: row.id })
        .update({ pickup_time: new Date(Date.now() + 60_000) });
      await enqueueJob(trx, 'dispatch-booking', { bookingId: row.id }, { jobId: `dispatch-${row.id}-last-try` });
    });
    const final = await eventually(async () =>
      env.rt.db('outbound_messages').where({ booking_id: row.id, purpose: 'no_driver_final' }).first(),
    );
    expect(final).toMatchObject({
      channel: 'email',
      recipient: 'lara@example.org',
      subject: `Your taxi ${ref}: no driver found`,
    });
    expect((await env.rt.db('bookings').where({ id: row.id }).first('dispatch_retry_at')).dispatch_retry_at).toBeNull();
    const finalMail = await eventually(async () =>
      smtp.mails.find((m) => m.to.includes('lara@example.org') && mailText(m).includes('none could take it')),
    );
    expect(mailText(finalMail)).toContain('please make other plans');
    expect(
      await env.rt
        .db('outbound_messages')
        .where({ booking_id: row.id })
        .whereIn('purpose', ['no_driver_yet', 'no_driver_final']),
    ).toHaveLength(2);

    // found in a probe: when the last try offered the ride and the offer lapsed, the booking came
    // back from dispatching, not from no_driver_available, and the passenger was never told we had stopped
    const lapsedRef = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Lapsed Lena',
      passengerEmail: 'lena@example.org',
      vehicleType: 'wav',
    });
    const lapsed = await eventually(async () => {
      const b = await env.rt.db('bookings').where({ reference: lapsedRef }).first();
      return b?.status === 'no_driver_available' && b.dispatch_retry_at !== null ? b : null;
    });
    await env.rt.db.transaction(async (trx) => {
      // the last try offered it to someone (dispatching again), who let the offer lapse
      await appendStatus(trx, lapsed.id, 'dispatching', 'dispatch');
      await trx('bookings')
        .where({ id: lapsed.id })
        .update({ pickup_time: new Date(Date.now() + 60_000) });
      await enqueueJob(trx, 'dispatch-booking', { bookingId: lapsed.id }, { jobId: `dispatch-${lapsed.id}-lapsed` });
    });
    const lapsedFinal = await eventually(async () =>
      env.rt.db('outbound_messages').where({ booking_id: lapsed.id, purpose: 'no_driver_final' }).first(),
    );
    expect(lapsedFinal).toMatchObject({
      recipient: 'lena@example.org',
      subject: `Your taxi ${lapsedRef}: no driver found`,
    });

    // A partner's customer hears from the partner: their booking gets the operators' alert, and
    // no e-mail from us (we never sent them a confirmation).
    const partner = await createPartner(env.rt.db, env.config, { name: 'Quiet Partner', actor: 'test' });
    const job = await fetch(`${srv.url}/api/public/v1/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${partner.apiKey}` },
      body: JSON.stringify({
        jobRef: 'QUIET-1',
        pickup: 'Manchester Piccadilly',
        dropoff: 'Manchester Airport',
        pickupTime: new Date(Date.now() + 20 * 60_000).toISOString(),
        passengerName: 'Partner Pia',
        passengerEmail: 'pia@example.org',
        vehicleType: 'wav',
      }),
    });
    const jobRef = ((await job.json()) as Row).results?.[0]?.bookingReference as string;
    expect(job.status).toBe(201);
    const partnerRow = await eventually(async () => {
      const b = await env.rt.db('bookings').where({ reference: jobRef }).first();
      return b?.status === 'no_driver_available' ? b : null;
    });
    expect(
      await env.rt
        .db('outbound_messages')
        .where({ booking_id: partnerRow.id })
        .whereIn('purpose', ['operator_alert', 'no_driver_yet'])
        .pluck('purpose'),
    ).toEqual(['operator_alert']);
  });

  it('tells a late accept the offer expired, and that it went to another driver only when it did', async () => {
    const d = await driver('Late Lou');
    const b = await insertOfferedBooking(env.rt.db, `${env.config.bookings.referencePrefix}-ZATE01`, {
      driverId: d.id,
    });
    await env.rt.db('dispatch_offers').where({ id: b.offerId }).update({ state: 'expired' });
    // Every tier tried, nobody found: nobody else has it.
    await env.rt.db('bookings').where({ id: b.id }).update({ status: 'no_driver_available' });
    const late = await call('POST', `/api/public/v1/jobs/${b.reference}/accept`, d.token);
    expect(late.status).toBe(409);
    expect(late.json.error).toMatchObject({ code: 'offer_unavailable', message: 'This offer has expired.' });
    // Another driver took it.
    const other = await driver('Other Otto');
    await env.rt.db('bookings').where({ id: b.id }).update({ status: 'driver_assigned', driver_id: other.id });
    const taken = await call('POST', `/api/public/v1/jobs/${b.reference}/accept`, d.token);
    expect(taken.json.error).toMatchObject({
      code: 'offer_unavailable',
      message: 'This offer has expired and gone to another driver.',
    });
  });

  it('records a ride on account as charged to the account, and a bank transfer; account only for an account booking', async () => {
    const d = await driver('Account Ari');
    const onAccount = await insertOfferedBooking(env.rt.db, 'DTN-ACC0A1', { driverId: d.id });
    await env.rt.db('bookings').where({ id: onAccount.id }).update({ payment_method: 'account' });
    const paidByPassenger = await insertOfferedBooking(env.rt.db, 'DTN-ACC0A2', { driverId: d.id });
    for (const b of [onAccount, paidByPassenger]) {
      expect((await call('POST', `/api/public/v1/jobs/${b.reference}/accept`, d.token)).status).toBe(200);
      for (const status of ['driver_en_route', 'driver_arrived', 'passenger_on_board']) {
        expect((await call('POST', `/api/public/v1/jobs/${b.reference}/status`, d.token, { status })).status).toBe(200);
      }
    }
    const wrong = await call('POST', `/api/public/v1/jobs/${paidByPassenger.reference}/status`, d.token, {
      status: 'completed',
      payment: { method: 'account', amountGBP: 42 },
    });
    expect(wrong.status, wrong.text).toBe(400);
    expect(wrong.json.error.details).toEqual([
      { field: '/payment/method', problem: 'account only for a booking made on account' },
    ]);
    const byTransfer = await call('POST', `/api/public/v1/jobs/${paidByPassenger.reference}/status`, d.token, {
      status: 'completed',
      payment: { method: 'bank_transfer', amountGBP: 42 },
    });
    expect(byTransfer.status, byTransfer.text).toBe(200);
    const charged = await call('POST', `/api/public/v1/jobs/${onAccount.reference}/status`, d.token, {
      status: 'completed',
      payment: { method: 'account', amountGBP: 42 },
    });
    expect(charged.status, charged.text).toBe(200);
    const records = await env.rt
      .db('settlement_records')
      .whereIn('booking_id', [onAccount.id, paidByPassenger.id])
      .select('booking_id', 'kind', 'method', 'amount_pence', 'driver_id');
    expect(records).toEqual(
      expect.arrayContaining([
        { booking_id: onAccount.id, kind: 'account_charged', method: 'account', amount_pence: 4200, driver_id: d.id },
        {
          booking_id: paidByPassenger.id,
          kind: 'bank_transfer_received',
          method: 'bank_transfer',
          amount_pence: 4200,
          driver_id: d.id,
        },
      ]),
    );
    expect(records).toHaveLength(2);
  });

  it('refuses driver endpoints without a driver token, and a driver token elsewhere', async () => {
    const d = await driver('Token Tia');
    // 401s carry the bearer challenge (RFC 6750 section 3): invalid_token when one was sent.
    const none = await call('GET', '/api/public/v1/jobs', null);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="api"');
    // The feed takes a partner's key too, and says so.
    expect(none.json.error.message).toContain('a partner API key');
    const forged = await call('GET', '/api/public/v1/jobs', `dtn_drv_${'x'.repeat(40)}`);
    expect(forged.status).toBe(401);
    expect(forged.headers.get('www-authenticate')).toBe('Bearer realm="api", error="invalid_token"');
    // A driver token in the wrong case is told it is a driver token that is not valid.
    const shouting = await call('GET', '/api/public/v1/jobs', d.token.toUpperCase());
    expect(shouting.status).toBe(401);
    expect(shouting.json.error.message).toBe('The driver token is not valid, or the driver is not approved.');
    expect(
      (await call('POST', '/api/public/v1/driver/presence', null, { available: true, lat: 53, lng: -2 })).status,
    ).toBe(401);
    // A key route refuses a driver token (403, it is valid); public routes take it, as anyone.
    const keyOnly = await call('GET', '/api/public/v1/test/messages', d.token);
    expect(keyOnly.status).toBe(403);
    expect(keyOnly.json.error.message).toBe('This endpoint needs an API key: a driver token does not open it.');
    const who = await call('GET', '/api/public/v1/whoami', d.token);
    expect(who.status).toBe(200);
    expect(who.json).toEqual({
      authenticated: true,
      key: null,
      driver: { id: d.id, name: 'Token Tia' },
      rateLimitedBy: 'driver',
    });
    expect((await call('GET', '/api/public/v1/openapi.json', d.token)).status).toBe(200);
    const intake = await call('POST', '/api/public/v1/jobs', d.token, []);
    expect(intake.status).toBe(403);
    expect(intake.json.error.message).toBe('Job intake is for partners: a driver token cannot submit jobs.');
    // What a driver's token makes takes the driver's mode: a sandbox driver's booking is a
    // test-mode one (never dispatched to live drivers), a live driver's a live one.
    const sandboxDriver = await driver('Sandbox Sid', { testMode: true });
    const ride = (name: string) => ({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      departAt: new Date(Date.now() + 5 * 3600_000).toISOString(),
      passengerName: name,
      passengerEmail: `${name.toLowerCase().replace(/\s+/g, '.')}@example.org`,
      passengerPhone: '+447700900123',
    });
    const sandboxBooking = await call('POST', '/api/public/v1/booking', sandboxDriver.token, ride('Sandbox Sue'));
    expect(sandboxBooking.status, sandboxBooking.text).toBe(201);
    const liveBooking = await call('POST', '/api/public/v1/booking', d.token, ride('Live Lou'));
    expect(liveBooking.status, liveBooking.text).toBe(201);
    const modes = await env.rt
      .db('bookings')
      .whereIn('reference', [sandboxBooking.json.bookingReference, liveBooking.json.bookingReference])
      .select('passenger_name', 'test_mode');
    expect(Object.fromEntries(modes.map((m) => [m.passenger_name, m.test_mode]))).toEqual({
      'Sandbox Sue': true,
      'Live Lou': false,
    });
    // Cancelled at once, so neither is dispatched to the drivers of other tests.
    // (A sandbox caller sees its mode's bookings only, as a test key does.)
    for (const [b, name, token] of [
      [sandboxBooking, 'Sandbox Sue', sandboxDriver.token],
      [liveBooking, 'Live Lou', null],
    ] as const) {
      const cancel = await call('POST', `/api/public/v1/booking/${b.json.bookingReference}`, token, {
        action: 'cancel',
        email: ride(name).passengerEmail,
      });
      expect(cancel.status, cancel.text).toBe(200);
    }
    expect((await call('POST', '/api/public/quotes/estimate', d.token, {})).status).toBe(400);
    const bad = await call('POST', '/api/public/v1/driver/presence', d.token, { available: true, lat: 200, lng: -2 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_input');
  });

  it('resumes after a dispatch worker is killed -9 just after making an offer, with no second offer or job card', async () => {
    const d = await driver('Crash Cora');
    await presence(d.token, near(0.4));
    await dispatchRole.close();
    // A real dispatch worker that SIGKILLs itself after the offer and its job cards commit,
    // before BullMQ hears that the job is done: the job is left active, then found stalled.
    const crashing = startTs('workers/main.ts', ['dispatch'], {
      ...env.childEnv,
      DTN_FAILPOINTS: 'dispatch-after-offer',
    });
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Crash Carl',
      passengerEmail: 'carl@example.org',
    });
    const died = await crashing.exited;
    // The worker killed itself (SIGKILL): no clean exit.
    expect(died.signal ?? died.code, died.stderr + died.stdout).not.toBe(0);
    const booking = await env.rt.db('bookings').where({ reference: ref }).first();
    expect(await env.rt.db('dispatch_offers').where({ booking_id: booking.id }).count({ n: '*' })).toEqual([{ n: 1 }]);
    const job = await env.rt.queues.dispatch.getJob(`dispatch-${booking.id}`);
    expect(await job?.getState()).toBe('active');
    // This file's offers last 2 s; keep this one open while the job is recovered, so a second
    // offer could only come from the re-run (its time-out job then finds it still open: no-op).
    await env.rt
      .db('dispatch_offers')
      .where({ booking_id: booking.id })
      .update({ expires_at: new Date(Date.now() + 60_000) });

    // Restarted, a worker finds the job stalled, runs it again, sees the live offer and stops.
    dispatchRole = startRoles(['dispatch'], env.rt);
    await eventually(async () => (await env.rt.queues.dispatch.getJob(`dispatch-${booking.id}`))?.finishedOn, 20_000);
    expect(await env.rt.db('dispatch_offers').where({ booking_id: booking.id }).count({ n: '*' })).toEqual([{ n: 1 }]);
    const cards = await env.rt.db('outbound_messages').where({ booking_id: booking.id, purpose: 'job_card' });
    expect(cards.map((c) => c.channel).sort()).toEqual(['sms', 'whatsapp']);
    await eventually(async () => twilio.requests.filter((r) => r.form.Body?.includes(ref)).length === 2);
    await new Promise((r) => setTimeout(r, 500));
    expect(twilio.requests.filter((r) => r.form.Body?.includes(ref))).toHaveLength(2);
    await offline(d.token);
  }, 60_000);

  it('names a street-address pickup on the job card as its offer link does (post town and district)', async () => {
    const d = await driver('Area Ann');
    await presence(d.token, near(0.3));
    const ref = await book({
      pickup: '14 Oxford Road, Manchester M1 5QA',
      dropoff: 'Manchester Airport',
      paymentMethod: 'pay_driver',
      passengerName: 'Street Sam',
      passengerEmail: 'street.sam@example.org',
    });
    const offer = await liveOffer(ref);
    expect(offer.driver_id).toBe(d.id);
    const card = (
      await eventually(async () =>
        env.rt.db('outbound_messages').where({ booking_id: offer.booking_id, purpose: 'job_card' }).first(),
      )
    ).body as string;
    const linkPath = /\/o\/[A-Za-z0-9_-]+/.exec(card)?.[0] as string;
    const opened = await call('GET', linkPath, d.token);
    expect(opened.status, opened.text).toBe(200);
    expect(opened.json.job.pickupArea).toBe('Manchester M1');
    // How the passenger pays, as the card says it (the page said "paid to you" whatever it was).
    expect(opened.json.job.paymentMethod).toBe('pay_link');
    expect(card).toContain('(your pay link, 0% commission)');
    const page = await fetch(`${srv.url}${linkPath}`, { headers: { accept: 'text/html' } });
    expect(await page.text()).toContain(', your pay link, 0% commission</dd>');
    expect(card).toContain(`: Manchester M1 to ${opened.json.job.dropoffArea}, `);
    await cancelled(ref, 'street.sam@example.org');
    await offline(d.token);
  });

  it('tells the driver of a charged meet and greet (job card, offer link, feed), and not of one asked for away from an airport', async () => {
    const d = await driver('Greeting Gus');
    // A v1 quote asking for meet and greet, redeemed with its quote_id; dispatched at once.
    const bookQuoted = async (pickup: string, dropoff: string, email: string) => {
      const q = await call('POST', '/api/public/v1/quote', null, {
        pickup,
        dropoff,
        departAt: new Date(Date.now() + 20 * 60_000).toISOString(),
        meetAndGreet: true,
      });
      expect(q.status, q.text).toBe(200);
      const r = await call('POST', '/api/public/v1/booking', null, {
        quote_id: q.json.quoteId,
        passenger_name: 'Greta Gale',
        passenger_email: email,
        passenger_phone: '+447700900999',
        payment_method: 'cash',
      });
      expect(r.status, r.text).toBe(201);
      return { ref: r.json.bookingReference as string, rules: q.json.appliedRules as Row[] };
    };
    /** The open offer to `d`, kept open past this file's 2 s while the test reads it; its card, feed entry and link. */
    const seenByDriver = async (ref: string) => {
      const offer = await liveOffer(ref);
      expect(offer.driver_id).toBe(d.id);
      await env.rt
        .db('dispatch_offers')
        .where({ id: offer.id })
        .update({ expires_at: new Date(Date.now() + 60_000) });
      const cards = await eventually(async () => {
        const got = twilio.requests.filter((r) => r.form.Body?.includes(ref));
        return got.length >= 2 ? got : null;
      });
      expect(cards.map((c) => c.form.To).sort()).toEqual([d.phone, `whatsapp:${d.phone}`].sort());
      const feed = await call('GET', '/api/public/v1/jobs', d.token);
      expect(feed.status, feed.text).toBe(200);
      const linkPath = /\/o\/[A-Za-z0-9_-]+/.exec(cards[0]?.form.Body ?? '')?.[0] as string;
      const opened = await call('GET', linkPath, d.token);
      expect(opened.status, opened.text).toBe(200);
      const booking = await env.rt.db('bookings').where({ reference: ref }).first();
      return {
        bodies: cards.map((c) => c.form.Body as string),
        job: (feed.json.jobs as Row[]).find((j) => j.bookingReference === ref),
        linked: opened.json.job as Row,
        booking,
      };
    };

    // Charged: a pickup at Manchester Airport.
    await presence(d.token, { lat: 53.3655, lng: -2.2727 });
    const charged = await bookQuoted('Manchester Airport', 'Manchester Piccadilly', 'greta@example.org');
    expect(charged.rules).toContainEqual(expect.objectContaining({ code: 'meet_and_greet', amountGBP: 25 }));
    const met = await seenByDriver(charged.ref);
    // As the booking stores it: the quote's rules, in pence.
    expect(met.booking.applied_rules).toContainEqual(
      expect.objectContaining({ code: 'meet_and_greet', amountPence: 2500 }),
    );
    const fare = (met.booking.fare_pence / 100).toFixed(2);
    for (const body of met.bodies) {
      expect(body).toContain(`, 1 pax, saloon, meet & greet, fare £${fare} (cash to you, 0% commission). Accept `);
      expect(body).not.toContain('Greta');
    }
    expect(met.job).toMatchObject({ bookingReference: charged.ref, state: 'offered', meetAndGreet: true });
    expect(met.linked).toMatchObject({ bookingReference: charged.ref, meetAndGreet: true });
    await cancelled(charged.ref, 'greta@example.org');

    // Asked for at a station: not charged (a warning on the quote), so the driver is told nothing of it.
    await presence(d.token, near(0.3));
    const asked = await bookQuoted('Manchester Piccadilly', 'Manchester Airport', 'gwen@example.org');
    expect(asked.rules.map((r) => r.code)).not.toContain('meet_and_greet');
    const plain = await seenByDriver(asked.ref);
    for (const body of plain.bodies) {
      expect(body).toContain(', 1 pax, saloon, fare £');
      // (The link's random code left out: it could spell anything.)
      expect(body.replace(/\/o\/\S+$/, '/o/…')).not.toMatch(/meet|greet|&/i);
    }
    expect(plain.job).toMatchObject({ bookingReference: asked.ref, state: 'offered', meetAndGreet: false });
    expect(plain.linked).toMatchObject({ bookingReference: asked.ref, meetAndGreet: false });
    await cancelled(asked.ref, 'gwen@example.org');
    await offline(d.token);
  });
});

describe('rounds of tries', () => {
  it('asks a driver who let the offer lapse once more in a later round of tries, after anyone not yet asked, and never again', async () => {
    const sleepy = await driver('Sleepy Sue', { cls: 'wav', wav: true });
    await presence(sleepy.token, near(0.3));
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Retry Rita',
      passengerEmail: 'rita@example.org',
      vehicleType: 'wav',
    });
    try {
      const first = await liveOffer(ref);
      expect(first.driver_id).toBe(sleepy.id);
      // She does not answer; nobody else has a wheelchair-accessible car: no driver this round.
      const afterFirst = await eventually(async () => {
        const b = await env.rt.db('bookings').where({ reference: ref }).first();
        return b?.status === 'no_driver_available' && b.dispatch_retry_at ? b : null;
      });
      const retryJob = (at: Date) =>
        eventually(() =>
          env.rt.queues.dispatch.getJob(`dispatch-${afterFirst.id}-retry-${Math.floor(at.getTime() / 60_000)}`),
        );
      const retry = await retryJob(afterFirst.dispatch_retry_at);
      // The next round's time comes (brought forward here rather than waited for).
      await env.rt.db('bookings').where({ id: afterFirst.id }).update({ dispatch_retry_at: new Date() });
      await retry.promote();
      const second = await liveOffer(ref);
      expect(second).toMatchObject({ driver_id: sleepy.id, attempt: 2 });
      // She lets this one lapse too: the round asks nobody else, and her not a third time in it.
      await eventually(async () => {
        const b = await env.rt.db('bookings').where({ reference: ref }).first();
        return b?.status === 'no_driver_available' && b.dispatch_retry_at > new Date() ? b : null;
      });
      // A driver who comes online meanwhile, never asked, is asked before her in the next round.
      const fresh = await driver('Fresh Fay', { cls: 'wav', wav: true });
      await presence(fresh.token, near(0.8));
      // (Its retry job, due minutes from now, shares its id with the one just run when both
      // fall in the same minute: the round is started here with a job of its own.)
      const nextRound = async (n: number) => {
        await env.rt.db('bookings').where({ id: afterFirst.id }).update({ dispatch_retry_at: new Date() });
        await env.rt.queues.dispatch.add(
          'dispatch-booking',
          { bookingId: afterFirst.id },
          { jobId: `test-round-${n}` },
        );
      };
      await nextRound(3);
      expect(await liveOffer(ref)).toMatchObject({ driver_id: fresh.id, attempt: 3 });
      // Fay lets it lapse too and goes off duty: in the round after, nobody is asked (Fay is not
      // available, and Sue, asked twice already, is not asked a third time).
      await offline(fresh.token);
      const afterThird = await eventually(async () => {
        const b = await env.rt.db('bookings').where({ reference: ref }).first();
        return b?.status === 'no_driver_available' && b.dispatch_retry_at > new Date() ? b : null;
      });
      await nextRound(4);
      await eventually(async () => {
        const b = await env.rt.db('bookings').where({ reference: ref }).first();
        return b?.status === 'no_driver_available' && b.dispatch_retry_at > afterThird.dispatch_retry_at ? b : null;
      });
      const offers = await env.rt.db('dispatch_offers').where({ booking_id: afterFirst.id }).orderBy('attempt');
      expect(offers.map((o) => [o.driver_id, o.state])).toEqual([
        [sleepy.id, 'expired'],
        [sleepy.id, 'expired'],
        [fresh.id, 'expired'],
      ]);
    } finally {
      await cancelled(ref, 'rita@example.org');
      await offline(sleepy.token);
    }
  });

  it('asks a driver who let the offer lapse once more when the one driver not yet asked is given another job while the round chooses him', async () => {
    const lapsing = await driver('Lapsing Lou', { cls: 'wav', wav: true });
    const taken = await driver('Taken Theo', { cls: 'wav', wav: true });
    await presence(lapsing.token, near(0.3));
    const email = 'taken.tess@example.org';
    const ref = await book({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      passengerName: 'Taken Tess',
      passengerEmail: email,
      vehicleType: 'wav',
    });
    const giving = await env.rt.db.transaction();
    let other: { id: string; offerId: string } | undefined;
    try {
      expect((await liveOffer(ref)).driver_id).toBe(lapsing.id);
      // Lou does not answer; nobody else has a wheelchair-accessible car: no driver this round.
      const booking = await eventually(async () => {
        const b = await env.rt.db('bookings').where({ reference: ref }).first();
        return b?.status === 'no_driver_available' && b.dispatch_retry_at ? b : null;
      });
      // Theo, never asked, comes online before the next round: its first choice, before Lou.
      expect((await presence(taken.token, near(0.8))).status).toBe(200);
      // Another step is giving Theo another job: his row held, its offer not yet committed, so
      // the round reads him as free (he takes one job at a time).
      await giving('drivers').where({ id: taken.id }).forNoKeyUpdate().first('id');
      other = await insertOfferedBooking(giving, `${env.config.bookings.referencePrefix}-TAKEN1`, {
        driverId: taken.id,
      });
      // The next round's time comes (brought forward), started with a job of its own.
      await env.rt.db('bookings').where({ id: booking.id }).update({ dispatch_retry_at: new Date() });
      await env.rt.queues.dispatch.add('dispatch-booking', { bookingId: booking.id }, { jobId: 'test-taken-round' });
      // The round has chosen Theo and waits for his row (the only row this transaction holds);
      // then he is taken.
      await waitersOn(giving, 1, '%for no key update%');
      await giving.commit();
      // Nobody not yet asked can take it now: Lou, whose one offer lapsed, is asked once more.
      expect(await liveOffer(ref)).toMatchObject({ driver_id: lapsing.id, attempt: 2 });
      const offers = await env.rt.db('dispatch_offers').where({ booking_id: booking.id }).orderBy('attempt');
      expect(offers.map((o) => [o.driver_id, o.attempt])).toEqual([
        [lapsing.id, 1],
        [lapsing.id, 2],
      ]);
      // Theo holds the other job's offer only, and no job card of this booking went to him.
      expect(await env.rt.db('dispatch_offers').where({ driver_id: taken.id }).pluck('booking_id')).toEqual([other.id]);
      await eventually(
        async () =>
          twilio.requests.filter((r) => r.form.Body?.includes(ref) && r.form.To === lapsing.phone).length >= 2,
      );
      expect(twilio.requests.filter((r) => r.form.Body?.includes(ref) && r.form.To?.endsWith(taken.phone))).toEqual([]);
    } finally {
      await giving.rollback().catch(() => {});
      await cancelled(ref, email);
      if (other) {
        await env.rt.db('dispatch_offers').where({ id: other.offerId }).update({ state: 'withdrawn' });
        await env.rt.db('bookings').where({ id: other.id }).update({ status: 'cancelled' });
      }
      await offline(lapsing.token, taken.token);
    }
  });
});
