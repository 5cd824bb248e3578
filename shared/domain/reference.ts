import { randomInt } from 'node:crypto';

/** Crockford base32: no I, L, O or U, so references survive being read aloud and retyped. */
export const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** A booking reference: `<PREFIX>-` + 6 Crockford characters, e.g. `DTN-7K3F9Q` (~1e9 values). */
export function newReference(prefix: string): string {
  let code = '';
  for (let i = 0; i < 6; i++) code += CROCKFORD[randomInt(32)];
  return `${prefix}-${code}`;
}

/**
 * A reference as typed by a person: any case, spaces or a missing hyphen, and Crockford's
 * look-alikes (I and L read as 1, O as 0). Null when it cannot be a reference.
 */
export function normaliseReference(raw: string, prefix: string): string | null {
  const s = raw.trim().toUpperCase().replace(/[\s_]/g, '');
  const m = new RegExp(`^${prefix}-?([0-9A-Z]{6})$`).exec(s);
  if (!m?.[1]) return null;
  const code = m[1].replace(/[IL]/g, '1').replace(/O/g, '0');
  return /^[0-9A-HJKMNP-TV-Z]{6}$/.test(code) ? `${prefix}-${code}` : null;
}

/**
 * How an error message names a reference it could not find: as sent when that is plain letters,
 * digits, spaces and hyphens (at most 24), else "with that reference". Text that cannot be a
 * reference is not repeated back: it may carry bidi overrides or control characters that make
 * the message read as something else.
 */
export function referenceForMessage(raw: string): string {
  const s = raw.trim();
  return /^[A-Za-z0-9 -]{1,24}$/.test(s) ? s : 'with that reference';
}
