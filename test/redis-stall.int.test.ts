import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, waitForRedis } from '../shared/queues/connection.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { type StallingRedis, startStallingRedis } from './helpers/stalling-redis.ts';

/**
 * A Redis that stops answering (a long fork, packets dropped without a reset) is not a Redis
 * that is down: the connection stays open and nothing comes back. The fail-fast (producer)
 * connection gives up on a command after REDIS_COMMAND_TIMEOUT_MS, so the API answers 503
 * `service_unavailable` instead of holding the request until the client gives up. The
 * database is this file's own schema on the real Postgres; Redis is a loopback stand-in
 * speaking RESP (test/helpers/stalling-redis.ts), the only way to make a Redis hang on cue.
 */
let fake: StallingRedis;
let env: TestEnv;
let api: Served;

beforeAll(async () => {
  fake = await startStallingRedis();
  env = await createTestEnv({ env: { REDIS_URL: fake.url, REDIS_COMMAND_TIMEOUT_MS: '300' } });
  api = await serve(await appFor(env));
});

afterAll(async () => {
  fake.resume();
  await api?.close();
  await env?.cleanup();
  await fake?.close();
});

describe('a stalled Redis', () => {
  it('fails a producer command after the command timeout instead of waiting for ever', async () => {
    const redis = createRedis({ redisUrl: fake.url, redisCommandTimeoutMs: 200 }, 'producer', 'stall-test');
    try {
      await waitForRedis(redis, 5_000);
      expect(await redis.ping()).toBe('PONG');
      fake.stall();
      await expect(redis.ping()).rejects.toThrow(/timed out/i);
      expect(fake.unanswered).toContain('PING');
    } finally {
      fake.resume();
      redis.disconnect();
    }
  });

  it('answers an API request 503 service_unavailable with Retry-After, not a hung request', async () => {
    fake.stall();
    try {
      const res = await fetch(`${api.url}/api/public/v1/quote`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ pickup: 'Manchester Piccadilly', dropoff: 'Manchester Airport' }),
        // Far longer than the 300 ms command timeout: without it the request would still be waiting.
        signal: AbortSignal.timeout(20_000),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('service_unavailable');
      expect(body.error.message).not.toMatch(/timed out|ioredis|stack/i);
    } finally {
      fake.resume();
    }
  });
});
