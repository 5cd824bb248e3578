import { createHmac } from 'node:crypto';

/**
 * How a supplier on the `hmac` adapter signs a hook request (README "Supplier hooks"), written
 * apart from the adapter so tests check the documented scheme, not the code against itself:
 * `x-{slug}-timestamp: <Unix seconds>` and `x-{slug}-signature: sha256=<hex HMAC-SHA256 of
 * "<timestamp>.<raw body>">` with the supplier secret. Every test that signs a supplier request
 * signs it here.
 */

/** Unix seconds now, or `offsetSeconds` from now. */
export const unixNow = (offsetSeconds = 0): number => Math.floor(Date.now() / 1000) + offsetSeconds;

/** `sha256=<hex>` over `<timestamp>.<raw body>`. */
export function supplierSignature(secret: string, timestamp: number | string, raw: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${raw}`).digest('hex')}`;
}

/** The two headers of a signed request to `/api/public/hooks/{slug}-booking`, signed now unless told. */
export function supplierHmacHeaders(
  slug: string,
  secret: string,
  raw: string,
  timestamp: number = unixNow(),
): Record<string, string> {
  return {
    [`x-${slug}-timestamp`]: String(timestamp),
    [`x-${slug}-signature`]: supplierSignature(secret, timestamp, raw),
  };
}
