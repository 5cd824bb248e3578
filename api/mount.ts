import type { Express, NextFunction, Request, Response } from 'express';
import { AppError, contentRejected, detailsText, errorBody } from '../shared/errors.ts';
import { assertStorableText } from '../shared/schemas/text.ts';
import { compileSchema, type Findings, type Validator } from '../shared/schemas/validate.ts';
import { beginIdempotent, replayable } from '../shared/services/idempotency.ts';
import type { ApiDeps } from './deps.ts';
import { authenticate, type Caller } from './middleware/auth.ts';
import { requestIdOf } from './middleware/errors.ts';
import { singleHeader } from './middleware/headers.ts';
import type { RateLimits } from './middleware/rate-limit.ts';
import type { RouteDef } from './route.ts';

function validator(schema: RouteDef['body'], coerce: boolean): Validator | null {
  return schema ? compileSchema(schema, { coerce }) : null;
}

function check(
  v: Validator | null,
  data: unknown,
  where: string,
  req: Request,
  alsoRequired?: RouteDef['alsoRequired'],
): void {
  if (!v) return;
  const found = v(data);
  const missing =
    alsoRequired && data !== null && typeof data === 'object' && !Array.isArray(data)
      ? alsoRequired(data as Record<string, unknown>)
          .map((name) => `/${name}`)
          .filter((field) => !found.some((d) => d.field === field))
          .map((field) => ({ field, problem: 'is required' }))
      : [];
  // With a field missing too, over-long text is one fault among others: invalid_input listing all.
  const details: Findings = missing.length > 0 ? [...found, ...missing] : found;
  if (details.length > 0) {
    if (details.contentRejected) {
      // Over-long free text is refused as the content screen refuses it, and logged as it logs.
      req.log?.warn({ reasons: details.map((d) => `${d.field}: too_long`) }, 'content rejected');
      throw contentRejected(details);
    }
    throw new AppError('invalid_input', `The ${where} is not valid: ${detailsText(details)}.`, details);
  }
}

/**
 * Where an Idempotency-Key is remembered: the operation, not the spelling of its URL. Express
 * matches paths without regard to case or a trailing slash, so a retry sent to
 * `/api/public/bookings/instant/` is the same operation as one sent to `.../instant`. A path
 * with parameters is the request's own without a trailing slash: its parameters name what is
 * acted on (their case is kept, since a token's matters).
 */
export function idempotencyPathOf(
  route: Pick<RouteDef, 'path'> & { idempotencyPath?: string | undefined },
  requestPath: string,
): string {
  if (route.idempotencyPath) return route.idempotencyPath;
  if (!route.path.includes(':')) return route.path;
  return requestPath.length > 1 ? requestPath.replace(/\/+$/, '') : requestPath;
}

/** Whose requests these are, for idempotency keys and repeat detection: the API key, else the IP. */
export function callerScope(caller: Caller): string {
  return caller.kind === 'api_key'
    ? `key:${caller.key.id}`
    : caller.kind === 'driver'
      ? `driver:${caller.driver.id}`
      : `ip:${caller.ip}`;
}

/**
 * Mount declared routes: authenticate → rate limit → the route's own `verify` (a signature
 * over the raw body, before anything is validated) → validate → handler. Unknown methods on
 * a known path answer 405 with `Allow`.
 */
export function mountRoutes(app: Express, routes: readonly RouteDef[], deps: ApiDeps, limits: RateLimits): void {
  const methodsByPath = new Map<string, string[]>();
  for (const route of routes) {
    const body = validator(route.body, false);
    const query = validator(route.query, true);
    const params = validator(route.params, true);
    const chain: Array<(req: Request, res: Response, next: NextFunction) => unknown> = [
      authenticate(route, deps, limits),
    ];
    if (route.rateLimit !== false) chain.push(limits.middleware(route));
    chain.push(async (req, res) => {
      const q = { ...(req.query as Record<string, unknown>) };
      const p = { ...req.params } as Record<string, unknown>;
      const b: unknown = req.body === undefined && route.body ? {} : req.body;
      const caller = res.locals.caller as Caller;
      const verified = route.verify ? await route.verify({ req, deps, caller }) : undefined;
      assertStorableText(p, 'path');
      assertStorableText(q, 'query string');
      // Job intake checks each job itself, so one bad job is rejected alone (not the batch).
      if (!route.textCheckedPerJob) assertStorableText(b, 'request body');
      check(params, p, 'path', req);
      check(query, q, 'query string', req);
      check(body, b, 'request body', req, route.alsoRequired);
      const idemKey = route.idempotent === true ? singleHeader(req, 'Idempotency-Key') : undefined;
      const idem =
        idemKey !== undefined
          ? await beginIdempotent(
              deps.db,
              callerScope(caller),
              idemKey,
              req.method,
              idempotencyPathOf(route, req.path),
              req.rawBody,
              deps.config.dataEncryptionKey,
            )
          : null;
      if (idem?.kind === 'replay') {
        for (const [k, v] of Object.entries(idem.response.headers)) res.setHeader(k, v);
        res.setHeader('Idempotency-Replayed', 'true');
        res.status(idem.response.status).type('application/json').send(idem.response.body);
        return;
      }
      let status: number;
      let headers: Record<string, string>;
      let payload: Buffer;
      let remember: boolean;
      try {
        const result = await route.handler({
          req,
          res,
          deps,
          caller,
          body: b as never,
          query: q as never,
          params: p as never,
          requestId: requestIdOf(req),
          verified,
        });
        if ('stream' in result) {
          // The handler wrote the response itself (a stream): nothing to send, nothing to replay.
          if (idem?.kind === 'new') await idem.abandon();
          return;
        }
        status = result.status;
        headers = result.headers ?? {};
        // A 5xx, 401 or 429 result is not replayed either, as when thrown.
        remember = replayable(status);
        payload = Buffer.from(JSON.stringify(result.body));
      } catch (err) {
        if (idem?.kind === 'new') {
          // A refusal (4xx) is replayed too; see `replayable`.
          if (err instanceof AppError && replayable(err.status)) {
            await idem.complete({
              status: err.status,
              headers: err.headers,
              body: Buffer.from(JSON.stringify(errorBody(err.code, err.message, err.details, requestIdOf(req)))),
            });
          } else {
            await idem.abandon();
          }
        }
        throw err;
      }
      if (idem?.kind === 'new') {
        if (remember) await idem.complete({ status, headers, body: payload });
        else await idem.abandon();
      }
      for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
      res.status(status).type('application/json').send(payload);
    });
    app[route.method](route.path, ...chain);
    const list = methodsByPath.get(route.path) ?? [];
    list.push(route.method.toUpperCase());
    methodsByPath.set(route.path, list);
  }
  for (const [path, methods] of methodsByPath) {
    const allow = [...new Set([...methods, ...(methods.includes('GET') ? ['HEAD'] : []), 'OPTIONS'])].join(', ');
    app.all(path, (req, res, next) => {
      if (req.method === 'OPTIONS') {
        res.setHeader('Allow', allow);
        // A CORS preflight (the cors middleware went on to here): only this path's methods.
        if (res.getHeader('Access-Control-Allow-Methods') !== undefined) {
          res.setHeader('Access-Control-Allow-Methods', allow);
        }
        res.status(204).end();
        return;
      }
      next(
        new AppError('method_not_allowed', `${req.method} is not allowed here; use ${methods.join(' or ')}.`, [], {
          Allow: allow,
        }),
      );
    });
  }
}
