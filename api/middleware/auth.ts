import type { NextFunction, Request, Response } from 'express';
import type { Config } from '../../shared/config.ts';
import { AppError } from '../../shared/errors.ts';
import { type ApiKeyIdentity, findApiKey, keyPattern, touchApiKey } from '../../shared/services/api-keys.ts';
import { authenticateDriver, DRIVER_TOKEN_PREFIX, type DriverIdentity } from '../../shared/services/drivers.ts';
import type { ApiDeps } from '../deps.ts';
import type { RouteDef } from '../route.ts';
import type { RateLimits } from './rate-limit.ts';

export type Caller =
  | { kind: 'anonymous'; ip: string }
  | { kind: 'api_key'; ip: string; key: ApiKeyIdentity }
  | { kind: 'driver'; ip: string; driver: DriverIdentity };

/**
 * Whether the caller works in the sandbox: a test key, or a sandbox driver's token (a driver
 * who applied with a test key, or the simulator's). Anonymous callers are live. What a caller
 * makes (quotes, bookings, applications, verification e-mails) takes its mode from here.
 */
export function callerTestMode(caller: Caller): boolean {
  return caller.kind === 'api_key'
    ? caller.key.mode === 'test'
    : caller.kind === 'driver' && caller.driver.testMode === true;
}

/**
 * 401 with the challenge RFC 6750 section 3 asks of a resource taking bearer credentials: the
 * realm, with `error="invalid_token"` when a credential was presented and refused and
 * `error="invalid_request"` when the request's credentials are malformed (an Authorization
 * header that is not "Bearer <key>", different keys in different headers, an empty one), so a
 * client (and a person reading the headers) can tell "send one" from "this one is wrong" from
 * "this is not how to send one". Still 401 `unauthorized` (CONTRACT.md section 1), not 400.
 */
function unauthorized(message: string, presented: boolean | 'malformed'): AppError {
  const error = presented === 'malformed' ? ', error="invalid_request"' : presented ? ', error="invalid_token"' : '';
  return new AppError('unauthorized', message, [], { 'WWW-Authenticate': `Bearer realm="api"${error}` });
}

/**
 * The key a request presents, from any of the three header forms of SPEC.md section 5:
 * `X-Direct-Taxi-Network-AI-Key: <key>`, `Authorization: Bearer <key>`, `x-api-key: <key>`.
 * Returns null when none is present; throws 401 for a malformed Authorization header or for
 * two headers carrying different keys.
 */
export function presentedKey(req: Request, config: Pick<Config, 'apiKeyHeader'>): string | null {
  // Every copy of each header (`headersDistinct`): Node joins a repeated key header into one
  // value ("k, k") and keeps only the first Authorization, so the same key sent twice would be
  // read as an unknown one, and a second, different Authorization would go unseen.
  const copies = (name: string) => req.headersDistinct[name.toLowerCase()] ?? [];
  const found: string[] = [];
  for (const named of copies(config.apiKeyHeader)) found.push(named.trim());
  for (const auth of copies('authorization')) {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(auth);
    if (!m?.[1]) {
      throw unauthorized('The Authorization header must be "Bearer <API key>".', 'malformed');
    }
    found.push(m[1]);
  }
  for (const xApiKey of copies('x-api-key')) found.push(xApiKey.trim());
  if (found.length === 0) return null;
  const distinct = new Set(found);
  if (distinct.size > 1)
    throw unauthorized(
      'The request carries different API keys (in different headers, or one header twice).',
      'malformed',
    );
  const [key] = distinct;
  if (!key) throw unauthorized('The API key header is empty.', 'malformed');
  return key;
}

/**
 * Authenticate the caller for a route. A present but invalid key is 401 even where no key is
 * needed (a caller who thinks they are authenticated must find out). Failed attempts count
 * against the caller's IP, so keys cannot be guessed at speed.
 */
export function authenticate(route: RouteDef, deps: ApiDeps, limits: RateLimits) {
  const pattern = keyPattern(deps.config.serviceCode);
  return async (req: Request, res: Response, next: NextFunction) => {
    const ip = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    res.locals.caller = { kind: 'anonymous', ip } satisfies Caller;
    if (route.auth === 'none') return next();
    const raw = presentedKey(req, deps.config);
    const wantsDriver = route.auth === 'driver' || route.auth === 'driver_or_key';
    if (raw === null) {
      if (route.auth === 'key' || wantsDriver) {
        throw unauthorized(
          route.auth === 'driver'
            ? 'A driver token is required: send "Authorization: Bearer <driver token>" (issued when an operator approves you).'
            : route.auth === 'driver_or_key'
              ? 'A driver token or a partner API key is required: send "Authorization: Bearer <token or key>".'
              : `An API key is required: send it as "${deps.config.apiKeyHeader}: <key>", "Authorization: Bearer <key>" or "x-api-key: <key>".`,
          false,
        );
      }
      return next();
    }
    // Any case of the prefix is a driver token (refused below unless exactly right), so a
    // mangled one is told it is a driver token that is not valid, not an API key.
    if (raw.toLowerCase().startsWith(DRIVER_TOKEN_PREFIX)) {
      const driver = await authenticateDriver(deps.db, raw);
      if (!driver) {
        await limits.countAuthFailure(ip);
        throw unauthorized('The driver token is not valid, or the driver is not approved.', true);
      }
      // Public routes take a driver as they take anyone (a driver app sends its token with
      // every request: the job card's link, the OpenAPI document); key routes, and public routes
      // that are not for drivers (`refusesDriverToken`: partner job intake), refuse it.
      if (route.auth === 'key') {
        throw new AppError('forbidden', 'This endpoint needs an API key: a driver token does not open it.');
      }
      if (route.refusesDriverToken) throw new AppError('forbidden', route.refusesDriverToken);
      res.locals.caller = { kind: 'driver', ip, driver } satisfies Caller;
      return next();
    }
    if (route.auth === 'driver') {
      throw new AppError('forbidden', 'This endpoint is for drivers: send your driver token.');
    }
    const key = pattern.test(raw) ? await findApiKey(deps.db, raw) : null;
    if (!key) {
      await limits.countAuthFailure(ip);
      throw unauthorized('The API key is not valid or has been revoked.', true);
    }
    res.locals.caller = { kind: 'api_key', ip, key } satisfies Caller;
    touchApiKey(deps.db, key.id).catch((err: unknown) => deps.logger.warn({ err }, 'could not record key use'));
    next();
  };
}
