import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { type DnsStub, startDnsStub } from './helpers/dns-stub.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * The mail-server check in each of its modes (EMAIL_MX_CHECK, CONTRACT.md section 5), through
 * the v1 booking, against a DNS server on loopback (EMAIL_DNS_SERVERS) that answers a domain
 * with a mail server, one that does not exist and one whose lookup fails:
 * strict refuses both of the last two, soft (the default) refuses only the missing domain,
 * off asks nothing and accepts all three.
 */
let stub: DnsStub;

const DOMAINS = { hasMail: 'mx-yes.test', noDomain: 'no-such.test', dnsFails: 'dns-fails.test' } as const;

beforeAll(async () => {
  stub = await startDnsStub({
    [DOMAINS.hasMail]: { mx: `mail.${DOMAINS.hasMail}` },
    [DOMAINS.noDomain]: 'nxdomain',
    [DOMAINS.dnsFails]: 'servfail',
  });
});
afterAll(async () => {
  await stub?.close();
});

const inHours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

type Verdict = 'accepted' | 'no_mail_server';

describe.each([
  ['strict', { hasMail: 'accepted', noDomain: 'no_mail_server', dnsFails: 'no_mail_server' }],
  ['soft', { hasMail: 'accepted', noDomain: 'no_mail_server', dnsFails: 'accepted' }],
  ['off', { hasMail: 'accepted', noDomain: 'accepted', dnsFails: 'accepted' }],
] as const)('EMAIL_MX_CHECK=%s', (mode, expected: Record<keyof typeof DOMAINS, Verdict>) => {
  let env: TestEnv;
  let roles: RunningRoles;
  let api: Served;

  beforeAll(async () => {
    env = await createTestEnv({
      env: {
        EMAIL_MX_CHECK: mode,
        EMAIL_DNS_SERVERS: stub.server,
        RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
        QUOTE_LIMIT_PER_HOUR: '100000',
      },
    });
    await syncBuiltInTariffs(env.rt.db);
    roles = startRoles(['pricing'], env.rt);
    api = await serve(await appFor(env));
  }, 60_000);
  afterAll(async () => {
    await api?.close();
    await roles?.close();
    await env?.cleanup();
  });

  it('answers a live v1 booking for each kind of domain as the mode says', async () => {
    const asked = stub.questions.length;
    for (const [kind, domain] of Object.entries(DOMAINS) as [keyof typeof DOMAINS, string][]) {
      const res = await fetch(`${api.url}/api/public/v1/booking`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          pickup: 'Leeds',
          dropoff: 'York',
          departAt: inHours(30),
          passengerName: 'Mx Morgan',
          passengerEmail: `morgan@${domain}`,
          passengerPhone: '+447700900515',
        }),
      });
      const json = (await res.json()) as { bookingReference?: string; error?: { code: string; details: unknown[] } };
      if (expected[kind] === 'accepted') {
        expect(res.status, `${kind}: ${JSON.stringify(json)}`).toBe(201);
        expect(
          await env.rt.db('bookings').where({ reference: json.bookingReference }).first('passenger_email'),
        ).toEqual({ passenger_email: `morgan@${domain}` });
      } else {
        expect(res.status, kind).toBe(400);
        expect(json.error).toMatchObject({
          code: 'email_not_accepted',
          details: [{ field: '/passengerEmail', problem: 'no_mail_server' }],
        });
      }
    }
    const questions = stub.questions.slice(asked);
    if (mode === 'off') expect(questions).toEqual([]);
    else expect(questions).toEqual(expect.arrayContaining(Object.values(DOMAINS).map((d) => `${d} MX`)));
  });

  it('checks the address passenger-verify is asked to send to the same way', async () => {
    const res = await fetch(`${api.url}/api/public/v1/passenger-verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: `morgan@${DOMAINS.dnsFails}` }),
    });
    const json = (await res.json()) as { error?: { code: string } };
    if (expected.dnsFails === 'accepted') expect(res.status, JSON.stringify(json)).toBe(200);
    else {
      expect(res.status).toBe(400);
      expect(json.error?.code).toBe('email_not_accepted');
    }
  });
});
