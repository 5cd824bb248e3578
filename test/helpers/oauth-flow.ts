import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { eventually } from './env.ts';
import { type CapturedMail, mailText } from './smtp-capture.ts';

/**
 * Drives the MCP OAuth server as an assistant and a passenger's browser would: dynamic client
 * registration, the authorization page (e-mail, the one-time code read from a real SMTP
 * capture, allow or deny) with PKCE S256, and the token endpoint. Only fetch and real HTTP.
 */

export type Json = Record<string, unknown>;

/** A free loopback port, so a test can configure PUBLIC_BASE_URLS before it listens. */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export async function registerClient(
  url: string,
  metadata: Json = {},
): Promise<{ status: number; json: Json & { client_id: string; client_secret?: string }; headers: Headers }> {
  const res = await fetch(`${url}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Test Assistant',
      redirect_uris: ['http://127.0.0.1:9/callback'],
      token_endpoint_auth_method: 'none',
      ...metadata,
    }),
  });
  return { status: res.status, json: (await res.json()) as Json & { client_id: string }, headers: res.headers };
}

export async function tokenRequest(
  url: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
  path = '/token',
): Promise<{ status: number; json: Json; headers: Headers }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(fields).toString(),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Json) : {}, headers: res.headers };
}

/** A browser: keeps cookies, follows nothing (redirects are read, not followed). */
export class Browser {
  readonly cookies = new Map<string, string>();

  private keep(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = (pair ?? '').indexOf('=');
      if (eq > 0) this.cookies.set((pair as string).slice(0, eq).trim(), (pair as string).slice(eq + 1).trim());
    }
  }

  private cookieHeader(): Record<string, string> {
    if (this.cookies.size === 0) return {};
    return { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
  }

  async get(url: string): Promise<{ status: number; html: string; location: string | null; headers: Headers }> {
    const res = await fetch(url, { redirect: 'manual', headers: this.cookieHeader() });
    this.keep(res);
    return { status: res.status, html: await res.text(), location: res.headers.get('location'), headers: res.headers };
  }

  async post(
    url: string,
    fields: Record<string, string>,
  ): Promise<{ status: number; html: string; location: string | null; headers: Headers }> {
    const res = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...this.cookieHeader() },
      body: new URLSearchParams(fields).toString(),
    });
    this.keep(res);
    return { status: res.status, html: await res.text(), location: res.headers.get('location'), headers: res.headers };
  }
}

/**
 * An authorization request's error as /authorize shows it (a 400 page, never an automatic
 * redirect: `authorizationErrorsShown`): the link back to the client it offers, parsed.
 */
export function errorShown(page: { status: number; html: string; location: string | null }): URL {
  if (page.status !== 400 || page.location !== null) {
    throw new Error(`expected the error shown as a page, got ${page.status} to ${page.location}:\n${page.html}`);
  }
  const m = /<a href="([^"]+)">Return to /.exec(page.html);
  if (!m?.[1]) throw new Error(`no link back to the client in the page:\n${page.html}`);
  const href = m[1]
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
  return new URL(href);
}

/** The page's request token (its forms' hidden field). */
export function requestTokenOf(html: string): string {
  const m = /name="request" value="([0-9A-Za-z]{43})"/.exec(html);
  if (!m?.[1]) throw new Error(`no request token in the page:\n${html}`);
  return m[1];
}

/** The code of the newest verification e-mail to `email` after `before` had arrived. */
export async function codeFromMail(mails: CapturedMail[], email: string, before: number): Promise<string> {
  const mail = await eventually(async () => {
    const to = mails.filter((m) => m.to.includes(email));
    return to.length > before ? to[to.length - 1] : undefined;
  });
  const code = /verification code is: (\d{6})/.exec(mailText(mail))?.[1];
  if (!code) throw new Error(`no code in the e-mail:\n${mailText(mail)}`);
  return code;
}

export interface AuthorizeOptions {
  url: string;
  clientId: string;
  redirectUri?: string;
  challenge: string;
  scope?: string;
  state?: string;
  resource?: string;
  method?: string;
}

export function authorizeUrl(o: AuthorizeOptions): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: o.clientId,
    redirect_uri: o.redirectUri ?? 'http://127.0.0.1:9/callback',
    code_challenge: o.challenge,
    code_challenge_method: o.method ?? 'S256',
    state: o.state ?? 'state-123',
  });
  if (o.scope !== undefined) q.set('scope', o.scope);
  if (o.resource !== undefined) q.set('resource', o.resource);
  return `${o.url}/authorize?${q}`;
}

/**
 * The passenger's part: open the authorization URL, enter the e-mail, read the code from the
 * captured e-mail, enter it, and allow (or deny). Answers the redirect back to the client.
 */
export async function passThroughPage(opts: {
  url: string;
  authorizationUrl: string;
  email: string;
  mails: CapturedMail[];
  decision?: 'approve' | 'deny';
  browser?: Browser;
}): Promise<{ location: URL; pages: string[] }> {
  const browser = opts.browser ?? new Browser();
  const first = await browser.get(opts.authorizationUrl);
  if (first.status !== 200) throw new Error(`authorize answered ${first.status} ${first.location ?? first.html}`);
  const request = requestTokenOf(first.html);
  const before = opts.mails.filter((m) => m.to.includes(opts.email)).length;
  const codePage = await browser.post(`${opts.url}/authorize/email`, { request, email: opts.email });
  if (codePage.status !== 200) throw new Error(`e-mail step answered ${codePage.status}:\n${codePage.html}`);
  const code = await codeFromMail(opts.mails, opts.email, before);
  const consent = await browser.post(`${opts.url}/authorize/code`, { request, code });
  if (consent.status !== 200) throw new Error(`code step answered ${consent.status}:\n${consent.html}`);
  const done = await browser.post(`${opts.url}/authorize/decision`, { request, decision: opts.decision ?? 'approve' });
  if (done.status !== 303 || !done.location) throw new Error(`decision answered ${done.status}:\n${done.html}`);
  return { location: new URL(done.location), pages: [first.html, codePage.html, consent.html] };
}

/** Registration, the page and the code exchange: an access and refresh token for `email`. */
export async function obtainTokens(opts: {
  url: string;
  email: string;
  mails: CapturedMail[];
  scope?: string;
  clientName?: string;
  resource?: string;
}): Promise<{ clientId: string; accessToken: string; refreshToken: string; json: Json }> {
  const reg = await registerClient(opts.url, opts.clientName ? { client_name: opts.clientName } : {});
  if (reg.status !== 201) throw new Error(`registration answered ${reg.status} ${JSON.stringify(reg.json)}`);
  const { verifier, challenge } = pkce();
  const { location } = await passThroughPage({
    url: opts.url,
    authorizationUrl: authorizeUrl({
      url: opts.url,
      clientId: reg.json.client_id,
      challenge,
      ...(opts.scope !== undefined ? { scope: opts.scope } : {}),
      ...(opts.resource !== undefined ? { resource: opts.resource } : {}),
    }),
    email: opts.email,
    mails: opts.mails,
  });
  const code = location.searchParams.get('code');
  if (!code) throw new Error(`no code in ${location}`);
  const tokens = await tokenRequest(opts.url, {
    grant_type: 'authorization_code',
    code,
    code_verifier: verifier,
    client_id: reg.json.client_id,
    redirect_uri: 'http://127.0.0.1:9/callback',
  });
  if (tokens.status !== 200) throw new Error(`token answered ${tokens.status} ${JSON.stringify(tokens.json)}`);
  return {
    clientId: reg.json.client_id,
    accessToken: tokens.json.access_token as string,
    refreshToken: tokens.json.refresh_token as string,
    json: tokens.json,
  };
}
