/**
 * Stable error codes (CONTRACT.md section 1) and the one error type the HTTP layer turns
 * into the envelope `{"error": {code, message, details}, "requestId"}`.
 */
export const ERROR_STATUS = {
  invalid_input: 400,
  email_not_accepted: 400,
  pickup_in_past: 400,
  content_rejected: 400,
  unauthorized: 401,
  forbidden: 403,
  email_mismatch: 403,
  account_blocked: 403,
  not_found: 404,
  quote_not_found: 404,
  booking_not_found: 404,
  job_not_found: 404,
  method_not_allowed: 405,
  quote_already_redeemed: 409,
  cannot_cancel: 409,
  idempotency_in_progress: 409,
  conflict: 409,
  offer_unavailable: 409,
  quote_expired: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  address_not_found: 422,
  /** Beyond the contract's list: a request head over Node's 16 KB limit (answered before the app). */
  headers_too_large: 431,
  idempotency_key_reused: 422,
  rate_limited: 429,
  daily_limit_reached: 429,
  internal_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  /** JSON pointer to the offending field, e.g. `/passengers`; `/` for the whole body. */
  field: string;
  problem: string;
}

/**
 * Details as an error message names them, `/pickup is required; /notes is too long`: each
 * pointer followed by its problem, so a message can be re-pointed with its details.
 */
export const detailsText = (details: readonly ErrorDetail[]): string =>
  details.map((d) => `${d.field} ${d.problem}`).join('; ');

/**
 * Details re-pointed by `to` (a field named as the caller spelt it), and the message's mentions
 * of them (`detailsText`'s "/notes contains ...": the pointer followed by its problem) with them.
 */
export function repointed(
  message: string,
  details: readonly ErrorDetail[],
  to: (pointer: string) => string,
): { message: string; details: ErrorDetail[]; changed: boolean } {
  let text = message;
  let changed = false;
  const out = details.map((d) => {
    const field = to(d.field);
    if (field === d.field) return d;
    changed = true;
    text = text.split(`${d.field} ${d.problem}`).join(`${field} ${d.problem}`);
    return { ...d, field };
  });
  return { message: text, details: out, changed };
}

/** The content screen's refusal (issue 4): 400 `content_rejected` naming each field and its problem. */
export function contentRejected(details: ErrorDetail[]): AppError {
  return new AppError('content_rejected', `Some fields cannot be accepted: ${detailsText(details)}.`, details);
}

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: ErrorDetail[] = [],
    /** Extra response headers, e.g. Retry-After on a 429. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}

export function errorBody(code: ErrorCode, message: string, details: ErrorDetail[], requestId: string) {
  return { error: { code, message, details }, requestId };
}

/**
 * `{ retryAfterSeconds }` from a refusal's Retry-After header (delay-seconds, as every refusal
 * here sets it), for answers that carry errors in their body (per-job results, MCP tool
 * errors); empty when it has none.
 */
export function retryAfterField(err: AppError): { retryAfterSeconds?: number } {
  const value = err.headers['Retry-After'];
  return value !== undefined && /^\d{1,9}$/.test(value) ? { retryAfterSeconds: Number(value) } : {};
}
