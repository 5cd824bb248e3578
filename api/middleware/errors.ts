import type { NextFunction, Request, Response } from 'express';
import { AppError, type ErrorCode, errorBody } from '../../shared/errors.ts';
import { NOT_UTF8 } from './body.ts';

export function requestIdOf(req: Request): string {
  return String(req.id ?? '');
}

export function sendError(req: Request, res: Response, err: AppError): void {
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res.status(err.status).json(errorBody(err.code, err.message, err.details, requestIdOf(req)));
}

/**
 * Express's refusal of a path whose percent-escapes do not decode to UTF-8 (`/track/%ff`): the
 * router's `decodeURIComponent` of a route parameter threw, and it made the URIError a 400.
 * The API answers it 400 `invalid_input` (below); the pages answer a page (`malformedLinkPage`).
 */
export function isMalformedPath(err: unknown): boolean {
  return err instanceof URIError && (err as { status?: unknown }).status === 400;
}

/** Body-parser and other http-errors style failures, mapped to stable codes. */
function fromHttpError(err: {
  type?: string;
  status?: number;
  statusCode?: number;
  expose?: boolean;
  code?: unknown;
}): AppError | null {
  // zlib's refusal of a body that is not what its Content-Encoding says (gzip, deflate, br).
  if (
    (err.status ?? err.statusCode) === 400 &&
    typeof err.code === 'string' &&
    /^(Z_|ERR__ERROR|ERR_BROTLI|ERR_ZSTD)/.test(err.code)
  ) {
    return new AppError('invalid_input', 'The request body could not be decompressed.', [
      { field: '/', problem: 'must be compressed as its Content-Encoding says' },
    ]);
  }
  switch (err.type) {
    case 'entity.too.large':
      return new AppError('payload_too_large', 'The request body is larger than this endpoint accepts.');
    case 'entity.parse.failed':
      return new AppError('invalid_input', 'The request body is not valid JSON.', [
        { field: '/', problem: 'must be valid JSON' },
      ]);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('unsupported_media_type', 'The request body must be JSON encoded as UTF-8.');
    case NOT_UTF8:
      return new AppError('invalid_input', 'The request body is not valid UTF-8 text.', [
        { field: '/', problem: 'must be JSON encoded as UTF-8' },
      ]);
    case 'request.aborted':
      return new AppError('invalid_input', 'The request body was not received completely.');
    case 'request.size.invalid':
      return new AppError('invalid_input', 'The request body length does not match Content-Length.');
    default:
  }
  const status = err.status ?? err.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code: ErrorCode =
      status === 404
        ? 'not_found'
        : status === 413
          ? 'payload_too_large'
          : status === 415
            ? 'unsupported_media_type'
            : 'invalid_input';
    return new AppError(code, 'The request could not be processed as sent.');
  }
  return null;
}

/** Connection-level failures of Postgres or Redis: the service is briefly unavailable, not broken. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08006',
  '08001',
]);

function isUnavailable(err: unknown): boolean {
  const e = err as { name?: string; code?: string; message?: string } | null;
  if (!e) return false;
  return (
    e.name === 'KnexTimeoutError' ||
    (typeof e.code === 'string' && UNAVAILABLE_CODES.has(e.code)) ||
    /Connection is closed|enableOfflineQueue|Connection terminated/.test(e.message ?? '')
  );
}

/**
 * The last middleware: every error becomes the envelope of CONTRACT.md section 1. Anything
 * that is not a known error is a bug: it is logged with its stack and answered 500 with no
 * detail, never the stack.
 */
export function errorHandler() {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const known =
      err instanceof AppError
        ? err
        : isUnavailable(err)
          ? new AppError('service_unavailable', 'The service is briefly unavailable; retry in a few seconds.', [], {
              'Retry-After': '5',
            })
          : fromHttpError((err ?? {}) as Record<string, never>);
    if (res.headersSent) {
      req.log?.error({ err }, 'error after the response started');
      res.destroy();
      return;
    }
    if (known) {
      if (known.status >= 500) req.log?.warn({ code: known.code, err }, known.message);
      sendError(req, res, known);
      return;
    }
    req.log?.error({ err }, 'unhandled error');
    sendError(
      req,
      res,
      new AppError('internal_error', 'Something went wrong on our side. Quote the requestId if you contact us.'),
    );
  };
}

export function notFoundHandler() {
  return (req: Request, res: Response) => {
    // The path is named back only when it is short printable ASCII: not kilobytes of it, nor
    // characters that would make the message read as something else.
    const path = /^[\x21-\x7e]{1,200}$/.test(req.path) ? req.path : null;
    sendError(
      req,
      res,
      new AppError('not_found', path ? `No route ${req.method} ${path}.` : `No route ${req.method} for this path.`),
    );
  };
}
