import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { randomBase62 } from '../../shared/crypto.ts';

/**
 * CSRF protection of the website's forms: the signed double-submit pattern. A random browser
 * id lives in an HttpOnly, SameSite=Lax cookie; each form carries an HMAC (with the service
 * key) of that id and what the form acts on (`book:<quoteId>`, `cancel:<bookingId>`). A post
 * counts only when the cookie is there and the form's token is the HMAC of that cookie for
 * that action: a cross-site form sends no cookie (SameSite) and cannot read or forge the
 * token, and a token taken from one browser or one quote does not work for another. Nothing is
 * stored on the server, so a form submitted twice (a double tap) passes twice: what it does is
 * idempotent on its own (a quote is redeemed once, a cancel is a cancel).
 */

export const BROWSER_COOKIE = 'dtn_web';
const BROWSER_ID = /^[0-9A-Za-z]{32}$/;
/** The cookie outlives a quote (24 hours) so that a form opened from a quote still works when sent. */
const COOKIE_MAX_AGE_MS = 2 * 24 * 3600_000;

export function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function browserId(req: Request): string | undefined {
  const v = cookieValue(req, BROWSER_COOKIE);
  return v && BROWSER_ID.test(v) ? v : undefined;
}

function sign(key: Buffer, browser: string, action: string): string {
  return createHmac('sha256', key).update(`csrf:${browser}:${action}`).digest('base64url');
}

/**
 * The token for a form acting on `action`, for this browser; sets the browser cookie when the
 * request has none (a page showing a form calls it before sending).
 */
export function formToken(req: Request, res: Response, key: Buffer, action: string, secure: boolean): string {
  // Two forms on one page sign with the same id, and the cookie is set once.
  let browser = res.locals.webBrowserId as string | undefined;
  if (!browser) {
    browser = browserId(req) ?? randomBase62(32);
    res.locals.webBrowserId = browser;
    res.cookie(BROWSER_COOKIE, browser, {
      httpOnly: true,
      sameSite: 'lax',
      secure,
      path: '/',
      maxAge: COOKIE_MAX_AGE_MS,
    });
  }
  return sign(key, browser, action);
}

/** Whether a posted form's token is this browser's for `action` (compared in constant time). */
export function formTokenValid(req: Request, key: Buffer, action: string, presented: unknown): boolean {
  const browser = browserId(req);
  if (!browser || typeof presented !== 'string') return false;
  const expected = Buffer.from(sign(key, browser, action));
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
