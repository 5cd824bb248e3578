import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blockKey, up as rekeyBlocks } from '../migrations/20261126002100_blocked-contact-keys.ts';
import { up as canonicalVerifications } from '../migrations/20261126002200_verification-email-canonical.ts';
import { assertNotBlocked, blockedAmong, normalisePhone } from '../shared/services/bookings.ts';
import { isEmailVerified, verificationRow } from '../shared/services/email-verification.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * One passenger, one identity, however the address or number is spelt (CONTRACT.md sections 4
 * and 5): the address stored is the one the acceptance rules checked (its domain in canonical
 * form); an internationalised address books, looks up and cancels; and an operator's block on
 * an e-mail or phone is not dodged by a `+tag`, Gmail dots, googlemail.com, a full-width or
 * soft-hyphenated domain, or a "(0)" after +44. Through real HTTP.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;

type Json = Record<string, unknown> & {
  error?: { code: string; message: string; details: Array<{ field: string; problem: string }> };
};

beforeAll(async () => {
  env = await createTestEnv({
    env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', QUOTE_LIMIT_PER_HOUR: '100000' },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env));
});
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

let hours = 20;
/** A distinct pickup time for each booking, so none repeats an earlier one's content. */
function nextPickup(): string {
  hours += 1;
  return new Date(Date.now() + hours * 3600_000).toISOString();
}

async function post(path: string, body: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as Json, text };
}

async function get(path: string) {
  const res = await fetch(`${api.url}${path}`);
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) as Json, text };
}

function book(email: string, phone = '+447700900100') {
  return post('/api/public/v1/booking', {
    pickup: 'Cardiff Central',
    dropoff: 'Cardiff Bay',
    departAt: nextPickup(),
    passengerName: 'Pat Passenger',
    passengerEmail: email,
    passengerPhone: phone,
  });
}

async function storedEmail(reference: unknown): Promise<string> {
  const row = await env.rt.db('bookings').where({ reference }).first('passenger_email');
  return row.passenger_email;
}

async function admin(args: string[]) {
  const r = await runTs('bin/admin.ts', args, env.childEnv);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

describe('the address stored is the address checked', () => {
  it('stores a full-width or soft-hyphenated domain in its canonical form, and verification sees that form', async () => {
    const wide = await book('wide@ｇmail.com');
    expect(wide.status, wide.text).toBe(201);
    expect(await storedEmail(wide.json.bookingReference)).toBe('wide@gmail.com');
    const soft = await book('soft@gm\u00ADail.com');
    expect(soft.status, soft.text).toBe(201);
    expect(await storedEmail(soft.json.bookingReference)).toBe('soft@gmail.com');

    // A confirmed address is confirmed in every spelling of its domain.
    const { row } = verificationRow({ email: 'vera@gmail.com', key: env.config.dataEncryptionKey });
    await env.rt.db('email_verifications').insert({ ...row, verified_at: new Date() });
    const vera = await book('Vera@ＧＭＡＩＬ.com');
    expect(vera.status, vera.text).toBe(201);
    expect(vera.json.emailVerified).toBe(true);
    const verify = await post('/api/public/v1/passenger-verify', { email: 'vera@ｇmail.com' });
    expect(verify.status, verify.text).toBe(200);
    expect(verify.json).toMatchObject({ email: 'vera@gmail.com', verified: true, verificationSent: false });
  });

  it('counts the unconfirmed-address limit by mailbox: +tag variants do not start a fresh hour', async () => {
    for (let i = 1; i <= 8; i++) {
      const r = await book(`counted+${i}@example.org`);
      expect(r.status, r.text).toBe(201);
    }
    const ninth = await book('counted+9@example.org');
    expect(ninth.status, ninth.text).toBe(429);
    expect(ninth.json.error?.code).toBe('rate_limited');
    // Another mailbox has its own count.
    expect((await book('uncounted@example.org')).status).toBe(201);
  });
});

describe('an internationalised address', () => {
  it('books, looks up and cancels with the same address, in either spelling of its domain', async () => {
    const made = await book('Anna@München.de');
    expect(made.status, made.text).toBe(201);
    const ref = made.json.bookingReference as string;
    expect(await storedEmail(ref)).toBe('anna@münchen.de');

    const look = await get(`/api/public/v1/booking/${ref}?email=${encodeURIComponent('anna@münchen.de')}`);
    expect(look.status, look.text).toBe(200);
    expect(look.json).toMatchObject({ bookingReference: ref, status: 'pending' });
    const puny = await get(`/api/public/v1/booking/${ref}?email=${encodeURIComponent('ANNA@xn--mnchen-3ya.de')}`);
    expect(puny.status, puny.text).toBe(200);
    const wide = await get(`/api/public/v1/booking/${ref}?email=${encodeURIComponent('anna@ｍünchen.de')}`);
    expect(wide.status, wide.text).toBe(200);

    const other = await get(`/api/public/v1/booking/${ref}?email=${encodeURIComponent('anne@münchen.de')}`);
    expect(other.status).toBe(403);
    expect(other.json.error?.code).toBe('email_mismatch');
    const malformed = await get(`/api/public/v1/booking/${ref}?email=not-an-address`);
    expect(malformed.status).toBe(400);
    expect(malformed.json.error).toMatchObject({ code: 'invalid_input', details: [{ field: '/email' }] });
    const tooLong = await get(`/api/public/v1/booking/${ref}?email=${'a'.repeat(250)}%40example.org`);
    expect(tooLong.status).toBe(400);

    const cancel = await post(`/api/public/v1/booking/${ref}`, { action: 'cancel', email: 'anna@xn--mnchen-3ya.de' });
    expect(cancel.status, cancel.text).toBe(200);
    expect(cancel.json).toEqual({ bookingReference: ref, status: 'cancelled', cancelled: true });
    const badCancel = await post(`/api/public/v1/booking/${ref}`, { action: 'cancel', email: 'anna@münchen' });
    expect(badCancel.status).toBe(400);
    expect(badCancel.json.error?.code).toBe('invalid_input');
  });
});

describe('blocks by mailbox and by number', () => {
  it('refuses the spellings that used to get past a block on an e-mail address', async () => {
    expect(await admin(['block', '--email', 'Bad@Gmail.com', '--reason', 'abuse'])).toEqual({
      blocked: { kind: 'email', value: 'bad@gmail.com' },
      openBookings: [],
      cancelled: [],
    });
    // Each of these booked before: the block matched the lower-cased text only.
    for (const email of [
      'bad@gmail.com',
      'b.ad@gmail.com',
      'bad+x@gmail.com',
      'B.A.D+taxi@gmail.com',
      'bad@googlemail.com',
      'bad@ｇmail.com',
      'bad@gm\u00ADail.com',
    ]) {
      const r = await book(email, '+447700900200');
      expect(r.status, `${email}: ${r.text}`).toBe(403);
      expect(r.json.error?.code).toBe('account_blocked');
      expect(r.json.error?.details).toEqual([{ field: '/passengerEmail', problem: 'blocked' }]);
    }
    // The alias route checks the same key.
    const quote = await post('/api/public/quotes/estimate', {
      pickup_address: 'Cardiff Central',
      dropoff_address: 'Cardiff Bay',
      passenger_count: 1,
      depart_at: nextPickup(),
    });
    expect(quote.status, quote.text).toBe(200);
    const alias = await post('/api/public/bookings/create', {
      quote_id: quote.json.quote_id,
      passenger_name: 'Pat Passenger',
      passenger_phone_whatsapp: '+447700900201',
      payment_method: 'cash_to_driver',
      passenger_email: 'b.a.d+alias@googlemail.com',
    });
    expect(alias.status, alias.text).toBe(403);
    expect(alias.json.error?.code).toBe('account_blocked');

    // Not the neighbours: another Gmail mailbox, and dots elsewhere still count.
    expect((await book('bad2@gmail.com', '+447700900202')).status).toBe(201);
    expect(await admin(['block', '--email', 'Ada.L+spam@Example.net'])).toEqual({
      blocked: { kind: 'email', value: 'ada.l@example.net' },
      openBookings: [],
      cancelled: [],
    });
    expect((await book('ada.l+taxi@example.net', '+447700900203')).status).toBe(403);
    expect((await book('adal@example.net', '+447700900203')).status).toBe(201);
  });

  it('refuses to block an e-mail spelling no booking can carry (it would block nobody)', async () => {
    for (const pasted of [
      '<mal@example.com>',
      'mailto:mal@example.com',
      'Mal@Example.com.',
      'mal@example.com,',
      '"mal@example.com"',
    ]) {
      const r = await runTs('bin/admin.ts', ['block', '--email', pasted], env.childEnv);
      expect(r.code, pasted).toBe(1);
      expect(r.stdout).toBe('');
      expect(JSON.parse(r.stderr.trim()), pasted).toMatchObject({ error: { code: 'invalid_input' } });
    }
    expect(await env.rt.db('blocked_contacts').where('value', 'like', '%mal@%')).toEqual([]);
    // Five CLI processes: more than the default time on a busy machine.
  }, 90_000);

  it('refuses a blocked phone number however it is written', async () => {
    expect(await admin(['block', '--phone', '+44 (0)7700 900456'])).toEqual({
      blocked: { kind: 'phone', value: '+447700900456' },
      openBookings: [],
      cancelled: [],
    });
    for (const phone of [
      '+447700900456',
      '+44 (0)7700 900456',
      '07700 900456',
      '0044 (0) 7700 900456',
      '+44 00 7700 900456',
      '0044 0 0 7700 900456',
    ]) {
      const r = await book(`phone.${hours}@example.org`, phone);
      expect(r.status, `${phone}: ${r.text}`).toBe(403);
      expect(r.json.error?.code).toBe('account_blocked');
      expect(r.json.error?.details).toEqual([{ field: '/passengerPhone', problem: 'blocked' }]);
    }
    expect(normalisePhone('+44 (0)7700 900123')).toBe('+447700900123');
    expect(normalisePhone('07700 900123')).toBe('+447700900123');
    expect(normalisePhone('whatsapp:+440 7700 900123')).toBe('+447700900123');
    expect(normalisePhone('+33 6 12 34 56 78')).toBe('+33612345678');
    // A zero where the country code starts is no number (E.164): refused, not read past the block.
    for (const phone of ['+0044 7700 900456', '000447700900456', '+0 7700 900456']) {
      const r = await book(`phone.${hours}@example.org`, phone);
      expect(r.status, `${phone}: ${r.text}`).toBe(400);
      expect(r.json.error?.code).toBe('invalid_input');
      expect(r.json.error?.details).toEqual([{ field: '/passengerPhone', problem: expect.any(String) }]);
    }
  });

  it('matches by the same keys in the direct and batch checks', async () => {
    await expect(
      assertNotBlocked(env.rt.db, { name: 'X', phone: '+447700900999', email: 'b.ad+z@googlemail.com' }),
    ).rejects.toMatchObject({ code: 'account_blocked' });
    const found = await blockedAmong(env.rt.db, [
      { phone: normalisePhone('+44 (0)7700 900456'), email: null },
      { phone: null, email: 'b.ad+z@googlemail.com' },
      { phone: '+447700900998', email: 'good@gmail.com' },
    ]);
    expect([...found.keys()]).toEqual([0, 1]);
    expect(found.get(1)?.details).toEqual([{ field: '/passengerEmail', problem: 'blocked' }]);
  });
});

describe('migration 20261126002100: blocks re-keyed', () => {
  it('computes the keys the block check matches', () => {
    expect(blockKey('email', 'b.ad+x@googlemail.com')).toBe('bad@gmail.com');
    expect(blockKey('email', 'anna+x@xn--mnchen-3ya.de')).toBe('anna@münchen.de');
    expect(blockKey('phone', '+4407700900123')).toBe('+447700900123');
    expect(blockKey('phone', '+447700900123')).toBe('+447700900123');
    expect(blockKey('phone', 'not a number')).toBe('not a number');
  });

  it('rewrites rows made under the old rules, merging those that become one', async () => {
    const db = env.rt.db;
    await db('blocked_contacts').insert([
      { kind: 'email', value: 'old.timer+x@googlemail.com', reason: 'first' },
      { kind: 'email', value: 'oldtimer@gmail.com', reason: 'second' },
      { kind: 'email', value: 'o.l.d.timer@gmail.com', reason: null },
      { kind: 'email', value: 'solo+tag@example.org', reason: 'solo' },
      { kind: 'phone', value: '+4407700900777', reason: 'trunk' },
      { kind: 'phone', value: '+447700900777', reason: null },
      { kind: 'phone', value: '+4407700900778', reason: null },
    ]);
    await rekeyBlocks(db);
    const rows = await db('blocked_contacts')
      .whereIn('value', [
        'oldtimer@gmail.com',
        'solo@example.org',
        'solo+tag@example.org',
        '+447700900777',
        '+4407700900777',
        '+447700900778',
        '+4407700900778',
      ])
      .select('kind', 'value', 'reason');
    expect(rows.sort((a, b) => `${a.kind}${a.value}`.localeCompare(`${b.kind}${b.value}`))).toEqual([
      { kind: 'email', value: 'oldtimer@gmail.com', reason: 'second; first' },
      { kind: 'email', value: 'solo@example.org', reason: 'solo' },
      { kind: 'phone', value: '+447700900777', reason: 'trunk' },
      { kind: 'phone', value: '+447700900778', reason: null },
    ]);
    expect(await db('blocked_contacts').where('value', 'like', '%timer%').count({ n: '*' })).toEqual([{ n: 1 }]);
    // Rows already keyed are left alone: the earlier tests' blocks still hold, once each.
    expect(await db('blocked_contacts').where({ value: 'bad@gmail.com' }).select('kind', 'reason')).toEqual([
      { kind: 'email', reason: 'abuse' },
    ]);
    // Running it again changes nothing.
    const before = await db('blocked_contacts').orderBy('id').select();
    await rekeyBlocks(db);
    expect(await db('blocked_contacts').orderBy('id').select()).toEqual(before);
    // And the re-keyed rows block.
    expect((await book('old.timer+again@gmail.com', '+447700900300')).status).toBe(403);
    expect((await book('fresh@example.org', '07700 900778')).status).toBe(403);
  });
});

describe('migration 20261126002200: verified addresses in canonical form', () => {
  it('rewrites a verification kept under an older spelling, so the passenger stays verified', async () => {
    const db = env.rt.db;
    const row = (email: string) => ({
      id: uuidv7(),
      email,
      code_hash: randomBytes(32),
      link_token_hash: randomBytes(32),
      expires_at: new Date(Date.now() + 600_000),
      verified_at: new Date(),
    });
    await db('email_verifications').insert([row('ada@xn--mnchen-3ya.de'), row('plain@example.org')]);
    expect(await isEmailVerified(db, 'ada@münchen.de')).toBe(false);
    await canonicalVerifications(db);
    expect(await isEmailVerified(db, 'ada@münchen.de')).toBe(true);
    expect(await isEmailVerified(db, 'ADA@xn--mnchen-3ya.de')).toBe(true);
    expect(await db('email_verifications').where({ email: 'plain@example.org' }).count({ n: '*' })).toEqual([{ n: 1 }]);
  });
});
