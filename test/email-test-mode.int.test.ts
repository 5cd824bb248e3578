import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../shared/services/api-keys.ts';
import { isEmailVerified } from '../shared/services/email-verification.ts';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { CookieJar, csrfOf, getPage, postForm } from './helpers/pages.ts';

/**
 * The mail-server check and test mode, with EMAIL_MX_CHECK=strict: a live booking for an
 * address whose domain takes no mail is 400 email_not_accepted (no_mail_server); a test-mode
 * one (a test key, a sandbox quote's booking page, a partner's test key, the alias endpoints)
 * skips the lookup, as its messages are recorded and never sent. `.invalid` never resolves
 * (RFC 2606), so the live refusal holds on any network; the other e-mail rules still apply in
 * test mode.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let liveKey: string;
let testKey: string;

beforeAll(async () => {
  env = await createTestEnv({
    env: { EMAIL_MX_CHECK: 'strict', RATE_LIMIT_PER_IP_PER_MINUTE: '100000', QUOTE_LIMIT_PER_HOUR: '100000' },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env));
  const serviceCode = env.config.serviceCode;
  liveKey = (await createApiKey(env.rt.db, { serviceCode, name: 'live' })).key;
  testKey = (await createApiKey(env.rt.db, { serviceCode, name: 'sandbox', mode: 'test' })).key;
}, 60_000);
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

const NO_MAIL = 'ada@mail.invalid';
const inHours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

async function postJson(path: string, key: string, body: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Record<string, unknown> };
}

/** A 400 refusing the address for its missing mail server, at `field`. */
function expectNoMailServer(res: { status: number; text: string; json: Record<string, unknown> }, field: string) {
  expect(res.status, res.text).toBe(400);
  expect(res.json.error).toMatchObject({ code: 'email_not_accepted', details: [{ field, problem: 'no_mail_server' }] });
}

/** A 200 whose booking was stored for NO_MAIL in test mode. */
async function expectTestModeBooking(res: { status: number; text: string; json: Record<string, unknown> }) {
  expect(res.status, res.text).toBe(200);
  const row = await env.rt
    .db('bookings')
    .where({ reference: res.json.booking_reference as string })
    .first();
  expect(row).toMatchObject({ passenger_email: NO_MAIL, test_mode: true });
}

const booking = (email: string, n: number) => ({
  pickup: 'Manchester Piccadilly',
  dropoff: 'Manchester Airport',
  departAt: inHours(5),
  passengerName: `Ada ${n}`,
  passengerEmail: email,
  passengerPhone: '+447700900123',
});

describe('the mail-server check in test mode', () => {
  it('refuses a live v1 booking for a domain with no mail server, and books the same with a test key', async () => {
    const live = await postJson('/api/public/v1/booking', liveKey, booking(NO_MAIL, 1));
    expectNoMailServer(live, '/passengerEmail');

    const sandbox = await postJson('/api/public/v1/booking', testKey, booking(NO_MAIL, 2));
    expect(sandbox.status, sandbox.text).toBe(201);
    const row = await env.rt.db('bookings').where({ passenger_email: NO_MAIL }).first();
    expect(row?.test_mode).toBe(true);

    // The other rules still apply in test mode.
    const role = await postJson('/api/public/v1/booking', testKey, booking('bookings@mail.invalid', 3));
    expect(role.status, role.text).toBe(400);
    expect(role.json.error).toMatchObject({ details: [{ problem: 'role_address' }] });
  });

  it("gives a test-mode booking's confirmation a link that confirms the address for test-mode bookings only", async () => {
    // A real person's address, booked with a test key: the key's holder reads the recorded
    // confirmation, so its link must not mark that address confirmed for live bookings.
    const email = `someone-${Date.now()}@example.org`;
    const sandbox = await postJson('/api/public/v1/booking', testKey, booking(email, 4));
    expect(sandbox.status, sandbox.text).toBe(201);
    expect(sandbox.json.emailVerified).toBe(false);
    const ref = sandbox.json.bookingReference as string;
    const res = await fetch(`${api.url}/api/public/v1/test/messages?booking=${ref}`, {
      headers: { authorization: `Bearer ${testKey}` },
    });
    const { messages } = (await res.json()) as { messages: { purpose: string; body: string }[] };
    const confirmation = messages.find((m) => m.purpose === 'confirmation');
    expect(confirmation?.body).toContain(ref);
    const link = /Confirm your e-mail address: (\S+)/.exec(confirmation?.body ?? '')?.[1];
    expect(link).toMatch(/\/api\/public\/v1\/passenger-verify\/link\?token=/);
    const url = new URL(link as string);
    const opened = await fetch(`${api.url}${url.pathname}${url.search}`, { headers: { accept: 'application/json' } });
    expect(opened.status, await opened.clone().text()).toBe(200);
    // Confirmed in the sandbox: the next test-mode booking says so; not for live bookings.
    expect(await isEmailVerified(env.rt.db, email, { testMode: true })).toBe(true);
    expect(await isEmailVerified(env.rt.db, email)).toBe(false);
    const again = await postJson('/api/public/v1/booking', testKey, booking(email, 5));
    expect(again.status, again.text).toBe(201);
    expect(again.json.emailVerified).toBe(true);
    // Opening it is no verification e-mail: the sandbox's hourly count of them is untouched.
    const rows = await env.rt.db('email_verifications').where({ email }).pluck('purpose');
    expect(rows).toEqual(['booking_link_test']);
  });

  it('applies the same rule to passenger-verify: a test key is not refused for the mail server, and its e-mail is recorded', async () => {
    const live = await postJson('/api/public/v1/passenger-verify', liveKey, { email: NO_MAIL });
    expectNoMailServer(live, '/email');
    const sandbox = await postJson('/api/public/v1/passenger-verify', testKey, { email: NO_MAIL });
    expect(sandbox.status, sandbox.text).toBe(200);
    expect(sandbox.json).toMatchObject({ email: NO_MAIL, accepted: true, verificationSent: true });
    const message = await env.rt
      .db('outbound_messages')
      .where({ recipient: NO_MAIL, purpose: 'verification' })
      .first('test_mode');
    expect(message?.test_mode).toBe(true);
    // The other rules still apply.
    const role = await postJson('/api/public/v1/passenger-verify', testKey, { email: 'info@mail.invalid' });
    expect(role.status).toBe(400);
    expect(role.json.error).toMatchObject({ details: [{ problem: 'role_address' }] });
  });

  it('applies the same rule on the alias endpoints: bookings/create and bookings/instant', async () => {
    const redeem = async (key: string, n: number) => {
      const q = await postJson('/api/public/v1/quote', key, {
        pickup: 'Manchester Piccadilly',
        dropoff: 'Manchester Airport',
        departAt: inHours(4),
      });
      expect(q.status, q.text).toBe(200);
      return postJson('/api/public/bookings/create', key, {
        quote_id: q.json.quote_id,
        passenger_name: `Alias ${n}`,
        passenger_phone_whatsapp: '+447700900124',
        passenger_email: NO_MAIL,
        payment_method: 'cash',
      });
    };
    expectNoMailServer(await redeem(liveKey, 1), '/passenger_email');
    await expectTestModeBooking(await redeem(testKey, 2));

    const instant = (n: number) => ({
      pickup_address: 'Manchester Piccadilly',
      dropoff_address: 'Manchester Airport',
      depart_at: inHours(5),
      passenger_name: `Instant ${n}`,
      passenger_phone_whatsapp: '+447700900125',
      passenger_email: NO_MAIL,
    });
    expectNoMailServer(await postJson('/api/public/bookings/instant', liveKey, instant(1)), '/passenger_email');
    await expectTestModeBooking(await postJson('/api/public/bookings/instant', testKey, instant(2)));
  });

  it('books a sandbox quote on its booking page with such an address; a live quote’s page refuses it', async () => {
    const quoteWith = async (key: string) => {
      const q = await postJson('/api/public/v1/quote', key, {
        pickup: 'Manchester Piccadilly',
        dropoff: 'Manchester Airport',
        departAt: inHours(4),
      });
      expect(q.status, q.text).toBe(200);
      return new URL(q.json.bookingUrl as string).pathname;
    };
    const post = async (path: string) => {
      const jar = new CookieJar();
      const csrf = csrfOf((await getPage(api.url, path, jar)).html, path);
      return postForm(
        api.url,
        path,
        { csrf, name: 'Grace Page', phone: '07700 900456', email: NO_MAIL, payment: 'cash' },
        jar,
      );
    };
    const sandbox = await post(await quoteWith(testKey));
    expect(sandbox.status, sandbox.html).toBe(303);
    expect(sandbox.location).toMatch(/^\/track\//);

    const live = await post(await quoteWith(liveKey));
    expect(live.status).toBe(400);
    expect(live.html).toContain('No mail server was found');
  });

  it('takes a partner’s test-mode job with such an address and rejects the live one', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Mail Fleet', actor: 'test' });
    const partnerTestKey = (
      await createApiKey(env.rt.db, {
        serviceCode: env.config.serviceCode,
        name: 'partner sandbox',
        partnerId: partner.id,
        mode: 'test',
      })
    ).key;
    const job = (jobRef: string) => ({
      jobRef,
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      pickupTime: inHours(6),
      passengerName: 'Jo Partner',
      passengerPhone: '+447700900789',
      passengerEmail: NO_MAIL,
    });
    const live = await postJson('/api/public/v1/jobs', partner.apiKey, job('MX-LIVE'));
    expect(live.status, live.text).toBe(400);
    expect(live.text).toContain('no_mail_server');
    const sandbox = await postJson('/api/public/v1/jobs', partnerTestKey, job('MX-TEST'));
    expect(sandbox.status, sandbox.text).toBe(201);
  });
});
