import express, { type NextFunction, type Request, type Response } from 'express';
import { AppError } from '../../shared/errors.ts';

declare global {
  namespace Express {
    interface Request {
      /** The exact bytes of a JSON body, for HMAC signature checks. */
      rawBody?: Buffer;
    }
  }
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/i;

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return Number(length) > 0;
  return req.headers['transfer-encoding'] !== undefined;
}

/**
 * JSON bodies only, bounded in size. A request that carries a body in another media type is
 * 415; a body over the limit is 413 (checked on Content-Length before reading, and while
 * reading for chunked bodies); malformed JSON is 400. The raw bytes are kept for signatures.
 */
export function jsonBody(limitBytes: number) {
  const parse = express.json({
    limit: limitBytes,
    type: (req) => hasBody(req as Request),
    strict: false,
    verify: (req, _res, buf) => {
      (req as Request).rawBody = buf;
    },
  });
  return (req: Request, res: Response, next: NextFunction) => {
    if (!hasBody(req)) return next();
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
    if (!JSON_TYPE.test(type)) {
      return next(
        new AppError('unsupported_media_type', 'Send the request body as JSON with "Content-Type: application/json".', [
          { field: '/', problem: `content type ${type || '(none)'} is not accepted` },
        ]),
      );
    }
    parse(req, res, next);
  };
}
