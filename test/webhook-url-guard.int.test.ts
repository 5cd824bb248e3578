import { randomBytes } from 'node:crypto';
import type { LookupAddress } from 'node:dns';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../shared/config.ts';
import { enqueueJob } from '../shared/db/outbox.ts';
import {
  AddressRefusedError,
  checkEndpointUrl,
  EndpointUrlError,
  endpointUrlRules,
  isPublicAddress,
  nonPublicRange,
  publicOnlyLookup,
} from '../shared/net/public-address.ts';
import { createPartner } from '../shared/services/partners.ts';
import { setWebhookEndpoint } from '../shared/services/webhooks.ts';
import { postWebhook } from '../workers/fanout/deliver-webhook.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { createTestEnv, eventually, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * SSRF guard for webhook endpoint URLs (WEBHOOK_ALLOW_PRIVATE_NETWORKS): the address
 * classifier, registration through the real admin CLI, and delivery by the real fanout worker,
 * which resolves the endpoint's host when it connects and refuses a non-public address.
 */

/** The host `new URL` makes of a URL: what registration checks. */
const hostOf = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, '');

describe('address classifier', () => {
  it('refuses every non-public form of an address, however the URL spells it', () => {
    const cases: Array<[url: string, host: string, range: string]> = [
      ['http://127.0.0.1/', '127.0.0.1', 'loopback'],
      ['http://127.255.255.254/', '127.255.255.254', 'loopback'],
      ['http://2130706433/', '127.0.0.1', 'loopback'], // decimal
      ['http://0x7f000001/', '127.0.0.1', 'loopback'], // hex
      ['http://0x7f.1/', '127.0.0.1', 'loopback'], // hex, short form
      ['http://0177.0.0.1/', '127.0.0.1', 'loopback'], // octal
      ['http://017700000001/', '127.0.0.1', 'loopback'], // octal, one number
      ['http://127.1/', '127.0.0.1', 'loopback'],
      ['http://127.0.0.1./', '127.0.0.1', 'loopback'], // final dot
      ['http://%31%32%37.0.0.1/', '127.0.0.1', 'loopback'], // percent-encoded
      ['http://0/', '0.0.0.0', 'this network'],
      ['http://10.0.0.5/', '10.0.0.5', 'private'],
      ['http://0xa000005/', '10.0.0.5', 'private'],
      ['http://172.16.0.1/', '172.16.0.1', 'private'],
      ['http://172.31.255.255/', '172.31.255.255', 'private'],
      ['http://192.168.1.1/', '192.168.1.1', 'private'],
      ['http://3232235777/', '192.168.1.1', 'private'],
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254', 'link-local'],
      ['http://100.64.0.1/', '100.64.0.1', 'carrier-grade NAT'],
      ['http://100.127.255.255/', '100.127.255.255', 'carrier-grade NAT'],
      ['http://224.0.0.1/', '224.0.0.1', 'multicast'],
      ['http://255.255.255.255/', '255.255.255.255', 'reserved or broadcast'],
      ['http://192.0.2.10/', '192.0.2.10', 'documentation'],
      ['http://[::1]/', '::1', 'loopback'],
      ['http://[0:0:0:0:0:0:0:1]/', '::1', 'loopback'],
      ['http://[::]/', '::', 'unspecified'],
      ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1', 'loopback'], // IPv4-mapped
      ['http://[0:0:0:0:0:ffff:7f00:1]/', '::ffff:7f00:1', 'loopback'],
      ['http://[::ffff:a9fe:a9fe]/', '::ffff:a9fe:a9fe', 'link-local'], // mapped 169.254.169.254
      ['http://[::ffff:10.1.2.3]/', '::ffff:a01:203', 'private'],
      ['http://[::127.0.0.1]/', '::7f00:1', 'IPv4-compatible'],
      ['http://[64:ff9b::a00:5]/', '64:ff9b::a00:5', 'private'], // NAT64 of 10.0.0.5
      ['http://[2002:7f00:1::1]/', '2002:7f00:1::1', 'loopback'], // 6to4 of 127.0.0.1
      ['http://[fe80::1]/', 'fe80::1', 'link-local'],
      ['http://[febf:ffff::1]/', 'febf:ffff::1', 'link-local'],
      ['http://[fc00::1]/', 'fc00::1', 'unique-local'],
      ['http://[fd12:3456::1]/', 'fd12:3456::1', 'unique-local'],
      ['http://[ff02::1]/', 'ff02::1', 'multicast'],
      ['http://[2001:db8::1]/', '2001:db8::1', 'documentation'],
    ];
    for (const [url, host, range] of cases) {
      expect(hostOf(url), url).toBe(host);
      expect(nonPublicRange(hostOf(url)), url).toBe(range);
      expect(isPublicAddress(hostOf(url)), url).toBe(false);
    }
  });

  it('accepts public addresses, including the neighbours of private ranges', () => {
    for (const ip of [
      '8.8.8.8',
      '1.1.1.1',
      '93.184.216.34',
      '9.255.255.255',
      '11.0.0.0',
      '100.63.255.255',
      '100.128.0.0',
      '126.255.255.255',
      '128.0.0.0',
      '169.253.255.255',
      '172.15.255.255',
      '172.32.0.0',
      '192.167.255.255',
      '192.169.0.0',
      '223.255.255.255',
      '2606:4700:4700::1111',
      '2001:4860:4860::8888',
      '2a00:1450:4009:81f::200e',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
      '2002:808:808::1',
      '[2606:4700:4700::1111]',
    ]) {
      expect(nonPublicRange(ip), ip).toBeNull();
      expect(isPublicAddress(ip), ip).toBe(true);
    }
    expect(hostOf('http://134744072/')).toBe('8.8.8.8');
    expect(isPublicAddress(hostOf('http://134744072/'))).toBe(true);
  });

  it('treats anything that is not an IP address as not public', () => {
    for (const text of ['localhost', 'example.com', '', '1.2.3', '::g', '256.0.0.1']) {
      expect(isPublicAddress(text), text).toBe(false);
    }
  });
});

describe('endpoint URL rules', () => {
  const closed = { requireHttps: false, allowPrivateNetworks: false };
  const refusal = (url: string, rules = closed) => {
    try {
      checkEndpointUrl(url, rules);
    } catch (err) {
      expect(err).toBeInstanceOf(EndpointUrlError);
      return (err as EndpointUrlError).problem;
    }
    return null;
  };

  it('refuses non-http(s) URLs, credentials, and non-public or localhost hosts', () => {
    expect(refusal('ftp://hooks.example.com/')).toBe('must be an http or https URL');
    expect(refusal('javascript:alert(1)')).toBe('must be an http or https URL');
    expect(refusal('not a url')).toBe('must be an http or https URL');
    expect(refusal('https://user:secret@hooks.example.com/')).toBe('must not contain a user name or password');
    expect(refusal('https://user@hooks.example.com/')).toBe('must not contain a user name or password');
    expect(refusal('http://0x7f.1/hooks')).toBe(
      'must not point at 127.0.0.1, which is not a public address (loopback)',
    );
    expect(refusal('http://[::ffff:169.254.169.254]/')).toMatch(/not a public address \(link-local\)$/);
    for (const url of ['http://localhost/', 'http://LOCALHOST.:8080/', 'http://api.localhost/', 'http://ⓛocalhost/']) {
      expect(refusal(url), url).toMatch(/^must not point at [a-z.]*localhost\.? \(the loopback\)$/);
    }
    expect(refusal(`https://hooks.example.com/${'x'.repeat(2100)}`)).toMatch(/at most 2048 characters/);
  });

  it('accepts public hosts, normalised; names are not resolved at registration', () => {
    expect(checkEndpointUrl('https://Hooks.Example.com/dtn', closed)).toBe('https://hooks.example.com/dtn');
    expect(checkEndpointUrl('http://134744072:8080/x', closed)).toBe('http://8.8.8.8:8080/x');
    expect(checkEndpointUrl('https://[2606:4700:4700::1111]/', closed)).toBe('https://[2606:4700:4700::1111]/');
    expect(checkEndpointUrl('https://localhost.example.com/', closed)).toBe('https://localhost.example.com/');
  });

  it('requires https in production, and allows private networks only when told to', () => {
    const production = { requireHttps: true, allowPrivateNetworks: false };
    expect(refusal('http://hooks.example.com/', production)).toBe('must use https');
    expect(refusal('https://hooks.example.com/', production)).toBeNull();
    const open = { requireHttps: false, allowPrivateNetworks: true };
    for (const url of ['http://127.0.0.1:9/', 'http://localhost:3000/', 'http://[::1]/', 'http://10.0.0.5/']) {
      expect(refusal(url, open), url).toBeNull();
    }
    expect(refusal('https://user:pw@127.0.0.1/', open)).toBe('must not contain a user name or password');
  });

  it('reads WEBHOOK_ALLOW_PRIVATE_NETWORKS: off by default in production, on in development and test', () => {
    const key = randomBytes(32).toString('hex');
    const prod = loadConfig({ NODE_ENV: 'production', DATA_ENCRYPTION_KEY: key });
    expect(prod.webhooks.allowPrivateNetworks).toBe(false);
    expect(endpointUrlRules(prod)).toEqual({ requireHttps: true, allowPrivateNetworks: false });
    expect(loadConfig({ NODE_ENV: 'development' }).webhooks.allowPrivateNetworks).toBe(true);
    expect(loadConfig({ NODE_ENV: 'test' }).webhooks.allowPrivateNetworks).toBe(true);
    expect(endpointUrlRules(loadConfig({ NODE_ENV: 'test' }))).toEqual({
      requireHttps: false,
      allowPrivateNetworks: true,
    });
    expect(
      loadConfig({ NODE_ENV: 'production', DATA_ENCRYPTION_KEY: key, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }).webhooks
        .allowPrivateNetworks,
    ).toBe(true);
    expect(
      loadConfig({ NODE_ENV: 'test', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' }).webhooks.allowPrivateNetworks,
    ).toBe(false);
    expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'maybe' })).toThrow(/WEBHOOK_ALLOW_PRIVATE_NETWORKS/);
  });
});

describe('connect-time lookup', () => {
  const fixed =
    (addresses: LookupAddress[]) =>
    (_host: string, _opts: unknown, cb: (err: NodeJS.ErrnoException | null, a: LookupAddress[]) => void) =>
      cb(null, addresses);
  const run = (lookup: ReturnType<typeof publicOnlyLookup>, all: boolean) =>
    new Promise<{ err: Error | null; address: unknown; family?: number }>((resolve) =>
      lookup('hooks.example.com', { all }, (err, address, family) => resolve({ err, address, family })),
    );

  it('refuses a name that resolves only to non-public addresses', async () => {
    const r = await run(
      publicOnlyLookup(
        fixed([
          { address: '10.0.0.5', family: 4 },
          { address: 'fd00::5', family: 6 },
        ]),
      ),
      false,
    );
    expect(r.err).toBeInstanceOf(AddressRefusedError);
    expect(r.err?.message).toBe('refused: 10.0.0.5 is not a public address');
  });

  it('keeps only the public addresses of a name that has both', async () => {
    const lookup = publicOnlyLookup(
      fixed([
        { address: '127.0.0.1', family: 4 },
        { address: '93.184.216.34', family: 4 },
        { address: '::1', family: 6 },
        { address: '2606:2800:220:1::248', family: 6 },
      ]),
    );
    expect(await run(lookup, false)).toEqual({ err: null, address: '93.184.216.34', family: 4 });
    expect(await run(lookup, true)).toMatchObject({
      err: null,
      address: [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:2800:220:1::248', family: 6 },
      ],
    });
  });

  it('passes resolver errors through, and refuses localhost through the real resolver', async () => {
    const failing = publicOnlyLookup((_h, _o, cb) =>
      cb(Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.invalid'), { code: 'ENOTFOUND' }), []),
    );
    expect((await run(failing, false)).err?.message).toBe('getaddrinfo ENOTFOUND nowhere.invalid');
    const real = await new Promise<Error | null>((resolve) =>
      publicOnlyLookup()('localhost', {}, (err) => resolve(err)),
    );
    expect(real?.message).toMatch(/^refused: (127\.0\.0\.1|::1) is not a public address$/);
  });
});

// ---------------------------------------------------------------------------------------
// Registration and delivery against a real database, CLI and worker
// ---------------------------------------------------------------------------------------

/** Requests the local receiver got, by path. */
const received: Array<{ path: string; headers: http.IncomingHttpHeaders }> = [];
let receiver: http.Server;
let port: number;
/** Private networks not allowed (as in production). */
let closedEnv: TestEnv;
/** Private networks allowed, explicitly. */
let openEnv: TestEnv;
const roles: RunningRoles[] = [];

beforeAll(async () => {
  // A short schedule (read by the worker at each attempt): 3 attempts, 50 ms base.
  process.env.WEBHOOK_RETRY_BASE_MS = '50';
  process.env.WEBHOOK_RETRY_MAX_ATTEMPTS = '3';
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received.push({ path: req.url ?? '/', headers: req.headers });
      if (req.url === '/redirect') {
        res.writeHead(302, { location: '/elsewhere' }).end();
        return;
      }
      res.writeHead(204).end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  port = (receiver.address() as AddressInfo).port;
  [closedEnv, openEnv] = await Promise.all([
    createTestEnv({ env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' } }),
    createTestEnv({ env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } }),
  ]);
  roles.push(startRoles(['fanout', 'outbox-relay'], closedEnv.rt));
  roles.push(startRoles(['fanout', 'outbox-relay'], openEnv.rt));
});
afterAll(async () => {
  await Promise.all(roles.map((r) => r.close()));
  receiver?.closeAllConnections();
  receiver?.close();
  await Promise.all([closedEnv?.cleanup(), openEnv?.cleanup()]);
  delete process.env.WEBHOOK_RETRY_BASE_MS;
  delete process.env.WEBHOOK_RETRY_MAX_ATTEMPTS;
});

describe('registration through the admin CLI (private networks not allowed)', () => {
  const admin = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
    runTs('bin/admin.ts', args, { ...closedEnv.childEnv, DTN_OPERATOR: 'ops-test', ...extra }, 90_000);

  it('refuses non-public, credentialed and (in production) plain-http endpoint URLs with invalid_input', async () => {
    const partner = await createPartner(closedEnv.rt.db, closedEnv.config, {
      name: 'Guarded Partner',
      webhookUrl: 'https://hooks.example.com/guarded',
      actor: 'test',
    });
    const production = { NODE_ENV: 'production', DATA_ENCRYPTION_KEY: randomBytes(32).toString('hex') };
    const cases: Array<{ args: string[]; env?: NodeJS.ProcessEnv; message: RegExp }> = [
      {
        args: ['partner', 'create', '--name', 'Refused Decimal', '--webhook-url', 'http://2130706433/hooks'],
        message: /^--webhook-url must not point at 127\.0\.0\.1, which is not a public address \(loopback\)$/,
      },
      {
        args: [
          'supplier',
          'create',
          '--slug',
          'refused-meta',
          '--adapter',
          'secret-header',
          '--webhook-url',
          'http://[::ffff:169.254.169.254]/latest/meta-data',
        ],
        message: /^--webhook-url must not point at ::ffff:a9fe:a9fe, which is not a public address \(link-local\)$/,
      },
      {
        args: ['webhook', 'set', '--partner', partner.id, '--url', 'http://api.localhost:8080/hooks'],
        message: /^--url must not point at api\.localhost \(the loopback\)$/,
      },
      {
        args: ['partner', 'create', '--name', 'Refused Creds', '--webhook-url', 'https://u:p@hooks.example.com/'],
        message: /^--webhook-url must not contain a user name or password$/,
      },
      {
        args: ['partner', 'create', '--name', 'Refused Http', '--webhook-url', 'http://hooks.example.com/'],
        env: production,
        message: /^--webhook-url must use https$/,
      },
    ];
    // Each a process of its own, three at a time (as in admin-cli.int.test.ts).
    const runs: Array<Awaited<ReturnType<typeof admin>>> = [];
    let next = 0;
    await Promise.all(
      [1, 2, 3].map(async () => {
        for (let i = next++; i < cases.length; i = next++) {
          const c = cases[i] as (typeof cases)[number];
          runs[i] = await admin(c.args, c.env);
        }
      }),
    );
    runs.forEach((r, i) => {
      const c = cases[i] as (typeof cases)[number];
      expect(r.code, `${c.args.join(' ')}\n${r.stderr}`).toBe(1);
      expect(r.stdout).toBe('');
      const err = JSON.parse(r.stderr.trim().split('\n').pop() as string).error;
      expect(err.code, c.args.join(' ')).toBe('invalid_input');
      expect(err.message, c.args.join(' ')).toMatch(c.message);
    });
    // Nothing was written.
    expect(await closedEnv.rt.db('partners').where('name', 'like', 'Refused%')).toHaveLength(0);
    expect(await closedEnv.rt.db('suppliers').where({ slug: 'refused-meta' })).toHaveLength(0);
    const endpoint = await closedEnv.rt.db('webhook_endpoints').where({ partner_id: partner.id }).first();
    expect(endpoint.url).toBe('https://hooks.example.com/guarded');

    const ok = await admin([
      'partner',
      'create',
      '--name',
      'Public Hooks',
      '--webhook-url',
      'https://Hooks.Example.com/a',
    ]);
    expect(ok.code, ok.stderr).toBe(0);
    const created = JSON.parse(ok.stdout);
    expect(created.webhookSecret).toMatch(/^whsec_/);
    const stored = await closedEnv.rt.db('webhook_endpoints').where({ partner_id: created.id }).first();
    expect(stored.url).toBe('https://hooks.example.com/a');
  }, 120_000);

  it('refuses the same URLs in the services the operator pages use', async () => {
    await expect(
      createPartner(closedEnv.rt.db, closedEnv.config, {
        name: 'Service Refused',
        webhookUrl: 'http://[fd00::1]/',
        actor: 'test',
      }),
    ).rejects.toThrow(EndpointUrlError);
    const partner = await createPartner(closedEnv.rt.db, closedEnv.config, { name: 'No Hook', actor: 'test' });
    await expect(
      setWebhookEndpoint(closedEnv.rt.db, closedEnv.config, { partnerId: partner.id }, 'http://10.1.2.3/', 'test'),
    ).rejects.toThrow('webhook URL must not point at 10.1.2.3, which is not a public address (private)');
    expect(await closedEnv.rt.db('webhook_endpoints').where({ partner_id: partner.id })).toHaveLength(0);
    expect(await closedEnv.rt.db('partners').where({ name: 'Service Refused' })).toHaveLength(0);
  });
});

/** A pending delivery to a partner endpoint at `url` (set straight in the database), queued through the outbox. */
async function queueDelivery(env: TestEnv, url: string): Promise<{ id: string; messageId: string }> {
  const partner = await createPartner(env.rt.db, env.config, {
    name: `Receiver ${url}`,
    webhookUrl: 'https://hooks.example.com/registered',
    actor: 'test',
  });
  // What registration saw was a public name; what the host is by delivery time is another matter.
  await env.rt.db('webhook_endpoints').where({ partner_id: partner.id }).update({ url });
  const endpoint = await env.rt.db('webhook_endpoints').where({ partner_id: partner.id }).first();
  const id = uuidv7();
  await env.rt.db.transaction(async (trx) => {
    await trx('webhook_deliveries').insert({
      id,
      endpoint_id: endpoint.id,
      event_type: 'booking.status',
      sequence: 1,
      message_id: `msg_${id}`,
      payload: JSON.stringify({ type: 'booking.status', data: { status: 'dispatching' } }),
    });
    await enqueueJob(trx, 'deliver-webhook', { deliveryId: id }, { jobId: `webhook-${id}` });
  });
  return { id, messageId: `msg_${id}` };
}

const attemptsOf = (env: TestEnv, id: string) =>
  env.rt.db('webhook_delivery_attempts').where({ delivery_id: id }).orderBy('attempt');
const deliveryState = async (env: TestEnv, id: string) =>
  (await env.rt.db('webhook_deliveries').where({ id }).first()).state as string;

describe('delivery (connect-time check)', () => {
  it('refuses to connect when the endpoint name resolves to the loopback, and retries on the schedule', async () => {
    const { id } = await queueDelivery(closedEnv, `http://localhost:${port}/rebound`);
    await eventually(async () => (await deliveryState(closedEnv, id)) === 'dead');
    const attempts = await attemptsOf(closedEnv, id);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
    for (const a of attempts) {
      expect(a.error).toMatch(/^refused: (127\.0\.0\.1|::1) is not a public address$/);
      expect(a.status_code).toBeNull();
      expect(Number.isInteger(a.latency_ms)).toBe(true);
    }
    expect(received.filter((r) => r.path === '/rebound')).toHaveLength(0);
  });

  it('refuses a non-public IP literal host without resolving it', async () => {
    const literal = await queueDelivery(closedEnv, `http://127.0.0.1:${port}/literal`);
    const mapped = await queueDelivery(closedEnv, `http://[::ffff:7f00:1]:${port}/mapped`);
    await eventually(async () => (await attemptsOf(closedEnv, literal.id)).length > 0);
    await eventually(async () => (await attemptsOf(closedEnv, mapped.id)).length > 0);
    expect((await attemptsOf(closedEnv, literal.id))[0]?.error).toBe('refused: 127.0.0.1 is not a public address');
    expect((await attemptsOf(closedEnv, mapped.id))[0]?.error).toBe('refused: ::ffff:7f00:1 is not a public address');
    expect(received.filter((r) => r.path === '/literal' || r.path === '/mapped')).toHaveLength(0);
  });

  it('delivers to a local receiver when private networks are allowed', async () => {
    const { id, messageId } = await queueDelivery(openEnv, `http://localhost:${port}/open`);
    await eventually(async () => (await deliveryState(openEnv, id)) === 'delivered');
    const got = received.filter((r) => r.path === '/open');
    expect(got).toHaveLength(1);
    expect(got[0]?.headers['webhook-id']).toBe(messageId);
    expect(got[0]?.headers['webhook-signature']).toMatch(/^v1,/);
    expect(got[0]?.headers['content-type']).toBe('application/json');
    const attempts = await attemptsOf(openEnv, id);
    expect(attempts.map((a) => [a.attempt, a.status_code, a.error])).toEqual([[1, 204, null]]);
  });

  it('posts without following redirects', async () => {
    const status = await postWebhook(
      `http://127.0.0.1:${port}/redirect`,
      { 'content-type': 'application/json' },
      '{}',
      {
        allowPrivateNetworks: true,
      },
    );
    expect(status).toBe(302);
    await new Promise((r) => setTimeout(r, 100));
    expect(received.filter((r) => r.path === '/elsewhere')).toHaveLength(0);
    await expect(
      postWebhook(`http://127.0.0.1:${port}/redirect`, {}, '{}', { allowPrivateNetworks: false }),
    ).rejects.toThrow('refused: 127.0.0.1 is not a public address');
  });
});
