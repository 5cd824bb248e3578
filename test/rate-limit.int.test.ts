import { Type } from '@sinclair/typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../api/app.ts';
import { countReleaser, fixedWindowCounter, ipBucket } from '../api/middleware/rate-limit.ts';
import { defineRoute } from '../api/route.ts';
import { knownMigrations } from '../shared/db/knex.ts';
import { createRedis } from '../shared/queues/connection.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

const hourly = defineRoute({
  method: 'get',
  path: '/api/public/v1/test-hourly',
  operationId: 'testHourly',
  summary: 'test',
  tags: ['test'],
  auth: 'public',
  rateLimit: [{ name: 'test-hourly', points: 2, durationSeconds: 3600 }],
  responses: { 200: { description: 'ok', schema: Type.Object({}) } },
  handler: () => ({ status: 200, body: {} }),
});

let env: TestEnv;
let http: Served;

beforeAll(async () => {
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '3', RATE_LIMIT_PER_KEY_PER_MINUTE: '5' } });
  http = await serve(await appFor(env, [hourly]));
});
afterAll(async () => {
  await http?.close();
  await env?.cleanup();
});

describe('rate limits', () => {
  it('answers the request over the per-IP limit 429 with Retry-After and RateLimit headers', async () => {
    const statuses: number[] = [];
    let last: Response | undefined;
    for (let i = 0; i < 4; i++) {
      last = await fetch(`${http.url}/api/public/v1/whoami`);
      statuses.push(last.status);
      if (i === 0) {
        expect(last.headers.get('ratelimit-policy')).toBe('"per-ip";q=3;w=60');
        expect(last.headers.get('ratelimit')).toMatch(/^"per-ip";r=2;t=\d+$/);
      }
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    const res = last as Response;
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(res.headers.get('ratelimit-policy')).toBe('"per-ip";q=3;w=60');
    expect(res.headers.get('ratelimit')).toMatch(/^"per-ip";r=0;t=\d+$/);
    expect(await res.json()).toMatchObject({ error: { code: 'rate_limited' } });
  });

  it('limits a key on its own budget, separate from the IP', async () => {
    const { key } = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: 'rl' });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push((await fetch(`${http.url}/api/public/v1/whoami`, { headers: { 'x-api-key': key } })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it('limits the booking endpoints as every route: instant, v1 and bookings/create answer 429 past the budget', async () => {
    for (const path of ['/api/public/bookings/instant', '/api/public/v1/booking', '/api/public/bookings/create']) {
      const { key } = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: `rl-${path}` });
      const answers: Response[] = [];
      for (let i = 0; i < 6; i++) {
        answers.push(
          await fetch(`${http.url}${path}`, {
            method: 'POST',
            headers: { 'x-api-key': key, 'content-type': 'application/json' },
            body: '{}',
          }),
        );
      }
      // Five answered on their merits (an empty body is 400), the sixth refused before them.
      expect(answers.map((r) => r.status)).toEqual([400, 400, 400, 400, 400, 429]);
      const last = answers[5] as Response;
      expect(Number(last.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await last.json()).toMatchObject({ error: { code: 'rate_limited' } });
    }
  });

  it('counts requests that arrive together one by one', async () => {
    const { key } = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: 'burst' });
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => fetch(`${http.url}/api/public/v1/whoami`, { headers: { 'x-api-key': key } })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    const remaining = answers
      .filter((r) => r.status === 200)
      .map((r) => Number(/r=(\d+)/.exec(r.headers.get('ratelimit') ?? '')?.[1]))
      .sort();
    expect(remaining).toEqual([0, 1, 2, 3, 4]);
  });

  it('gives a count back only to the window it was counted in, never to the next', async () => {
    const count = fixedWindowCounter(env.rt.redis);
    const release = countReleaser(env.rt.redis);
    const key = `${env.config.queuePrefix}:rl:test-release:${Date.now()}`;
    const [, ttl1] = await count([key], ['3600']);
    const [, ttl2] = await count([key], ['3600']);
    await release([key], [Number(ttl2)]);
    expect(await env.rt.redis.get(key)).toBe('1');
    // The window ended and a new one began with a count of its own: the old count is not taken from it.
    await env.rt.redis.del(key);
    await count([key], ['3600']);
    await env.rt.redis.pexpire(key, Number(ttl1) + 5_000);
    await release([key], [Number(ttl1)]);
    expect(await env.rt.redis.get(key)).toBe('1');
    // Nor is a window that ended re-created.
    await env.rt.redis.del(key);
    await release([key], [Number(ttl1)]);
    expect(await env.rt.redis.exists(key)).toBe(0);
  });

  it('applies a route policy on top of the general limit and lists both', async () => {
    const { key } = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: 'hourly' });
    const h = { 'x-api-key': key };
    const first = await fetch(`${http.url}/api/public/v1/test-hourly`, { headers: h });
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-policy')).toBe('"per-key";q=5;w=60, "test-hourly";q=2;w=3600');
    expect((await fetch(`${http.url}/api/public/v1/test-hourly`, { headers: h })).status).toBe(200);
    const third = await fetch(`${http.url}/api/public/v1/test-hourly`, { headers: h });
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(60);
  });

  it('slows down key guessing: repeated bad keys from one IP end in 429', async () => {
    const statuses = new Set<number>();
    for (let i = 0; i < 22; i++) {
      const res = await fetch(`${http.url}/api/public/v1/openapi.json`, {
        headers: { 'x-api-key': `dtn_live_${'x'.repeat(32)}` },
      });
      statuses.add(res.status);
    }
    expect([...statuses].sort()).toEqual([401, 429]);
  });

  it('answers 503 with the envelope when Redis is unreachable, never unlimited', async () => {
    const deadRedis = createRedis({ redisUrl: 'redis://127.0.0.1:1/0' }, 'producer', 'dead');
    const app = buildApp({ ...env.rt, redis: deadRedis, expectedMigrations: await knownMigrations() });
    const dead = await serve(app);
    try {
      const res = await fetch(`${dead.url}/api/public/v1/whoami`);
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ error: { code: 'service_unavailable' } });
      expect(res.headers.get('retry-after')).toBe('5');
    } finally {
      await dead.close();
      deadRedis.disconnect();
    }
  });
});

describe('dependencies away', () => {
  it('answers 503 with the envelope when Postgres is unreachable', async () => {
    const { createDb } = await import('../shared/db/knex.ts');
    const deadDb = createDb(
      { databaseUrl: 'postgres://postgres@127.0.0.1:1/none', databaseSchema: 'public' },
      { acquireTimeoutMs: 500, logger: env.rt.logger },
    );
    const { key } = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: 'pg-away' });
    const app = buildApp({ ...env.rt, db: deadDb, expectedMigrations: await knownMigrations() });
    const dead = await serve(app);
    try {
      const res = await fetch(`${dead.url}/api/public/v1/whoami`, { headers: { 'x-api-key': key } });
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ error: { code: 'service_unavailable' } });
      const ready = await fetch(`${dead.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(
        ((await ready.json()) as { error: { details: Array<{ field: string }> } }).error.details.map((d) => d.field),
      ).toContain('/checks/postgres');
    } finally {
      await dead.close();
      await deadDb.destroy();
    }
  });
});

describe('ipBucket (the failed-proof limits’ caller without a key)', () => {
  it('keeps IPv4 as it is and takes IPv6 by its /64, however it is written', () => {
    expect(ipBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(ipBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    const one = ipBucket('2001:db8:85a3:0:1:2:3:4');
    expect(one).toBe('2001:db8:85a3:0::/64');
    for (const same of ['2001:0db8:85a3:0000:ffff:ffff:ffff:ffff', '2001:DB8:85A3::9', '2001:db8:85a3::1%eth0']) {
      expect(ipBucket(same), same).toBe(one);
    }
    expect(ipBucket('2001:db8:85a4::1')).not.toBe(one);
    expect(ipBucket('::1')).toBe('0:0:0:0::/64');
  });
});
