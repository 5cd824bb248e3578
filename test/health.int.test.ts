import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

let env: TestEnv;
let http: Served;

beforeAll(async () => {
  env = await createTestEnv({ migrate: false });
  http = await serve(await appFor(env));
});
afterAll(async () => {
  await http?.close();
  await env?.cleanup();
});

describe('health', () => {
  it('answers /healthz while the process is up', async () => {
    const res = await fetch(`${http.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok', service: 'Direct Taxi Network' });
  });

  it('answers /readyz 503 naming the pending migrations, then 200 once migrated', async () => {
    const before = await fetch(`${http.url}/readyz`);
    expect(before.status).toBe(503);
    const body = (await before.json()) as {
      error: { code: string; details: Array<{ field: string; problem: string }> };
    };
    expect(body.error.code).toBe('service_unavailable');
    expect(body.error.details).toEqual([
      { field: '/checks/migrations', problem: expect.stringMatching(/^\d+ pending: /) },
    ]);

    await env.rt.db.migrate.latest();
    const after = await fetch(`${http.url}/readyz`);
    expect(after.status).toBe(200);
    expect(await after.json()).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', migrations: 'ok' } });
  });
});
