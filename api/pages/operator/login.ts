import type { Request, Response } from 'express';
import { sha256 } from '../../../shared/crypto.ts';
import {
  authenticateOperator,
  EMAIL_MAX,
  endOperatorSession,
  findOperatorSession,
  normaliseOperatorEmail,
  PASSWORD_MAX,
  startOperatorSession,
} from '../../../shared/services/operators.ts';
import type { ApiDeps } from '../../deps.ts';
import { subjectLimiter } from '../../mcp/limits.ts';
import type { RateLimits } from '../../middleware/rate-limit.ts';
import { formToken, formTokenValid } from '../csrf.ts';
import { escapeHtml } from '../layout.ts';
import { pageLimiter, sendMessagePage } from '../site.ts';
import { notice, operatorPage, sendOperatorPage } from './layout.ts';
import {
  clearSessionCookie,
  HOME_PATH,
  isSecure,
  LOGIN_PATH,
  safeNext,
  sessionFormValid,
  sessionOf,
  sessionToken,
  setSessionCookie,
} from './session.ts';

/**
 * Signing in and out. The sign-in form is limited per client IP and per e-mail address (the
 * API's Redis limiter; the address is hashed in the key) and answers the same message, after
 * the same work (one scrypt), for an unknown address, a disabled operator and a wrong password.
 */

/** Sign-in attempts per client IP, and per e-mail address, in 15 minutes. */
export const LOGIN_LIMITS = { perIp: 20, perEmail: 10, windowSeconds: 900 } as const;

const LOGIN_ACTION = 'operator-login';
export const REFUSED = 'The e-mail address or password is not right.';

interface LoginView {
  email: string;
  next: string | null;
  problem?: string;
  done?: string;
}

function loginPage(serviceName: string, csrf: string, v: LoginView): string {
  return operatorPage({
    serviceName,
    title: `${v.problem ? 'Error: ' : ''}Sign in`,
    signedIn: null,
    body: [
      '<h1>Operator sign-in</h1>',
      ...(v.problem ? [notice('problem', [v.problem])] : []),
      ...(v.done ? [notice('done', [v.done])] : []),
      `<form method="post" action="${LOGIN_PATH}">`,
      `<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">`,
      ...(v.next ? [`<input type="hidden" name="next" value="${escapeHtml(v.next)}">`] : []),
      '<label for="email">E-mail address</label>',
      `<input id="email" name="email" type="email" autocomplete="username" inputmode="email" required maxlength="${EMAIL_MAX}" value="${escapeHtml(v.email)}"${v.problem ? ' aria-invalid="true"' : ''}>`,
      '<label for="password">Password</label>',
      `<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="${PASSWORD_MAX}"${v.problem ? ' aria-invalid="true"' : ''}>`,
      '<p><button type="submit">Sign in</button></p>',
      '</form>',
      '<p class="muted">Accounts are made with <span class="mono">npm run admin -- operator create --email E</span>.</p>',
    ],
  });
}

/** A form post whose token is missing or wrong (403): nothing was done. */
export function refuseForm(res: Response, serviceName: string): void {
  sendMessagePage(
    res,
    serviceName,
    403,
    'This form could not be checked',
    ['Nothing was changed: the form had expired or came from somewhere else. Go back, reload the page and try again.'],
    [`<p><a href="${HOME_PATH}">Operator overview</a></p>`],
  );
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

export interface LoginHandlers {
  show(req: Request, res: Response): Promise<void>;
  submit(req: Request, res: Response): Promise<void>;
  logout(req: Request, res: Response): Promise<void>;
}

export function loginHandlers(deps: ApiDeps, limits: RateLimits): LoginHandlers {
  const { config } = deps;
  const serviceName = config.serviceName;
  const page = pageLimiter(limits);
  const perIp = pageLimiter(limits, [
    { name: 'operator-login', points: LOGIN_LIMITS.perIp, durationSeconds: LOGIN_LIMITS.windowSeconds },
  ]);
  const perEmail = subjectLimiter(limits, [
    { name: 'operator-login-email', points: LOGIN_LIMITS.perEmail, durationSeconds: LOGIN_LIMITS.windowSeconds },
  ]);

  function render(req: Request, res: Response, status: number, view: LoginView) {
    const csrf = formToken(req, res, config.dataEncryptionKey, LOGIN_ACTION, isSecure(req, deps));
    sendOperatorPage(res, status, loginPage(serviceName, csrf, view));
  }

  return {
    async show(req, res) {
      await page(req, res);
      const next = safeNext(req.query.next);
      // Already signed in: straight on.
      const token = sessionToken(req);
      if (token && (await findOperatorSession(deps.db, token))) {
        res.set('Cache-Control', 'no-store');
        res.redirect(303, next ?? HOME_PATH);
        return;
      }
      render(req, res, 200, {
        email: '',
        next,
        ...(req.query['signed-out'] === '1' ? { done: 'You are signed out.' } : {}),
      });
    },

    async submit(req, res) {
      await perIp(req, res);
      const body = (req.body ?? {}) as Record<string, unknown>;
      const email = normaliseOperatorEmail(str(body.email)).slice(0, EMAIL_MAX + 1);
      const password = str(body.password);
      const next = safeNext(body.next);
      if (!formTokenValid(req, config.dataEncryptionKey, LOGIN_ACTION, body.csrf)) {
        req.log?.warn('operator sign-in refused: missing or wrong form token');
        return render(req, res, 403, {
          email,
          next,
          problem: 'This form could not be checked (it had expired, or cookies are blocked). Please sign in again.',
        });
      }
      if (email === '' || password === '') {
        return render(req, res, 400, { email, next, problem: 'Enter your e-mail address and password.' });
      }
      await perEmail(req, res, `operator-login:${sha256(email).toString('hex').slice(0, 32)}`);
      const operator = await authenticateOperator(deps.db, email, password);
      if (!operator) {
        req.log?.warn('operator sign-in refused');
        return render(req, res, 401, { email, next, problem: REFUSED });
      }
      const session = await startOperatorSession(deps.db, operator.id);
      setSessionCookie(req, res, deps, session.token);
      req.log?.info({ operatorId: operator.id }, 'operator signed in');
      res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
      res.redirect(303, next ?? HOME_PATH);
    },

    /** Behind requireSession. */
    async logout(req, res) {
      const session = sessionOf(res);
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (!sessionFormValid(req, res, deps, body.csrf)) {
        req.log?.warn({ operatorId: session.operator.id }, 'operator sign-out refused: missing or wrong form token');
        return refuseForm(res, serviceName);
      }
      await endOperatorSession(deps.db, sessionToken(req) ?? '');
      clearSessionCookie(req, res, deps);
      req.log?.info({ operatorId: session.operator.id }, 'operator signed out');
      res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
      res.redirect(303, `${LOGIN_PATH}?signed-out=1`);
    },
  };
}
