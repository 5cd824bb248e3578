import type { NextFunction, Request, Response } from 'express';
import { safeEqual } from '../../shared/crypto.ts';
import { AppError } from '../../shared/errors.ts';
import type { Metrics } from '../../shared/metrics.ts';
import type { ApiDeps } from '../deps.ts';

/**
 * Times every request into `dtn_http_request_duration_seconds`, labelled by the route template
 * that answered (`/api/public/v1/booking/:ref`, never the path itself, so references and tokens
 * stay out of the series and their number stays bounded), or `unmatched`.
 */
export function httpMetrics(metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const end = metrics.httpDuration.startTimer();
    res.once('close', () => {
      const route = req.route?.path === undefined ? 'unmatched' : `${req.baseUrl}${String(req.route.path)}`;
      end({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  };
}

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * `GET /metrics` in the Prometheus text format. With `METRICS_TOKEN` set it requires
 * `Authorization: Bearer <token>` (compared in constant time); without, only a client on the
 * same machine (loopback) may read it, since the series describe the business's volumes.
 */
export function metricsHandler(deps: Pick<ApiDeps, 'metrics' | 'config' | 'db' | 'queues'>) {
  deps.metrics.observeStores(deps);
  const token = deps.config.metrics.token;
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    try {
      if (token) {
        // Hashed both sides first (`safeEqual`): no early answer tells the token's length.
        if (!safeEqual((req.get('authorization') ?? '').replace(/^Bearer\s+/i, ''), token)) {
          res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
          throw new AppError('unauthorized', 'The metrics need "Authorization: Bearer <METRICS_TOKEN>".');
        }
      } else if (!LOOPBACK.has(req.socket.remoteAddress ?? '') || !LOOPBACK.has(req.ip ?? '')) {
        // Both the connection and the client: behind a proxy on this machine (TRUST_PROXY_HOPS)
        // every request comes over loopback, and `req.ip` is who sent it.
        throw new AppError('forbidden', 'The metrics are served to this machine only unless METRICS_TOKEN is set.');
      }
      const body = await deps.metrics.registry.metrics();
      res.setHeader('Content-Type', deps.metrics.registry.contentType);
      res.setHeader('Cache-Control', 'no-store');
      res.status(200).send(body);
    } catch (err) {
      next(err);
    }
  };
}
