import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../api/app.ts';
import { unseal } from '../shared/crypto.ts';
import { knownMigrations } from '../shared/db/knex.ts';
import { REDACT_PATHS } from '../shared/logger.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { mapProviderForDriver } from '../shared/services/driver-map-key.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { startMapProviderStub } from './helpers/map-provider-stub.ts';

/**
 * A driver's own map-provider key (SPEC.md 2.10): stored sealed through the driver API, never
 * echoed or logged, and used by the pricing worker for quotes the driver makes with their token
 * (against the local stand-in for Google's Geocoding and Distance Matrix APIs).
 */
const DRIVER_KEY = 'AIzaDriverOwnKey1234567890abcdefWXYZ';

let env: TestEnv;
let srv: Served;
let roles: RunningRoles;
let stub: Awaited<ReturnType<typeof startMapProviderStub>>;
const logLines: string[] = [];

// biome-ignore lint/suspicious/noExplicitAny: JSON read back in assertions
type Json = Record<string, any>;

async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(`${srv.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : null) as Json, text };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

const driver = () => approvedDriver(env.rt.db, { home: 'Leeds' });

const QUOTE = { pickup: 'Manchester Piccadilly', dropoff: 'Leeds', passengers: 1 };

beforeAll(async () => {
  stub = await startMapProviderStub({ keys: [DRIVER_KEY] });
  env = await createTestEnv({
    env: {
      MAP_PROVIDER_BASE_URL: stub.url,
      QUOTE_LIMIT_PER_HOUR: '100000',
      RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
    },
  });
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(String(chunk));
      cb();
    },
  });
  const logger = pino({ level: 'trace', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
  srv = await serve(buildApp({ ...env.rt, logger, expectedMigrations: await knownMigrations() }));
  roles = startRoles(['pricing'], env.rt);
}, 60_000);

afterAll(async () => {
  await roles?.close();
  await srv?.close();
  await stub?.close();
  await env?.cleanup();
});

describe('driver map-provider key', () => {
  it('needs a driver token, and refuses a malformed key without echoing it', async () => {
    expect((await call('PUT', '/api/public/v1/driver/map-key', {}, { apiKey: DRIVER_KEY })).status).toBe(401);
    expect((await call('DELETE', '/api/public/v1/driver/map-key', {})).status).toBe(401);
    const { key } = await createApiKey(env.rt.db, { serviceCode: env.config.serviceCode, name: 'not a driver' });
    const withKey = await call('PUT', '/api/public/v1/driver/map-key', { 'x-api-key': key }, { apiKey: DRIVER_KEY });
    expect(withKey.status).toBe(403);
    const d = await driver();
    const bad = await call('PUT', '/api/public/v1/driver/map-key', bearer(d.token), { apiKey: 'has spaces in it!' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_input');
    expect(bad.text).not.toContain('has spaces');
  });

  it('stores the key sealed, answers only its last 4 characters, and never logs it', async () => {
    const d = await driver();
    const put = await call('PUT', '/api/public/v1/driver/map-key', bearer(d.token), { apiKey: DRIVER_KEY });
    expect(put.status, put.text).toBe(200);
    expect(put.json).toEqual({ stored: true, last4: 'WXYZ' });
    expect(put.text).not.toContain(DRIVER_KEY.slice(0, -4));
    const row = await env.rt.db('drivers').where({ id: d.id }).first('map_api_key_sealed');
    expect(row.map_api_key_sealed).toMatch(/^v1\./);
    expect(row.map_api_key_sealed).not.toContain(DRIVER_KEY);
    expect(row.map_api_key_sealed).not.toContain(Buffer.from(DRIVER_KEY).toString('base64url').slice(0, 20));
    expect(unseal(row.map_api_key_sealed, env.config.dataEncryptionKey)).toBe(DRIVER_KEY);
    const audit = await env.rt.db('audit_log').where({ subject_id: d.id, action: 'driver.map_key_set' });
    expect(audit).toHaveLength(1);
    expect(JSON.stringify(audit)).not.toContain(DRIVER_KEY);
    expect(logLines.join('')).toContain('/api/public/v1/driver/map-key');
    expect(logLines.join('')).not.toContain(DRIVER_KEY);
  });

  it('prices a quote made with the driver token through the map provider with their key', async () => {
    const d = await driver();
    await call('PUT', '/api/public/v1/driver/map-key', bearer(d.token), { apiKey: DRIVER_KEY });
    const before = stub.requests.length;
    const q = await call('POST', '/api/public/v1/quote', bearer(d.token), QUOTE);
    expect(q.status, q.text).toBe(200);
    const sent = stub.requests.slice(before);
    expect(sent.map((r) => r.path).sort()).toEqual([
      '/maps/api/distancematrix/json',
      '/maps/api/geocode/json',
      '/maps/api/geocode/json',
    ]);
    for (const r of sent) expect(r.params.key).toBe(DRIVER_KEY);
    expect(sent.filter((r) => r.path.endsWith('geocode/json')).map((r) => r.params.address)).toEqual(
      expect.arrayContaining(['Manchester Piccadilly', 'Leeds']),
    );
    // Google's answer names the places: the stand-in's formatted addresses come back.
    expect(q.json.pickup.name).toBe('Manchester Piccadilly, Manchester M60 7RA, UK');
    expect(q.json.dropoff.name).toBe('Leeds, UK');
    expect(q.text).not.toContain(DRIVER_KEY);
    const stored = await env.rt.db('quotes').where({ id: q.json.quoteId }).first('driver_id');
    expect(stored.driver_id).toBe(d.id);
    expect(logLines.join('')).not.toContain(DRIVER_KEY);
  });

  it('still quotes, on the built-in data, when the provider refuses the driver’s key, and says so', async () => {
    const d = await driver();
    const refused = 'AIzaRefusedKey0000000000000000000000ABCD';
    const put = await call('PUT', '/api/public/v1/driver/map-key', bearer(d.token), { apiKey: refused });
    expect(put.status, put.text).toBe(200);
    const before = stub.requests.length;
    const q = await call('POST', '/api/public/v1/quote', bearer(d.token), QUOTE);
    expect(q.status, q.text).toBe(200);
    // The provider was asked with the driver's key, refused it, and the offline gazetteer priced it.
    expect(stub.requests.slice(before).some((r) => r.params.key === refused)).toBe(true);
    expect(q.json.pickup.name).not.toContain('M60 7RA');
    expect(q.json.fareGBP).toBeGreaterThan(0);
    expect(JSON.stringify(q.json.warnings)).toContain('map provider could not be used (key rejected)');
    expect(q.text).not.toContain(refused);
  });

  it('prices offline for anonymous callers, drivers without a key, and after the key is removed', async () => {
    const d = await driver();
    const keyless = await driver();
    await call('PUT', '/api/public/v1/driver/map-key', bearer(d.token), { apiKey: DRIVER_KEY });
    const before = stub.requests.length;
    const anon = await call('POST', '/api/public/v1/quote', {}, QUOTE);
    expect(anon.status, anon.text).toBe(200);
    expect(anon.json.pickup.name).not.toContain('M60 7RA');
    const noKey = await call('POST', '/api/public/v1/quote', bearer(keyless.token), QUOTE);
    expect(noKey.status, noKey.text).toBe(200);
    expect(stub.requests.length).toBe(before);

    const del = await call('DELETE', '/api/public/v1/driver/map-key', bearer(d.token));
    expect(del.status, del.text).toBe(200);
    expect(del.json).toEqual({ stored: false, removed: true });
    const again = await call('DELETE', '/api/public/v1/driver/map-key', bearer(d.token));
    expect(again.json).toEqual({ stored: false, removed: false });
    const row = await env.rt.db('drivers').where({ id: d.id }).first('map_api_key_sealed');
    expect(row.map_api_key_sealed).toBeNull();
    const after = await call('POST', '/api/public/v1/quote', bearer(d.token), QUOTE);
    expect(after.status, after.text).toBe(200);
    expect(stub.requests.length).toBe(before);
  });

  it('documents the driver token on the quote route and the map-key paths', async () => {
    const doc = (await call('GET', '/api/public/v1/openapi.json', {})).json;
    expect(doc.paths['/api/public/v1/quote'].post.security).toEqual(
      expect.arrayContaining([{}, { DriverToken: [] }, { ApiKeyHeader: [] }]),
    );
    expect(doc.paths['/api/public/v1/driver/map-key'].put.security).toEqual([{ DriverToken: [] }]);
    expect(Object.keys(doc.paths['/api/public/v1/driver/map-key'])).toEqual(['put', 'delete']);
  });

  it('mapProviderForDriver gives the adapter bound to the driver’s unsealed key, or null', async () => {
    const d = await driver();
    const none = await driver();
    await call('PUT', '/api/public/v1/driver/map-key', bearer(d.token), { apiKey: DRIVER_KEY });
    expect(await mapProviderForDriver(env.rt.db, env.config.dataEncryptionKey, none.id)).toBeNull();
    const provider = await mapProviderForDriver(env.rt.db, env.config.dataEncryptionKey, d.id, { baseUrl: stub.url });
    const before = stub.requests.length;
    const leeds = await provider?.geocode('Leeds');
    expect(leeds).toMatchObject({ ok: true, place: { name: 'Leeds, UK' } });
    expect(stub.requests[before]?.params.key).toBe(DRIVER_KEY);
  });
});
