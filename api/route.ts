import type { Static, TSchema } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import type { ErrorCode } from '../shared/errors.ts';
import type { ApiDeps } from './deps.ts';
import type { Caller } from './middleware/auth.ts';

/** A rate-limit policy of a route, in addition to the general per-key and per-IP limits. */
export interface RoutePolicy {
  /** Name shown in the RateLimit-Policy header; also the Redis key space. */
  name: string;
  points: number;
  durationSeconds: number;
}

export interface HandlerContext<B, Q, P, V = unknown> {
  req: Request;
  res: Response;
  deps: ApiDeps;
  caller: Caller;
  body: B;
  query: Q;
  params: P;
  requestId: string;
  /** What the route's `verify` returned (the caller it authenticated); undefined without one. */
  verified: V;
}

export interface HandlerResult {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/**
 * Returned by a handler that has written the response itself through `ctx.res` (a stream, such
 * as server-sent events): `mountRoutes` then sends nothing. Until the handler starts writing,
 * a thrown error still becomes the JSON error envelope. Not for `idempotent` routes (a stream
 * cannot be stored for replay).
 */
export interface StreamedResult {
  stream: true;
}

type Infer<S> = S extends TSchema ? Static<S> : undefined;

/**
 * One route, declared once: its path, its schemas (the single source of validation,
 * TypeScript types and the OpenAPI document), how callers authenticate, its rate limit and
 * the errors it documents. `mountRoutes` turns it into Express middleware; `buildOpenApi`
 * turns it into an operation.
 */
export interface RouteDef<
  B extends TSchema | undefined = TSchema | undefined,
  Q extends TSchema | undefined = TSchema | undefined,
  P extends TSchema | undefined = TSchema | undefined,
  V = unknown,
> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Express path syntax (`/api/public/v1/booking/:ref`). */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /**
   * `public`: no key needed, but a key or driver token that is present must be valid (else
   * 401); a driver's token makes the caller that driver (quotes made through a driver, priced
   * with their map key; a driver app sends its token with every request).
   * `key`: an API key is required. `none`: not looked at (health checks, and the hooks that
   * carry credentials of their own, a supplier's secret or a signature, where a proxy's
   * Authorization header must not stand in their way).
   * `driver`: a driver's bearer token is required. `driver_or_key`: a driver token or an API key.
   */
  auth: 'none' | 'public' | 'key' | 'driver' | 'driver_or_key';
  /**
   * A public route that is not for drivers (partner job intake): a driver's token is refused
   * with 403 and this message, and the OpenAPI document does not offer it.
   */
  refusesDriverToken?: string;
  /** false: no rate limit (health checks). Else the general limit plus these policies. */
  rateLimit?: false | RoutePolicy[];
  /**
   * A creating POST: honours the Idempotency-Key header (CONTRACT.md section 2), scoped by the
   * API key, else the IP. A route that authenticates callers itself (partner HMAC, supplier
   * hooks) claims its keys in its handler, once it has (`underClaims`): it says `'handler'`,
   * which documents the header without the mount claiming it.
   */
  idempotent?: boolean | 'handler';
  /** Takes the sandbox's `X-Test-Scenario` header (test keys only): documented as a parameter. */
  testScenario?: boolean;
  /**
   * The path an Idempotency-Key is remembered under, when this route is another spelling of
   * one operation (`/v1/bookings` for `/v1/booking`): a key used on one is replayed on the other.
   * Default the route's own path (so `/instant/` and `/INSTANT`, which Express routes alike,
   * are one operation); for a path with parameters, the request's path without a trailing
   * slash (`idempotencyPathOf` in mount.ts).
   */
  idempotencyPath?: string;
  /** Appears in the OpenAPI document (public surface). Default true. */
  documented?: boolean;
  body?: B;
  /**
   * The handler checks the body's text (NUL, unpaired surrogates) job by job, so a bad job is
   * rejected alone instead of the whole batch (partner and supplier job intake). Default false:
   * the mount refuses such a body before the handler.
   */
  textCheckedPerJob?: boolean;
  /**
   * Fields the body needs that its schema cannot say without an `anyOf` (one of two spellings;
   * addresses unless a quote is named): checked with the schema, so one 400 names every field
   * missing, not the schema's first and then the rest. Given the body when it is an object.
   */
  alsoRequired?: (body: Record<string, unknown>) => string[];
  /**
   * The body as the OpenAPI document shows it, when the route checks parts of it itself with a
   * schema of their own (partner jobs, each checked against PartnerJob so a bad job is rejected
   * alone): `body` then bounds only the envelope. Default `body`.
   */
  documentedBody?: TSchema;
  /**
   * For the OpenAPI document: the route takes a partner's key or its HMAC signature (x-partner,
   * x-signature) and nothing else, so its security lists those, not the anonymous `{}` of a
   * `public` route (whose auth middleware lets the signature through to `verify`).
   */
  partnerSigned?: boolean;
  query?: Q;
  params?: P;
  /**
   * For a route that authenticates its callers itself from the raw body (partner HMAC, signed
   * webhooks): runs after the declared auth and the rate limit and BEFORE the request is
   * validated (body, query and path parameters alike: the route's own raw-body check must not
   * rely on them), so an unsigned or wrongly signed request is 401 without its body being judged
   * (nobody without the credentials is told what a valid body looks like, or made to fix one
   * when the signature is what is wrong). Throws to refuse; its result reaches the handler as
   * `verified`.
   */
  verify?(ctx: { req: Request; deps: ApiDeps; caller: Caller }): Promise<V>;
  responses: Record<number, { description: string; schema?: TSchema; contentType?: string }>;
  /** Error codes this route can answer with, for the document. Envelope errors common to all routes are added. */
  errors?: ErrorCode[];
  handler(
    ctx: HandlerContext<Infer<B>, Infer<Q>, Infer<P>, V>,
  ): Promise<HandlerResult | StreamedResult> | HandlerResult | StreamedResult;
}

export function defineRoute<
  B extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  P extends TSchema | undefined = undefined,
  V = undefined,
>(def: RouteDef<B, Q, P, V>): RouteDef {
  return def as unknown as RouteDef;
}
