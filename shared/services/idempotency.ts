import { seal, sha256, unseal } from '../crypto.ts';
import type { Db } from '../db/knex.ts';
import { AppError, errorBody } from '../errors.ts';

export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/**
 * How long a first request's claim on its key holds while it runs. Past it, the request is
 * taken for lost (its process died, or recording its answer failed) and a retry with the key
 * runs in its place, instead of answering 409 for the rest of the 24 hours. Longer than any
 * request runs (a partner batch of 100 jobs, each priced, takes seconds).
 */
export const IN_PROGRESS_LEASE_MS = 120_000;
/** Longer than any request runs (its answer is sent well within this): a claim older is likely lost. */
const STILL_RUNNING_MS = 30_000;
/** 1 to 255 printable ASCII characters; spaces inside (HTTP trims them at the ends). */
const KEY_PATTERN = /^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/;

/**
 * Answers an Idempotency-Key replays: a refusal (4xx) is the answer to its request; a failure on
 * our side (5xx), bad credentials (401) and a limit (429) are not, so the caller can retry with
 * the same key once fixed or after waiting.
 */
export function replayable(status: number): boolean {
  return status < 500 && status !== 401 && status !== 429;
}

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** A stored answer given again as a route's result (JSON body), marked `Idempotency-Replayed: true`. */
export function replayedResult(response: StoredResponse): {
  status: number;
  body: unknown;
  headers: Record<string, string>;
} {
  return {
    status: response.status,
    body: JSON.parse(response.body.toString('utf8')) as unknown,
    headers: { ...response.headers, 'Idempotency-Replayed': 'true' },
  };
}

export type IdempotencyStart =
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'new'; complete(response: StoredResponse): Promise<void>; abandon(): Promise<void> };

interface Row {
  id: number;
  created_at: Date;
  method: string;
  path: string;
  request_hash: Buffer;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_headers: Record<string, string> | null;
  response_body: Buffer | null;
  expires_at: Date;
}

/**
 * A stored answer's body sealed with the service's key (`seal`, AES-256-GCM): a booking's
 * answer carries its tracking link (a bearer capability that opens and can cancel it) and its
 * pay-the-driver link, and the table keeps answers 24 hours. Sealed, the table alone gives no link away,
 * and a replay, opened again, is byte for byte the answer first given (JSON text, UTF-8).
 */
const sealBody = (body: Buffer, key: Buffer): Buffer => Buffer.from(seal(body.toString('utf8'), key));

/** A stored body as first given: a sealed one starts `v1.`, which no JSON text does (rows from before sealing are as sent). */
function openBody(stored: Buffer, key: Buffer): Buffer {
  if (stored.subarray(0, 3).toString('latin1') !== 'v1.') return stored;
  return Buffer.from(unseal(stored.toString('latin1'), key), 'utf8');
}

/** JSON text with every object's keys in code-unit order and no whitespace: one spelling per JSON value. */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const obj = value as Record<string, unknown>;
  return `{${Object.keys(obj)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`)
    .join(',')}}`;
}

/**
 * What identifies a request under its key: the method, the path and the body as a JSON value,
 * so a retry that serialises the same body with other whitespace, key order or escapes (an
 * agent's SDK re-encoding it, a proxy pretty-printing it) is the same request and is replayed.
 * A body that is not JSON (or nests too deep to walk) is taken as its bytes. `asSentHash` is the
 * bytes' hash, as keys recorded before 2026-11-26 hold it: a retry of one of those still matches.
 */
function requestHashes(
  method: string,
  path: string,
  rawBody: Buffer | undefined,
): { requestHash: Buffer; asSentHash: Buffer } {
  const bytes = rawBody ?? Buffer.alloc(0);
  const asSentHash = sha256(Buffer.concat([Buffer.from(`${method} ${path}\n`), bytes]));
  if (bytes.length === 0) return { requestHash: asSentHash, asSentHash };
  let canonical: string;
  try {
    canonical = canonicalJson(JSON.parse(bytes.toString('utf8')));
  } catch {
    return { requestHash: asSentHash, asSentHash };
  }
  return { requestHash: sha256(Buffer.from(`json ${method} ${path}\n${canonical}`)), asSentHash };
}

/** How a claim's refusals name its key: the header, its pointer, and what to do instead. */
export interface ClaimLabel {
  name: string;
  pointer: string;
  renew: string;
}
export const IDEMPOTENCY_KEY: ClaimLabel = {
  name: 'Idempotency-Key',
  pointer: '/headers/idempotency-key',
  renew: 'use a new key for a new request',
};
/** A Standard Webhooks message id (the booking-status hook). */
export const WEBHOOK_ID: ClaimLabel = {
  name: 'webhook-id',
  pointer: '/headers/webhook-id',
  renew: 'give each new message its own webhook-id',
};
/** A supplier's signed message, known by its signature (the same timestamp and body). */
export const SIGNED_MESSAGE: ClaimLabel = {
  name: 'signature',
  pointer: '/headers',
  renew: 'sign each new request afresh, with its own timestamp',
};

/**
 * The `Idempotency-Key` header (CONTRACT.md section 2): within 24 hours the same key and the
 * same request (the same JSON value, however spelt: `requestHashes`) replays the first response
 * byte for byte; the same key with another request is
 * 422 `idempotency_key_reused`; a duplicate while the first is still running is 409
 * `idempotency_in_progress`. Keys are scoped to the caller (API key, else IP). A first request
 * that failed with a 5xx leaves no record, so it can be retried with the same key; one that
 * never answered (its process died) holds the key IN_PROGRESS_LEASE_MS, then a retry runs.
 */
export async function beginIdempotent(
  db: Db,
  scope: string,
  key: string,
  method: string,
  path: string,
  rawBody: Buffer | undefined,
  /** The service's key (`dataEncryptionKey`): stored answers are sealed with it (`sealBody`). */
  sealKey: Buffer,
  /** What the key is, for the refusals' words (default the Idempotency-Key header). */
  label: ClaimLabel = IDEMPOTENCY_KEY,
): Promise<IdempotencyStart> {
  if (!KEY_PATTERN.test(key)) {
    throw new AppError('invalid_input', `The ${label.name} header must be 1 to 255 printable ASCII characters.`, [
      { field: label.pointer, problem: 'must be 1 to 255 printable ASCII characters' },
    ]);
  }
  const { requestHash, asSentHash } = requestHashes(method, path, rawBody);
  // The claim is the row's created_at as this request set it: answering (complete) and letting
  // go (abandon) touch the row only while it is still this request's, so a request that ran
  // past its lease and was taken over records nothing over its successor.
  const claimed = (id: number, at: Date): IdempotencyStart => ({
    kind: 'new',
    async complete(response) {
      await db('idempotency_keys')
        .where({ id, created_at: at, state: 'in_progress' })
        .update({
          state: 'completed',
          response_status: response.status,
          response_headers: JSON.stringify(response.headers),
          response_body: sealBody(response.body, sealKey),
        });
    },
    async abandon() {
      await db('idempotency_keys').where({ id, created_at: at, state: 'in_progress' }).delete();
    },
  });
  for (let attempt = 0; attempt < 3; attempt++) {
    const now = new Date();
    const inserted = await db('idempotency_keys')
      .insert({
        scope,
        key,
        method,
        path,
        request_hash: requestHash,
        state: 'in_progress',
        created_at: now,
        expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
      })
      .onConflict(['scope', 'key'])
      .ignore()
      .returning<{ id: number }[]>('id');
    const id = inserted[0]?.id;
    if (id !== undefined) return claimed(id, now);
    const row = await db('idempotency_keys').where({ scope, key }).first<Row | undefined>();
    if (!row) continue; // removed between our insert and read: try again
    if (row.expires_at.getTime() <= Date.now()) {
      await db('idempotency_keys').where({ id: row.id }).delete();
      continue;
    }
    const sameRequest = row.request_hash.equals(requestHash) || row.request_hash.equals(asSentHash);
    if (!sameRequest || row.method !== method || row.path !== path) {
      throw new AppError(
        'idempotency_key_reused',
        `This ${label.name} was used for a different request; ${label.renew}.`,
        [{ field: label.pointer, problem: 'already used with a different request' }],
      );
    }
    const leaseEnded = new Date(now.getTime() - IN_PROGRESS_LEASE_MS);
    if (row.state === 'in_progress' && row.created_at.getTime() <= leaseEnded.getTime()) {
      // The first request is lost: this one runs in its place (one taker, by the row's claim).
      // What it does is safe to do again: bookings and jobs have their own guards against a
      // second ride (a quote redeems once, a repeat returns the first booking, a jobRef is one job).
      const taken = await db('idempotency_keys')
        .where({ id: row.id, state: 'in_progress' })
        .where('created_at', '<=', leaseEnded)
        .update({ created_at: now, expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS) })
        .returning<{ id: number }[]>('id');
      if (taken.length > 0) return claimed(row.id, now);
      continue;
    }
    if (row.state === 'in_progress' || row.response_status === null || row.response_body === null) {
      // A request still running answers within seconds: retry in one. One claimed longer ago
      // than any request runs (STILL_RUNNING_MS) was most likely lost with its process: it is
      // taken over when its lease ends, so that is when to retry, not every second until then.
      const age = now.getTime() - row.created_at.getTime();
      const retryAfter = age > STILL_RUNNING_MS ? Math.max(1, Math.ceil((IN_PROGRESS_LEASE_MS - age) / 1000)) : 1;
      throw new AppError(
        'idempotency_in_progress',
        `A request with this ${label.name} is still being processed; retry ${retryAfter > 1 ? `in ${retryAfter} seconds` : 'shortly'}.`,
        [],
        {
          'Retry-After': String(retryAfter),
        },
      );
    }
    return {
      kind: 'replay',
      response: {
        status: row.response_status,
        headers: row.response_headers ?? {},
        body: openBody(row.response_body, sealKey),
      },
    };
  }
  throw new AppError('service_unavailable', 'Could not record the Idempotency-Key; retry.', [], { 'Retry-After': '1' });
}

/**
 * Run `run` under a request's claims on idempotency keys (its Idempotency-Key header, a signed
 * message's id), for routes that can claim them only once they have authenticated the caller
 * themselves (partner HMAC, supplier hooks): nobody without the credentials is answered from a
 * key. When any claim is already answered, that answer is given (and stands for the others); a
 * claim still running is 409 and a key used for another request 422, as `beginIdempotent` says.
 * An answer `run` marks `remember: false` (a job failed on our side or hit a limit) lets every
 * claim but the `always` ones go, so a retry runs again; an error it throws lets them all go.
 * An `always` claim then records a 409 `conflict` saying to sign the message afresh, not the
 * answer: replaying a refusal for now (a 503 with its Retry-After) to a sender who retries the
 * same signed bytes would only repeat it until the timestamp went stale, and running the copy
 * again would let a captured message be replayed.
 */
export async function underClaims(
  db: Db,
  /**
   * `always`: the answer is recorded whatever it is (a signed message's id, whose claim stops a
   * captured copy being replayed: a genuine retry is signed afresh, so it is never let go).
   */
  claims: readonly { scope: string; key: string; always?: boolean; label?: ClaimLabel }[],
  request: { method: string; path: string; rawBody: Buffer | undefined; sealKey: Buffer; requestId?: string },
  run: () => Promise<{ status: number; body: unknown; headers?: Record<string, string>; remember: boolean }>,
): Promise<{ status: number; body: unknown; headers?: Record<string, string> }> {
  const held: (Extract<IdempotencyStart, { kind: 'new' }> & { always: boolean })[] = [];
  const letGo = () => Promise.all(held.map((h) => h.abandon()));
  for (const claim of claims) {
    let start: IdempotencyStart;
    try {
      start = await beginIdempotent(
        db,
        claim.scope,
        claim.key,
        request.method,
        request.path,
        request.rawBody,
        request.sealKey,
        claim.label,
      );
    } catch (err) {
      await letGo();
      throw err;
    }
    if (start.kind === 'replay') {
      const { response } = start;
      await Promise.all(held.map((h) => h.complete(response)));
      return replayedResult(response);
    }
    held.push({ ...start, always: claim.always === true });
  }
  let answer: { status: number; body: unknown; headers?: Record<string, string>; remember: boolean };
  try {
    answer = await run();
  } catch (err) {
    await letGo();
    throw err;
  }
  const body = Buffer.from(JSON.stringify(answer.body));
  const resign = {
    status: 409,
    headers: {},
    body: Buffer.from(
      JSON.stringify(
        errorBody(
          'conflict',
          'This signed message was answered already, with a job to be sent again (refused for now): send the request again signed afresh, with a new timestamp, as every attempt must be; jobs it already took answer unchanged.',
          [],
          request.requestId ?? '',
        ),
      ),
    ),
  };
  await Promise.all(
    held.map((h) =>
      answer.remember
        ? h.complete({ status: answer.status, headers: answer.headers ?? {}, body })
        : h.always
          ? h.complete(resign)
          : h.abandon(),
    ),
  );
  return { status: answer.status, body: answer.body, headers: answer.headers ?? {} };
}

/** Expired keys are deleted hourly by the outbox relay's housekeeping (indexed on expires_at); an expired key met on reuse is deleted at once. */
export async function pruneIdempotencyKeys(db: Db): Promise<number> {
  return db('idempotency_keys').where('expires_at', '<', new Date()).delete();
}
