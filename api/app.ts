import cors from 'cors';
import express, { type Express, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import helmet, { type HelmetOptions } from 'helmet';
import { configuredCheck } from '../shared/domain/email-acceptance.ts';
import type { ApiDeps } from './deps.ts';
import { MCP_ROUTER_PATHS, mcpRouter } from './mcp/router.ts';
import { jsonBody } from './middleware/body.ts';
import { errorHandler, notFoundHandler } from './middleware/errors.ts';
import { httpMetrics, metricsHandler } from './middleware/metrics.ts';
import { createRateLimits } from './middleware/rate-limit.ts';
import { requestLog } from './middleware/request-log.ts';
import { mountRoutes } from './mount.ts';
import { OPERATOR_PATHS, operatorRouter } from './pages/operator/router.ts';
import { WEBSITE_PATHS, websiteRouter } from './pages/router.ts';
import { malformedLinkPage, sendMessagePage } from './pages/site.ts';
import type { RouteDef } from './route.ts';
import { bookingEventRoutes } from './routes/booking-events.ts';
import { bookingStatusHookRoutes } from './routes/booking-status-hook.ts';
import { bookingRoutes } from './routes/bookings.ts';
import { driverAppRoutes } from './routes/driver-app.ts';
import { driverRoutes } from './routes/drivers.ts';
import { healthRoutes } from './routes/health.ts';
import { OFFER_LINK_PATH, offerRoutes } from './routes/offers.ts';
import { openApiRoutes } from './routes/openapi.ts';
import { partnerJobRoutes } from './routes/partner-jobs.ts';
import { passengerVerifyRoutes } from './routes/passenger-verify.ts';
import { PAY_PAGE_PATH, payPageRoutes } from './routes/pay-page.ts';
import { quoteRoutes } from './routes/quotes.ts';
import { sandboxRoutes } from './routes/sandbox.ts';
import { supplierHookRoutes } from './routes/supplier-hooks.ts';
import { whoamiRoutes } from './routes/whoami.ts';

/** Every route the service serves, in one list; later work adds its route files here. */
export function publicRoutes(config: ApiDeps['config']): RouteDef[] {
  return [
    ...whoamiRoutes,
    ...quoteRoutes(config),
    ...bookingRoutes(),
    ...bookingEventRoutes(),
    ...passengerVerifyRoutes({ emailCheck: configuredCheck(config.bookings) }),
    ...driverRoutes(),
    ...offerRoutes(),
    ...driverAppRoutes(),
    ...partnerJobRoutes(),
    ...supplierHookRoutes(),
    ...bookingStatusHookRoutes(),
    ...payPageRoutes(),
    ...sandboxRoutes(),
  ];
}

/** The fixed part of a route path before its first parameter (`/pay/:token` is `/pay`). */
function prefixOf(path: string): string {
  const at = path.indexOf('/:');
  return at === -1 ? path : path.slice(0, at);
}

/**
 * Every path prefix whose answers are pages (lower case): the website's, the operator pages' and
 * the pay page's (an API route that answers HTML). A malformed path under one is a 400 page.
 */
const PAGE_PATHS = [...WEBSITE_PATHS, ...OPERATOR_PATHS, prefixOf(PAY_PAGE_PATH)].map((p) => p.toLowerCase());
/**
 * The job card's link (`/o/{code}`) is a page and an API operation: the website router gives a
 * caller the page only when it prefers HTML to JSON, and a malformed link is answered the same.
 */
const NEGOTIATED_PATHS = [prefixOf(OFFER_LINK_PATH).toLowerCase()];

/** Whether a request's errors are answered as pages (`malformedLinkPage`): by its path, and on `/o` its Accept. */
function answeredAsPage(req: Request): boolean {
  const path = req.path.toLowerCase();
  if (!isUnder(PAGE_PATHS, path)) return false;
  return !isUnder(NEGOTIATED_PATHS, path) || req.accepts(['application/json', 'text/html']) === 'text/html';
}

/**
 * helmet's security headers, worked out once at start: with constant options (no per-request
 * functions, such as CSP nonces) helmet sets the same headers on every response, so they are
 * recorded from one run of its middleware and then set in one step per response, instead of
 * through helmet's chain of a dozen middlewares.
 */
function securityHeaders(options: HelmetOptions) {
  const set: Array<[string, string]> = [];
  const removed: string[] = [];
  const recorder = {
    setHeader: (name: string, value: unknown) => set.push([name, String(value)]),
    removeHeader: (name: string) => removed.push(name),
  };
  let finished = false;
  helmet(options)({} as Request, recorder as unknown as Response, (err?: unknown) => {
    if (err) throw err;
    finished = true;
  });
  if (!finished) throw new Error('helmet did not set its headers synchronously');
  return (_req: Request, res: Response, next: NextFunction) => {
    for (const name of removed) res.removeHeader(name);
    for (const [name, value] of set) res.setHeader(name, value);
    next();
  };
}

/**
 * A sub-router consulted only for requests under the paths it serves (`prefixes`), matched as
 * Express matches a mount path: case-insensitively, the whole prefix or the prefix and more
 * after a `/`. An API request then does not walk the MCP server's, the website's and the
 * operator pages' layers (about 65 path matches, some 5% of a booking's CPU in the API);
 * a path under none of them goes on exactly as it did.
 */
export function servedUnder(
  prefixes: readonly string[],
  router: RequestHandler,
  /**
   * Pages only: an OPTIONS request goes on past the router (whose automatic answer would list
   * its form methods), to the API route of the same path (its CORS preflight) or the 404.
   */
  opts: { pagesOnly?: boolean } = {},
): RequestHandler {
  const lower = prefixes.map((p) => p.toLowerCase());
  return (req, res, next) =>
    isUnder(lower, req.path.toLowerCase()) && !(opts.pagesOnly && req.method === 'OPTIONS')
      ? router(req, res, next)
      : next();
}

/** Whether `path` is one of `prefixes` or below one (both lower case). */
export function isUnder(prefixes: readonly string[], path: string): boolean {
  return prefixes.some((p) => path.startsWith(p) && (path.length === p.length || path[p.length] === '/'));
}

/**
 * The Express app without listen(): request ids and logging, security headers, CORS on the
 * public API, bounded JSON bodies, declared routes, and the error envelope for everything
 * else. Tests mount it directly; `extraRoutes` lets a test add a route through the same
 * pipeline.
 */
export function buildApp(deps: ApiDeps, opts: { extraRoutes?: RouteDef[] } = {}): Express {
  const { config } = deps;
  const app = express();
  app.set('trust proxy', config.http.trustProxy);
  app.set('etag', false);

  app.use(requestLog(app, deps.logger));
  app.use(httpMetrics(deps.metrics));
  app.use(securityHeaders({ contentSecurityPolicy: { directives: { defaultSrc: ["'self'"] } } }));
  app.use(
    '/api/public',
    cors({
      origin: true,
      methods: ['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
      allowedHeaders: [
        'Content-Type',
        'Authorization',
        'x-api-key',
        config.apiKeyHeader,
        'Idempotency-Key',
        'X-Request-Id',
        'X-Test-Scenario',
      ],
      exposedHeaders: [
        'X-Request-Id',
        'RateLimit',
        'RateLimit-Policy',
        'Retry-After',
        'Idempotency-Replayed',
        'WWW-Authenticate',
      ],
      maxAge: 600,
      // The preflight goes on to the route's own OPTIONS answer (mountRoutes), which narrows
      // Access-Control-Allow-Methods to the methods of that path and says them in Allow.
      preflightContinue: true,
    }),
  );
  // Prometheus metrics (bearer METRICS_TOKEN, else loopback only).
  app.get('/metrics', metricsHandler(deps));
  const limits = createRateLimits(deps.redis, config);
  // The MCP tool server and its OAuth endpoints, which parse their own bodies (OAuth posts forms).
  app.use(servedUnder(MCP_ROUTER_PATHS, mcpRouter(deps, limits)));
  // The passenger website (/book, /track) and /docs, whose forms also post form bodies.
  app.use(servedUnder(WEBSITE_PATHS, websiteRouter(deps, limits), { pagesOnly: true }));
  // The operator pages (/operator, behind operator sign-in) and the BullMQ board (/operator/queues).
  app.use(servedUnder(OPERATOR_PATHS, operatorRouter(deps, limits), { pagesOnly: true }));
  app.use(jsonBody(config.http.bodyLimitBytes));

  const routes: RouteDef[] = [...healthRoutes, ...publicRoutes(config), ...(opts.extraRoutes ?? [])];
  routes.push(...openApiRoutes(() => routes));
  mountRoutes(app, routes, deps, limits);

  // No page at a path under a page prefix (`/book/a/b`, `/track`): a 404 page, as the pages'
  // own refusals are; elsewhere the API's envelope.
  app.use((req: Request, res: Response, next: NextFunction) => {
    if (req.method === 'OPTIONS' || !answeredAsPage(req)) return next();
    sendMessagePage(res, config.serviceName, 404, 'Page not found', [
      'There is no page at this address: check the link was copied whole, or open it again from the message it came in.',
    ]);
  });
  app.use(notFoundHandler());
  // A page's link whose percent-escapes do not decode is a page; on the API, the envelope.
  app.use(malformedLinkPage(config.serviceName, answeredAsPage));
  app.use(errorHandler());
  return app;
}
