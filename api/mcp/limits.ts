import type { Request, RequestHandler, Response } from 'express';
import { sha256 } from '../../shared/crypto.ts';
import { AppError } from '../../shared/errors.ts';
import type { Caller } from '../middleware/auth.ts';
import type { RateLimits } from '../middleware/rate-limit.ts';
import type { RouteDef, RoutePolicy } from '../route.ts';

/**
 * The MCP server and its OAuth endpoints are not declared routes, but they are limited by the
 * same Redis limiter (`createRateLimits`): its middleware is built for a route from the route's
 * `rateLimit` policies only, and reads who is calling from `res.locals.caller`.
 */
function limitedRoute(policies: RoutePolicy[]): RouteDef {
  return { rateLimit: policies } as Partial<RouteDef> as RouteDef;
}

/**
 * Run an async check (a rate limit) as middleware; a refusal (an AppError) gets its headers
 * (Retry-After) and is answered by `answer`, in the shape the endpoint's callers read. OPTIONS
 * preflights pass.
 */
export function checkedFirst(
  check: (req: Request, res: Response) => Promise<void>,
  answer: (res: Response, err: AppError) => void,
): RequestHandler {
  return (req, res, next) => {
    if (req.method === 'OPTIONS') return next();
    check(req, res).then(
      () => next(),
      (err: unknown) => {
        if (!(err instanceof AppError)) return next(err);
        for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
        answer(res, err);
      },
    );
  };
}

export function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * Per client IP (the general per-IP limit plus `policy`), for the OAuth endpoints and the
 * authorization page, where nobody is authenticated yet. Throws 429 `rate_limited`.
 */
export function ipLimiter(limits: RateLimits, policy: RoutePolicy): (req: Request, res: Response) => Promise<void> {
  const middleware = limits.middleware(limitedRoute([policy]));
  return async (req, res) => {
    res.locals.caller = { kind: 'anonymous', ip: clientIp(req) } satisfies Caller;
    await middleware(req, res, () => {});
  };
}

/**
 * Whose budget an MCP request spends: the passenger the token was issued for (their verified
 * e-mail, hashed so no address ends up in Redis keys), whichever assistant they use.
 */
export function mcpSubject(email: string): string {
  return `mcp:${sha256(email.toLowerCase()).toString('hex').slice(0, 32)}`;
}

/**
 * Per token subject: the general per-key limit plus `policies`, counted as an API key's
 * requests are (`key:mcp:<hash>`). The limiter's RateLimit headers go on the HTTP response
 * while it is not yet sent. Throws 429 `rate_limited` with Retry-After.
 */
export function subjectLimiter(
  limits: RateLimits,
  policies: RoutePolicy[],
): (req: Request, res: Response, subject: string) => Promise<void> {
  const middleware = limits.middleware(limitedRoute(policies));
  return async (req, res, subject) => {
    const caller = {
      kind: 'api_key',
      ip: clientIp(req),
      key: { id: subject, name: 'MCP token', prefix: 'mcp', mode: 'live', partnerId: null, partnerSuspended: false },
    } satisfies Caller;
    const view = {
      locals: { caller },
      setHeader(name: string, value: string) {
        if (!res.headersSent) res.setHeader(name, value);
        return view;
      },
    };
    await middleware(req, view as unknown as Response, () => {});
  };
}
