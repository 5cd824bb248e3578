import type { IncomingMessage } from 'node:http';
import { AppError } from '../../shared/errors.ts';

/**
 * A request header that must come once (`Idempotency-Key`): its value, undefined when absent,
 * 400 `invalid_input` when sent twice or more. Node joins repeated headers of most names into
 * one value ("a1, a2"), which would be read as one key that neither copy of the request named.
 */
export function singleHeader(req: IncomingMessage, name: string): string | undefined {
  const all = req.headersDistinct[name.toLowerCase()];
  if (!all || all.length === 0) return undefined;
  if (all.length > 1) {
    throw new AppError('invalid_input', `Send one ${name} header, not ${all.length}.`, [
      { field: `/headers/${name.toLowerCase()}`, problem: 'is sent more than once' },
    ]);
  }
  return all[0];
}
