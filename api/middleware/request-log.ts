import { randomUUID } from 'node:crypto';
import type { Express, NextFunction, Request, Response } from 'express';
import type { Logger } from '../../shared/logger.ts';
import { withTrace } from '../../shared/trace.ts';

declare module 'http' {
  interface IncomingMessage {
    /** The request id: the caller's well-formed X-Request-Id, else `req_<uuid>`. */
    id: string;
    /** A logger bound to this request (`req: {id, method, url}`). */
    log: Logger;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const LOG = Symbol('request logger');

type LogLevel = 'error' | 'info' | 'debug';

/** Error for a failed request, info for a refused one, debug for the rest. */
function levelOf(res: Response, err: unknown): LogLevel {
  return err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug';
}

/**
 * Paths whose segment after the prefix is a bearer secret (a booking's tracking token, the
 * pay-the-driver link, a job card's signed offer code): logged as `[redacted]`, so that a log
 * reader cannot open a passenger's booking.
 */
const SECRET_PATH = /^(\/(?:track|pay|o)\/)[^/]+/i;

export function loggedPath(path: string): string {
  return path.replace(SECRET_PATH, '$1[redacted]');
}

/**
 * Request ids and request logs, as pino-http did them (same fields and messages), without its
 * per-request cost: the id comes from a valid `X-Request-Id` or is made, and is echoed in the
 * response; each response is logged when it finishes (`req: {id, method, url}` without the
 * query string, which may carry e-mails, `res: {statusCode}`, `responseTime`), at the level
 * of `levelOf`. The request's child logger (`req.log`) is made only when something logs
 * through it, or when its completion line is at an enabled level.
 */
export function requestLog(app: Express, logger: Logger) {
  const requestLogger = (req: Request): Logger => {
    const slot = req as unknown as Record<symbol, Logger | undefined>;
    let log = slot[LOG];
    if (!log) {
      const url = req.originalUrl || req.url;
      const q = url.indexOf('?');
      log = logger.child({
        req: { id: req.id, method: req.method, url: loggedPath(q === -1 ? url : url.slice(0, q)) },
      });
      slot[LOG] = log;
    }
    return log;
  };
  // On this app's request prototype (routers share it; an express() sub-app would not): every
  // request of the app has `req.log`, built on first use.
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    enumerable: false,
    get(this: Request) {
      return requestLogger(this);
    },
    set(this: Request, value: Logger) {
      (this as unknown as Record<symbol, Logger | undefined>)[LOG] = value;
    },
  });

  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : `req_${randomUUID()}`;
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const startedAt = Date.now();
    let done = false;
    const onDone = (err?: unknown) => {
      if (done) return;
      done = true;
      const level = levelOf(res, err);
      if (!logger.isLevelEnabled(level)) return;
      const responseTime = Date.now() - startedAt;
      const log = requestLogger(req);
      const resOut = { statusCode: res.statusCode };
      if (err || res.statusCode >= 500) {
        const error = err || new Error(`failed with status code ${res.statusCode}`);
        log[level]({ res: resOut, err: error, responseTime }, 'request errored');
        return;
      }
      log[level](
        { res: resOut, responseTime },
        !req.readableAborted && res.writableEnded ? 'request completed' : 'request aborted',
      );
    };
    // A response always emits 'close' (after 'finish' when it completed); 'error' carries the error.
    res.on('close', onDone);
    res.on('error', onDone);
    // Work this request starts (outbox rows, hence jobs) carries its id into the workers' logs.
    withTrace({ requestId: id }, next);
  };
}
