import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSENGER_VERIFY_LINK_PATH, PASSENGER_VERIFY_PATH } from '../api/routes/passenger-verify.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { isEmailVerified } from '../shared/services/email-verification.ts';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { type CapturedMail, mailText, startSmtpCapture } from './helpers/smtp-capture.ts';

/**
 * passenger-verify in the sandbox, through HTTP with the notify worker and a real SMTP server:
 * a test key's verification e-mail is recorded, not sent, and listed by
 * `GET /api/public/v1/test/messages` to that key and its partner's other keys, with the text a
 * live one has, so an integrator completes verify-by-code and verify-by-link in the sandbox (for
 * test-mode bookings only). A live key's verification e-mail is never listed, nor is one partner's
 * to another's test key. Each test asks with fresh keys (10 requests an hour per caller) and its
 * own addresses (a mailbox is sent 5 an hour).
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let smtp: Awaited<ReturnType<typeof startSmtpCapture>>;
let mails: CapturedMail[] = [];
let partnerId: string;
let partnerLiveKey: string;
let otherPartnerId: string;
const PRIMARY = 'http://sandbox.example';

beforeAll(async () => {
  smtp = await startSmtpCapture();
  mails = smtp.mails;
  env = await createTestEnv({
    env: {
      SMTP_URL: smtp.url,
      MAIL_FROM: 'Direct Taxi Network <no-reply@dtn.test>',
      PUBLIC_BASE_URLS: PRIMARY,
      EMAIL_MX_CHECK: 'off',
      RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
      QUOTE_LIMIT_PER_HOUR: '100000',
    },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing', 'notify', 'outbox-relay'], env.rt);
  api = await serve(await appFor(env));
  const partner = await createPartner(env.rt.db, env.config, { name: 'Verify Sandbox Partner', actor: 'test' });
  partnerId = partner.id;
  partnerLiveKey = partner.apiKey;
  otherPartnerId = (await createPartner(env.rt.db, env.config, { name: 'Another Partner', actor: 'test' })).id;
}, 60_000);
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
  await smtp?.close();
});

interface Message {
  id: string;
  bookingReference: string | null;
  channel: string;
  recipient: string;
  subject: string | null;
  body: string;
  purpose: string;
  state: string;
  createdAt: string;
}
type Json = Record<string, unknown>;

/** A fresh test key, of the partner or of none. */
async function testKey(partner: string | null = partnerId): Promise<{ id: string; key: string }> {
  return createApiKey(env.rt.db, {
    serviceCode: env.config.serviceCode,
    name: 'verify sandbox',
    partnerId: partner,
    mode: 'test',
  });
}

const unique = (name: string) => `${name}.${Date.now()}.${randomBytes(3).toString('hex')}@example.com`;

async function call(method: string, path: string, key: string | null, body?: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: {
      accept: 'application/json',
      ...(key ? { [env.config.apiKeyHeader]: key } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Json };
}

async function messages(key: string, query = ''): Promise<Message[]> {
  const r = await call('GET', `/api/public/v1/test/messages${query}`, key);
  expect(r.status, r.text).toBe(200);
  return (r.json as { messages: Message[] }).messages;
}

/** The recorded verification e-mail to `email` as `key` lists it, once the notify worker has processed it. */
async function recordedVerification(key: string, email: string): Promise<Message> {
  return eventually(async () =>
    (await messages(key)).find((m) => m.recipient === email && m.purpose === 'verification' && m.state === 'recorded'),
  );
}

const codeIn = (text: string) => /verification code is: (\d{6})/.exec(text)?.[1];
const linkIn = (text: string) => /(https?:\/\/\S+\/passenger-verify\/link\?token=[A-Za-z0-9_-]+)/.exec(text)?.[1];

let booked = 0;
/** A test-mode (or, with a live key, live) v1 booking for `email`: each a ride of its own (another minute), never a repeat. */
async function book(key: string, email: string) {
  booked += 1;
  const r = await call('POST', '/api/public/v1/booking', key, {
    pickup: 'Manchester Piccadilly',
    dropoff: 'Manchester Airport',
    departAt: new Date(Date.now() + 5 * 3600_000 + booked * 60_000).toISOString(),
    passengerName: 'Sandbox Passenger',
    passengerEmail: email,
    passengerPhone: '+447700900321',
    paymentMethod: 'cash',
  });
  expect(r.status, r.text).toBe(201);
  return r.json as { bookingReference: string; emailVerified: boolean };
}

describe('passenger-verify with a test key, read through the sandbox messages', () => {
  it('lists the recorded e-mail with its code; the code verifies the address for test-mode bookings only', async () => {
    const { key } = await testKey();
    const email = unique('sandbox.code');
    const started = await call('POST', PASSENGER_VERIFY_PATH, key, { email });
    expect(started.status, started.text).toBe(200);
    expect(started.json).toEqual({ email, accepted: true, verified: false, verificationSent: true });

    const message = await recordedVerification(key, email);
    expect(message).toMatchObject({
      bookingReference: null,
      channel: 'email',
      recipient: email,
      purpose: 'verification',
      state: 'recorded',
    });
    const code = codeIn(message.body) as string;
    expect(code).toMatch(/^\d{6}$/);
    expect(message.subject).toBe(`${code} is your Direct Taxi Network verification code`);
    expect(linkIn(message.body)?.startsWith(`${PRIMARY}${PASSENGER_VERIFY_LINK_PATH}?token=`)).toBe(true);
    // Recorded, not sent.
    expect(mails.filter((m) => m.to.includes(email))).toHaveLength(0);

    // Another test key of the same partner reads it too, as it reads the partner's test bookings.
    expect((await messages((await testKey()).key)).map((m) => m.id)).toContain(message.id);

    // Before the code, a test-mode booking for the address is unverified.
    expect((await book(key, email)).emailVerified).toBe(false);
    const verified = await call('POST', PASSENGER_VERIFY_PATH, key, { email, code });
    expect(verified.status, verified.text).toBe(200);
    expect(verified.json).toEqual({ email, verified: true });
    // Verified for test-mode bookings only.
    const booking = await book(key, email);
    expect(booking.emailVerified).toBe(true);
    expect(await isEmailVerified(env.rt.db, email, { testMode: true })).toBe(true);
    expect(await isEmailVerified(env.rt.db, email)).toBe(false);
    expect((await call('POST', PASSENGER_VERIFY_PATH, key, { email })).json).toMatchObject({
      verified: true,
      verificationSent: false,
    });

    // The booking filter still lists that booking's messages only: not the verification e-mail.
    const ofBooking = await eventually(async () => {
      const list = await messages(key, `?booking=${booking.bookingReference}`);
      return list.some((m) => m.purpose === 'confirmation') ? list : null;
    });
    expect(ofBooking.every((m) => m.bookingReference === booking.bookingReference)).toBe(true);
    expect(ofBooking.map((m) => m.id)).not.toContain(message.id);
    // Unfiltered, both, newest first.
    const all = await messages(key);
    expect(all.map((m) => m.id)).toContain(message.id);
    expect(all.some((m) => m.bookingReference === booking.bookingReference)).toBe(true);
    const times = all.map((m) => m.createdAt);
    expect(times).toEqual([...times].sort().reverse());
    expect((await messages(key, '?limit=1')).map((m) => m.id)).toEqual([all[0]?.id]);
  });

  it('verifies by the recorded link (JSON), for test-mode bookings only', async () => {
    const { key } = await testKey();
    const email = unique('sandbox.link');
    expect((await call('POST', PASSENGER_VERIFY_PATH, key, { email })).json.verificationSent).toBe(true);
    const link = linkIn((await recordedVerification(key, email)).body) as string;
    expect(link).toBeDefined();

    const opened = await call('GET', link.slice(PRIMARY.length), null);
    expect(opened.status, opened.text).toBe(200);
    expect(opened.json).toEqual({ email, verified: true });
    expect((await book(key, email)).emailVerified).toBe(true);
    expect(await isEmailVerified(env.rt.db, email)).toBe(false);
  });

  it("records the text a live verification e-mail has, and never lists a live key's", async () => {
    const { key } = await testKey();
    const sandboxEmail = unique('sandbox.same');
    const liveEmail = unique('live.same');
    expect((await call('POST', PASSENGER_VERIFY_PATH, key, { email: sandboxEmail })).json.verificationSent).toBe(true);
    // The partner's own live key: sent for real, by SMTP.
    const live = await call('POST', PASSENGER_VERIFY_PATH, partnerLiveKey, { email: liveEmail });
    expect(live.status, live.text).toBe(200);
    const sent = await eventually(async () => mails.find((m) => m.to.includes(liveEmail)));
    const raw = mailText(sent).replace(/\r\n/g, '\n');
    const liveText = raw.slice(raw.indexOf('\n\n') + 2).trim();
    const liveCode = codeIn(liveText) as string;
    expect(raw).toContain(`Subject: ${liveCode} is your Direct Taxi Network verification code`);

    const recorded = await recordedVerification(key, sandboxEmail);
    const sandboxCode = codeIn(recorded.body) as string;
    const generic = (text: string, code: string) =>
      text.replaceAll(code, '<code>').replace(/token=[A-Za-z0-9_-]+/, 'token=<token>');
    expect(generic(recorded.body, sandboxCode)).toBe(generic(liveText, liveCode));

    // The live e-mail is delivered (its text then removed from our record) and listed to no key.
    const row = await eventually(async () => {
      const m = await env.rt.db('outbound_messages').where({ recipient: liveEmail }).first();
      return m?.state === 'sent' ? m : null;
    });
    expect(row).toMatchObject({ test_mode: false, api_key_id: null, purpose: 'verification' });
    expect(JSON.stringify(row)).not.toContain(liveCode);
    for (const k of [key, (await testKey()).key, (await testKey(null)).key]) {
      const list = await messages(k);
      expect(list.map((m) => m.recipient)).not.toContain(liveEmail);
      expect(JSON.stringify(list)).not.toContain(liveCode);
    }
    // And the database refuses a key on a live message, so none can ever be listed.
    await expect(
      env.rt
        .db('outbound_messages')
        .where({ id: row.id })
        .update({ api_key_id: (await testKey()).id }),
    ).rejects.toThrow(/outbound_messages_api_key_test_only/);
  });

  it("keeps a test key's verification e-mail from another partner's test keys", async () => {
    const asker = await testKey();
    const email = unique('sandbox.apart');
    expect((await call('POST', PASSENGER_VERIFY_PATH, asker.key, { email })).json.verificationSent).toBe(true);
    const message = await recordedVerification(asker.key, email);
    const code = codeIn(message.body) as string;

    const other = await testKey(otherPartnerId);
    const partnerless = await testKey(null);
    for (const k of [other.key, partnerless.key]) {
      const list = await messages(k);
      expect(list.map((m) => m.id)).not.toContain(message.id);
      expect(JSON.stringify(list)).not.toContain(code);
    }

    // A key of no partner reads its own, and the asking partner's keys do not read it.
    const ownEmail = unique('sandbox.own');
    expect((await call('POST', PASSENGER_VERIFY_PATH, partnerless.key, { email: ownEmail })).status).toBe(200);
    const own = await recordedVerification(partnerless.key, ownEmail);
    expect(own.bookingReference).toBeNull();
    expect((await messages(asker.key)).map((m) => m.id)).not.toContain(own.id);
    expect((await messages(other.key)).map((m) => m.id)).not.toContain(own.id);
    // A live key may not read the sandbox's messages at all.
    expect((await call('GET', '/api/public/v1/test/messages', partnerLiveKey)).status).toBe(403);
  });
});
