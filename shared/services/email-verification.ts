import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../crypto.ts';
import type { Queryable, Tx } from '../db/knex.ts';
import { mailboxKey, normaliseEmail } from '../domain/email-acceptance.ts';
import { uuidv7 } from '../ids.ts';
import { queueMessage } from './messages.ts';

/**
 * Passenger e-mail verification (CONTRACT.md section 5): a 6-digit code and a link, e-mailed
 * together, either of which proves the passenger reads the mailbox.
 *
 * - Only SHA-256 hashes are stored. The code's hash is salted with the verification id
 *   (`<id>:<code>`), so one table of a million precomputed hashes does not read every row;
 *   the link token carries 256 random bits and is hashed as it is.
 * - A verification expires 30 minutes after it starts and allows 5 code attempts, each
 *   counted (a successful one included) under a row lock, so parallel guesses cannot exceed it.
 * - The newest verification of an address supersedes older ones for codes (the latest e-mail's
 *   code is the one that works); any unexpired link still works. The MCP sign-in instead checks
 *   the verification it started (`verificationId`), one per authorization.
 * - Verified is a property of the address: any verified row for it, for any purpose.
 *
 * - A booking's confirmation e-mail carries a link of its own, signed rather than stored
 *   (`bookingVerifyToken`): nothing is written when the booking is made, and opening the link
 *   writes a verified row of its own purpose (`BOOKING_LINK_PURPOSE`). So bookings neither add
 *   a row per e-mail nor supersede the code a passenger was sent by passenger-verify, nor
 *   count against its e-mails per address.
 *
 * The MCP OAuth sign-in (purpose `oauth`) e-mails the code only (`sendSignInCodeEmail`): its
 * proof must happen in the browser that started the sign-in, and a link opened anywhere would
 * let whoever started it sign in as the recipient. Its row's link token is never sent.
 */

export const VERIFICATION_TTL_MS = 30 * 60 * 1000;
/**
 * How long the link in a booking's confirmation e-mail confirms its address: 3 days. The
 * passenger did not ask for it (it comes with the booking, read whenever they get to it),
 * and it confirms only the address it was sent to; a code or link they asked for stays 30
 * minutes.
 */
export const BOOKING_LINK_TTL_MS = 3 * 24 * 3600 * 1000;
export const MAX_CODE_ATTEMPTS = 5;
/**
 * Wrong codes an address may have entered for one purpose in 24 hours, across all its codes;
 * beyond it no code is checked (the right one neither) until the oldest of the day's codes is
 * a day old. Each code allows MAX_CODE_ATTEMPTS, and a new code can be asked for a few times
 * an hour, so without it one address could be tried about 600 times a day, each with a one in
 * a million chance: over a year, a one in five chance of signing in to the MCP server as
 * someone else. At 20 a day, under one in a hundred; a passenger who mistypes a few codes is
 * never near it. Someone trying codes for an address can keep its owner from verifying it
 * (or signing in) for the rest of that day, which is the price of the cap.
 */
export const MAX_WRONG_CODES_PER_DAY = 20;
const DAY_MS = 24 * 3600_000;
export const DEFAULT_PURPOSE = 'passenger';
/**
 * The verified row a booking's signed link writes when opened: its own purpose, so it neither
 * becomes the address's latest passenger verification (whose code counts) nor counts as an
 * e-mail sent (`countVerificationsSince`).
 */
export const BOOKING_LINK_PURPOSE = 'booking_link';
/**
 * A verification started with a test key (passenger-verify in the sandbox): its e-mail is
 * recorded for the key's holder to read, not sent, so its code proves nothing about who owns
 * the address. It verifies the address for test-mode bookings only: live standing
 * (`isEmailVerified`, the bookings' standing read) ignores it, and it neither supersedes a
 * live code nor counts against the live e-mails per address (a test key cannot use up a
 * stranger's hourly allowance).
 */
export const TEST_PURPOSE = 'passenger_test';
/** A test-mode booking's confirmation link, opened: as `BOOKING_LINK_PURPOSE`, for test-mode bookings only. */
export const TEST_BOOKING_LINK_PURPOSE = 'booking_link_test';
/** The purposes of the sandbox's verifications: they confirm an address for test-mode bookings only. */
export const SANDBOX_PURPOSES = [TEST_PURPOSE, TEST_BOOKING_LINK_PURPOSE] as const;

interface VerificationRow {
  id: string;
  email: string;
  code_hash: Buffer;
  link_token_hash: Buffer;
  purpose: string;
  attempts: number;
  created_at: Date;
  expires_at: Date;
  verified_at: Date | null;
}

export interface StartedVerification {
  verificationId: string;
  /** 6 digits, shown to the passenger once (in the e-mail); never stored. */
  code: string;
  /** 32 random bytes, base64url (43 characters); never stored. */
  linkToken: string;
  expiresAt: Date;
}

export type CodeCheck =
  | { verified: true; email: string; verificationId: string }
  | {
      verified: false;
      /**
       * `no_verification`: none was started for the address. `expired`: the latest has expired.
       * `too_many_attempts`: the latest has used its attempts. `wrong_code`: try again.
       * `too_many_today`: the address has had MAX_WRONG_CODES_PER_DAY wrong codes in 24 hours;
       * `retryAfterSeconds` says when the oldest of them stops counting.
       */
      reason: 'no_verification' | 'expired' | 'too_many_attempts' | 'wrong_code' | 'too_many_today';
      attemptsLeft: number;
      retryAfterSeconds?: number;
    };

/**
 * A code as stored: an HMAC with the service's key, not a plain hash. Six digits are a million
 * values, so a plain hash of a row's id and code gives the code back to anyone who can read the
 * table, in milliseconds; without the key it gives nothing.
 */
function codeHash(key: Buffer, verificationId: string, code: string): Buffer {
  return createHmac('sha256', key).update(`verification-code:${verificationId}:${code}`).digest();
}

/** `123 456` and `123-456` are read as `123456`; anything else that is not 6 digits is no code. */
export function normaliseCode(raw: string): string | null {
  const code = raw.replace(/[\s-]/g, '');
  return /^\d{6}$/.test(code) ? code : null;
}

/** Start a verification for an address: store the hashes, return the secrets to e-mail. */
export async function startVerification(
  db: Queryable,
  input: { email: string; purpose?: string; now?: Date; key: Buffer },
): Promise<StartedVerification> {
  const { row, started } = verificationRow(input);
  await db('email_verifications').insert(row);
  return started;
}

/**
 * The token of the verification link in a booking's confirmation e-mail: `B`, the booking id
 * (32 hex digits), its expiry (8 hex digits of Unix seconds) and an HMAC-SHA256, with the
 * service's key, of the three and the booking's address (base64url). It is checked against
 * the booking's address when opened, so the link verifies only the address it was sent to.
 * The same alphabet as a stored link's token, 84 characters against its 43.
 */
export function bookingVerifyToken(bookingId: string, email: string, key: Buffer, expiresAt: Date): string {
  const id = bookingId.replace(/-/g, '').toLowerCase();
  const exp = Math.floor(expiresAt.getTime() / 1000)
    .toString(16)
    .padStart(8, '0');
  return `B${id}${exp}${bookingLinkMac(id, exp, email, key).toString('base64url')}`;
}

function bookingLinkMac(id: string, exp: string, email: string, key: Buffer): Buffer {
  return createHmac('sha256', key)
    .update(`verify-link:${id}:${exp}:${normaliseEmail(email)}`)
    .digest();
}

const BOOKING_TOKEN = /^B([0-9a-f]{32})([0-9a-f]{8})([0-9A-Za-z_-]{43})$/;

/**
 * The address a booking's verification link stands for, when its signature holds for the
 * booking's address (null when it is not such a token, or the signature, the booking or the
 * key does not match), and whether it has expired.
 */
async function bookingLinkAddress(
  db: Queryable,
  token: string,
  key: Buffer | undefined,
  now: Date,
): Promise<{ email: string; expiresAt: Date; testMode: boolean } | null> {
  const m = BOOKING_TOKEN.exec(token);
  if (!m || !key) return null;
  const [, id, exp, mac] = m as unknown as [string, string, string, string];
  const bookingId = `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20)}`;
  const booking = await db('bookings')
    .where({ id: bookingId })
    .first<{ passenger_email: string | null; test_mode: boolean } | undefined>('passenger_email', 'test_mode');
  // A test-mode booking's link (its confirmation is readable with the test key, in the sandbox's
  // messages) confirms the address for test-mode bookings only (`verifyBookingLink`).
  if (!booking?.passenger_email) return null;
  // Compared as text: base64url's last character carries two bits the bytes do not, so
  // decoding first would take four spellings of one signature.
  const given = Buffer.from(mac);
  const expected = Buffer.from(bookingLinkMac(id, exp, booking.passenger_email, key).toString('base64url'));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  const expiresAt = new Date(Number.parseInt(exp, 16) * 1000);
  return expiresAt.getTime() > now.getTime()
    ? { email: normaliseEmail(booking.passenger_email), expiresAt, testMode: booking.test_mode }
    : null;
}

/** A new verification's row (to insert) and what to send: the code and link token are never stored. */
export function verificationRow(input: { email: string; purpose?: string; now?: Date; key: Buffer }): {
  row: Record<string, unknown>;
  started: StartedVerification;
} {
  const verificationId = uuidv7();
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const linkToken = randomBytes(32).toString('base64url');
  const expiresAt = new Date((input.now ?? new Date()).getTime() + VERIFICATION_TTL_MS);
  return {
    row: {
      id: verificationId,
      email: normaliseEmail(input.email),
      mailbox_key: mailboxKey(input.email),
      code_hash: codeHash(input.key, verificationId, code),
      link_token_hash: sha256(linkToken),
      purpose: input.purpose ?? DEFAULT_PURPOSE,
      expires_at: expiresAt,
    },
    started: { verificationId, code, linkToken, expiresAt },
  };
}

/**
 * Check a code against the latest verification of the address (for `purpose`, default
 * `passenger`). Entering the code of an already verified latest verification again succeeds
 * (a double submit), without counting an attempt.
 */
export async function verifyByCode(
  db: Queryable,
  email: string,
  code: string,
  opts: {
    /** The service's key (`dataEncryptionKey`), which codes are stored under (`codeHash`). */
    key: Buffer;
    purpose?: string;
    now?: Date;
    /**
     * Check the code of this verification only, not the newest of the address: the MCP sign-in
     * binds each authorization to the code e-mailed for it, so a code sent for another sign-in
     * (another browser, another assistant) does not work here, and this one's code still does
     * after another sign-in sent the address a newer one.
     */
    verificationId?: string;
  },
): Promise<CodeCheck> {
  const address = normaliseEmail(email);
  const now = opts.now ?? new Date();
  const given = normaliseCode(code);
  // The row is locked for the read-and-count (a savepoint when the caller passed a transaction).
  return db.transaction(async (trx): Promise<CodeCheck> => {
    const row = await trx<VerificationRow>('email_verifications')
      .where({ email: address, purpose: opts.purpose ?? DEFAULT_PURPOSE })
      .modify((q) => {
        if (opts.verificationId !== undefined) q.where({ id: opts.verificationId });
      })
      .orderBy([
        { column: 'created_at', order: 'desc' },
        { column: 'id', order: 'desc' },
      ])
      .forUpdate()
      .first();
    if (!row) return { verified: false, reason: 'no_verification', attemptsLeft: 0 };
    const matches = given !== null && timingSafeEqual(row.code_hash, codeHash(opts.key, row.id, given));
    if (row.verified_at) {
      return matches
        ? { verified: true, email: address, verificationId: row.id }
        : { verified: false, reason: 'wrong_code', attemptsLeft: 0 };
    }
    if (row.expires_at.getTime() <= now.getTime()) return { verified: false, reason: 'expired', attemptsLeft: 0 };
    if (row.attempts >= MAX_CODE_ATTEMPTS) return { verified: false, reason: 'too_many_attempts', attemptsLeft: 0 };
    const today = await wrongCodesSince(trx, address, row.purpose, new Date(now.getTime() - DAY_MS));
    if (today.wrong >= MAX_WRONG_CODES_PER_DAY) {
      const until = (today.oldest?.getTime() ?? now.getTime()) + DAY_MS;
      return {
        verified: false,
        reason: 'too_many_today',
        attemptsLeft: 0,
        retryAfterSeconds: Math.max(1, Math.ceil((until - now.getTime()) / 1000)),
      };
    }
    const attempts = row.attempts + 1;
    await trx('email_verifications')
      .where({ id: row.id })
      .update({ attempts, ...(matches ? { verified_at: now } : {}) });
    if (matches) return { verified: true, email: address, verificationId: row.id };
    const attemptsLeft = MAX_CODE_ATTEMPTS - attempts;
    return { verified: false, reason: attemptsLeft > 0 ? 'wrong_code' : 'too_many_attempts', attemptsLeft };
  });
}

/**
 * Wrong codes entered for an address and purpose on its codes sent since `since` (a code's
 * attempts are all made within its 30 minutes), and when the oldest of those codes was sent.
 */
async function wrongCodesSince(
  db: Queryable,
  email: string,
  purpose: string,
  since: Date,
): Promise<{ wrong: number; oldest: Date | null }> {
  const row = await db('email_verifications')
    .where({ email, purpose })
    .where('created_at', '>', since)
    .where('attempts', '>', 0)
    .first<{ wrong: number; oldest: Date | null }>(
      db.raw('coalesce(sum(attempts) - count(verified_at), 0)::int as wrong'),
      db.raw('min(created_at) as oldest'),
    );
  return { wrong: row?.wrong ?? 0, oldest: row?.oldest ?? null };
}

/**
 * Verify by the link's token. Answers the address, or null when the token is unknown or its
 * verification expired unused. Opening a link again after it verified answers the address again.
 */
export async function verifyByLink(
  db: Queryable,
  token: string,
  /** `key`: the service's key, for the signed links of confirmation e-mails (`bookingVerifyToken`). */
  opts: { now?: Date; key?: Buffer } = {},
): Promise<{ email: string; verificationId: string } | null> {
  const now = opts.now ?? new Date();
  const row = await db<VerificationRow>('email_verifications')
    .where({ link_token_hash: sha256(token) })
    .first();
  if (!row) return verifyBookingLink(db, token, opts.key, now);
  if (row.verified_at) return { email: row.email, verificationId: row.id };
  if (row.expires_at.getTime() <= now.getTime()) return null;
  // Conditional update: concurrent opens of the same link set it once; both answer the address.
  await db('email_verifications').where({ id: row.id }).whereNull('verified_at').update({ verified_at: now });
  return { email: row.email, verificationId: row.id };
}

/**
 * A booking's signed link opened for the first time: its verified row is written then (a
 * second open finds that row; two at once write it once and both answer the address).
 */
async function verifyBookingLink(
  db: Queryable,
  token: string,
  key: Buffer | undefined,
  now: Date,
): Promise<{ email: string; verificationId: string } | null> {
  const link = await bookingLinkAddress(db, token, key, now);
  if (!link) return null;
  const id = uuidv7();
  const inserted = await db('email_verifications')
    .insert({
      id,
      email: link.email,
      mailbox_key: mailboxKey(link.email),
      // No code goes with this link: the hash of random bytes matches none.
      code_hash: sha256(randomBytes(32)),
      link_token_hash: sha256(token),
      // A test-mode booking's link is the sandbox's verification: it confirms the address for
      // test-mode bookings only, never for live ones (whoever holds a test key reads the link).
      purpose: link.testMode ? TEST_BOOKING_LINK_PURPOSE : BOOKING_LINK_PURPOSE,
      expires_at: link.expiresAt,
      verified_at: now,
    })
    .onConflict('link_token_hash')
    .ignore()
    .returning('id');
  if (inserted.length > 0) return { email: link.email, verificationId: id };
  const row = await db<VerificationRow>('email_verifications')
    .where({ link_token_hash: sha256(token) })
    .first('id');
  return row ? { email: link.email, verificationId: row.id } : null;
}

/**
 * What a verification link stands for, without using it (the page that asks the passenger to
 * confirm shows this): unknown or expired unused, already verified, or waiting.
 */
export async function linkState(
  db: Queryable,
  token: string,
  /** `key`: as for `verifyByLink`. */
  opts: { now?: Date; key?: Buffer } = {},
): Promise<{ state: 'unknown' } | { state: 'verified' | 'pending'; email: string }> {
  const now = opts.now ?? new Date();
  const row = await db<VerificationRow>('email_verifications')
    .where({ link_token_hash: sha256(token) })
    .first('email', 'verified_at', 'expires_at');
  if (!row) {
    const link = await bookingLinkAddress(db, token, opts.key, now);
    return link ? { state: 'pending', email: link.email } : { state: 'unknown' };
  }
  if (row.verified_at) return { state: 'verified', email: row.email };
  if (row.expires_at.getTime() <= now.getTime()) return { state: 'unknown' };
  return { state: 'pending', email: row.email };
}

/**
 * Whether the address (normalised) has ever been verified, for any purpose; for live use
 * (`testMode` false, the default) a sandbox verification (`SANDBOX_PURPOSES`) does not count.
 */
export async function isEmailVerified(
  db: Queryable,
  email: string,
  opts: { testMode?: boolean } = {},
): Promise<boolean> {
  const row = await db('email_verifications')
    .where({ email: normaliseEmail(email) })
    .whereNotNull('verified_at')
    .modify((q) => {
      if (opts.testMode !== true) q.whereNotIn('purpose', SANDBOX_PURPOSES);
    })
    .first('id');
  return row !== undefined;
}

/**
 * Verifications started for the address's mailbox since `since` (to bound how many e-mails one
 * inbox gets): e-mails sent, or with `testMode`, the sandbox's recorded ones (`TEST_PURPOSE`),
 * each counted apart.
 */
export async function countVerificationsSince(
  db: Queryable,
  email: string,
  since: Date,
  opts: { testMode?: boolean } = {},
): Promise<{ count: number; oldest: Date | null }> {
  const row = await db('email_verifications')
    // By mailbox: `+tag` (and Gmail's dotted) variants of an address are one inbox, one count.
    .where({ mailbox_key: mailboxKey(email) })
    // A booking's link, opened, is no e-mail sent.
    .whereNotIn('purpose', [BOOKING_LINK_PURPOSE, TEST_BOOKING_LINK_PURPOSE])
    .modify((q) => {
      if (opts.testMode === true) q.where({ purpose: TEST_PURPOSE });
      else q.whereNot({ purpose: TEST_PURPOSE });
    })
    .where('created_at', '>=', since)
    .first<{ count: number; oldest: Date | null }>(
      db.raw('count(*)::int as count'),
      db.raw('min(created_at) as oldest'),
    );
  return { count: row?.count ?? 0, oldest: row?.oldest ?? null };
}

/**
 * Queue the verification e-mail (code and link) for the notify worker in the caller's
 * transaction, so it is sent if and only if the verification commits. Returns the message id.
 *
 * In test mode the same e-mail is recorded, never sent (the notify worker marks it `recorded`
 * and keeps its text), and `apiKeyId`, the test key that asked, is written on it: the sandbox's
 * `GET /api/public/v1/test/messages` lists it to that key and its partner's other keys, so an
 * integrator reads the code and link there. So a sandbox code is stored in clear, in that row
 * (it confirms an address for test-mode bookings only, `TEST_PURPOSE`). A live e-mail carries no
 * key (the column's check refuses one), and its text is removed once delivered
 * (workers/notify/send-message.ts).
 */
export async function sendVerificationEmail(
  trx: Tx,
  input: {
    email: string;
    code: string;
    link: string;
    serviceName?: string;
    testMode?: boolean;
    /** Test mode only: the test key that asked, whose holder reads the recorded e-mail. */
    apiKeyId?: string;
  },
): Promise<string> {
  const service = input.serviceName ?? 'Direct Taxi Network';
  const minutes = Math.round(VERIFICATION_TTL_MS / 60_000);
  const body = [
    `Your ${service} verification code is: ${input.code}`,
    '',
    'Or confirm your e-mail address by opening this link:',
    input.link,
    '',
    `The code and the link expire in ${minutes} minutes. If you asked more than once, use the code from the latest e-mail.`,
    '',
    'If you did not ask for this, you can ignore this e-mail: nothing happens until the address is confirmed.',
  ].join('\n');
  const testMode = input.testMode ?? false;
  return queueMessage(trx, {
    channel: 'email',
    recipient: normaliseEmail(input.email),
    subject: `${input.code} is your ${service} verification code`,
    body,
    purpose: 'verification',
    testMode,
    ...(testMode && input.apiKeyId !== undefined ? { apiKeyId: input.apiKeyId } : {}),
  });
}

/**
 * Queue the MCP OAuth sign-in e-mail (purpose `oauth`) in the caller's transaction: the code
 * only, never a link, since the code must be typed into the page that asked for it (the browser
 * holding that authorization's cookie); a link could be opened, and so confirm the sign-in, by
 * the recipient on behalf of whoever started it. The e-mail says which assistant asked for what,
 * to type the code only on that page and to tell it nobody, and to ignore it if this wasn't them.
 * Returns the message id.
 */
export async function sendSignInCodeEmail(
  trx: Tx,
  input: {
    email: string;
    code: string;
    /** The name the assistant registered itself with (content-screened), or null. */
    clientName: string | null;
    /** Whether it asks to book taxis (scope `bookings:write`). */
    books: boolean;
    /** What it asks to do, one line each (the consent page's scope descriptions). */
    asks: readonly string[];
    serviceName?: string;
  },
): Promise<string> {
  const service = input.serviceName ?? 'Direct Taxi Network';
  const minutes = Math.round(VERIFICATION_TTL_MS / 60_000);
  const assistant = input.clientName
    ? `An AI assistant ("${input.clientName}", the name it gave itself)`
    : 'An AI assistant that gave no name';
  const body = [
    input.books
      ? `${assistant} asked to book taxis for you with ${service}, using this e-mail address.`
      : `${assistant} asked to use ${service} for you, using this e-mail address.`,
    '',
    `Your ${service} verification code is: ${input.code}`,
    '',
    `Type it only on the ${service} sign-in page where this e-mail address was entered, in that same browser window. Never tell it to anyone, a person or an assistant: whoever enters it can act for you as listed below.`,
    '',
    'The assistant asks to:',
    ...input.asks.map((a) => `- ${a}`),
    '',
    `The code expires in ${minutes} minutes. Each sign-in page takes only the code sent for it: if you asked more than once on the same page, use the code from the latest e-mail.`,
    '',
    "If this wasn't you, ignore this e-mail: without the code nobody gets access, and nothing is booked.",
  ].join('\n');
  return queueMessage(trx, {
    channel: 'email',
    recipient: normaliseEmail(input.email),
    subject: `${input.code} is your ${service} sign-in code for an AI assistant`,
    body,
    purpose: 'verification',
  });
}
