import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendStatus } from '../shared/db/bookings.ts';
import { createPartner } from '../shared/services/partners.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { insertPendingBooking } from './helpers/bookings.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, eventually, serve, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';
import { readSigned } from './helpers/signed-webhook.ts';
import { webhookEventChecker } from './helpers/webhook-schemas.ts';

/**
 * Status fanout end to end: appendStatus queues a signed delivery in its transaction, the
 * outbox relay and the fanout worker (in-process) POST it to a local receiver that verifies
 * every request with the reference `standardwebhooks` library.
 */
interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  verified: boolean;
  answered: number;
}

let env: TestEnv;
let roles: RunningRoles;
let server: http.Server;
let receiverUrl: string;
const received: Received[] = [];
/** Per path: the secrets the receiver knows and the status codes it answers, in turn (then 204). */
const receivers = new Map<string, { secrets: string[]; answers: number[] }>();

beforeAll(async () => {
  // A short retry schedule: 4 attempts, 50 ms base (read by the worker at each attempt).
  process.env.WEBHOOK_RETRY_BASE_MS = '50';
  process.env.WEBHOOK_RETRY_MAX_ATTEMPTS = '4';
  env = await createTestEnv();
  server = http.createServer(async (req, res) => {
    const r = receivers.get(req.url ?? '/');
    const { path, headers, body, verified } = await readSigned(req, r?.secrets ?? []);
    const answered = r?.answers.shift() ?? 204;
    received.push({ path, headers, body, verified, answered });
    res.statusCode = answered;
    res.end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  roles = startRoles(['fanout', 'outbox-relay'], env.rt);
});
afterAll(async () => {
  await roles?.close();
  server?.close();
  await env?.cleanup();
  delete process.env.WEBHOOK_RETRY_BASE_MS;
  delete process.env.WEBHOOK_RETRY_MAX_ATTEMPTS;
});

const admin = (...args: string[]) => runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'ops-test' });
const at = (path: string) => received.filter((r) => r.path === path);

let refSeq = 0;
/** A partner whose webhook endpoint is a receiver path, and a booking it submitted. */
async function partnerBooking(path: string, answers: number[] = []) {
  const partner = await createPartner(env.rt.db, env.config, {
    name: `Partner ${path}`,
    webhookUrl: 'https://partner.example/hooks',
    actor: 'test',
  });
  await env.rt
    .db('webhook_endpoints')
    .where({ partner_id: partner.id })
    .update({ url: `${receiverUrl}${path}` });
  receivers.set(path, { secrets: [partner.webhookSecret as string], answers });
  const bookingId = await insertBooking(partner.id);
  return { partner, bookingId };
}

async function insertBooking(partnerId: string | null): Promise<string> {
  refSeq += 1;
  return insertPendingBooking(env.rt.db, `DTN-WH${String(refSeq).padStart(4, '0')}`, partnerId);
}

const setStatus = (bookingId: string, status: string) =>
  env.rt.db.transaction((trx) => appendStatus(trx, bookingId, status, 'test'));

const deliveriesOf = (bookingId: string) =>
  env.rt.db('webhook_deliveries').where({ booking_id: bookingId }).orderBy('sequence');

describe('booking status fanout', () => {
  it('delivers each status once, signed, with increasing sequence numbers', async () => {
    const { bookingId } = await partnerBooking('/ordered');
    await env.rt.db('partner_jobs').insert({
      id: uuidv7(),
      partner_id: (await env.rt.db('bookings').where({ id: bookingId }).first()).partner_id,
      job_ref: 'ACME-42',
      booking_id: bookingId,
      last_action: 'new',
      content_hash: randomBytes(32),
      payload: '{}',
    });
    for (const s of ['dispatching', 'driver_assigned', 'driver_en_route']) await setStatus(bookingId, s);
    await eventually(async () => at('/ordered').length >= 3);
    await eventually(async () => (await deliveriesOf(bookingId)).every((d) => d.state === 'delivered'));
    await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
    const got = at('/ordered');
    expect(got).toHaveLength(3);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(got.every((r) => r.headers['content-type'] === 'application/json')).toBe(true);
    const events = got.map((r) => JSON.parse(r.body)).sort((a, b) => a.data.sequence - b.data.sequence);
    expect(events.map((e) => [e.data.sequence, e.data.status])).toEqual([
      [1, 'dispatching'],
      [2, 'driver_assigned'],
      [3, 'driver_en_route'],
    ]);
    expect(events[0]).toMatchObject({
      type: 'booking.status',
      timestamp: expect.any(String),
      data: { bookingReference: expect.stringMatching(/^DTN-WH/), jobRef: 'ACME-42', at: expect.any(String) },
    });
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(3);
    const deliveries = await deliveriesOf(bookingId);
    expect(deliveries.map((d) => [d.sequence, d.state, d.attempts])).toEqual([
      [1, 'delivered', 1],
      [2, 'delivered', 1],
      [3, 'delivered', 1],
    ]);
  });

  it("sends the driver and vehicle with a status while a driver is on the job, as the OpenAPI document's webhooks say", async () => {
    const { bookingId } = await partnerBooking('/with-driver');
    const driver = await approvedDriver(env.rt.db, { name: 'Sam Okafor' });
    // as an accept writes it: the driver and their active vehicle
    const vehicle = await env.rt.db('vehicles').where({ driver_id: driver.id, active: true }).first('id');
    await env.rt.db('bookings').where({ id: bookingId }).update({ driver_id: driver.id, vehicle_id: vehicle.id });
    await setStatus(bookingId, 'driver_assigned');
    const got = await eventually(async () => (at('/with-driver').length > 0 ? at('/with-driver') : null));
    expect(got[0]?.verified).toBe(true);
    const event = JSON.parse(got[0]?.body ?? '{}');
    expect(event.data).toMatchObject({
      status: 'driver_assigned',
      driver: {
        name: 'Sam Okafor',
        phone: driver.phone,
        vehicle: { make: 'Toyota', model: 'Prius', colour: 'Silver', registration: expect.stringMatching(/^MA/) },
      },
    });
    const api = await serve(await appFor(env));
    try {
      expect((await webhookEventChecker(api.url, 'bookingStatus'))(event)).toEqual([]);
    } finally {
      await api.close();
    }
  });

  it('tells the partner platform when the passenger cancels through the API', async () => {
    const { bookingId } = await partnerBooking('/cancelled');
    await env.rt.db('bookings').where({ id: bookingId }).update({ passenger_email: 'ada@example.org' });
    const ref = (await env.rt.db('bookings').where({ id: bookingId }).first()).reference as string;
    const api = await serve(await appFor(env));
    try {
      const res = await fetch(`${api.url}/api/public/v1/booking/${ref}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ action: 'cancel', email: 'ADA@example.org', reason: 'plans changed' }),
      });
      expect(res.status).toBe(200);
    } finally {
      await api.close();
    }
    const got = await eventually(async () => (at('/cancelled').length > 0 ? at('/cancelled') : null));
    expect(got[0]?.verified).toBe(true);
    expect(JSON.parse(got[0]?.body ?? '{}').data).toMatchObject({ bookingReference: ref, status: 'cancelled' });
  });

  it('queues nothing for a booking with no partner, supplier or operator', async () => {
    const bookingId = await insertBooking(null);
    expect(await setStatus(bookingId, 'dispatching')).toBe(1);
    expect(await deliveriesOf(bookingId)).toHaveLength(0);
  });

  it('retries a failing receiver with the same webhook-id and logs every attempt', async () => {
    const { bookingId } = await partnerBooking('/flaky', [500, 500]);
    await setStatus(bookingId, 'dispatching');
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'delivered');
    const got = at('/flaky');
    expect(got.map((r) => r.answered)).toEqual([500, 500, 204]);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const [delivery] = await deliveriesOf(bookingId);
    expect(got[0]?.headers['webhook-id']).toBe(delivery.message_id);
    expect(delivery.message_id).toBe(`msg_${delivery.id}`);
    expect(delivery.attempts).toBe(3);
    const attempts = await env.rt
      .db('webhook_delivery_attempts')
      .where({ delivery_id: delivery.id })
      .orderBy('attempt');
    expect(attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      [1, 500, 'HTTP 500'],
      [2, 500, 'HTTP 500'],
      [3, 204, null],
    ]);
    expect(attempts.every((a) => Number.isInteger(a.latency_ms) && a.latency_ms >= 0)).toBe(true);
  });

  it('keeps a delivery whose retry job came early: one for its time is queued, and it is delivered then', async () => {
    const { bookingId } = await partnerBooking('/early');
    // A failed first attempt, its retry due in 3 seconds, and the retry's job run now (as a
    // worker whose clock is ahead of Postgres's would run it).
    await env.rt.db.transaction(async (trx) => {
      await appendStatus(trx, bookingId, 'dispatching', 'test');
      const [d] = await trx('webhook_deliveries')
        .where({ booking_id: bookingId })
        .update({ attempts: 1, next_attempt_at: trx.raw("now() + interval '3 seconds'") })
        .returning<{ id: string }[]>('id');
      // Its first job is not relayed: the early retry below is the only job it has.
      await trx('outbox')
        .where({ job_name: 'deliver-webhook' })
        .whereRaw("payload->>'deliveryId' = ?", [d?.id ?? ''])
        .update({ relayed_at: trx.fn.now() });
    });
    const [delivery] = await deliveriesOf(bookingId);
    await env.rt.queues.fanout.add(
      'deliver-webhook',
      { deliveryId: delivery.id },
      { jobId: `webhook-${delivery.id}-2` },
    );
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'delivered', 15_000);
    expect(at('/early')).toHaveLength(1);
    expect((await deliveriesOf(bookingId))[0]?.attempts).toBe(2);
  });

  it('marks a delivery dead when retries run out; the CLI lists and replays it', async () => {
    const { bookingId } = await partnerBooking('/down', [503, 503, 503, 503, 503]);
    await setStatus(bookingId, 'dispatching');
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'dead');
    const [delivery] = await deliveriesOf(bookingId);
    expect(delivery.attempts).toBe(4);
    expect(at('/down')).toHaveLength(4);

    const dead = await admin('webhooks', 'dead');
    expect(dead.code, dead.stderr).toBe(0);
    const listed = JSON.parse(dead.stdout).find((d: { id: string }) => d.id === delivery.id);
    expect(listed).toEqual({
      id: delivery.id,
      endpointUrl: `${receiverUrl}/down`,
      bookingReference: expect.stringMatching(/^DTN-WH/),
      eventType: 'booking.status',
      sequence: 1,
      attempts: 4,
      lastError: 'HTTP 503',
      createdAt: expect.any(String),
    });

    // The receiver is fixed (the 5th answer is used up by nobody yet: clear it).
    (receivers.get('/down') as { answers: number[] }).answers = [];
    const replay = await admin('webhooks', 'replay', delivery.id);
    expect(replay.code, replay.stderr).toBe(0);
    expect(JSON.parse(replay.stdout)).toEqual({ id: delivery.id, status: 'pending' });
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'delivered');
    const got = at('/down');
    expect(got).toHaveLength(5);
    expect(got[4]).toMatchObject({ answered: 204, verified: true });
    expect(got[4]?.headers['webhook-id']).toBe(delivery.message_id);

    const again = await admin('webhooks', 'replay', delivery.id);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error.code).toBe('conflict');
    const unknown = await admin('webhooks', 'replay', uuidv7());
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr).error.code).toBe('not_found');
  });

  it('gives a replayed delivery a fresh retry schedule; attempt numbers and the webhook-id carry on', async () => {
    // 4 attempts per schedule: dead after 4; replayed, dead again after 4 more (a whole
    // schedule, not one attempt); replayed again, fails once, is retried and gets through.
    const answers = [...Array(8).fill(503), 500];
    const { bookingId } = await partnerBooking('/replayed', answers);
    await setStatus(bookingId, 'dispatching');
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'dead');
    const [delivery] = await deliveriesOf(bookingId);
    expect([delivery.attempts, delivery.schedule_start]).toEqual([4, 0]);

    const first = await admin('webhooks', 'replay', delivery.id);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({ id: delivery.id, status: 'pending' });
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'dead');
    let row = (await deliveriesOf(bookingId))[0];
    expect([row.attempts, row.schedule_start]).toEqual([8, 4]);
    expect(at('/replayed')).toHaveLength(8);

    const second = await admin('webhooks', 'replay', delivery.id);
    expect(second.code, second.stderr).toBe(0);
    await eventually(async () => (await deliveriesOf(bookingId))[0]?.state === 'delivered');
    row = (await deliveriesOf(bookingId))[0];
    expect([row.state, row.attempts, row.schedule_start]).toEqual(['delivered', 10, 8]);
    expect(row.message_id).toBe(delivery.message_id);

    const got = at('/replayed');
    expect(got.map((r) => r.answered)).toEqual([...Array(8).fill(503), 500, 204]);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([delivery.message_id]));

    const attempts = await env.rt
      .db('webhook_delivery_attempts')
      .where({ delivery_id: delivery.id })
      .orderBy('attempt');
    expect(attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([
      ...[1, 2, 3, 4, 5, 6, 7, 8].map((n) => [n, 503, 'HTTP 503']),
      [9, 500, 'HTTP 500'],
      [10, 204, null],
    ]);
    // The retry after the second replay's failed first attempt waited the schedule's first
    // delay (50 ms and jitter), not the ninth (50 ms * 2^8 = 12.8 s).
    expect(attempts[9].at.getTime() - attempts[8].at.getTime()).toBeLessThan(5_000);

    // One BullMQ job per attempt, each id used once: the first, the replays', the retries'.
    const jobIds = [
      `webhook-${delivery.id}`,
      ...[2, 3, 4].map((n) => `webhook-${delivery.id}-${n}`),
      `webhook-${delivery.id}-replay-5`,
      ...[6, 7, 8].map((n) => `webhook-${delivery.id}-${n}`),
      `webhook-${delivery.id}-replay-9`,
      `webhook-${delivery.id}-10`,
    ];
    const jobs = await Promise.all(jobIds.map((id) => env.rt.queues.fanout.getJob(id)));
    expect(jobs.map((j) => j?.id)).toEqual(jobIds);
    const audit = await env.rt.db('audit_log').where({ subject_id: delivery.id, action: 'webhook.replay' });
    expect(audit).toHaveLength(2);
  }, 60_000);

  it('keeps signing with the old secret during a rotation overlap', async () => {
    const { partner, bookingId } = await partnerBooking('/rotating');
    const oldSecret = partner.webhookSecret as string;
    // `webhook set` on an existing endpoint replaces the URL and keeps the secret.
    const set = await admin('webhook', 'set', '--partner', partner.id, '--url', `${receiverUrl}/rotating`);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ url: `${receiverUrl}/rotating`, webhookSecret: null });

    const rotated = await admin('webhook', 'rotate', '--partner', partner.id, '--overlap-hours', '2');
    expect(rotated.code, rotated.stderr).toBe(0);
    const out = JSON.parse(rotated.stdout);
    expect(out).toEqual({
      id: expect.any(String),
      webhookSecret: expect.stringMatching(/^whsec_/),
      previousExpiresAt: expect.any(String),
    });
    expect(out.webhookSecret).not.toBe(oldSecret);
    const overlapMs = new Date(out.previousExpiresAt).getTime() - Date.now();
    expect(overlapMs).toBeGreaterThan(1.9 * 3600_000);
    expect(overlapMs).toBeLessThan(2.1 * 3600_000);

    // The receiver still holds only the old secret: it verifies.
    await setStatus(bookingId, 'dispatching');
    await eventually(async () => at('/rotating').length === 1);
    const first = at('/rotating')[0] as Received;
    expect(first.verified).toBe(true);
    expect(first.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(() => new Webhook(out.webhookSecret).verify(first.body, first.headers)).not.toThrow();

    // Once the overlap ends only the new secret signs.
    await env.rt
      .db('webhook_endpoints')
      .where({ partner_id: partner.id })
      .update({ previous_secret_expires_at: new Date(Date.now() - 1000) });
    await setStatus(bookingId, 'driver_assigned');
    await eventually(async () => at('/rotating').length === 2);
    const second = at('/rotating')[1] as Received;
    expect(second.verified).toBe(false);
    expect(second.headers['webhook-signature']?.split(' ')).toHaveLength(1);
    expect(() => new Webhook(out.webhookSecret).verify(second.body, second.headers)).not.toThrow();
  });

  it('webhook set creates an endpoint with a new secret for a partner without one', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'No hooks yet', actor: 'test' });
    const set = await admin('webhook', 'set', '--partner', partner.id, '--url', 'https://p.example/h');
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({
      id: expect.any(String),
      url: 'https://p.example/h',
      webhookSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const missing = await admin('webhook', 'rotate', '--partner', uuidv7());
    expect(JSON.parse(missing.stderr).error.code).toBe('not_found');

    // A second rotation while the first one's overlap is open would end it early: refused, naming its end.
    const rotated = await admin('webhook', 'rotate', '--partner', partner.id);
    expect(rotated.code, rotated.stderr).toBe(0);
    const { previousExpiresAt } = JSON.parse(rotated.stdout);
    const again = await admin('webhook', 'rotate', '--partner', partner.id);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error).toMatchObject({
      code: 'conflict',
      message: expect.stringContaining(previousExpiresAt),
    });
    const forced = await admin('webhook', 'rotate', '--partner', partner.id, '--force');
    expect(forced.code, forced.stderr).toBe(0);
  });
});
