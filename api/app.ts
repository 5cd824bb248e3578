import { randomUUID } from 'node:crypto';
import cors from 'cors';
import express, { type Express } from 'express';
import helmet from 'helmet';
import { pinoHttp } from 'pino-http';
import type { ApiDeps } from './deps.ts';
import { jsonBody } from './middleware/body.ts';
import { mcpRouter } from './mcp/router.ts';
import { websiteRouter } from './pages/router.ts';
import { errorHandler, notFoundHandler } from './middleware/errors.ts';
import { createRateLimits } from './middleware/rate-limit.ts';
import { mountRoutes } from './mount.ts';
import type { RouteDef } from './route.ts';
import { bookingEventRoutes } from './routes/booking-events.ts';
import { bookingStatusHookRoutes } from './routes/booking-status-hook.ts';
import { bookingRoutes } from './routes/bookings.ts';
import { driverAppRoutes } from './routes/driver-app.ts';
import { driverRoutes } from './routes/drivers.ts';
import { healthRoutes } from './routes/health.ts';
import { offerRoutes } from './routes/offers.ts';
import { openApiRoutes } from './routes/openapi.ts';
import { partnerJobRoutes } from './routes/partner-jobs.ts';
import { passengerVerifyRoutes } from './routes/passenger-verify.ts';
import { payPageRoutes } from './routes/pay-page.ts';
import { quoteRoutes } from './routes/quotes.ts';
import { supplierHookRoutes } from './routes/supplier-hooks.ts';
import { whoamiRoutes } from './routes/whoami.ts';

/** Every route the service serves, in one list; later work adds its route files here. */
export function publicRoutes(config: ApiDeps['config']): RouteDef[] {
  return [
    ...whoamiRoutes,
    ...quoteRoutes(config),
    ...bookingRoutes(),
    ...bookingEventRoutes(),
    ...passengerVerifyRoutes({ mxMode: config.bookings.emailMxCheck }),
    ...driverRoutes(),
    ...offerRoutes(),
    ...driverAppRoutes(),
    ...partnerJobRoutes(),
    ...supplierHookRoutes(),
    ...bookingStatusHookRoutes(),
    ...payPageRoutes(),
  ];
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

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

  app.use(
    pinoHttp({
      logger: deps.logger,
      genReqId: (req, res) => {
        const incoming = req.headers['x-request-id'];
        const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : `req_${randomUUID()}`;
        res.setHeader('X-Request-Id', id);
        return id;
      },
      customLogLevel: (_req, res, err) =>
        err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug',
      serializers: {
        // Ids, method and path only: query strings and headers may carry e-mails and keys.
        req: (req: { id: unknown; method: string; url: string }) => ({
          id: req.id,
          method: req.method,
          url: req.url.split('?')[0],
        }),
        res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      },
    }),
  );
  app.use(helmet({ contentSecurityPolicy: { directives: { defaultSrc: ["'self'"] } } }));
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
      ],
      exposedHeaders: ['X-Request-Id', 'RateLimit', 'RateLimit-Policy', 'Retry-After', 'Idempotency-Replayed'],
      maxAge: 600,
    }),
  );
  const limits = createRateLimits(deps.redis, config);
  // The MCP tool server and its OAuth endpoints, which parse their own bodies (OAuth posts forms).
  app.use(mcpRouter(deps, limits));
  // The passenger website (/book, /track) and /docs, whose forms also post form bodies.
  app.use(websiteRouter(deps, limits));
  app.use(jsonBody(config.http.bodyLimitBytes));

  const routes: RouteDef[] = [...healthRoutes, ...publicRoutes(config), ...(opts.extraRoutes ?? [])];
  routes.push(...openApiRoutes(() => routes));
  mountRoutes(app, routes, deps, limits);

  app.use(notFoundHandler());
  app.use(errorHandler());
  return app;
}
