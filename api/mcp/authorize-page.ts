import { InvalidRequestError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthorizationParams } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Request, RequestHandler, Response } from 'express';
import { randomBase62 } from '../../shared/crypto.ts';
import { checkEmail, configuredCheck, EMAIL_PROBLEM_MESSAGES } from '../../shared/domain/email-acceptance.ts';
import { AppError } from '../../shared/errors.ts';
import { unstorableText } from '../../shared/schemas/text.ts';
import {
  countVerificationsSince,
  MAX_CODE_ATTEMPTS,
  normaliseCode,
  sendSignInCodeEmail,
  startVerification,
  verifyByCode,
} from '../../shared/services/email-verification.ts';
import {
  AUTHORIZATION_TTL_MS,
  approveAuthorization,
  createAuthorization,
  denyAuthorization,
  findAuthorization,
  grantableScopes,
  markAuthorizationEmailVerified,
  type PendingAuthorization,
  resolveResource,
  SCOPE_DESCRIPTIONS,
  setAuthorizationEmail,
} from '../../shared/services/oauth.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { cookieValue } from '../pages/csrf.ts';
import {
  pageHeaders as basePageHeaders,
  contentSecurityPolicy,
  escapeHtml,
  renderPage,
  stylesheet,
} from '../pages/layout.ts';
import { issuesInWords } from './issues-in-words.ts';
import { checkedFirst } from './limits.ts';

/**
 * The authorization page of the MCP OAuth server (`GET /authorize`, then its three form
 * posts): the passenger sees which assistant asks for what, proves their e-mail address with a
 * one-time code (the passenger-verify service: same codes, hashing, expiry and attempt limits,
 * purpose `oauth`), and allows or denies.
 *
 * The proof happens in the browser that started the sign-in: the e-mail carries the code only,
 * no link, and the code is accepted only as typed into this page (whose posts need the
 * authorization's browser cookie). A link would let anyone who starts a sign-in with someone
 * else's address be signed in as them once that person opens and confirms it.
 *
 * CSRF: every form carries the request token of a server-side authorization row, and the row
 * is bound to the browser that opened it by an HttpOnly, SameSite=Lax cookie (only hashes of
 * both are stored). A cross-site form post carries no cookie, and a leaked request token does
 * not work from another browser. The page loads nothing (`default-src 'none'`, its one inline
 * style allowed by hash), cannot be framed, escapes every value, and is not cached.
 */

export const AUTHORIZE_PATH = '/authorize';
export const AUTHORIZE_EMAIL_PATH = '/authorize/email';
export const AUTHORIZE_CODE_PATH = '/authorize/code';
export const AUTHORIZE_DECISION_PATH = '/authorize/decision';

const BROWSER_COOKIE = 'dtn_oauth_browser';
const BROWSER_TOKEN = /^[0-9A-Za-z]{43}$/;
/** Verification e-mails one address can be sent per hour (as passenger-verify allows). */
const EMAILS_PER_ADDRESS_PER_HOUR = 5;

const STYLE = stylesheet(
  [
    ':root{color-scheme:light dark;--fg:#1a1a1a;--bg:#fff;--muted:#555;--accent:#0b5cad;--bad:#a4161a;--line:#c8c8c8}',
    '@media (prefers-color-scheme:dark){:root{--fg:#f2f2f2;--bg:#121212;--muted:#bbb;--accent:#8cc4ff;--bad:#ff8a8a;--line:#555}}',
    '*{box-sizing:border-box}',
    'body{margin:0;font:1.0625rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}',
    'main{max-width:30rem;margin:0 auto;padding:1.25rem 1rem 2.5rem}',
    'h1{font-size:1.4rem;margin:0 0 1rem}p{margin:.5rem 0}',
    'ul{padding-left:1.25rem;margin:.5rem 0 1rem}li{margin:.25rem 0}',
    'label{display:block;font-weight:600;margin:1rem 0 .35rem}',
    'input[type=email],input[type=text]{width:100%;font:inherit;padding:.7rem .75rem;min-height:3rem;border:1px solid var(--line);border-radius:.5rem;background:var(--bg);color:var(--fg)}',
    'button{display:block;width:100%;font:inherit;font-weight:700;padding:.8rem 1rem;min-height:3rem;margin:1rem 0 0;border-radius:.5rem;border:2px solid var(--accent);background:var(--accent);color:var(--bg);cursor:pointer}',
    'button.secondary{background:transparent;color:var(--accent)}',
    'button:focus-visible,input:focus-visible{outline:3px solid var(--fg);outline-offset:2px}',
    '.error{color:var(--bad);font-weight:600}.note{color:var(--muted);font-size:.95rem}',
  ].join('\n'),
);

/** The security headers of every page; forms may post here and, after a decision, lead to the client. */
function pageHeaders(redirectUri: string | null): Record<string, string> {
  const formAction = ["'self'"];
  if (redirectUri) {
    const u = new URL(redirectUri);
    formAction.push(u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : u.protocol);
  }
  return basePageHeaders(contentSecurityPolicy({ styles: [STYLE], formAction }));
}

interface View {
  serviceName: string;
  requestToken: string;
  clientName: string | null;
  clientId: string;
  redirectUri: string;
  scopes: readonly string[];
  email: string | null;
}

function clientLabel(v: Pick<View, 'clientName'>): string {
  return v.clientName ? escapeHtml(v.clientName) : 'An unnamed assistant';
}

/** Where the passenger returns to: the host of a web redirect, the app scheme of a native one. */
function returnsTo(redirectUri: string): string {
  const u = new URL(redirectUri);
  return u.protocol === 'http:' || u.protocol === 'https:' ? u.host : `the app (${u.protocol})`;
}

function layout(title: string, body: string[]): string {
  return renderPage({ title, style: STYLE, body });
}

function hidden(v: View): string {
  return `<input type="hidden" name="request" value="${escapeHtml(v.requestToken)}">`;
}

function describeScope(scope: string): string {
  return SCOPE_DESCRIPTIONS[scope as keyof typeof SCOPE_DESCRIPTIONS] ?? scope;
}

function header(v: View): string[] {
  return [
    `<h1>${clientLabel(v)} wants to use ${escapeHtml(v.serviceName)} for you</h1>`,
    `<p>${clientLabel(v)} <span class="note">(client ${escapeHtml(v.clientId)})</span> asks to:</p>`,
    '<ul>',
    ...v.scopes.map((s) => `<li>${escapeHtml(describeScope(s))}</li>`),
    '</ul>',
  ];
}

function denyForm(v: View): string[] {
  return [
    `<form method="post" action="${AUTHORIZE_DECISION_PATH}">`,
    hidden(v),
    '<button type="submit" name="decision" value="deny" class="secondary">Deny</button>',
    '</form>',
    `<p class="note">Whatever you choose, you go back to ${escapeHtml(returnsTo(v.redirectUri))}.</p>`,
  ];
}

function errorLine(error: string | undefined): string[] {
  return error ? [`<p class="error" role="alert">${escapeHtml(error)}</p>`] : [];
}

function emailStep(v: View, error?: string, email?: string): string {
  return layout(`Sign in | ${v.serviceName}`, [
    ...header(v),
    ...errorLine(error),
    `<form method="post" action="${AUTHORIZE_EMAIL_PATH}">`,
    hidden(v),
    '<label for="email">Your e-mail address</label>',
    `<input id="email" name="email" type="email" autocomplete="email" inputmode="email" required maxlength="254" value="${escapeHtml(email ?? v.email ?? '')}">`,
    `<p class="note">We e-mail you a 6-digit code to check it is you. Bookings made for you use this address for the confirmation and tracking link.</p>`,
    '<button type="submit">Send me a code</button>',
    '</form>',
    ...denyForm(v),
  ]);
}

function codeStep(v: View, error?: string): string {
  return layout(`Enter your code | ${v.serviceName}`, [
    ...header(v),
    `<p>We sent a 6-digit code to <strong>${escapeHtml(v.email ?? '')}</strong>. It is valid for 30 minutes.</p>`,
    ...errorLine(error),
    `<form method="post" action="${AUTHORIZE_CODE_PATH}">`,
    hidden(v),
    '<label for="code">6-digit code</label>',
    '<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" maxlength="9">',
    '<p class="note">Type the code here, in this window. Never tell it to anyone.</p>',
    '<button type="submit">Continue</button>',
    '</form>',
    `<form method="post" action="${AUTHORIZE_EMAIL_PATH}">`,
    hidden(v),
    `<input type="hidden" name="email" value="${escapeHtml(v.email ?? '')}">`,
    '<button type="submit" class="secondary">Send a new code</button>',
    '</form>',
    ...denyForm(v),
  ]);
}

function consentStep(v: View, error?: string): string {
  return layout(`Allow access | ${v.serviceName}`, [
    ...header(v),
    `<p>Signed in as <strong>${escapeHtml(v.email ?? '')}</strong>.</p>`,
    ...errorLine(error),
    `<form method="post" action="${AUTHORIZE_DECISION_PATH}">`,
    hidden(v),
    `<button type="submit" name="decision" value="approve">Allow ${clientLabel(v)}</button>`,
    '<button type="submit" name="decision" value="deny" class="secondary">Deny</button>',
    '</form>',
    `<p class="note">${clientLabel(v)} can then act only as listed above. Bookings are confirmed to you by e-mail, with a link to track or cancel them.</p>`,
    `<p class="note">Whatever you choose, you go back to ${escapeHtml(returnsTo(v.redirectUri))}.</p>`,
  ]);
}

function messagePage(serviceName: string, title: string, message: string): string {
  return layout(`${title} | ${serviceName}`, [`<h1>${escapeHtml(title)}</h1>`, `<p>${escapeHtml(message)}</p>`]);
}

function send(res: Response, status: number, html: string, redirectUri: string | null): void {
  res.status(status).set(pageHeaders(redirectUri)).type('html').send(html);
}

function browserToken(req: Request): string | undefined {
  const v = cookieValue(req, BROWSER_COOKIE);
  return v && BROWSER_TOKEN.test(v) ? v : undefined;
}

/**
 * `GET /authorize`, after the SDK's handler checked client_id, redirect_uri, response_type
 * and PKCE S256: check the scopes and the resource (errors go back to the client as
 * `error=invalid_scope` / `invalid_target`), record the request bound to this browser, and
 * show the first step.
 */
export async function beginAuthorization(
  deps: ApiDeps,
  client: OAuthClientInformationFull,
  params: AuthorizationParams,
  res: Response,
): Promise<void> {
  const req = res.req;
  const base = baseUrlFor(req, deps.config);
  if (params.state !== undefined && unstorableText(params.state) !== null) {
    throw new InvalidRequestError('state must be well-formed Unicode text without NUL characters.');
  }
  const scopes = grantableScopes(params.scopes ?? [], client.scope);
  const resource = resolveResource(params.resource, base, deps.config.publicBaseUrls);
  const browser = browserToken(req) ?? randomBase62(43);
  const { requestToken } = await createAuthorization(deps.db, {
    clientId: client.client_id,
    redirectUri: params.redirectUri,
    scopes,
    state: params.state,
    codeChallenge: params.codeChallenge,
    resource,
    browserToken: browser,
  });
  res.cookie(BROWSER_COOKIE, browser, {
    httpOnly: true,
    sameSite: 'lax',
    secure: base.startsWith('https:'),
    path: AUTHORIZE_PATH,
    maxAge: AUTHORIZATION_TTL_MS,
  });
  const view: View = {
    serviceName: deps.config.serviceName,
    requestToken,
    clientName: client.client_name ?? null,
    clientId: client.client_id,
    redirectUri: params.redirectUri,
    scopes,
    email: null,
  };
  send(res, 200, emailStep(view), params.redirectUri);
}

/**
 * RFC 9700 section 4.11.2: any client may register (RFC 7591) any redirect URI, so an error
 * in an authorization request, sent back to the client by a redirect before the person has
 * seen anything (as the SDK's handler does with a missing PKCE challenge, an unknown scope, a
 * bad `resource`), would take them unseen to whatever site registered it: an open redirector.
 * Such an error is shown as a page instead, with a link back to the client carrying the error
 * (with `iss`, RFC 9207, and the request's `state`), which the person may follow. After the person has answered, the
 * decision's redirect (`redirectWith`) is made as usual.
 */
export function authorizationErrorsShown(deps: ApiDeps): RequestHandler {
  return (req, res, next) => {
    const redirect = res.redirect.bind(res) as (...args: unknown[]) => void;
    res.redirect = ((...args: unknown[]) => {
      const target = args.length > 1 ? args[1] : args[0];
      let url: URL | null;
      try {
        url = new URL(String(target));
      } catch {
        url = null;
      }
      const error = url?.searchParams.get('error');
      if (!url || !error) return redirect(...args);
      url.searchParams.set('iss', baseUrlFor(req, deps.config));
      // RFC 6749 section 4.1.2.1: the request's state goes back with its error, even when the
      // SDK's check of the other parameters failed before it read it.
      const state = (req.method === 'POST' ? (req.body as Record<string, unknown> | undefined) : req.query)?.state;
      if (!url.searchParams.has('state') && typeof state === 'string' && unstorableText(state) === null) {
        url.searchParams.set('state', state);
      }
      const said = url.searchParams.get('error_description');
      // The SDK's schema failures, in words on the page and in the link back alike.
      const description = (said && issuesInWords(said)) ?? said;
      if (description && description !== said) url.searchParams.set('error_description', description);
      const serviceName = deps.config.serviceName;
      send(
        res,
        400,
        layout(`This sign-in request cannot be completed | ${serviceName}`, [
          '<h1>This sign-in request cannot be completed</h1>',
          `<p>The assistant asked in a way ${escapeHtml(serviceName)} does not accept (${escapeHtml(error)}${description ? `: ${escapeHtml(description)}` : ''}).</p>`,
          `<p><a href="${escapeHtml(url.href)}">Return to ${escapeHtml(returnsTo(url.href))}</a> to tell it so.</p>`,
        ]),
        null,
      );
    }) as Response['redirect'];
    // Errors the SDK answers without a redirect, because the client or its redirect URI cannot
    // be trusted (an unknown client_id, a redirect_uri it never registered): RFC 6749 section
    // 4.1.2.1 says to tell the person, not the client, so they get a page, with no link back.
    const json = res.json.bind(res);
    res.json = ((body?: unknown) => {
      const error = (body as { error?: unknown } | undefined)?.error;
      if (res.statusCode < 400 || typeof error !== 'string') return json(body);
      const said = (body as { error_description?: unknown }).error_description;
      const description = typeof said === 'string' ? (issuesInWords(said) ?? said) : '';
      const serviceName = deps.config.serviceName;
      send(
        res,
        res.statusCode,
        layout(`This sign-in request cannot be completed | ${serviceName}`, [
          '<h1>This sign-in request cannot be completed</h1>',
          `<p>The assistant asked in a way ${escapeHtml(serviceName)} does not accept (${escapeHtml(error)}${description ? `: ${escapeHtml(description)}` : ''}).</p>`,
          '<p>Close this page and connect the assistant again. If this keeps happening, the assistant must register with us again.</p>',
        ]),
        null,
      );
      return res;
    }) as Response['json'];
    next();
  };
}

/**
 * A limit in front of the authorization page (`GET /authorize`), answered as a page: a person
 * in a browser reads "Please wait" and how long, as the page's own forms answer it.
 */
export function pageLimited(deps: ApiDeps, limit: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return checkedFirst(limit, (res, err) =>
    send(res, err.status, messagePage(deps.config.serviceName, 'Please wait', err.message), null),
  );
}

type Step = (req: Request, res: Response, pending: PendingAuthorization, view: View) => Promise<void>;

/**
 * A form post of the page: the authorization row its request token names, from the browser
 * that opened it, undecided and unexpired; anything else is a page saying to start again.
 * A refusal (AppError, e.g. 429) is a page too.
 */
export function formHandler(deps: ApiDeps, limit: (req: Request, res: Response) => Promise<void>, step: Step) {
  const serviceName = deps.config.serviceName;
  return async (req: Request, res: Response): Promise<void> => {
    try {
      await limit(req, res);
      const body = (req.body ?? {}) as Record<string, unknown>;
      const requestToken = typeof body.request === 'string' ? body.request : '';
      const pending = /^[0-9A-Za-z]{43}$/.test(requestToken)
        ? await findAuthorization(deps.db, requestToken, browserToken(req))
        : null;
      if (!pending) {
        send(
          res,
          400,
          messagePage(
            serviceName,
            'This sign-in page is no longer valid',
            'Start again from your assistant. (The page must be used in the browser that opened it, and cookies must be allowed.)',
          ),
          null,
        );
        return;
      }
      if (pending.decision !== null) {
        send(
          res,
          409,
          messagePage(serviceName, 'Already answered', 'You already answered this request. Return to your assistant.'),
          null,
        );
        return;
      }
      if (pending.expired) {
        send(
          res,
          400,
          messagePage(
            serviceName,
            'This sign-in has expired',
            `Requests expire after ${AUTHORIZATION_TTL_MS / 60_000} minutes: start again from your assistant.`,
          ),
          null,
        );
        return;
      }
      const view: View = {
        serviceName,
        requestToken,
        clientName: pending.clientName,
        clientId: pending.clientId,
        redirectUri: pending.redirectUri,
        scopes: pending.scopes,
        email: pending.email,
      };
      await step(req, res, pending, view);
    } catch (err) {
      if (!(err instanceof AppError) || res.headersSent) throw err;
      for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
      send(res, err.status, messagePage(serviceName, 'Please wait', err.message), null);
    }
  };
}

/** A wait in words: "45 minutes", "3 hours". */
function waitText(seconds: number): string {
  const minutes = Math.max(1, Math.ceil(seconds / 60));
  if (minutes < 90) return `${minutes} ${minutes === 1 ? 'minute' : 'minutes'}`;
  const hours = Math.ceil(minutes / 60);
  return `${hours} hours`;
}

/** Step 1: check the address (as bookings do) and e-mail it a code. */
export function emailSubmitted(deps: ApiDeps): Step {
  return async (req, res, pending, view) => {
    const raw = typeof req.body?.email === 'string' ? req.body.email : '';
    const check = await checkEmail(raw, configuredCheck(deps.config.bookings));
    if (!check.accepted) {
      send(res, 400, emailStep(view, EMAIL_PROBLEM_MESSAGES[check.problem], raw), pending.redirectUri);
      return;
    }
    const email = check.email;
    const recent = await countVerificationsSince(deps.db, email, new Date(Date.now() - 3600_000));
    if (recent.count >= EMAILS_PER_ADDRESS_PER_HOUR) {
      const wait = waitText(((recent.oldest?.getTime() ?? Date.now()) + 3600_000 - Date.now()) / 1000);
      const sent = `We have sent ${EMAILS_PER_ADDRESS_PER_HOUR} codes to this address in the last hour`;
      // This page's own code can still be entered here; another page's only on that page.
      if (pending.email === email) {
        send(res, 429, codeStep(view, `${sent}: enter the latest one, or try again in ${wait}.`), pending.redirectUri);
      } else {
        const error = `${sent}: enter a code on the page you asked for it from, or try again here in ${wait}.`;
        send(res, 429, emailStep(view, error, raw), pending.redirectUri);
      }
      return;
    }
    await deps.db.transaction(async (trx) => {
      // The code only: no link (see the top of this file). The row's link token is never sent.
      const started = await startVerification(trx, { email, purpose: 'oauth', key: deps.config.dataEncryptionKey });
      await sendSignInCodeEmail(trx, {
        email,
        code: started.code,
        clientName: pending.clientName,
        books: pending.scopes.includes('bookings:write'),
        asks: pending.scopes.map(describeScope),
        serviceName: deps.config.serviceName,
      });
      await setAuthorizationEmail(trx, pending.id, email, started.verificationId);
    });
    req.log.info({ authorization: pending.id, client: pending.clientId }, 'oauth sign-in code sent');
    send(res, 200, codeStep({ ...view, email }), pending.redirectUri);
  };
}

/**
 * Step 2: the code, typed into this page, proves the address. Nothing else does: not the
 * address having been verified elsewhere, nor any link (the sign-in e-mail has none).
 */
export function codeSubmitted(deps: ApiDeps): Step {
  return async (req, res, pending, view) => {
    if (!pending.email || !pending.verificationId) {
      send(res, 400, emailStep(view, 'Enter your e-mail address first.'), pending.redirectUri);
      return;
    }
    const raw = typeof req.body?.code === 'string' ? req.body.code.trim() : '';
    let verified = false;
    let problem = '';
    let status = 400;
    if (raw === '') {
      problem = 'Enter the 6-digit code from the e-mail.';
    } else {
      const code = normaliseCode(raw);
      if (code === null) {
        problem = 'The code is the 6 digits from the e-mail.';
      } else {
        // This sign-in's own code (the latest it sent), not the address's newest from any sign-in.
        const result = await verifyByCode(deps.db, pending.email, code, {
          key: deps.config.dataEncryptionKey,
          purpose: 'oauth',
          verificationId: pending.verificationId,
        });
        verified = result.verified;
        if (!result.verified) {
          if (result.reason === 'too_many_today') status = 429;
          problem =
            result.reason === 'wrong_code' && result.attemptsLeft > 0
              ? `That code is not correct: ${result.attemptsLeft} ${result.attemptsLeft === 1 ? 'attempt' : 'attempts'} left.`
              : result.reason === 'too_many_today'
                ? `Too many wrong codes have been entered for this address today: no code is checked for it now. Try again in ${waitText(result.retryAfterSeconds ?? 3600)}.`
                : result.reason === 'expired'
                  ? 'That code has expired: send a new code.'
                  : result.reason === 'too_many_attempts' || result.reason === 'wrong_code'
                    ? `The code was entered wrongly ${MAX_CODE_ATTEMPTS} times: send a new code.`
                    : 'No code was sent to this address: send a new code.';
        }
      }
    }
    if (!verified) {
      send(res, status, codeStep(view, problem), pending.redirectUri);
      return;
    }
    const marked = await markAuthorizationEmailVerified(deps.db, pending.id, {
      email: pending.email,
      verificationId: pending.verificationId,
    });
    if (!marked) {
      // The address changed while this code was checked (another post on the same request).
      send(
        res,
        400,
        emailStep(view, 'Your e-mail address changed: confirm it with its own code.'),
        pending.redirectUri,
      );
      return;
    }
    send(res, 200, consentStep(view), pending.redirectUri);
  };
}

function redirectWith(res: Response, redirectUri: string, params: Record<string, string | null>): void {
  const target = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== null) target.searchParams.set(k, v);
  res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' }).redirect(303, target.href);
}

/** Step 3: allow (code to the client) or deny (`error=access_denied`); either is final. */
export function decisionSubmitted(deps: ApiDeps): Step {
  return async (req, res, pending, view) => {
    const issuer = baseUrlFor(req, deps.config);
    const decision = req.body?.decision;
    if (decision === 'deny') {
      if (await denyAuthorization(deps.db, pending.id)) {
        req.log.info({ authorization: pending.id, client: pending.clientId }, 'oauth authorization denied');
        redirectWith(res, pending.redirectUri, {
          error: 'access_denied',
          error_description: 'The passenger did not allow access.',
          state: pending.state,
          iss: issuer,
        });
        return;
      }
    } else if (decision === 'approve') {
      if (!pending.emailVerified) {
        send(res, 400, emailStep(view, 'Confirm your e-mail address before allowing access.'), pending.redirectUri);
        return;
      }
      const code = await approveAuthorization(deps.db, pending.id);
      if (code) {
        req.log.info({ authorization: pending.id, client: pending.clientId }, 'oauth authorization approved');
        redirectWith(res, pending.redirectUri, { code, state: pending.state, iss: issuer });
        return;
      }
    } else {
      send(res, 400, consentStep(view, 'Choose Allow or Deny.'), pending.redirectUri);
      return;
    }
    send(
      res,
      409,
      messagePage(deps.config.serviceName, 'Already answered', 'This request was already answered or has expired.'),
      null,
    );
  };
}
