import type { NextFunction, Request, Response } from 'express';
import { findOperatorSession, type OperatorSession, SESSION_TTL_MS } from '../../../shared/services/operators.ts';
import { baseUrlFor } from '../../base-url.ts';
import type { ApiDeps } from '../../deps.ts';
import { cookieValue, formToken, formTokenValid } from '../csrf.ts';
import { sendMessagePage } from '../site.ts';

/**
 * The operator's session: a cookie `dtn_op` holding 32 random bytes (base64url), HttpOnly,
 * SameSite=Strict, Secure on https, Path=/operator, for 12 hours; the database holds only its
 * SHA-256 (shared/services/operators.ts). Every operator page but the sign-in page requires one;
 * a browser without one is sent to the sign-in page with where it was going (`next`, a path
 * under /operator only).
 *
 * Forms are protected as the website's are (csrf.ts: the signed double-submit pattern on the
 * `dtn_web` browser cookie), with the action bound to the session (`operator:<session id>`): a
 * token is good for one browser and one session, and stops working when the session ends.
 */

export const SESSION_COOKIE = 'dtn_op';
export const COOKIE_PATH = '/operator';
export const LOGIN_PATH = '/operator/login';
export const HOME_PATH = '/operator';

export const isSecure = (req: Request, deps: ApiDeps): boolean =>
  req.secure || baseUrlFor(req, deps.config).startsWith('https:');

export function setSessionCookie(req: Request, res: Response, deps: ApiDeps, token: string): void {
  res.cookie(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'strict',
    secure: isSecure(req, deps),
    path: COOKIE_PATH,
    maxAge: SESSION_TTL_MS,
  });
}

export function clearSessionCookie(req: Request, res: Response, deps: ApiDeps): void {
  res.clearCookie(SESSION_COOKIE, {
    httpOnly: true,
    sameSite: 'strict',
    secure: isSecure(req, deps),
    path: COOKIE_PATH,
  });
}

export const sessionToken = (req: Request): string | undefined => cookieValue(req, SESSION_COOKIE);

/** The signed-in session of this request (set by `requireSession`). */
export function sessionOf(res: Response): OperatorSession {
  const s = res.locals.operatorSession as OperatorSession | undefined;
  if (!s) throw new Error('operator page without a session');
  return s;
}

/** Who did it, for the audit log: `operator:<id>`. */
export const actorOf = (s: OperatorSession): string => `operator:${s.operator.id}`;

const sessionAction = (s: OperatorSession) => `operator:${s.id}`;

/** The token of this session's forms (sets the browser cookie when the request has none). */
export function sessionFormToken(req: Request, res: Response, deps: ApiDeps): string {
  return formToken(req, res, deps.config.dataEncryptionKey, sessionAction(sessionOf(res)), isSecure(req, deps));
}

export function sessionFormValid(req: Request, res: Response, deps: ApiDeps, presented: unknown): boolean {
  return formTokenValid(req, deps.config.dataEncryptionKey, sessionAction(sessionOf(res)), presented);
}

const MAX_NEXT = 512;

/**
 * `next` if it is a path under /operator of this site (not the sign-in page), else null: never
 * another origin (`//host`, `/\host`, a scheme), never a control character.
 */
export function safeNext(raw: unknown): string | null {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > MAX_NEXT) return null;
  if (!raw.startsWith('/') || raw.startsWith('//')) return null;
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x20 || c === 0x7f || c === 0x5c /* backslash */) return null;
  }
  let url: URL;
  try {
    url = new URL(raw, 'http://operator.invalid');
  } catch {
    return null;
  }
  if (url.origin !== 'http://operator.invalid') return null;
  if (url.pathname !== HOME_PATH && !url.pathname.startsWith(`${HOME_PATH}/`)) return null;
  if (url.pathname === LOGIN_PATH || url.pathname.startsWith(`${LOGIN_PATH}/`)) return null;
  return `${url.pathname}${url.search}`;
}

export function loginUrl(next: string | null): string {
  return next && next !== HOME_PATH ? `${LOGIN_PATH}?next=${encodeURIComponent(next)}` : LOGIN_PATH;
}

/**
 * Require a live session: sets `res.locals.operatorSession`, or answers. A page (a GET) is sent
 * to sign in and back (303); a form post or an API call of the queue board is 401, with a page
 * saying to sign in (the board's script shows its own error).
 */
export function requireSession(deps: ApiDeps, opts: { api?: (req: Request) => boolean } = {}) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    try {
      const token = sessionToken(req);
      const session = token ? await findOperatorSession(deps.db, token) : null;
      if (session) {
        res.locals.operatorSession = session;
        next();
        return;
      }
      if (token) clearSessionCookie(req, res, deps);
      res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
      if ((req.method === 'GET' || req.method === 'HEAD') && !opts.api?.(req)) {
        res.redirect(303, loginUrl(safeNext(req.originalUrl)));
        return;
      }
      sendMessagePage(
        res,
        deps.config.serviceName,
        401,
        'Please sign in',
        ['Your operator session has ended or you are not signed in.'],
        [`<p><a href="${LOGIN_PATH}">Sign in</a></p>`],
      );
    } catch (err) {
      // Never the API's JSON envelope: a page, as pageHandler answers.
      req.log?.error({ err }, 'operator session check failed');
      sendMessagePage(res, deps.config.serviceName, 503, 'Please try again in a moment', [
        'The service is briefly unavailable. Please try again in a minute.',
      ]);
    }
  };
}
