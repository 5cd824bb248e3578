import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncBuiltInTariffs } from '../../shared/services/tariff-store.ts';
import type { TestDriver } from '../helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from '../helpers/env.ts';
import {
  alive,
  bookThroughOutage,
  expectNothingLost,
  liveDrivers,
  type Proc,
  privateRedis,
  smtpStandIn,
  startWorkers,
  stopProc,
  twilioStandIn,
} from './support.ts';

/**
 * Redis crashes (kill -9) during a burst of bookings and comes back: the API answers 503
 * `service_unavailable` with the envelope and Retry-After while it is away (never a 500, never a
 * hang), no accepted booking is lost (the outbox holds what was not relayed yet), and the same
 * API and worker processes recover and dispatch everything once. A private redis-server is used,
 * never the machine's shared one; it persists with an append-only file, as Redis under BullMQ
 * must.
 */
let redis: Awaited<ReturnType<typeof privateRedis>>;
let env: TestEnv;
let api: Served;
let workers: Proc;
let twilio: Awaited<ReturnType<typeof twilioStandIn>>;
let smtp: Awaited<ReturnType<typeof smtpStandIn>>;
const drivers = new Map<string, TestDriver>();

beforeAll(async () => {
  redis = await privateRedis();
  twilio = await twilioStandIn();
  smtp = await smtpStandIn();
  env = await createTestEnv({
    env: {
      REDIS_URL: redis.url,
      TWILIO_API_BASE_URL: twilio.url,
      SMTP_URL: smtp.url,
      OFFER_TIMEOUT_SECONDS: '3600',
      PRESENCE_TTL_SECONDS: '3600',
      WORKER_LOCK_MS: '2000',
      OUTBOX_POLL_MS: '200',
      RATE_LIMIT_PER_IP_PER_MINUTE: '1000000',
      QUOTE_LIMIT_PER_HOUR: '1000000',
    },
  });
  await syncBuiltInTariffs(env.rt.db);
  api = await serve(await appFor(env));
  workers = await startWorkers('pricing,dispatch,notify,outbox-relay', env.childEnv);
  for (const d of await liveDrivers(env.rt.db, api.url, 4)) drivers.set(d.id, d);
}, 120_000);

afterAll(async () => {
  await stopProc(workers);
  await api?.close();
  await twilio?.stop();
  await smtp?.stop();
  await env?.cleanup();
  await redis?.destroy();
});

describe('Redis restarted during a booking burst', () => {
  it('answers 503 while Redis is away, loses no accepted booking and dispatches each once when it is back', async () => {
    const { accepted, refusedWhileDown } = await bookThroughOutage(api.url, redis.kill, redis.start);
    expect(refusedWhileDown).toBeGreaterThan(0);
    expect(accepted.length).toBeGreaterThanOrEqual(14);
    await expectNothingLost(env.rt.db, accepted, twilio.sent, smtp.mails, drivers);
    // Recovered without a restart.
    expect(alive(workers), workers.output().slice(-2000)).toBe(true);
  });
});
