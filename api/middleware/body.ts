import { isUtf8 } from 'node:buffer';
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

/** The body's bytes are not UTF-8 (`fromHttpError` answers 400 invalid_input). */
export const NOT_UTF8 = 'entity.not.utf8';

/**
 * A body parser's `verify`: bytes that are not UTF-8 are refused (type NOT_UTF8) before the
 * decoder turns them into U+FFFD. For the parsers the API does not build itself (OAuth's).
 */
export function assertUtf8(buf: Buffer): void {
  if (!isUtf8(buf)) throw Object.assign(new Error('body is not UTF-8'), { type: NOT_UTF8, status: 400 });
}

/**
 * A form body's `verify` (`application/x-www-form-urlencoded`): as `assertUtf8`, and a
 * percent-escape that does not decode to UTF-8 (`%FF`, `%C3` cut short, an overlong or a
 * surrogate sequence) or escapes nothing (`%zz`, a `%` at the end) is refused the same way,
 * type NOT_UTF8. The form parser (qs, under body-parser) would keep such a field as its literal
 * text, escapes and all (URLSearchParams would decode it into U+FFFD): neither is what was
 * typed, and a browser never sends it (it escapes `%` as `%25`). `&`, `=` and `+` are plain
 * ASCII, so no escape sequence runs across two fields, and checking the whole body at once is
 * checking every field's name and value.
 */
export function assertFormUtf8(buf: Buffer): void {
  assertUtf8(buf);
  if (!buf.includes(0x25)) return; // no `%`, no escape
  try {
    decodeURIComponent(buf.toString('utf8'));
  } catch {
    throw Object.assign(new Error('a percent-escape of the form is not UTF-8'), { type: NOT_UTF8, status: 400 });
  }
}

/**
 * A request whose declared Content-Length is over `limitBytes`: the error body-parser raises
 * for a body too large (type `entity.too.large`, 413), so every handler of that answers it as
 * it would, but at once, before any of the body is read; the connection closes after the
 * answer, so a body still coming is never read as a request. body-parser itself first reads
 * the whole declared body: a client declaring 5 MB and sending none held the connection until
 * the request timed out. Null when the declared length is within the limit (or not given).
 */
export function declaredTooLarge(req: Request, res: Response, limitBytes: number): Error | null {
  const declared = Number(req.headers['content-length']);
  if (!Number.isFinite(declared) || declared <= limitBytes) return null;
  res.setHeader('Connection', 'close');
  return Object.assign(new Error('request entity too large'), {
    type: 'entity.too.large',
    status: 413,
    expose: true,
    limit: limitBytes,
    length: declared,
  });
}

/** `declaredTooLarge` as middleware, before a body parser the API does not wrap (the OAuth endpoints'). */
export const refuseDeclaredOver =
  (limitBytes: number) =>
  (req: Request, res: Response, next: NextFunction): void =>
    next(declaredTooLarge(req, res, limitBytes) ?? undefined);

/** Most bytes a page's form (website, operator pages) may carry. */
const FORM_LIMIT = '16kb';
const FORM_LIMIT_BYTES = 16 * 1024;

/**
 * Reads a page's `application/x-www-form-urlencoded` body into `req.body`, for handlers that
 * answer every refusal as a page: a form declaring a charset other than UTF-8 is 415 (the
 * pages are served as UTF-8, and a browser posts their forms so), bytes that are not UTF-8 are
 * 400 (refused, not decoded into U+FFFD), and so is a field whose percent-escapes do not decode
 * to UTF-8 (refused, not stored as its literal escapes: `assertFormUtf8`), over 16 KB 413,
 * anything else unreadable 400.
 */
export function formReader(): (req: Request, res: Response) => Promise<void> {
  const urlencoded = express.urlencoded({
    extended: false,
    limit: FORM_LIMIT,
    parameterLimit: 20,
    verify: (_req, _res, buf) => assertFormUtf8(buf),
  });
  return async (req, res) => {
    const charset = otherCharset(req.headers['content-type'] ?? '');
    if (charset !== null) {
      throw new AppError('unsupported_media_type', `The form must be sent as UTF-8, not ${charset}.`, [
        { field: '/', problem: `charset ${charset} is not accepted; send UTF-8` },
      ]);
    }
    if (declaredTooLarge(req, res, FORM_LIMIT_BYTES)) {
      throw new AppError('payload_too_large', 'The form is larger than expected.');
    }
    try {
      await new Promise<void>((resolve, reject) =>
        urlencoded(req, res, (err?: unknown) => (err ? reject(err) : resolve())),
      );
    } catch (err) {
      const e = err as { type?: string };
      if (e.type === 'entity.too.large') throw new AppError('payload_too_large', 'The form is larger than expected.');
      throw new AppError('invalid_input', 'The form could not be read: go back and send it again.');
    }
  };
}

/** A charset parameter other than UTF-8's: 415, as JSON is UTF-8 (RFC 8259 section 8.1). */
function otherCharset(contentType: string): string | null {
  const m = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType);
  if (!m) return null;
  const charset = (m[1] ?? '').toLowerCase();
  return charset === 'utf-8' ? null : charset || '(empty)';
}

/**
 * JSON bodies only, bounded in size. A request that carries a body in another media type, or
 * declares a charset other than UTF-8, is 415; a body over the limit is 413 (checked on
 * Content-Length before reading, and while reading for chunked bodies); bytes that are not
 * UTF-8 are 400 (the decoder would otherwise turn them into U+FFFD, stored and sent on as if
 * the caller had written it); malformed JSON is 400. The raw bytes are kept for signatures.
 */
export function jsonBody(limitBytes: number) {
  const parse = express.json({
    limit: limitBytes,
    type: (req) => hasBody(req as Request),
    strict: false,
    verify: (req, _res, buf) => {
      assertUtf8(buf);
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
    const charset = otherCharset(req.headers['content-type'] ?? '');
    if (charset !== null) {
      return next(
        new AppError('unsupported_media_type', 'The request body must be JSON encoded as UTF-8.', [
          { field: '/', problem: `charset ${charset} is not accepted; send UTF-8` },
        ]),
      );
    }
    const tooLarge = declaredTooLarge(req, res, limitBytes);
    if (tooLarge) return next(tooLarge);
    parse(req, res, next);
  };
}
