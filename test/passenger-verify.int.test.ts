import { createHmac } from 'node:crypto';
import { validate } from '@readme/openapi-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicRoutes } from '../api/app.ts';
import {
  PASSENGER_VERIFY_LINK_PATH,
  PASSENGER_VERIFY_PATH,
  passengerVerifyRoutes,
} from '../api/routes/passenger-verify.ts';
import { sha256 } from '../shared/crypto.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { passengerStanding } from '../shared/services/bookings.ts';
import {
  isEmailVerified,
  startVerification,
  TEST_PURPOSE,
  verifyByCode,
} from '../shared/services/email-verification.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { expectSafePage, getPage, postForm } from './helpers/pages.ts';
import { type CapturedMail, startSmtpCapture } from './helpers/smtp-capture.ts';

/**
 * POST /api/public/v1/passenger-verify and its link (CONTRACT.md section 5) through real HTTP,
 * Postgres and Redis, with the verification e-mail relayed from the outbox, sent by the notify
 * worker and received by a real SMTP server; the code and the link are read from that e-mail.
 * The mail-server check is off: no DNS here (the rules are unit-tested with an injected resolver).
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let smtp: Awaited<ReturnType<typeof startSmtpCapture>>;
let mails: CapturedMail[] = [];
const PRIMARY = 'http://primary.example';

beforeAll(async () => {
  smtp = await startSmtpCapture();
  mails = smtp.mails;
  env = await createTestEnv({
    env: {
      SMTP_URL: smtp.url,
      MAIL_FROM: 'Direct Taxi Network <no-reply@dtn.test>',
      PUBLIC_BASE_URLS: PRIMARY,
      EMAIL_MX_CHECK: 'off',
    },
  });
  roles = startRoles(['notify', 'outbox-relay'], env.rt);
  // Mount the routes ourselves unless api/app.ts already serves them.
  const wired = publicRoutes(env.config).some((r) => r.path === PASSENGER_VERIFY_PATH);
  api = await serve(await appFor(env, wired ? [] : passengerVerifyRoutes({ emailCheck: { mx: 'off' } })));
});
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
  await smtp?.close();
});

type Json = Record<string, unknown> & {
  error?: { code: string; message: string; details: Array<{ field: string; problem: string }> };
};

/** Each test calls as its own API key, so the route's hourly limit (per caller) is not shared. */
async function caller(mode: 'live' | 'test' = 'live'): Promise<Record<string, string>> {
  const { key } = await createApiKey(env.rt.db, { serviceCode: env.config.serviceCode, name: 'verify test', mode });
  return { [env.config.apiKeyHeader]: key };
}

async function post(body: unknown, headers: Record<string, string>) {
  const res = await fetch(`${api.url}${PASSENGER_VERIFY_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Json, headers: res.headers };
}

async function get(pathAndQuery: string) {
  const res = await fetch(`${api.url}${pathAndQuery}`, { headers: { accept: 'application/json' } });
  return { status: res.status, json: (await res.json()) as Json };
}

/** The text part of a received message, undoing quoted-printable if nodemailer used it. */
function textOf(raw: string): string {
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, split);
  const body = raw.slice(split + 4);
  if (!/content-transfer-encoding:\s*quoted-printable/i.test(head)) return body;
  return body
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/** Wait for the verification e-mail to `address`, and read its code and link. */
async function received(address: string, nth = 1): Promise<{ code: string; link: string; raw: string }> {
  const mail = await eventually(async () => mails.filter((m) => m.to.includes(address))[nth - 1]);
  const text = textOf(mail.raw);
  const code = /verification code is: (\d{6})/.exec(text)?.[1];
  const link = /(https?:\/\/\S+\/passenger-verify\/link\?token=[A-Za-z0-9_-]+)/.exec(text)?.[1];
  if (!code || !link) throw new Error(`no code or link in the e-mail:\n${text}`);
  return { code, link, raw: mail.raw };
}

const pathOf = (link: string) => link.slice(PRIMARY.length);

describe('POST /api/public/v1/passenger-verify', () => {
  it('e-mails a code and a link, then verifies by the code', async () => {
    const h = await caller();
    const start = await post({ email: '  Ada.Lovelace@Example.org ' }, h);
    expect(start.status, JSON.stringify(start.json)).toBe(200);
    expect(start.json).toEqual({
      email: 'ada.lovelace@example.org',
      accepted: true,
      verified: false,
      verificationSent: true,
    });
    expect(start.headers.get('ratelimit-policy')).toContain('"passenger-verify";q=10;w=3600');

    const { code, link, raw } = await received('ada.lovelace@example.org');
    expect(raw).toMatch(/Subject: \d{6} is your Direct Taxi Network verification code/);
    expect(link.startsWith(`${PRIMARY}${PASSENGER_VERIFY_LINK_PATH}?token=`)).toBe(true);

    // Only hashes are stored; the message row is the verification e-mail.
    const row = await env.rt.db('email_verifications').where({ email: 'ada.lovelace@example.org' }).first();
    const token = new URL(link).searchParams.get('token') as string;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.compare(row.link_token_hash, sha256(token))).toBe(0);
    expect(JSON.stringify(row)).not.toContain(code);
    // Under the service's key: a plain hash of a six-digit code (and the row's id beside it) would
    // give the code back to whoever reads the table, by trying the million codes.
    const under = (key: Buffer) => createHmac('sha256', key).update(`verification-code:${row.id}:${code}`).digest();
    expect(Buffer.compare(row.code_hash, under(env.config.dataEncryptionKey))).toBe(0);
    expect(Buffer.compare(row.code_hash, under(Buffer.alloc(32)))).not.toBe(0);
    expect(Buffer.compare(row.code_hash, sha256(`${row.id}:${code}`))).not.toBe(0);
    expect(row.verified_at).toBeNull();
    const expiresIn = new Date(row.expires_at).getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(29 * 60_000);
    expect(expiresIn).toBeLessThanOrEqual(30 * 60_000);
    // The SMTP server has the message before the worker commits `sent`: wait for the commit.
    const msg = await eventually(async () => {
      const row = await env.rt.db('outbound_messages').where({ recipient: 'ada.lovelace@example.org' }).first();
      return row?.state === 'sent' ? row : null;
    });
    expect(msg).toMatchObject({ channel: 'email', purpose: 'verification', state: 'sent' });
    // Delivered: the code lives only in the inbox, not in our record of the message (its
    // subject, which leads with the code for the inbox preview, included).
    expect(msg.body).not.toContain(code);
    expect(JSON.stringify(msg)).not.toContain(code);
    expect(msg.subject).toMatch(/is your .*verification code/);
    expect(msg.body).toMatch(/removed after delivery/);

    const wrong = code === '000000' ? '111111' : '000000';
    const bad = await post({ email: 'ada.lovelace@example.org', code: wrong }, h);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({
      code: 'invalid_input',
      details: [{ field: '/code', problem: 'is not correct; 4 attempts left' }],
    });

    const ok = await post({ email: 'ADA.LOVELACE@example.org', code: `${code.slice(0, 3)} ${code.slice(3)}` }, h);
    expect(ok.status, JSON.stringify(ok.json)).toBe(200);
    expect(ok.json).toEqual({ email: 'ada.lovelace@example.org', verified: true });
    expect(await isEmailVerified(env.rt.db, 'Ada.Lovelace@example.org')).toBe(true);
    const after = await env.rt.db('email_verifications').where({ id: row.id }).first();
    expect(after.attempts).toBe(2);

    // A verified address is not sent another e-mail.
    const again = await post({ email: 'ada.lovelace@example.org' }, h);
    expect(again.json).toEqual({
      email: 'ada.lovelace@example.org',
      accepted: true,
      verified: true,
      verificationSent: false,
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(mails.filter((m) => m.to.includes('ada.lovelace@example.org'))).toHaveLength(1);
  });

  it('verifies a second address by the link in its e-mail', async () => {
    const h = await caller();
    expect((await post({ email: 'grace@example.net' }, h)).json.verificationSent).toBe(true);
    const { link } = await received('grace@example.net');
    expect(await isEmailVerified(env.rt.db, 'grace@example.net')).toBe(false);

    const opened = await get(pathOf(link));
    expect(opened.status, JSON.stringify(opened.json)).toBe(200);
    expect(opened.json).toEqual({ email: 'grace@example.net', verified: true });
    expect(await isEmailVerified(env.rt.db, 'grace@example.net')).toBe(true);
    // Opening it again answers the same.
    expect((await get(pathOf(link))).json).toEqual({ email: 'grace@example.net', verified: true });
  });

  it('in a browser, shows the address and verifies only when the passenger confirms', async () => {
    const h = await caller();
    expect((await post({ email: 'Katherine@Example.net' }, h)).json.verificationSent).toBe(true);
    const { link } = await received('katherine@example.net');
    const page = await getPage(api.url, pathOf(link));
    expect(page.status).toBe(200);
    expectSafePage(page);
    expect(page.html).toContain('katherine@example.net');
    expect(page.html).toContain('Confirm my e-mail address');
    // Opening the page (as a mail scanner does) verifies nothing; nor does opening the link
    // with `*/*`, as scanners that open every link do.
    for (const accept of ['*/*', 'text/html, */*;q=0.8', 'application/xml, */*']) {
      const scanned = await fetch(`${api.url}${pathOf(link)}`, { headers: { accept } });
      expect(scanned.status).toBe(200);
      expect(scanned.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await scanned.text()).toContain('Confirm my e-mail address');
    }
    // Nor does a client that takes no HTML and does not ask for JSON (a preview bot).
    for (const accept of ['text/plain', 'image/*', 'application/xml']) {
      const bot = await fetch(`${api.url}${pathOf(link)}`, { headers: { accept } });
      expect(bot.status, accept).toBe(400);
      expect(((await bot.json()) as Json).error?.details[0]?.field).toBe('/headers/accept');
    }
    expect(await isEmailVerified(env.rt.db, 'katherine@example.net')).toBe(false);

    const token = new URL(link).searchParams.get('token') as string;
    const action = /<form method="post" action="([^"]+)"/.exec(page.html)?.[1];
    expect(action).toBe(PASSENGER_VERIFY_LINK_PATH);
    const confirmed = await postForm(api.url, action as string, { token });
    expect(confirmed.status).toBe(200);
    expect(confirmed.html).toContain('Your e-mail address is verified');
    expect(await isEmailVerified(env.rt.db, 'katherine@example.net')).toBe(true);
    // Again: the page says it is verified, without a form.
    const again = await getPage(api.url, pathOf(link));
    expect(again.html).toContain('Your e-mail address is verified');
    expect(again.html).not.toContain('<form');

    // An unknown or malformed token is a 404 page, posted or opened.
    const unknown = await getPage(api.url, `${PASSENGER_VERIFY_LINK_PATH}?token=${'B'.repeat(43)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.html).toContain('This link has expired');
    expect((await postForm(api.url, PASSENGER_VERIFY_LINK_PATH, { token: '<script>' })).status).toBe(404);
  });

  it('answers 404 for an unknown or expired link, and 400 for an expired code', async () => {
    const unknown = await get(`${PASSENGER_VERIFY_LINK_PATH}?token=${'A'.repeat(43)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error?.code).toBe('not_found');
    const missing = await get(PASSENGER_VERIFY_LINK_PATH);
    expect(missing.status).toBe(400);
    expect(missing.json.error?.details).toEqual([{ field: '/token', problem: 'is required' }]);
    // found in a probe: a JSON client posting to the link got the website's HTML page
    const posted = await fetch(`${api.url}${PASSENGER_VERIFY_LINK_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ token: 'A'.repeat(43) }),
    });
    expect(posted.status).toBe(405);
    expect(posted.headers.get('content-type')).toMatch(/^application\/json/);
    expect(posted.headers.get('allow')).toContain('GET');
    expect(((await posted.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');

    const h = await caller();
    await post({ email: 'edith@example.com' }, h);
    const { code, link } = await received('edith@example.com');
    await env.rt
      .db('email_verifications')
      .where({ email: 'edith@example.com' })
      .update({
        expires_at: new Date(Date.now() - 1000),
      });
    const expiredCode = await post({ email: 'edith@example.com', code }, h);
    expect(expiredCode.status).toBe(400);
    expect(expiredCode.json.error?.details).toEqual([{ field: '/code', problem: 'has expired; request a new code' }]);
    expect((await get(pathOf(link))).status).toBe(404);
    expect(await isEmailVerified(env.rt.db, 'edith@example.com')).toBe(false);
  });

  it('allows 5 attempts per code, then only a new code works', async () => {
    const h = await caller();
    await post({ email: 'katherine@example.com' }, h);
    const first = await received('katherine@example.com');
    const wrong = first.code === '000000' ? '111111' : '000000';
    const problems: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await post({ email: 'katherine@example.com', code: wrong }, h);
      expect(r.status).toBe(400);
      problems.push(r.json.error?.details[0]?.problem ?? '');
    }
    expect(problems).toEqual([
      'is not correct; 4 attempts left',
      'is not correct; 3 attempts left',
      'is not correct; 2 attempts left',
      'is not correct; 1 attempt left',
      'was entered wrongly 5 times; request a new code',
    ]);
    const right = await post({ email: 'katherine@example.com', code: first.code }, h);
    expect(right.status).toBe(400);
    expect(right.json.error?.details).toEqual([
      { field: '/code', problem: 'was entered wrongly 5 times; request a new code' },
    ]);
    const row = await env.rt.db('email_verifications').where({ email: 'katherine@example.com' }).first();
    expect(row.attempts).toBe(5);

    // A new e-mail: its code works, and supersedes the old one.
    await post({ email: 'katherine@example.com' }, h);
    const second = await received('katherine@example.com', 2);
    const ok = await post({ email: 'katherine@example.com', code: second.code }, h);
    expect(ok.status, JSON.stringify(ok.json)).toBe(200);
  });

  it('checks no code for an address after 20 wrong codes in a day, the right one neither', async () => {
    // A caller may make 10 requests an hour: each round is a fresh caller, as a guesser
    // spreading over keys or addresses would be.
    let h = await caller();
    const email = 'grace.guessed@example.com';
    for (let n = 1; n <= 4; n++) {
      h = await caller();
      expect((await post({ email }, h)).status).toBe(200);
      const { code } = await received(email, n);
      const wrong = code === '000000' ? '111111' : '000000';
      for (let i = 0; i < 5; i++) expect((await post({ email, code: wrong }, h)).status).toBe(400);
    }
    // A fifth code is sent, but with 20 wrong codes in the last 24 hours none is checked.
    h = await caller();
    expect((await post({ email }, h)).status).toBe(200);
    const fifth = await received(email, 5);
    const refused = await post({ email, code: fifth.code }, h);
    expect(refused.status).toBe(429);
    expect(refused.json.error).toMatchObject({
      code: 'rate_limited',
      details: [
        {
          field: '/code',
          problem: 'was not checked: 20 wrong codes have been entered for this address in the last 24 hours',
        },
      ],
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(23 * 3600);
    expect(retryAfter).toBeLessThanOrEqual(24 * 3600);
    expect(refused.headers.get('ratelimit-policy')).toContain('"wrong-codes";q=20;w=86400');
    expect(refused.headers.get('ratelimit')).toContain(`"wrong-codes";r=0;t=${retryAfter}`);
    expect(await isEmailVerified(env.rt.db, email)).toBe(false);
    // A day later (the codes sent a day ago), the latest code is checked again.
    await env.rt
      .db('email_verifications')
      .where({ email })
      .whereNot({
        id: (await env.rt.db('email_verifications').where({ email }).orderBy('created_at', 'desc').first('id')).id,
      })
      .update({ created_at: env.rt.db.raw("created_at - interval '1 day'") });
    const ok = await post({ email, code: fifth.code }, h);
    expect(ok.status, JSON.stringify(ok.json)).toBe(200);
  });

  it('honours Idempotency-Key: a retried request replays its answer and sends no second e-mail', async () => {
    const h = { ...(await caller()), 'idempotency-key': 'verify-retry-1' };
    const email = 'retrying.rita@example.com';
    const first = await post({ email }, h);
    expect(first.status).toBe(200);
    const again = await post({ email }, h);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.json).toEqual(first.json);
    await received(email);
    expect(await env.rt.db('email_verifications').where({ email }).count({ n: '*' })).toEqual([{ n: 1 }]);
    const other = await post({ email: 'someone.else@example.com' }, h);
    expect(other.status).toBe(422);
    expect(other.json.error?.code).toBe('idempotency_key_reused');
  });

  it('refuses codes that are not 6 digits, and codes for an address never sent one', async () => {
    const h = await caller();
    const short = await post({ email: 'ada@example.org', code: '12345' }, h);
    expect(short.status).toBe(400);
    expect(short.json.error).toMatchObject({
      code: 'invalid_input',
      details: [{ field: '/code', problem: 'must be 6 digits' }],
    });
    const never = await post({ email: 'nobody@example.org', code: '123456' }, h);
    expect(never.status).toBe(400);
    expect(never.json.error?.details[0]?.field).toBe('/code');
  });

  it.each([
    ['not-an-email', 'malformed'],
    ['ada@@example.com', 'malformed'],
    ['ada lovelace@example.com', 'malformed'],
    ['ada@mailinator.com', 'disposable'],
    ['ada@eu.mailinator.com', 'disposable'],
    ['info@example.com', 'role_address'],
    ['bookings+taxi@example.com', 'role_address'],
  ])('refuses %s as %s with 400 email_not_accepted', async (email, problem) => {
    const r = await post({ email }, await caller());
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({
      code: 'email_not_accepted',
      message: expect.any(String),
      details: [{ field: '/email', problem }],
    });
    expect(typeof r.json.requestId).toBe('string');
    expect(await env.rt.db('email_verifications').where({ email: email.toLowerCase() }).first()).toBeUndefined();
  });

  it('answers 400 invalid_input when the e-mail is missing or not a string', async () => {
    const h = await caller();
    const missing = await post({}, h);
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({
      code: 'invalid_input',
      details: [{ field: '/email', problem: 'is required' }],
    });
    expect((await post({ email: 42 }, h)).json.error?.code).toBe('invalid_input');
  });

  it('limits requests per caller per hour (429 with Retry-After)', async () => {
    const h = await caller();
    for (let i = 0; i < 10; i++) expect((await post({ email: 'x' }, h)).status).toBe(400);
    const limited = await post({ email: 'x' }, h);
    expect(limited.status).toBe(429);
    expect(limited.json.error?.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('sends at most 5 verification e-mails to one address per hour, whoever asks', async () => {
    for (let i = 0; i < 5; i++) {
      expect((await post({ email: 'mary@example.com' }, await caller())).json.verificationSent).toBe(true);
    }
    const limited = await post({ email: 'mary@example.com' }, await caller());
    expect(limited.status).toBe(429);
    expect(limited.json.error?.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(3000);
    expect(limited.headers.get('ratelimit-policy')).toContain('"per-address";q=5;w=3600');
    expect(await env.rt.db('email_verifications').where({ email: 'mary@example.com' }).count({ n: '*' })).toEqual([
      { n: 5 },
    ]);
  });

  it('counts the 5 an hour per mailbox: +tag variants of an address are one inbox', async () => {
    const variants = ['tess@example.com', 'tess+1@example.com', 'TESS+2@example.com', 'tess+3@example.com'];
    for (const email of [...variants, 'tess+4@example.com']) {
      expect((await post({ email }, await caller())).json.verificationSent, email).toBe(true);
    }
    for (const email of ['tess+5@example.com', 'tess@example.com']) {
      const limited = await post({ email }, await caller());
      expect(limited.status, email).toBe(429);
      expect(limited.json.error?.code).toBe('rate_limited');
    }
    // Another mailbox at the same domain is not held back.
    expect((await post({ email: 'tessa@example.com' }, await caller())).json.verificationSent).toBe(true);
  });

  it('holds to 5 an hour when the requests for one address arrive together', async () => {
    const callers = await Promise.all(Array.from({ length: 10 }, () => caller()));
    const answers = await Promise.all(callers.map((h) => post({ email: 'parallel.pat@example.com' }, h)));
    expect(answers.filter((a) => a.status === 200 && a.json.verificationSent === true)).toHaveLength(5);
    expect(answers.filter((a) => a.status === 429)).toHaveLength(5);
    expect(
      await env.rt.db('email_verifications').where({ email: 'parallel.pat@example.com' }).count({ n: '*' }),
    ).toEqual([{ n: 5 }]);
  });

  it('records the e-mail instead of sending it for a test-mode key', async () => {
    const r = await post({ email: 'sandbox.passenger@example.com' }, await caller('test'));
    expect(r.json.verificationSent).toBe(true);
    await eventually(async () => {
      const m = await env.rt.db('outbound_messages').where({ recipient: 'sandbox.passenger@example.com' }).first();
      return m?.state === 'recorded';
    });
    expect(mails.filter((m) => m.to.includes('sandbox.passenger@example.com'))).toHaveLength(0);
  });

  it("keeps a test key's verifications apart: they neither supersede, use up nor confirm a live one", async () => {
    const email = `apart.${Date.now()}@example.com`;
    const live = await caller();
    expect((await post({ email }, live)).json.verificationSent).toBe(true);
    const { code } = await received(email);
    // A test key asking for the same address over and over: its e-mails are recorded, and
    // counted against the sandbox's own allowance for the address (5 an hour), not the live one.
    const sandbox = await caller('test');
    for (let i = 0; i < 5; i++) expect((await post({ email }, sandbox)).status).toBe(200);
    const over = await post({ email }, sandbox);
    expect(over.status).toBe(429);
    // The live code e-mailed first is still the address's latest live code, and it verifies.
    const verified = await post({ email, code }, live);
    expect(verified.status, JSON.stringify(verified.json)).toBe(200);
    expect(verified.json).toEqual({ email, verified: true });
    // And after a test key used up the sandbox's 5 for another address, a live request still sends.
    const other = `apart.other.${Date.now()}@example.com`;
    const sandbox2 = await caller('test');
    for (let i = 0; i < 5; i++) expect((await post({ email: other }, sandbox2)).status).toBe(200);
    expect((await post({ email: other }, await caller())).json.verificationSent).toBe(true);
    // A sandbox verification, even completed, confirms the address for test-mode use only.
    const third = `apart.third.${Date.now()}@example.com`;
    const started = await startVerification(env.rt.db, {
      email: third,
      purpose: TEST_PURPOSE,
      key: env.config.dataEncryptionKey,
    });
    const done = await verifyByCode(env.rt.db, third, started.code, {
      key: env.config.dataEncryptionKey,
      purpose: TEST_PURPOSE,
    });
    expect(done.verified).toBe(true);
    expect(await isEmailVerified(env.rt.db, third)).toBe(false);
    expect(await isEmailVerified(env.rt.db, third, { testMode: true })).toBe(true);
    // The bookings' standing read says the same: verified for a test-mode booking only.
    const passenger = { name: 'Third Party', email: third, phone: '+447700900123' };
    expect((await passengerStanding(env.rt.db, passenger, undefined, true)).emailVerified).toBe(true);
    expect((await passengerStanding(env.rt.db, passenger)).emailVerified).toBe(false);
    const asLive = await post({ email: third }, await caller());
    expect(asLive.json).toMatchObject({ verified: false, verificationSent: true });
    const asTest = await post({ email: third }, await caller('test'));
    expect(asTest.json).toMatchObject({ verified: true, verificationSent: false });
    // The sandbox's code is no live code: a live caller sending it is refused.
    const wrongMode = await post({ email: third, code: started.code }, await caller());
    expect(wrongMode.status).toBe(400);
    expect(await isEmailVerified(env.rt.db, third)).toBe(false);
  });

  it('is in the OpenAPI document, which still validates', async () => {
    const res = await fetch(`${api.url}/api/public/v1/openapi.json`);
    const doc = (await res.json()) as { paths: Record<string, Record<string, { operationId: string }>> };
    expect(doc.paths[PASSENGER_VERIFY_PATH]?.post?.operationId).toBe('verifyPassengerEmail');
    expect(doc.paths[PASSENGER_VERIFY_LINK_PATH]?.get?.operationId).toBe('verifyPassengerEmailLink');
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid ? [] : result.errors).toEqual([]);
  });
});
