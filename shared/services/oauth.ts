import { timingSafeEqual } from 'node:crypto';
import {
  CustomOAuthError,
  InvalidClientMetadataError,
  InvalidGrantError,
  InvalidRequestError,
  InvalidScopeError,
  InvalidTargetError,
  type OAuthError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthClientInformationFull, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { randomBase62, sha256 } from '../crypto.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { screenFields } from '../domain/content-screen.ts';
import { uuidv7 } from '../ids.ts';
import { unstorableText } from '../schemas/text.ts';

/**
 * OAuth 2.1 authorization server state for the MCP tool server, in Postgres: registered
 * clients (RFC 7591), authorization requests with their single-use codes (PKCE S256), and
 * access and refresh tokens bound to a client, the passenger's verified e-mail, scopes and a
 * resource (RFC 8707). Every secret (client secret, page request token, browser cookie, code,
 * token) is random, shown once, and stored as its SHA-256 only.
 *
 * Errors are the SDK's OAuth error classes, which its token and revocation handlers turn into
 * RFC 6749 error responses.
 */

/** What a token may do; the tools check them (`forbidden` without). */
export const MCP_SCOPES = ['fares:estimate', 'bookings:write'] as const;
export type McpScope = (typeof MCP_SCOPES)[number];

/** How the authorization page and the metadata describe each scope. */
export const SCOPE_DESCRIPTIONS: Record<McpScope, string> = {
  'fares:estimate': 'Price journeys and read how the service works (estimate_fare, get_service_info)',
  'bookings:write': 'Book taxis in your name, with your e-mail address for the confirmation (start_booking)',
};

/** An authorization request must be answered within this (the e-mailed code lives as long). */
export const AUTHORIZATION_TTL_MS = 30 * 60_000;
/** An authorization code must be exchanged within this. */
export const CODE_TTL_MS = 5 * 60_000;

export interface TokenLifetimes {
  accessTokenTtlSeconds: number;
  refreshTokenTtlDays: number;
}

const ACCESS_PREFIX = 'mcp_at_';
const REFRESH_PREFIX = 'mcp_rt_';
const CODE_PREFIX = 'mcp_ac_';
const GRANT_TYPES = ['authorization_code', 'refresh_token'];
const AUTH_METHODS = ['none', 'client_secret_post', 'client_secret_basic'];
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Schemes a redirect may never use (RFC 8252 private-use schemes are fine otherwise). */
const FORBIDDEN_SCHEMES = new Set([
  'javascript:',
  'data:',
  'vbscript:',
  'file:',
  'blob:',
  'about:',
  'ftp:',
  'ws:',
  'wss:',
  // schemes that belong to other programs than the client: mail, calls, messages, the browser's own
  'mailto:',
  'tel:',
  'sms:',
  'callto:',
  'urn:',
  'view-source:',
  'filesystem:',
  'jar:',
]);

const newSecret = (prefix = ''): string => `${prefix}${randomBase62(43)}`;

function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A resource URI as compared: without fragment and one trailing slash (as the SDK's bearer check does). */
export function normaliseResource(value: string | URL): string {
  const text = String(value);
  const hash = text.indexOf('#');
  return (hash === -1 ? text : text.slice(0, hash)).replace(/\/$/, '');
}

/** Requested scopes checked against those supported (and those the client registered, when it did). */
export function grantableScopes(requested: readonly string[], registered: string | undefined): McpScope[] {
  const wanted = requested.filter((s) => s !== '');
  const allowed = registered ? registered.split(' ').filter((s) => s !== '') : [...MCP_SCOPES];
  const unknown = wanted.filter((s) => !(MCP_SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) {
    throw new InvalidScopeError(`Unknown scope ${unknown.join(', ')}; this server offers ${MCP_SCOPES.join(' and ')}.`);
  }
  const notRegistered = wanted.filter((s) => !allowed.includes(s));
  if (notRegistered.length > 0) {
    throw new InvalidScopeError(`The client did not register scope ${notRegistered.join(', ')}.`);
  }
  const granted = (wanted.length > 0 ? wanted : allowed).filter((s): s is McpScope =>
    (MCP_SCOPES as readonly string[]).includes(s),
  );
  if (granted.length === 0) throw new InvalidScopeError('No scope this server offers was requested.');
  return [...new Set(granted)];
}

// ---------------------------------------------------------------------------------------------
// Clients (RFC 7591)
// ---------------------------------------------------------------------------------------------

interface ClientRow {
  client_id: string;
  client_secret_hash: Buffer | null;
  client_secret_expires_at: Date | null;
  client_name: string | null;
  metadata: Record<string, unknown>;
}

function checkRedirectUri(raw: string): void {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new CustomOAuthError('invalid_redirect_uri', `The redirect URI ${raw} is not a URL.`);
  }
  const ok =
    u.hash === '' &&
    // no user name or password in it (a link that carries credentials, or hides its host behind them)
    u.username === '' &&
    u.password === '' &&
    // http(s) written out in full: "https:evil.example" is read by browsers as https://evil.example
    (!/^https?:$/.test(u.protocol) || /^https?:\/\//i.test(raw)) &&
    !FORBIDDEN_SCHEMES.has(u.protocol) &&
    (u.protocol === 'https:' ||
      (u.protocol === 'http:' ? LOOPBACK.has(u.hostname) : /^[a-z][a-z0-9+.-]*:$/.test(u.protocol)));
  if (!ok) {
    throw new CustomOAuthError(
      'invalid_redirect_uri',
      `The redirect URI ${raw} is not allowed: use https://, http:// on a loopback address (localhost, 127.0.0.1, [::1]) or an app's private-use scheme, without a fragment or credentials.`,
    );
  }
}

/**
 * The metadata a client registers, checked and completed (OAuth 2.1 and this server's
 * capabilities): redirect URIs https, loopback http or a private-use scheme; the authorization
 * code and refresh token grants only; response type code; a known authentication method;
 * scopes this server offers; and a client name that passes the content screen (it is shown to
 * passengers on the authorization page and recorded on their bookings as the agent).
 */
export function completeClientMetadata(info: OAuthClientInformationFull): OAuthClientInformationFull {
  const unstorable = unstorableText(info);
  if (unstorable !== null) {
    throw new InvalidClientMetadataError(
      `${unstorable} contains a NUL character or an unpaired surrogate: send well-formed Unicode text.`,
    );
  }
  if (info.redirect_uris.length === 0) {
    throw new CustomOAuthError('invalid_redirect_uri', 'Register at least one redirect URI.');
  }
  for (const uri of info.redirect_uris) checkRedirectUri(uri);
  const grantTypes = info.grant_types ?? ['authorization_code', 'refresh_token'];
  const badGrant = grantTypes.filter((g) => !GRANT_TYPES.includes(g));
  if (badGrant.length > 0 || !grantTypes.includes('authorization_code')) {
    throw new InvalidClientMetadataError(
      `grant_types must be authorization_code, optionally with refresh_token${badGrant.length ? `; not ${badGrant.join(', ')}` : ''}.`,
    );
  }
  const responseTypes = info.response_types ?? ['code'];
  if (responseTypes.some((r) => r !== 'code')) {
    throw new InvalidClientMetadataError(
      'response_types must be ["code"]: only the authorization code flow is offered.',
    );
  }
  const method = info.token_endpoint_auth_method ?? (info.client_secret ? 'client_secret_basic' : 'none');
  if (!AUTH_METHODS.includes(method)) {
    throw new InvalidClientMetadataError(`token_endpoint_auth_method must be one of ${AUTH_METHODS.join(', ')}.`);
  }
  if (info.scope !== undefined) {
    try {
      grantableScopes(info.scope.split(' '), undefined);
    } catch (err) {
      // RFC 7591 section 3.2.2: a registration's bad metadata value is invalid_client_metadata.
      throw new InvalidClientMetadataError(err instanceof Error ? err.message : 'scope names a scope not offered.');
    }
  }
  if (info.client_name !== undefined) {
    const screened = screenFields([{ pointer: '/client_name', kind: 'agent', value: info.client_name }]);
    if (!screened.ok) {
      throw new InvalidClientMetadataError(`client_name ${screened.details.map((d) => d.problem).join('; ')}.`);
    }
  }
  return {
    ...info,
    grant_types: grantTypes,
    response_types: responseTypes,
    token_endpoint_auth_method: method,
  };
}

/** Store a registered client: its secret (when confidential) as a hash only. */
export async function storeClient(db: Queryable, info: OAuthClientInformationFull): Promise<void> {
  const { client_secret: secret, ...metadata } = info;
  await db('oauth_clients').insert({
    client_id: info.client_id,
    client_secret_hash: secret ? sha256(secret) : null,
    client_secret_expires_at: info.client_secret_expires_at ? new Date(info.client_secret_expires_at * 1000) : null,
    client_name: info.client_name ?? null,
    metadata,
  });
}

/**
 * A registered client as the SDK handlers read it, never with its secret: the secret is only
 * stored hashed, and `authenticateClient` checks it before the SDK's handlers run.
 */
export async function findClient(db: Queryable, clientId: string): Promise<OAuthClientInformationFull | undefined> {
  // No client has an id no column can hold (a NUL, say): unknown, not a database error.
  if (unstorableText(clientId) !== null) return undefined;
  const row = await db<ClientRow>('oauth_clients').where({ client_id: clientId }).first();
  if (!row) return undefined;
  return { ...(row.metadata as OAuthClientInformationFull), client_id: row.client_id };
}

export type ClientAuthentication = 'unknown' | 'public' | 'ok' | 'missing_secret' | 'wrong_secret' | 'expired_secret';

/** Check a client's secret against its hash (constant time); public clients have none. */
export async function authenticateClient(
  db: Queryable,
  clientId: string,
  secret: string | undefined,
  now = new Date(),
): Promise<ClientAuthentication> {
  if (unstorableText(clientId) !== null) return 'unknown';
  const row = await db<ClientRow>('oauth_clients').where({ client_id: clientId }).first();
  if (!row) return 'unknown';
  if (!row.client_secret_hash) return 'public';
  if (!secret) return 'missing_secret';
  if (!sameHash(row.client_secret_hash, sha256(secret))) return 'wrong_secret';
  if (row.client_secret_expires_at && row.client_secret_expires_at.getTime() <= now.getTime()) return 'expired_secret';
  return 'ok';
}

// ---------------------------------------------------------------------------------------------
// Authorization requests and codes
// ---------------------------------------------------------------------------------------------

interface AuthorizationRow {
  id: string;
  client_id: string;
  request_hash: Buffer;
  browser_hash: Buffer;
  redirect_uri: string;
  scopes: string[];
  state: string | null;
  code_challenge: string;
  resource: string;
  email: string | null;
  verification_id: string | null;
  email_verified_at: Date | null;
  decision: 'approved' | 'denied' | null;
  decided_at: Date | null;
  code_hash: Buffer | null;
  code_expires_at: Date | null;
  code_used_at: Date | null;
  expires_at: Date;
}

/** An authorization request as the page works with it. */
export interface PendingAuthorization {
  id: string;
  clientId: string;
  clientName: string | null;
  redirectUri: string;
  scopes: McpScope[];
  state: string | null;
  resource: string;
  email: string | null;
  verificationId: string | null;
  emailVerified: boolean;
  decision: 'approved' | 'denied' | null;
  expired: boolean;
}

export interface NewAuthorization {
  clientId: string;
  redirectUri: string;
  scopes: McpScope[];
  state: string | undefined;
  codeChallenge: string;
  resource: string;
  /** The browser-binding cookie's value (the row keeps its hash). */
  browserToken: string;
}

/** Record an authorization request; returns the request token the page's forms carry (stored hashed). */
export async function createAuthorization(
  db: Queryable,
  input: NewAuthorization,
  now = new Date(),
): Promise<{ id: string; requestToken: string }> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(input.codeChallenge)) {
    throw new InvalidRequestError('code_challenge must be a base64url SHA-256 (43 characters): PKCE S256.');
  }
  if (input.state !== undefined && input.state.length > 1024) {
    throw new InvalidRequestError('state must be at most 1024 characters.');
  }
  const id = uuidv7();
  const requestToken = newSecret();
  await db('oauth_authorizations').insert({
    id,
    client_id: input.clientId,
    request_hash: sha256(requestToken),
    browser_hash: sha256(input.browserToken),
    redirect_uri: input.redirectUri,
    scopes: input.scopes,
    state: input.state ?? null,
    code_challenge: input.codeChallenge,
    resource: input.resource,
    expires_at: new Date(now.getTime() + AUTHORIZATION_TTL_MS),
    created_at: now,
  });
  return { id, requestToken };
}

/**
 * The authorization request a page form names, when the same browser that started it submits
 * it (its cookie's hash matches): the request token alone, even if leaked, does not work from
 * another browser, and a cross-site form post carries no cookie (SameSite=Lax).
 */
export async function findAuthorization(
  db: Queryable,
  requestToken: string,
  browserToken: string | undefined,
  now = new Date(),
): Promise<PendingAuthorization | null> {
  if (!browserToken) return null;
  const row = await db('oauth_authorizations as a')
    .join('oauth_clients as c', 'c.client_id', 'a.client_id')
    .where('a.request_hash', sha256(requestToken))
    .first<(AuthorizationRow & { client_name: string | null }) | undefined>('a.*', 'c.client_name');
  if (!row || !sameHash(row.browser_hash, sha256(browserToken))) return null;
  return {
    id: row.id,
    clientId: row.client_id,
    clientName: row.client_name,
    redirectUri: row.redirect_uri,
    scopes: row.scopes as McpScope[],
    state: row.state,
    resource: row.resource,
    email: row.email,
    verificationId: row.verification_id,
    emailVerified: row.email_verified_at !== null,
    decision: row.decision,
    expired: row.expires_at.getTime() <= now.getTime(),
  };
}

/** The passenger entered an address and a code was sent to it (verification row id). */
export async function setAuthorizationEmail(
  db: Queryable,
  id: string,
  email: string,
  verificationId: string,
): Promise<void> {
  await db('oauth_authorizations')
    .where({ id })
    .whereNull('decision')
    .update({ email, verification_id: verificationId, email_verified_at: null });
}

/** The passenger proved they read that mailbox. */
/**
 * Mark the authorization's address verified, only if it is still the address (and the
 * verification) whose code was checked: a new address entered meanwhile on the same request
 * (another post racing the code) is not marked by the old address's code. False when it was not.
 */
export async function markAuthorizationEmailVerified(
  db: Queryable,
  id: string,
  checked: { email: string; verificationId: string },
  now = new Date(),
): Promise<boolean> {
  const updated = await db('oauth_authorizations')
    .where({ id, email: checked.email, verification_id: checked.verificationId })
    .whereNull('decision')
    .update({ email_verified_at: now });
  return updated > 0;
}

/**
 * Approve: issues the authorization code (single use, CODE_TTL_MS). Only an undecided,
 * unexpired request with a verified e-mail is approved; a second submit gets null.
 */
export async function approveAuthorization(db: Queryable, id: string, now = new Date()): Promise<string | null> {
  const code = newSecret(CODE_PREFIX);
  const updated = await db('oauth_authorizations')
    .where({ id })
    .whereNull('decision')
    .whereNotNull('email_verified_at')
    .where('expires_at', '>', now)
    .update({
      decision: 'approved',
      decided_at: now,
      code_hash: sha256(code),
      code_expires_at: new Date(now.getTime() + CODE_TTL_MS),
    });
  return updated === 1 ? code : null;
}

/** Deny: true when this submit decided it. */
export async function denyAuthorization(db: Queryable, id: string, now = new Date()): Promise<boolean> {
  const updated = await db('oauth_authorizations')
    .where({ id })
    .whereNull('decision')
    .update({ decision: 'denied', decided_at: now });
  return updated === 1;
}

/** The PKCE challenge of a code issued to this client (the SDK's token handler checks the verifier). */
export async function codeChallengeFor(db: Queryable, clientId: string, code: string): Promise<string | null> {
  const row = await db<AuthorizationRow>('oauth_authorizations')
    .where({ code_hash: sha256(code), client_id: clientId, decision: 'approved' })
    .first('code_challenge');
  return row?.code_challenge ?? null;
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

interface TokenRow {
  id: string;
  authorization_id: string;
  kind: 'access' | 'refresh';
  token_hash: Buffer;
  client_id: string;
  email: string;
  scopes: string[];
  resource: string;
  expires_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
}

interface Grant {
  authorizationId: string;
  clientId: string;
  email: string;
  resource: string;
}

async function issueTokens(
  db: Queryable,
  ttl: TokenLifetimes,
  grant: Grant,
  accessScopes: readonly string[],
  refreshScopes: readonly string[],
  now: Date,
): Promise<OAuthTokens> {
  const access = newSecret(ACCESS_PREFIX);
  const refresh = newSecret(REFRESH_PREFIX);
  const common = {
    authorization_id: grant.authorizationId,
    client_id: grant.clientId,
    email: grant.email,
    resource: grant.resource,
    created_at: now,
  };
  await db('oauth_tokens').insert([
    {
      ...common,
      id: uuidv7(),
      kind: 'access',
      token_hash: sha256(access),
      scopes: [...accessScopes],
      expires_at: new Date(now.getTime() + ttl.accessTokenTtlSeconds * 1000),
    },
    {
      ...common,
      id: uuidv7(),
      kind: 'refresh',
      token_hash: sha256(refresh),
      scopes: [...refreshScopes],
      expires_at: new Date(now.getTime() + ttl.refreshTokenTtlDays * 86_400_000),
    },
  ]);
  return {
    access_token: access,
    token_type: 'Bearer',
    expires_in: ttl.accessTokenTtlSeconds,
    refresh_token: refresh,
    scope: accessScopes.join(' '),
  };
}

/** Revoke every token issued from one authorization (the token family). */
async function revokeFamily(db: Queryable, authorizationId: string, now: Date): Promise<number> {
  return db('oauth_tokens').where({ authorization_id: authorizationId }).whereNull('revoked_at').update({
    revoked_at: now,
  });
}

type Outcome = { tokens: OAuthTokens } | { error: OAuthError };

/**
 * Exchange an authorization code (its PKCE verifier already checked) for an access and a
 * refresh token. A code works once, for the client it was issued to, within CODE_TTL_MS;
 * presenting a used code again revokes every token issued from it (OAuth 2.1 section 4.1.3).
 * `redirect_uri` and `resource`, when sent, must be the authorization request's.
 */
export async function exchangeCode(
  db: Db,
  ttl: TokenLifetimes,
  input: { clientId: string; code: string; redirectUri?: string; resource?: string },
  now = new Date(),
): Promise<OAuthTokens> {
  const outcome = await db.transaction(async (trx): Promise<Outcome> => {
    const row = await trx<AuthorizationRow>('oauth_authorizations')
      .where({ code_hash: sha256(input.code) })
      .forUpdate()
      .first();
    if (!row || row.client_id !== input.clientId || row.decision !== 'approved' || !row.email) {
      return { error: new InvalidGrantError('The authorization code is not valid.') };
    }
    if (row.code_used_at) {
      await revokeFamily(trx, row.id, now);
      return {
        error: new InvalidGrantError('The authorization code was already used; the tokens issued for it are revoked.'),
      };
    }
    if (!row.code_expires_at || row.code_expires_at.getTime() <= now.getTime()) {
      return { error: new InvalidGrantError('The authorization code has expired; authorize again.') };
    }
    if (input.redirectUri !== undefined && input.redirectUri !== row.redirect_uri) {
      return { error: new InvalidGrantError('redirect_uri does not match the authorization request.') };
    }
    if (input.resource !== undefined && normaliseResource(input.resource) !== normaliseResource(row.resource)) {
      return { error: new InvalidTargetError('resource does not match the authorization request.') };
    }
    await trx('oauth_authorizations').where({ id: row.id }).update({ code_used_at: now });
    const grant = { authorizationId: row.id, clientId: row.client_id, email: row.email, resource: row.resource };
    return { tokens: await issueTokens(trx, ttl, grant, row.scopes, row.scopes, now) };
  });
  if ('error' in outcome) throw outcome.error;
  return outcome.tokens;
}

/**
 * Rotate a refresh token: it is exchanged once for a new access and refresh token. Presenting
 * it again (a replay: it was stolen, or a client retried) revokes its whole family, so neither
 * the thief nor the client can continue without authorizing again. Scopes may be narrowed for
 * the new access token; the new refresh token keeps the original scopes (RFC 6749 section 6).
 */
export async function rotateRefreshToken(
  db: Db,
  ttl: TokenLifetimes,
  input: { clientId: string; refreshToken: string; scopes?: string[]; resource?: string },
  now = new Date(),
): Promise<OAuthTokens> {
  const outcome = await db.transaction(async (trx): Promise<Outcome> => {
    const row = await trx<TokenRow>('oauth_tokens')
      .where({ token_hash: sha256(input.refreshToken), kind: 'refresh' })
      .forUpdate()
      .first();
    if (!row || row.client_id !== input.clientId) {
      return { error: new InvalidGrantError('The refresh token is not valid.') };
    }
    if (row.revoked_at) return { error: new InvalidGrantError('The refresh token has been revoked; authorize again.') };
    if (row.rotated_at) {
      await revokeFamily(trx, row.authorization_id, now);
      return {
        error: new InvalidGrantError(
          'The refresh token was already used: every token of this authorization is now revoked; authorize again.',
        ),
      };
    }
    if (row.expires_at.getTime() <= now.getTime()) {
      return { error: new InvalidGrantError('The refresh token has expired; authorize again.') };
    }
    const wanted = input.scopes?.filter((s) => s !== '');
    if (wanted?.some((s) => !row.scopes.includes(s))) {
      return { error: new InvalidScopeError('A refresh can only keep or narrow the scopes granted.') };
    }
    if (input.resource !== undefined && normaliseResource(input.resource) !== normaliseResource(row.resource)) {
      return { error: new InvalidTargetError('resource does not match the one the token was issued for.') };
    }
    await trx('oauth_tokens').where({ id: row.id }).update({ rotated_at: now });
    const grant = {
      authorizationId: row.authorization_id,
      clientId: row.client_id,
      email: row.email,
      resource: row.resource,
    };
    const accessScopes = wanted && wanted.length > 0 ? [...new Set(wanted)] : row.scopes;
    return { tokens: await issueTokens(trx, ttl, grant, accessScopes, row.scopes, now) };
  });
  if ('error' in outcome) throw outcome.error;
  return outcome.tokens;
}

/**
 * Revocation (RFC 7009): a refresh token revokes its whole family (the access tokens issued
 * with it too); an access token only itself. Unknown tokens, and tokens of another client,
 * change nothing and answer the same, so the endpoint tells nobody which tokens exist.
 */
export async function revokeToken(db: Queryable, clientId: string, token: string, now = new Date()): Promise<void> {
  const row = await db<TokenRow>('oauth_tokens')
    .where({ token_hash: sha256(token), client_id: clientId })
    .first();
  if (!row) return;
  if (row.kind === 'refresh') await revokeFamily(db, row.authorization_id, now);
  else await db('oauth_tokens').where({ id: row.id }).whereNull('revoked_at').update({ revoked_at: now });
}

export interface AccessGrant {
  tokenId: string;
  authorizationId: string;
  clientId: string;
  clientName: string | null;
  /** The passenger's e-mail, verified on the authorization page. */
  email: string;
  scopes: McpScope[];
  resource: string;
  expiresAt: Date;
}

/** The grant an access token carries, or null when it is unknown, revoked or expired. */
export async function findAccessToken(db: Queryable, token: string, now = new Date()): Promise<AccessGrant | null> {
  if (!token.startsWith(ACCESS_PREFIX)) return null;
  const row = await db('oauth_tokens as t')
    .join('oauth_clients as c', 'c.client_id', 't.client_id')
    .where({ 't.token_hash': sha256(token), 't.kind': 'access' })
    .first<(TokenRow & { client_name: string | null }) | undefined>('t.*', 'c.client_name');
  if (!row || row.revoked_at || row.expires_at.getTime() <= now.getTime()) return null;
  return {
    tokenId: row.id,
    authorizationId: row.authorization_id,
    clientId: row.client_id,
    clientName: row.client_name,
    email: row.email,
    scopes: row.scopes.filter((s): s is McpScope => (MCP_SCOPES as readonly string[]).includes(s)),
    resource: row.resource,
    expiresAt: row.expires_at,
  };
}

/**
 * The resource (RFC 8707) an authorization is for: the one the client named, which must be the
 * MCP endpoint of a connected domain, else this domain's. Tokens are bound to it, and /mcp
 * refuses a token bound to another.
 */
export function resolveResource(requested: URL | undefined, base: string, bases: readonly string[]): string {
  if (requested === undefined) return `${base}/mcp`;
  // RFC 8707 section 2: a resource "MUST NOT include a fragment component".
  if (String(requested).includes('#')) {
    throw new InvalidTargetError(`The resource must not carry a fragment (RFC 8707): send ${base}/mcp.`);
  }
  const wanted = normaliseResource(requested);
  const known = bases.map((b) => `${b}/mcp`).find((r) => normaliseResource(r) === wanted);
  if (!known) {
    throw new InvalidTargetError(`Unknown resource ${wanted}: this server issues tokens for ${base}/mcp.`);
  }
  return known;
}

/**
 * Housekeeping (the relay's hourly pass): tokens a day past their expiry go (an expired
 * refresh token can no longer be used, so reuse detection does not need it), then requests and
 * authorizations a day past their own expiry that no longer hold any token. Returns the rows removed.
 */
export async function pruneOAuth(db: Db): Promise<{ tokens: number; authorizations: number; clients: number }> {
  const tokens = await db('oauth_tokens').where('expires_at', '<', db.raw("now() - interval '1 day'")).delete();
  const authorizations = await db('oauth_authorizations as a')
    .where('a.expires_at', '<', db.raw("now() - interval '1 day'"))
    .where((q) =>
      q.whereNull('a.code_expires_at').orWhere('a.code_expires_at', '<', db.raw("now() - interval '1 day'")),
    )
    .whereNotExists((q) => q.select(db.raw('1')).from('oauth_tokens as t').whereRaw('t.authorization_id = a.id'))
    .delete();
  // A client registered 30 days ago with nothing to show for it (no authorization left, no
  // token): registration is open to anyone, so clients that were never used do not pile up.
  const clients = await db('oauth_clients as c')
    .where('c.created_at', '<', db.raw("now() - interval '30 days'"))
    .whereNotExists((q) =>
      q.select(db.raw('1')).from('oauth_authorizations as a').whereRaw('a.client_id = c.client_id'),
    )
    .whereNotExists((q) => q.select(db.raw('1')).from('oauth_tokens as t').whereRaw('t.client_id = c.client_id'))
    .delete();
  return { tokens, authorizations, clients };
}
