import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Queryable } from '../../shared/db/knex.ts';
import {
  type DriverIdentity,
  driverIdentityOf,
  IDENTITY_COLUMNS,
  type IdentityRow,
} from '../../shared/services/drivers.ts';
import { cookieValue } from './csrf.ts';

/**
 * The driver pages' session: after a driver signs in with their driver token (the bearer token
 * issued at approval, checked by `authenticateDriver` as the API checks it), a cookie says who
 * they are. Stateless: `dtn_driver=<driverId>.<expiry>.<mac>`, where expiry is in Unix seconds
 * and mac = HMAC-SHA256 (a key derived from `dataEncryptionKey` for this purpose only) over the
 * driver id, the expiry and the SHA-256 of the driver's current token. Nothing is stored, and a
 * session ends by itself when the driver is suspended or rejected (the token hash is cleared)
 * or approved again (a new token): the MAC no longer matches. HttpOnly, SameSite=Lax, Secure on
 * an https domain, host-only (each connected domain has its own), 30 days.
 */

export const DRIVER_COOKIE = 'dtn_driver';
export const DRIVER_SESSION_DAYS = 30;
const SESSION_MS = DRIVER_SESSION_DAYS * 24 * 3600_000;
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const COOKIE_RE = new RegExp(`^(${UUID})\\.([0-9]{1,12})\\.([A-Za-z0-9_-]{43})$`);

const sessionKeys = new WeakMap<Buffer, Buffer>();

/** The session key: HMAC(dataEncryptionKey, purpose label), so the service key itself never signs cookies. */
function sessionKey(key: Buffer): Buffer {
  let derived = sessionKeys.get(key);
  if (!derived) {
    derived = createHmac('sha256', key).update('dtn driver web session v1').digest();
    sessionKeys.set(key, derived);
  }
  return derived;
}

function macOf(key: Buffer, driverId: string, expiry: number, tokenHash: Buffer): Buffer {
  return createHmac('sha256', sessionKey(key))
    .update(`${driverId}|${expiry}|${tokenHash.toString('hex')}`)
    .digest();
}

/** The cookie value of a session for `driverId` holding the token whose SHA-256 is `tokenHash`. */
export function sessionValue(key: Buffer, driverId: string, tokenHash: Buffer, now = Date.now()): string {
  const expiry = Math.floor((now + SESSION_MS) / 1000);
  return `${driverId}.${expiry}.${macOf(key, driverId, expiry, tokenHash).toString('base64url')}`;
}

interface SessionRow extends IdentityRow {
  token_hash: Buffer | null;
}

/**
 * The driver a session cookie value belongs to, or null: malformed, expired, forged, or the
 * driver is no longer approved or holds another token. The MAC is compared in constant time.
 */
export async function verifySession(
  db: Queryable,
  key: Buffer,
  value: string | undefined,
  now = Date.now(),
): Promise<DriverIdentity | null> {
  const m = value ? COOKIE_RE.exec(value) : null;
  if (!m) return null;
  const [, driverId, expiryText, mac] = m as unknown as [string, string, string, string];
  const expiry = Number(expiryText);
  if (expiry * 1000 <= now || expiry * 1000 > now + SESSION_MS + 60_000) return null;
  const row = await db('drivers')
    .where({ id: driverId, status: 'approved' })
    .whereNotNull('token_hash')
    .first<SessionRow | undefined>(...IDENTITY_COLUMNS, 'token_hash');
  if (!row?.token_hash) return null;
  // Compared as text: base64url has more than one spelling of some byte strings (the last
  // character's spare bits), and only the one we issue counts.
  const expected = Buffer.from(macOf(key, driverId, expiry, row.token_hash).toString('base64url'));
  const given = Buffer.from(mac);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  // As authenticateDriver answers: a sandbox driver stays one on the web (its own presence index).
  return driverIdentityOf(row, row.token_hash);
}

/** The signed-in driver of a request (the `dtn_driver` cookie), or null. */
export function sessionDriver(req: Request, db: Queryable, key: Buffer): Promise<DriverIdentity | null> {
  return verifySession(db, key, cookieValue(req, DRIVER_COOKIE));
}

/** Sign a driver in: the session cookie for the token they presented (its hash, as stored). */
export function startSession(res: Response, key: Buffer, driverId: string, tokenHash: Buffer, secure: boolean): void {
  res.cookie(DRIVER_COOKIE, sessionValue(key, driverId, tokenHash), {
    httpOnly: true,
    sameSite: 'lax',
    secure,
    path: '/',
    maxAge: SESSION_MS,
  });
}

/** Sign out: the cookie is cleared (the same attributes, expired). */
export function endSession(res: Response, secure: boolean): void {
  res.clearCookie(DRIVER_COOKIE, { httpOnly: true, sameSite: 'lax', secure, path: '/' });
}

/** Where a sign-in may return to: the driver pages of this site only (an offer link, the feed, a job), never elsewhere. */
const NEXT_RE = /^\/(?:o\/[A-Za-z0-9_-]{32}|driver(?:\/jobs\/[A-Za-z0-9-]{1,20})?)$/;
export const DRIVER_HOME = '/driver';

/** `next` when it is one of our driver pages (a relative path of this site), else the feed: no open redirect. */
export function safeNext(next: unknown): string {
  return typeof next === 'string' && NEXT_RE.test(next) ? next : DRIVER_HOME;
}
