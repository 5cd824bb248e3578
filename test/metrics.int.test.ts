import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../api/app.ts';
import { loadConfig } from '../shared/config.ts';
import { knownMigrations } from '../shared/db/knex.ts';
import { createMetrics } from '../shared/metrics.ts';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { bookThroughApi } from './helpers/bookings.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * `GET /metrics` (prom-client) through real HTTP with the pricing worker running in the same
 * process, as `npm start` runs it: HTTP latency by route template and status, job durations
 * and failures per queue, queue depth, dispatch offers per tier and outcome, webhook deliveries.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;

beforeAll(async () => {
  env = await createTestEnv({ env: { QUOTE_LIMIT_PER_HOUR: '1000' } });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env));
});
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

/** The value of one series in the Prometheus text format, or undefined. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const close = line.indexOf('}');
    const have = Object.fromEntries(
      [...line.slice(name.length + 1, close).matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(line.slice(close + 1).trim());
  }
  return undefined;
}

const inHours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

describe('GET /metrics', () => {
  it('exposes HTTP, job, queue, dispatch and webhook series, by route template not by path', async () => {
    const quote = await fetch(`${api.url}/api/public/v1/quote`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ pickup: 'Leeds station', dropoff: 'York', departAt: inHours(5) }),
    });
    expect(quote.status).toBe(200);
    const lookup = await fetch(`${api.url}/api/public/v1/booking/DTN-SECRET1?email=someone@example.org`);
    expect(lookup.status).toBe(404);

    const res = await fetch(`${api.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const route = { method: 'POST', route: '/api/public/v1/quote', status: '200' };
    expect(sample(text, 'dtn_http_request_duration_seconds_count', route)).toBe(1);
    expect(
      sample(text, 'dtn_http_request_duration_seconds_count', {
        method: 'GET',
        route: '/api/public/v1/booking/:ref',
        status: '404',
      }),
    ).toBe(1);
    // The reference and the e-mail of the lookup are in no series.
    expect(text).not.toContain('DTN-SECRET1');
    expect(text).not.toContain('someone@example.org');
    expect(
      sample(text, 'dtn_job_duration_seconds_count', { queue: 'pricing', job: 'price-quote', outcome: 'completed' }),
    ).toBe(1);
    for (const queue of ['pricing', 'dispatch', 'notify', 'fanout', 'billing']) {
      expect(sample(text, 'dtn_queue_jobs', { queue, state: 'waiting' }), queue).toBe(0);
    }
    expect(text).toContain('# TYPE dtn_dispatch_offers_24h gauge');
    expect(text).toContain('# TYPE dtn_webhook_deliveries_24h gauge');
    expect(text).toContain('# TYPE dtn_job_failures_total counter');
  });

  it('counts dispatch offers by tier and outcome and webhook deliveries by state, from Postgres', async () => {
    const booking = await bookThroughApi(api.url, env.rt.db);
    const partner = await createPartner(env.rt.db, env.config, { name: 'Metrics Fleet', actor: 'test' });
    const offer = (attempt: number, tier: number, state: string) => ({
      id: randomUUID(),
      booking_id: booking.id,
      tier,
      attempt,
      partner_id: partner.id,
      state,
      expires_at: new Date(Date.now() + 60_000),
    });
    await env.rt
      .db('dispatch_offers')
      .insert([offer(1, 1, 'declined'), offer(2, 1, 'expired'), offer(3, 1, 'expired'), offer(4, 3, 'accepted')]);
    const endpoint = randomUUID();
    await env.rt
      .db('webhook_endpoints')
      .insert({ id: endpoint, partner_id: partner.id, url: 'http://127.0.0.1:9/x', secret_sealed: 'x' });
    const delivery = (state: string) => ({
      id: randomUUID(),
      endpoint_id: endpoint,
      event_type: 'booking.status',
      message_id: `msg_${randomUUID()}`,
      payload: {},
      state,
    });
    await env.rt.db('webhook_deliveries').insert([delivery('delivered'), delivery('delivered'), delivery('dead')]);

    // A new app's metrics read Postgres on their first scrape (later ones reuse it for 10 s).
    const srv = await serve(
      buildApp({ ...env.rt, metrics: createMetrics(), expectedMigrations: await knownMigrations() }),
    );
    try {
      const text = await (await fetch(`${srv.url}/metrics`)).text();
      expect(sample(text, 'dtn_dispatch_offers_24h', { tier: '1', outcome: 'expired' })).toBe(2);
      expect(sample(text, 'dtn_dispatch_offers_24h', { tier: '1', outcome: 'declined' })).toBe(1);
      expect(sample(text, 'dtn_dispatch_offers_24h', { tier: '3', outcome: 'accepted' })).toBe(1);
      expect(sample(text, 'dtn_webhook_deliveries_24h', { status: 'delivered' })).toBe(2);
      expect(sample(text, 'dtn_webhook_deliveries_24h', { status: 'dead' })).toBe(1);
    } finally {
      await srv.close();
    }
  });

  it('requires the bearer token when METRICS_TOKEN is set, compared exactly', async () => {
    const config = loadConfig({ ...process.env, ...env.childEnv, METRICS_TOKEN: 'metrics-secret-0123456789' });
    const app = buildApp({ ...env.rt, config, expectedMigrations: await knownMigrations() });
    const srv = await serve(app);
    try {
      const none = await fetch(`${srv.url}/metrics`);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toContain('Bearer');
      expect(((await none.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
      const wrong = await fetch(`${srv.url}/metrics`, {
        headers: { authorization: 'Bearer metrics-secret-012345678X' },
      });
      expect(wrong.status).toBe(401);
      const right = await fetch(`${srv.url}/metrics`, {
        headers: { authorization: 'Bearer metrics-secret-0123456789' },
      });
      expect(right.status).toBe(200);
      expect(await right.text()).toContain('dtn_http_request_duration_seconds');
    } finally {
      await srv.close();
    }
  });

  // found in a probe: behind a proxy on this machine every request came over loopback, so anyone could read them
  it('is refused behind a proxy to a client the proxy names as not on this machine', async () => {
    const config = loadConfig({ ...process.env, ...env.childEnv, TRUST_PROXY_HOPS: '1' });
    const app = buildApp({ ...env.rt, config, expectedMigrations: await knownMigrations() });
    const srv = await serve(app);
    try {
      const outside = await fetch(`${srv.url}/metrics`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
      expect(outside.status).toBe(403);
      const local = await fetch(`${srv.url}/metrics`, { headers: { 'x-forwarded-for': '127.0.0.1' } });
      expect(local.status).toBe(200);
    } finally {
      await srv.close();
    }
  });

  it('is refused to a client that is not on this machine when no token is set', async () => {
    // Reach the server through a non-loopback address of this machine, if it has one.
    const outside = Object.values(os.networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
    if (!outside) return;
    const server = (await appFor(env)).listen(0, '0.0.0.0');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const res = await fetch(`http://${outside}:${port}/metrics`);
      expect(res.status).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
