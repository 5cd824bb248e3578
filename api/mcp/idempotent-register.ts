import type { RequestHandler, Response } from 'express';
import { AppError } from '../../shared/errors.ts';
import { beginIdempotent, replayable } from '../../shared/services/idempotency.ts';
import type { ApiDeps } from '../deps.ts';
import { singleHeader } from '../middleware/headers.ts';
import { clientIp } from './limits.ts';

/**
 * `Idempotency-Key` on dynamic client registration (CONTRACT.md section 2: every POST that
 * creates something honours it), which the SDK's handler does not: a client that registers,
 * loses the answer and retries with the same key and metadata is answered its first
 * registration, byte for byte with `Idempotency-Replayed: true` (the same `client_id` and
 * `client_secret`), not a second client it never learns the secret of. Keyed per client IP, as
 * every anonymous caller's keys are (`callerScope`); the stored answer is sealed with the
 * service's key, as the REST routes' are, since it holds a client secret. The same key with
 * other metadata is 422 and a duplicate still running 409, in the OAuth error shape
 * (`{error, error_description}`, RFC 7591 section 3.2.2) with the contract's codes. Runs after
 * the body is parsed (`rawBody`) and before the SDK's handler; a request without the header
 * passes untouched.
 */
export function idempotentRegistration(deps: ApiDeps, path: string): RequestHandler {
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    let key: string | undefined;
    try {
      key = singleHeader(req, 'Idempotency-Key');
    } catch (err) {
      return refuse(res, err, next);
    }
    if (key === undefined) return next();
    beginIdempotent(deps.db, `ip:${clientIp(req)}`, key, 'POST', path, req.rawBody, deps.config.dataEncryptionKey).then(
      (idem) => {
        if (idem.kind === 'replay') {
          for (const [k, v] of Object.entries(idem.response.headers)) res.setHeader(k, v);
          res.setHeader('Idempotency-Replayed', 'true');
          res.status(idem.response.status).type('application/json').send(idem.response.body);
          return;
        }
        // The answer as it goes out (after every rewording of it), recorded before it is sent,
        // so a retry that follows it at once is replayed, not told the first is still running.
        const send = res.send.bind(res);
        res.send = (chunk?: unknown) => {
          res.send = send;
          const body = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : null;
          const status = res.statusCode;
          const recorded =
            body !== null && replayable(status)
              ? idem.complete({ status, headers: { 'Cache-Control': 'no-store' }, body })
              : idem.abandon();
          recorded.then(
            () => send(chunk),
            (err: unknown) => {
              deps.logger.error({ err }, 'recording a registration answer under its Idempotency-Key failed');
              // Not recorded: the answer is still the client's (the key is freed after its lease).
              send(chunk);
            },
          );
          return res;
        };
        next();
      },
      (err: unknown) => refuse(res, err, next),
    );
  };
}

/** A key refused (malformed: OAuth's `invalid_request`; reused or in flight: the contract's codes). */
function refuse(res: Response, err: unknown, next: (err: unknown) => void): void {
  if (!(err instanceof AppError)) {
    next(err);
    return;
  }
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res
    .status(err.status)
    .set('Cache-Control', 'no-store')
    .json({ error: err.code === 'invalid_input' ? 'invalid_request' : err.code, error_description: err.message });
}
