import nodeHttp from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, revokeApiKey } from '../shared/services/api-keys.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

let env: TestEnv;
let http: Served;
let key: { id: string; key: string; prefix: string };

beforeAll(async () => {
  env = await createTestEnv();
  http = await serve(await appFor(env));
  key = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: 'integrator' });
});
afterAll(async () => {
  await http?.close();
  await env?.cleanup();
});

const whoami = (headers: Record<string, string>) => fetch(`${http.url}/api/public/v1/whoami`, { headers });

describe('API keys (SPEC.md section 5)', () => {
  it('names the header after the service', () => {
    expect(env.config.apiKeyHeader).toBe('X-Direct-Taxi-Network-AI-Key');
  });

  it.each([
    ['X-Direct-Taxi-Network-AI-Key', (k: string) => ({ 'X-Direct-Taxi-Network-AI-Key': k })],
    ['Authorization: Bearer', (k: string) => ({ Authorization: `Bearer ${k}` })],
    ['x-api-key', (k: string) => ({ 'x-api-key': k })],
  ])('accepts the key in %s', async (_name, headers) => {
    const res = await whoami(headers(key.key));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      authenticated: true,
      key: { id: key.id, prefix: key.prefix, name: 'integrator', mode: 'live' },
      rateLimitedBy: 'key',
    });
  });

  it('accepts the same key in several headers at once', async () => {
    const res = await whoami({ 'x-api-key': key.key, Authorization: `Bearer ${key.key}` });
    expect(res.status).toBe(200);
  });

  // found in a probe: a key header sent twice was joined into one unknown key; a second Authorization went unseen
  it('reads every copy of a header: the same key twice is that key; two different ones are 401 invalid_request', async () => {
    const raw = (headers: Record<string, string | string[]>) =>
      new Promise<{ status: number; challenge: string | undefined }>((resolve, reject) => {
        const req = nodeHttp.request(`${http.url}/api/public/v1/whoami`, { headers }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, challenge: res.headers['www-authenticate'] as string | undefined }),
          );
        });
        req.on('error', reject);
        req.end();
      });
    for (const name of ['X-Direct-Taxi-Network-AI-Key', 'x-api-key', 'Authorization']) {
      const value = name === 'Authorization' ? `Bearer ${key.key}` : key.key;
      expect((await raw({ [name]: [value, value] })).status, name).toBe(200);
    }
    for (const pair of [
      [`Bearer ${key.key}`, 'Bearer dtn_live_00000000000000000000000000000000'],
      ['Bearer dtn_live_00000000000000000000000000000000', `Bearer ${key.key}`],
    ]) {
      const res = await raw({ Authorization: pair });
      expect(res.status).toBe(401);
      expect(res.challenge).toBe('Bearer realm="api", error="invalid_request"');
    }
    expect((await raw({ 'x-api-key': [key.key, 'dtn_live_00000000000000000000000000000000'] })).challenge).toBe(
      'Bearer realm="api", error="invalid_request"',
    );
  });

  it('lets a public endpoint through without a key, identified by IP', async () => {
    const res = await whoami({});
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ authenticated: false, key: null, rateLimitedBy: 'ip' });
    expect(res.headers.get('ratelimit-policy')).toContain('"per-ip"');
  });

  it.each([
    [
      'X-Direct-Taxi-Network-AI-Key',
      { 'X-Direct-Taxi-Network-AI-Key': 'dtn_live_00000000000000000000000000000000' },
      'invalid_token',
    ],
    ['Authorization: Bearer', { Authorization: 'Bearer dtn_live_00000000000000000000000000000000' }, 'invalid_token'],
    ['x-api-key', { 'x-api-key': 'not-even-a-key' }, 'invalid_token'],
    ['Authorization: Basic', { Authorization: 'Basic dXNlcjpwYXNz' }, 'invalid_request'],
    [
      'two different keys',
      { 'x-api-key': 'dtn_live_00000000000000000000000000000000', Authorization: 'Bearer other' },
      'invalid_request',
    ],
    ['an empty x-api-key', { 'x-api-key': ' ' }, 'invalid_request'],
  ])('answers a present but invalid key in %s with 401 on a public endpoint', async (_name, headers, error) => {
    const res = await whoami(headers as Record<string, string>);
    expect(res.status).toBe(401);
    const body = (await res.json()) as { error: { code: string } };
    expect(body.error.code).toBe('unauthorized');
    // RFC 6750 section 3.1: a refused key is invalid_token; credentials sent wrongly are invalid_request.
    expect(res.headers.get('www-authenticate')).toBe(`Bearer realm="api", error="${error}"`);
  });

  it('lets a browser client read the challenge of a refused key (CORS exposes WWW-Authenticate)', async () => {
    const res = await whoami({ origin: 'https://agent.example', 'x-api-key': 'not-even-a-key' });
    expect(res.status).toBe(401);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://agent.example');
    const exposed = (res.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    expect(exposed).toContain('www-authenticate');
  });

  it('refuses a revoked key', async () => {
    const other = await createApiKey(env.rt.db, { serviceCode: 'dtn', name: 'to revoke' });
    expect((await whoami({ 'x-api-key': other.key })).status).toBe(200);
    await revokeApiKey(env.rt.db, other.id);
    expect((await whoami({ 'x-api-key': other.key })).status).toBe(401);
  });

  it('stores only a SHA-256 hash of the key, with a visible prefix', async () => {
    const row = await env.rt.db('api_keys').where({ id: key.id }).first();
    expect(row.prefix).toBe(key.key.slice(0, 14));
    expect(Buffer.isBuffer(row.key_hash)).toBe(true);
    expect(row.key_hash.length).toBe(32);
    const dump = JSON.stringify(await env.rt.db('api_keys').select('*'));
    expect(dump).not.toContain(key.key);
  });
});
