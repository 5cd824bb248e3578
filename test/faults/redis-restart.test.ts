import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, bookThroughOutage, expectNothingLost, type FaultStack, faultStack, privateRedis } from './support.ts';

/**
 * Redis crashes (kill -9) during a burst of bookings and comes back: the API answers 503
 * `service_unavailable` with the envelope and Retry-After while it is away (never a 500, never a
 * hang), no accepted booking is lost (the outbox holds what was not relayed yet), and the same
 * API and worker processes recover and dispatch everything once. A private redis-server is used,
 * never the machine's shared one; it persists with an append-only file, as Redis under BullMQ
 * must.
 */
let redis: Awaited<ReturnType<typeof privateRedis>>;
let stack: FaultStack;

beforeAll(async () => {
  redis = await privateRedis();
  stack = await faultStack({ REDIS_URL: redis.url }, 4);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await redis?.destroy();
});

describe('Redis restarted during a booking burst', () => {
  it('answers 503 while Redis is away, loses no accepted booking and dispatches each once when it is back', async () => {
    const { env, api, workers, twilio, smtp, drivers } = stack;
    const { accepted, refusedWhileDown } = await bookThroughOutage(api.url, redis.kill, redis.start);
    expect(refusedWhileDown).toBeGreaterThan(0);
    expect(accepted.length).toBeGreaterThanOrEqual(14);
    await expectNothingLost(env.rt.db, accepted, twilio.sent, smtp.mails, drivers);
    // Recovered without a restart.
    expect(alive(workers), workers.output().slice(-2000)).toBe(true);
  });
});
