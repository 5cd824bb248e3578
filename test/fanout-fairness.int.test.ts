import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendStatus } from '../shared/db/bookings.ts';
import { createPartner } from '../shared/services/partners.ts';
import { deliverWebhook, SLOT_WAIT_MS } from '../workers/fanout/deliver-webhook.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { insertPendingBooking } from './helpers/bookings.ts';
import { createTestEnv, eventually, type TestEnv } from './helpers/env.ts';

/**
 * One partner's endpoint that hangs must not hold every fanout slot: deliveries to one
 * endpoint in flight at once are capped (WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT), so another
 * partner's webhook goes out while the hanging ones wait, and theirs follow once it answers.
 */
let env: TestEnv;
let roles: RunningRoles;
let server: http.Server;
let receiverUrl: string;
/** Requests to /hang are held until released; the most held at once is recorded. */
const held: http.ServerResponse[] = [];
let mostHeld = 0;
const delivered: { path: string; at: number }[] = [];

const CAP = 2;
/** More deliveries than a fanout worker runs at once (ROLE_CONCURRENCY.fanout, 32). */
const HANGING = 40;

beforeAll(async () => {
  env = await createTestEnv({ env: { WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: String(CAP) } });
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      delivered.push({ path: req.url ?? '/', at: Date.now() });
      if (req.url === '/hang') {
        held.push(res);
        mostHeld = Math.max(mostHeld, held.filter((r) => !r.writableEnded).length);
        return;
      }
      res.statusCode = 204;
      res.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  roles = startRoles(['fanout', 'outbox-relay'], env.rt);
});
afterAll(async () => {
  for (const r of held) if (!r.writableEnded) r.end();
  await roles?.close();
  server?.closeAllConnections();
  server?.close();
  await env?.cleanup();
});

let refSeq = 0;
async function partnerAt(path: string) {
  const partner = await createPartner(env.rt.db, env.config, {
    name: `Partner ${path}`,
    webhookUrl: 'https://partner.example/hooks',
    actor: 'test',
  });
  await env.rt
    .db('webhook_endpoints')
    .where({ partner_id: partner.id })
    .update({ url: `${receiverUrl}${path}` });
  return partner.id;
}

async function bookingOf(partnerId: string): Promise<string> {
  refSeq += 1;
  return insertPendingBooking(env.rt.db, `DTN-FR${String(refSeq).padStart(4, '0')}`, partnerId);
}

const dispatching = (bookingId: string) =>
  env.rt.db.transaction((trx) => appendStatus(trx, bookingId, 'dispatching', 'test'));

describe('webhook fanout with a hanging endpoint', () => {
  it("caps one endpoint's deliveries in flight, so another partner's webhook is not held behind it", async () => {
    const hanging = await partnerAt('/hang');
    const healthy = await partnerAt('/ok');
    const stuck = await Promise.all(Array.from({ length: HANGING }, () => bookingOf(hanging)));
    for (const id of stuck) await dispatching(id);
    // The hanging endpoint has its few requests in flight (and no more).
    await eventually(async () => held.length >= CAP);
    await dispatching(await bookingOf(healthy));
    await eventually(async () => delivered.some((d) => d.path === '/ok'));
    expect(held.filter((r) => !r.writableEnded)).toHaveLength(CAP);
    // Waiting for a slot is not an attempt: nothing was logged for the deliveries still waiting.
    const attempts = await env.rt.db('webhook_delivery_attempts').count<{ n: string }[]>({ n: '*' });
    expect(Number(attempts[0]?.n)).toBeLessThanOrEqual(1);

    // The endpoint answers again: every delivery to it goes out, once each.
    const release = setInterval(() => {
      for (const r of held) {
        if (!r.writableEnded) {
          r.statusCode = 204;
          r.end();
        }
      }
    }, 20);
    try {
      await eventually(async () => {
        const rows = await env.rt
          .db('webhook_deliveries as d')
          .join('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
          .where('e.partner_id', hanging)
          .select('d.state', 'd.attempts');
        return rows.length === HANGING && rows.every((r) => r.state === 'delivered' && r.attempts === 1);
      }, 60_000);
    } finally {
      clearInterval(release);
    }
    expect(delivered.filter((d) => d.path === '/hang')).toHaveLength(HANGING);
    expect(mostHeld).toBeLessThanOrEqual(CAP);
    // The waits were real jobs, and none of them is kept once run: what the queue keeps is the
    // deliveries' own jobs (one each: every delivery went out on its first attempt).
    const kept = await env.rt.queues.fanout.getJobs(['completed'], 0, 1000);
    expect(kept.filter((j) => j.id?.includes('-wait-'))).toEqual([]);
    expect(kept.length).toBeLessThanOrEqual(HANGING + 1);
  }, 90_000);

  it('a delivery that keeps finding the slots taken looks again later each time, up to 30 s (plus jitter)', async () => {
    const busy = await partnerAt('/busy');
    const endpoint = await env.rt.db('webhook_endpoints').where({ partner_id: busy }).first<{ id: string }>('id');
    // Every slot of the endpoint held by requests that will not end during the test.
    const slots = `${env.config.queuePrefix}:fanout:in-flight:${endpoint?.id}`;
    const farLease = Date.now() + 10 * 60_000;
    for (let i = 0; i < CAP; i++) await env.rt.redis.zadd(slots, farLease, `held-${i}`);
    const bookingId = await bookingOf(busy);
    await dispatching(bookingId);
    const delivery = await eventually(() =>
      env.rt
        .db('webhook_deliveries')
        .where({ booking_id: bookingId, endpoint_id: endpoint?.id })
        .first<{ id: string; attempts: number }>('id', 'attempts'),
    );
    const waitJob = (n: number) => env.rt.queues.fanout.getJob(`webhook-${delivery.id}-1-wait-${n}`);
    // The worker's own first and second waits: about 1 s, then about 2 s (each plus up to as much again).
    const first = await eventually(() => waitJob(1));
    expect(first.data).toMatchObject({ deliveryId: delivery.id, slotWaits: 1 });
    expect(first.opts.delay).toBeGreaterThanOrEqual(SLOT_WAIT_MS);
    expect(first.opts.delay).toBeLessThan(2 * SLOT_WAIT_MS);
    const second = await eventually(() => waitJob(2), 10_000);
    expect(second.opts.delay).toBeGreaterThanOrEqual(2 * SLOT_WAIT_MS);
    expect(second.opts.delay).toBeLessThan(4 * SLOT_WAIT_MS);
    // Further on (run here directly, as the worker would run those jobs): it doubles, then stays at 30 s.
    for (const [waits, least, most] of [
      [4, 16_000, 32_000],
      [5, 30_000, 60_000],
      [40, 30_000, 60_000],
    ] as const) {
      await deliverWebhook({ deliveryId: delivery.id, slotWaits: waits }, env.rt);
      const job = await waitJob(waits + 1);
      expect(job?.data).toMatchObject({ slotWaits: waits + 1 });
      expect(job?.opts.delay).toBeGreaterThanOrEqual(least);
      expect(job?.opts.delay).toBeLessThan(most);
    }
    // Waiting is not an attempt: nothing counted, nothing logged.
    const row = await env.rt.db('webhook_deliveries').where({ id: delivery.id }).first('attempts', 'state');
    expect(row).toMatchObject({ attempts: 0, state: 'pending' });
    expect(await env.rt.db('webhook_delivery_attempts').where({ delivery_id: delivery.id })).toEqual([]);
    // Once a slot frees, the next look goes through.
    await env.rt.redis.del(slots);
    await eventually(async () => delivered.some((d) => d.path === '/busy'), 20_000);
  }, 40_000);
});
