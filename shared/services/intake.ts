import { createHmac, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import { safeEqual, sha256, unseal } from '../crypto.ts';
import { insertAllIf, insertManyIf, type KeyedRowInsert } from '../db/atomic.ts';
import type { BookingRow } from '../db/bookings.ts';
import type { Db } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { rawNamed } from '../db/prepared.ts';
import { FIELD_LIMITS, screenFields } from '../domain/content-screen.ts';
import { dispatchTimeMs, leadTimesOf } from '../domain/dispatch/dispatch-time.ts';
import { checkEmail, configuredCheck, EMAIL_PROBLEM_MESSAGES } from '../domain/email-acceptance.ts';
import type { TestScenario } from '../domain/sandbox.ts';
import type { VehicleType } from '../domain/tariffs/types.ts';
import { parseVehicleType } from '../domain/tariffs/vehicle.ts';
import { AppError, contentRejected, detailsText, type ErrorDetail, repointed, retryAfterField } from '../errors.ts';
import { withoutWorldwideHint } from '../geo/types.ts';
import { uuidv7 } from '../ids.ts';
import type { Logger } from '../logger.ts';
import { PartnerJob, type PartnerJobResult } from '../schemas/partner-jobs.ts';
import { assertStorableText, unstorableText } from '../schemas/text.ts';
import { compileSchema } from '../schemas/validate.ts';
import { publishBookingEvent } from './booking-events.ts';
import { amendmentChanges, recordAmendment } from './booking-history.ts';
import {
  assertNotBlocked,
  type BookingCaller,
  blockedAmong,
  bookingWrite,
  cancelBooking,
  normalisePhone,
} from './bookings.ts';
import { amendmentReachesHolders } from './dispatch.ts';
import type { PricingClient } from './pricing-client.ts';
import { type PricedQuote, priceQuote, rateCardOf } from './quotes.ts';

/**
 * Partner job intake (SPEC.md 2.9, CONTRACT.md section 6): one job or a batch of up to 100,
 * each `new`, `amend` or `cancel`, keyed by (partner, jobRef) in `partner_jobs`. Every job is
 * validated, screened and carried out on its own and gets its own outcome; a bad job never
 * fails the batch.
 */

export interface IntakePartner {
  id: string;
  canSetFares: boolean;
  dailyJobLimit: number | null;
  status: string;
}

/** A supplier sending jobs through its hook (api/routes/supplier-hooks.ts, CONTRACT.md section 6). */
export interface IntakeSupplier {
  id: string;
  slug: string;
  /** The one named external job platform (SPEC.md 2.10): its jobs carry its job fee. */
  externalPlatform: boolean;
  jobFeePence: number;
}

export interface IntakeCaller {
  /** The job source: a partner, or (with `partner: null`) a supplier. */
  partner: IntakePartner | null;
  supplier?: IntakeSupplier | null;
  apiKeyId: string | null;
  testMode: boolean;
  /** Rate-limit and idempotency scope of the request. */
  scope: string;
  /** Test mode: the scenario the request's X-Test-Scenario header names (else each job's notes may name one). */
  testScenario?: TestScenario | null;
}

export interface IntakeDeps {
  db: Db;
  /** Where a status change is announced after it commits (`publishBookingEvent`), for tracking streams. */
  redis: Redis;
  pricing: PricingClient;
  config: Pick<Config, 'bookings' | 'dataEncryptionKey' | 'intake' | 'dispatch' | 'queuePrefix' | 'serviceName'>;
  logger?: Logger;
}

type Action = 'new' | 'amend' | 'cancel';

/** A job after validation: normalised values and the hash that tells a replay from a change. */
interface NormJob {
  jobRef: string;
  action: Action;
  pickup: string | undefined;
  dropoff: string | undefined;
  pickupTime: Date | undefined;
  passengerName: string;
  passengerPhone: string | null;
  passengerEmail: string | null;
  passengers: number;
  vehicleType: VehicleType | undefined;
  flightNumber: string | null;
  farePence: number | null;
  notes: string | null;
  /** The content fields the job carried (null included): all an amendment changes. */
  sent: ReadonlySet<ContentField>;
  hash: Buffer;
  payload: Record<string, unknown>;
}

interface PartnerJobRow {
  id: string;
  job_ref: string;
  booking_id: string;
  content_hash: Buffer;
  last_action: Action;
  /** The job's content as last received (a new or an amendment): what an amendment merges into. */
  payload: Record<string, unknown>;
  reference: string;
  status: string;
  test_mode: boolean;
}

/** A booking may be amended until the passenger is on board (same states as a cancellation). */
const AMENDABLE = new Set([
  'pending',
  'dispatching',
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'no_driver_available',
]);

/** Jobs of one request priced and written at once (the pricing worker is shared). */
const CONCURRENCY = 8;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const validateJob = compileSchema(PartnerJob);

const BEARER_CHALLENGE = 'Bearer realm="api"';
const HMAC_CHALLENGE = 'HMAC-SHA256 realm="partners", headers="x-partner x-signature", optional="x-timestamp"';

/** The 401's challenge (RFC 9110 section 11.6.1): either of the two ways a partner authenticates. */
export const PARTNER_CHALLENGE = `${BEARER_CHALLENGE}, ${HMAC_CHALLENGE}`;

/**
 * The challenge for credentials sent wrongly (RFC 6750 section 3.1 `invalid_request`, as
 * api/middleware/auth.ts answers two different keys): here an API key beside HMAC headers that
 * are not a valid signature by the key's own partner.
 */
export const PARTNER_CONFLICT_CHALLENGE = `${BEARER_CHALLENGE}, error="invalid_request", ${HMAC_CHALLENGE}`;

function unauthorized(why?: string): AppError {
  return new AppError(
    'unauthorized',
    why ??
      'Partner credentials are missing or invalid: send your partner API key ("Authorization: Bearer <key>" or "x-api-key"), or sign the raw body with HMAC-SHA256 and send "x-partner: <partner id>" and "x-signature: <hex>" (optionally with "x-timestamp: <Unix seconds>", signing "<timestamp>.<raw body>").',
    [],
    { 'WWW-Authenticate': PARTNER_CHALLENGE },
  );
}

export async function loadPartner(db: Db, id: string): Promise<IntakePartner | undefined> {
  const row = await db('partners')
    .where({ id })
    .first<{ id: string; can_set_fares: boolean; daily_job_limit: number | null; status: string } | undefined>(
      'id',
      'can_set_fares',
      'daily_job_limit',
      'status',
    );
  return row
    ? { id: row.id, canSetFares: row.can_set_fares, dailyJobLimit: row.daily_job_limit, status: row.status }
    : undefined;
}

export function assertActive(partner: IntakePartner): void {
  if (partner.status !== 'active') {
    throw new AppError(
      'forbidden',
      'This partner account is suspended: it submits no new jobs or amendments (a request of cancellations only is still accepted); contact us to restore job intake.',
    );
  }
}

/** Signs for a partner id that does not exist: the check still runs, and never matches (see partnerBySignature). */
const UNKNOWN_PARTNER_SECRET = randomBytes(32);

/** How far a signed `x-timestamp` may be from our clock (seconds), as the supplier `hmac` adapter's. */
export const PARTNER_SIGNATURE_TOLERANCE_SECONDS = 300;

/** A partner authenticated by its signature; `messageId` names a timestamped signed message. */
export type SignedPartner = IntakePartner & { messageId?: string };

/**
 * HMAC partner authentication (CONTRACT.md section 6): `x-partner` names the partner,
 * `x-signature` is the hex HMAC-SHA256 of the raw body with the partner's signing secret (a
 * `sha256=` prefix is accepted), compared in constant time. Anything missing or wrong is 401,
 * the same answer whether or not the partner exists.
 *
 * Optionally the partner also sends `x-timestamp` (Unix seconds) and signs
 * `"<timestamp>.<raw body>"` instead: the request is then refused outside 5 minutes of our
 * clock, and the signed message is named (`messageId`) so the route answers a copy of it with
 * its first answer rather than applying it again. A captured amendment can then not be
 * replayed later to undo a newer one, which a body-only signature cannot prevent.
 */
export async function partnerBySignature(
  db: Db,
  key: Buffer,
  partnerHeader: string | undefined,
  signatureHeader: string | undefined,
  rawBody: Buffer | undefined,
  timestampHeader?: string,
  nowMs = Date.now(),
): Promise<SignedPartner> {
  const partnerId = partnerHeader?.trim() ?? '';
  const signature = (signatureHeader ?? '')
    .trim()
    .replace(/^sha256=/i, '')
    .toLowerCase();
  if (!UUID.test(partnerId) || !/^[0-9a-f]{64}$/.test(signature)) throw unauthorized();
  const timestamp = timestampHeader?.trim();
  if (timestamp !== undefined) {
    if (!/^\d{1,12}$/.test(timestamp)) {
      throw unauthorized('x-timestamp must be the time of signing in whole Unix seconds.');
    }
    if (Math.abs(Math.floor(nowMs / 1000) - Number(timestamp)) > PARTNER_SIGNATURE_TOLERANCE_SECONDS) {
      throw unauthorized(
        `x-timestamp must be within ${PARTNER_SIGNATURE_TOLERANCE_SECONDS} seconds of the current time (Unix seconds, not milliseconds): sign every attempt, retries included, when you send it.`,
      );
    }
  }
  const row = await db('partners')
    .where({ id: partnerId.toLowerCase() })
    .first<{ signing_secret_sealed: string } | undefined>('signing_secret_sealed');
  // An unknown partner id costs the same HMAC as a known one, so the answer's timing does not
  // tell whether an id exists (the 401 is the same either way).
  const secret = row ? unseal(row.signing_secret_sealed, key) : UNKNOWN_PARTNER_SECRET;
  const mac = createHmac('sha256', secret);
  if (timestamp !== undefined) mac.update(`${timestamp}.`);
  const expected = mac.update(rawBody ?? Buffer.alloc(0)).digest('hex');
  if (!safeEqual(expected, signature) || !row) throw unauthorized();
  const partner = await loadPartner(db, partnerId.toLowerCase());
  if (!partner) throw unauthorized();
  return timestamp !== undefined ? { ...partner, messageId: `sha256=${signature}` } : partner;
}

/**
 * A request carrying both a partner's API key (authenticated by the mount) and the HMAC headers
 * (`x-partner` and/or `x-signature`): accepted only when the signature is valid and names the
 * key's own partner, so one request never speaks for two partners and a bad signature is never
 * passed over because a key came with it (a present but invalid or conflicting credential is
 * 401 everywhere). Anything else is 401 with `error="invalid_request"` in the challenge.
 * Returns the signing partner (with `messageId` when the signature is timestamped).
 */
export async function partnerByKeyAndSignature(
  db: Db,
  key: Buffer,
  keyPartnerId: string | null,
  partnerHeader: string | undefined,
  signatureHeader: string | undefined,
  rawBody: Buffer | undefined,
  timestampHeader?: string,
): Promise<SignedPartner> {
  const refuse = (why: string) =>
    new AppError(
      'unauthorized',
      `This request carries both an API key and HMAC signature headers (x-partner, x-signature), and they do not agree: ${why}. Authenticate one way (the API key alone, or the signature alone), or sign as the partner the key belongs to.`,
      [],
      { 'WWW-Authenticate': PARTNER_CONFLICT_CHALLENGE },
    );
  let signer: SignedPartner;
  try {
    signer = await partnerBySignature(db, key, partnerHeader, signatureHeader, rawBody, timestampHeader);
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'unauthorized') throw err;
    // The timestamp's own refusals say what to fix; any other is "not valid", whatever the id.
    throw refuse(err.message.startsWith('x-timestamp') ? err.message.replace(/\.$/, '') : 'the signature is not valid');
  }
  if (!keyPartnerId) throw refuse('the API key belongs to no partner');
  if (signer.id !== keyPartnerId.toLowerCase()) throw refuse('the signature names another partner than the API key');
  return signer;
}

/**
 * Jobs accepted today (Europe/London) for the partner, its limit, and seconds to London midnight.
 * Test-mode jobs (sandbox keys) and live jobs are counted apart, each against the same limit:
 * integrating in the sandbox never uses up the day's live allowance.
 */
export async function dailyAllowance(
  deps: Pick<IntakeDeps, 'db' | 'config'>,
  partner: IntakePartner,
  testMode: boolean,
): Promise<{ used: number; limit: number; remaining: number; retryAfterSeconds: number }> {
  // One counter row per partner, mode and London day, kept by a trigger on partner_jobs
  // (migration 20261125001800): the read does not grow with the day's jobs.
  const { rows } = await rawNamed<{ rows: { used: number; retry_after: number }[] }>(
    deps.db,
    `select coalesce((select jobs from partner_job_days
                      where partner_id = ? and test_mode = ? and day = (now() at time zone 'Europe/London')::date), 0) as used,
            ceil(extract(epoch from ((date_trunc('day', now() at time zone 'Europe/London') + interval '1 day')
                                     at time zone 'Europe/London') - now()))::int as retry_after`,
    [partner.id, testMode],
  );
  const used = rows[0]?.used ?? 0;
  const limit = partner.dailyJobLimit ?? deps.config.intake.dailyJobLimit;
  return {
    used,
    limit,
    remaining: Math.max(0, limit - used),
    retryAfterSeconds: Math.max(1, rows[0]?.retry_after ?? 1),
  };
}

/** Job counts (`partner_job_days`) of London days more than this many days ago are deleted; only today's is read. */
export const JOB_DAYS_KEPT = 31;

/**
 * Delete job counts of London days more than JOB_DAYS_KEPT days ago: one row per partner, mode
 * and day would otherwise pile up for ever. Run by the outbox relay's hourly housekeeping.
 */
export async function pruneJobDays(db: Db): Promise<number> {
  const { rowCount } = await db.raw<{ rowCount: number }>(
    `delete from partner_job_days where day < (now() at time zone 'Europe/London')::date - ?::int`,
    [JOB_DAYS_KEPT],
  );
  return rowCount ?? 0;
}

function dailyLimitError(limit: number, retryAfter: number, testMode: boolean, field = '/'): AppError {
  const kind = testMode ? 'test-mode jobs' : 'jobs';
  const policy = testMode ? 'partner-daily-test-jobs' : 'partner-daily-jobs';
  return new AppError(
    'daily_limit_reached',
    `The daily limit of ${limit} new ${kind} (Europe/London day) is reached; send more after midnight UK time.`,
    [{ field, problem: `at most ${limit} new ${kind} per day` }],
    {
      'Retry-After': String(retryAfter),
      'RateLimit-Policy': `"${policy}";q=${limit};w=86400`,
      RateLimit: `"${policy}";r=0;t=${retryAfter}`,
    },
  );
}

const norm = (v: unknown) => (typeof v === 'string' ? v.trim().toLowerCase().replace(/\s+/g, ' ') : (v ?? null));

/** A job's content: what tells a replay from a change, and what an amendment merges into. */
type ContentField =
  | 'pickup'
  | 'dropoff'
  | 'pickupTime'
  | 'passengerName'
  | 'passengerPhone'
  | 'passengerEmail'
  | 'passengers'
  | 'vehicleType'
  | 'flightNumber'
  | 'farePence'
  | 'notes';

/** The content field each job field fills (`fare` in pounds is `farePence`). */
const CONTENT_FIELD_OF: Readonly<Record<string, ContentField>> = {
  pickup: 'pickup',
  dropoff: 'dropoff',
  pickupTime: 'pickupTime',
  passengerName: 'passengerName',
  passengerPhone: 'passengerPhone',
  passengerEmail: 'passengerEmail',
  passengers: 'passengers',
  vehicleType: 'vehicleType',
  flightNumber: 'flightNumber',
  fare: 'farePence',
  notes: 'notes',
};

/** What a new job needs; an amendment that leaves one out keeps it. */
const JOURNEY_REQUIRED = ['pickup', 'dropoff', 'pickupTime'] as const;

/**
 * The screen's refusals of a jobRef that are about its form, not its content: an identifier
 * with a control or invisible character is malformed (`invalid_input`), where instructions or
 * encoded data in it stay the screen's `content_rejected` (CONTRACT.md section 1).
 */
const MALFORMED_REFERENCE = /^\/jobRef: (?:too_long|control|hidden|invalid|variation_selector)\b/;

/**
 * A jobRef's fault of form (length is the schema's), or null. For a new job, spaces at either
 * end are one: " A-1" and "A-1" would be two jobs to us and one to the partner's eye, and a
 * cancel of one would miss the other. (An amend or cancel may still name a job received with
 * them before they were refused.)
 */
function jobRefFault(value: unknown, action: unknown): ErrorDetail | null {
  if (typeof value !== 'string' || value.length > FIELD_LIMITS.reference) return null;
  const screened = screenFields([{ pointer: '/jobRef', kind: 'reference', value }]);
  if (!screened.ok && screened.reasons.every((r) => MALFORMED_REFERENCE.test(r))) return screened.details[0] ?? null;
  if (action !== undefined && action !== 'new') return null;
  if (value.length > 0 && value.trim() === '') return { field: '/jobRef', problem: 'must not be blank' };
  if (value.trim() !== value) return { field: '/jobRef', problem: 'must not begin or end with a space' };
  return null;
}

/** A job's content as it is hashed and stored (`partner_jobs.payload`, with action and jobRef). */
function contentOf(job: Omit<NormJob, 'hash' | 'payload' | 'sent'>): Record<ContentField, unknown> {
  return {
    pickup: job.pickup,
    dropoff: job.dropoff,
    pickupTime: job.pickupTime?.toISOString(),
    passengerName: job.passengerName,
    passengerPhone: job.passengerPhone,
    passengerEmail: job.passengerEmail,
    passengers: job.passengers,
    vehicleType: job.vehicleType,
    flightNumber: job.flightNumber,
    farePence: job.farePence,
    notes: job.notes,
  };
}

/** The job with its content hash and payload: the same content from the same source and jobRef hashes the same. */
function sealed(sourceKey: string, job: Omit<NormJob, 'hash' | 'payload'>): NormJob {
  const content = contentOf(job);
  const entries = Object.keys(content)
    .sort()
    .map((k) => [k, norm(content[k as ContentField])]);
  const hash = sha256(JSON.stringify([sourceKey, job.jobRef, entries]));
  return { ...job, hash, payload: { action: job.action, ...content, jobRef: job.jobRef } };
}

/**
 * Validate, screen and normalise one job; throws the AppError that rejects it. `merges`: an
 * `amend` is applied over the job as last received (a partner's), so it needs none of a new
 * job's required fields; otherwise (a supplier's, whose formats send the whole booking) it
 * needs them as `new` does.
 */
async function normaliseJob(
  deps: IntakeDeps,
  sourceKey: string,
  raw: unknown,
  testMode: boolean,
  merges: boolean,
): Promise<NormJob> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new AppError('invalid_input', 'Each job must be a JSON object.', [{ field: '/', problem: 'must be object' }]);
  }
  // NUL or an unpaired surrogate rejects this job alone (the route leaves the check to us).
  assertStorableText(raw, 'job');
  // What the job carries, read before validation fills in defaults (passengers: 1): an
  // amendment changes only these.
  const sent = new Set(
    Object.keys(raw).flatMap((k) => (Object.hasOwn(CONTENT_FIELD_OF, k) ? [CONTENT_FIELD_OF[k] as ContentField] : [])),
  );
  const details: ErrorDetail[] & { contentRejected?: boolean } = validateJob(raw);
  // A jobRef is an identifier: control or invisible characters in it are a malformed value,
  // listed with the schema's findings (its length is the schema's own maxLength).
  const refFault = jobRefFault((raw as { jobRef?: unknown }).jobRef, (raw as { action?: unknown }).action);
  if (details.length > 0 || refFault) {
    // Over-long free text is refused as the content screen below refuses it.
    if (details.contentRejected && !refFault) {
      deps.logger?.warn({ reasons: details.map((d) => `${d.field}: too_long`) }, 'partner job content rejected');
      throw contentRejected(details);
    }
    const all = refFault ? [refFault, ...details] : [...details];
    throw new AppError('invalid_input', `The job is not valid: ${detailsText(all)}.`, all);
  }
  const job = raw as PartnerJob;
  const action: Action = job.action ?? 'new';
  // A cancellation reads its jobRef and its notes (kept as the cancellation's reason, which
  // operators and partners read, so screened as a passenger's reason is); the rest of a whole
  // job sent with it is neither stored nor told to anyone, and its content, screened, would
  // only stand between a partner and the cancellation it asked for.
  const cancels = action === 'cancel';
  const screened = screenFields([
    { pointer: '/jobRef', kind: 'reference', value: job.jobRef },
    ...(cancels
      ? []
      : ([
          { pointer: '/pickup', kind: 'address', value: job.pickup },
          { pointer: '/dropoff', kind: 'address', value: job.dropoff },
          { pointer: '/passengerName', kind: 'name', value: job.passengerName },
          { pointer: '/flightNumber', kind: 'flightNumber', value: job.flightNumber },
        ] as const)),
    { pointer: '/notes', kind: 'notes', value: job.notes },
  ]);
  if (!screened.ok) {
    deps.logger?.warn({ reasons: screened.reasons }, 'partner job content rejected');
    throw contentRejected(screened.details);
  }
  if (!cancels) {
    const blank = (k: (typeof JOURNEY_REQUIRED)[number]) => job[k] === undefined || String(job[k]).trim() === '';
    // A new job (and a supplier's amendment) needs them all; a partner's amendment may leave
    // them out (kept), but one it sends must say something.
    const missing: ErrorDetail[] = JOURNEY_REQUIRED.filter((k) =>
      action === 'amend' && merges ? job[k] !== undefined && blank(k) : blank(k),
    ).map((k) => ({
      field: `/${k}`,
      problem: job[k] === undefined ? `is required for action ${action}` : 'must not be blank',
    }));
    if (missing.length > 0) {
      throw new AppError('invalid_input', `Missing: ${detailsText(missing)}.`, missing);
    }
  }
  // null is "none" (on an amendment: cleared), as if left out of a new job.
  const passengerPhone = job.passengerPhone?.trim() ? normalisePhone(job.passengerPhone) : null;
  let passengerEmail: string | null = null;
  if (!cancels && job.passengerEmail?.trim()) {
    const checked = await checkEmail(job.passengerEmail, configuredCheck(deps.config.bookings, testMode));
    if (!checked.accepted) {
      throw new AppError('email_not_accepted', EMAIL_PROBLEM_MESSAGES[checked.problem], [
        { field: '/passengerEmail', problem: checked.problem },
      ]);
    }
    passengerEmail = checked.email;
  }
  return sealed(sourceKey, {
    jobRef: job.jobRef,
    action,
    pickup: job.pickup?.trim(),
    dropoff: job.dropoff?.trim(),
    pickupTime: job.pickupTime ? new Date(job.pickupTime) : undefined,
    passengerName: job.passengerName?.trim() || 'Passenger',
    passengerPhone,
    passengerEmail,
    passengers: job.passengers ?? 1,
    vehicleType: parseVehicleType(job.vehicleType ?? undefined),
    flightNumber: job.flightNumber?.trim() || null,
    farePence: job.fare === undefined || job.fare === null ? null : Math.round(job.fare * 100),
    notes: job.notes?.trim() || null,
    sent,
  });
}

/** What a job's price depends on: a change to any of them re-prices it. */
const PRICE_INPUTS = ['pickup', 'dropoff', 'pickupTime', 'passengers', 'vehicleType'] as const;

/** Whether the job's price inputs differ from the job as last received (`stored`, its payload), as the content hash compares them. */
function journeyChanged(job: Omit<NormJob, 'hash' | 'payload' | 'sent'>, stored: Record<string, unknown>): boolean {
  const content = contentOf(job);
  return PRICE_INPUTS.some((k) => norm(content[k]) !== norm(stored[k]));
}

/**
 * A partner's amendment applied over the job as last received (`partner_jobs.payload`, the
 * normalised content of its last new or amend): what the amendment sends replaces, what it
 * leaves out is kept, and a field sent as null is cleared to its default (JSON merge patch,
 * RFC 7396). The result is hashed as a whole job, so an amendment that changes nothing hashes
 * as the stored job does and is `unchanged`.
 *
 * The agreed fare an amendment leaves out is kept only for the same journey: a changed journey
 * (one that re-prices) without a fare has none, and is priced on the tariffs. A fare agreed for
 * a local ride is not carried over to a long one (the driver is paid that fare), whether or not
 * the partner may still set fares; a partner that may sends the fare with the new journey.
 */
function mergedAmendment(sourceKey: string, job: NormJob, stored: Record<string, unknown>): NormJob {
  const kept = (k: ContentField) => !job.sent.has(k);
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
  const storedTime = text(stored.pickupTime);
  const merged: Omit<NormJob, 'hash' | 'payload'> = {
    ...job,
    pickup: kept('pickup') ? (text(stored.pickup) ?? undefined) : job.pickup,
    dropoff: kept('dropoff') ? (text(stored.dropoff) ?? undefined) : job.dropoff,
    pickupTime: kept('pickupTime') ? (storedTime ? new Date(storedTime) : undefined) : job.pickupTime,
    passengerName: kept('passengerName') ? (text(stored.passengerName) ?? 'Passenger') : job.passengerName,
    passengerPhone: kept('passengerPhone') ? text(stored.passengerPhone) : job.passengerPhone,
    passengerEmail: kept('passengerEmail') ? text(stored.passengerEmail) : job.passengerEmail,
    passengers: kept('passengers') ? (typeof stored.passengers === 'number' ? stored.passengers : 1) : job.passengers,
    // Stored as parsed (a vehicle type), so read back as it was.
    vehicleType: kept('vehicleType')
      ? ((text(stored.vehicleType) as VehicleType | null) ?? undefined)
      : job.vehicleType,
    flightNumber: kept('flightNumber') ? text(stored.flightNumber) : job.flightNumber,
    farePence: kept('farePence') ? (typeof stored.farePence === 'number' ? stored.farePence : null) : job.farePence,
    notes: kept('notes') ? text(stored.notes) : job.notes,
  };
  // A job is always stored with its journey; should one not be, the amendment must send it.
  const missing = JOURNEY_REQUIRED.filter((k) => merged[k] === undefined).map((k) => ({
    field: `/${k}`,
    problem: 'is required: the job as received has none',
  }));
  if (missing.length > 0) throw new AppError('invalid_input', `Missing: ${detailsText(missing)}.`, missing);
  if (kept('farePence') && merged.farePence !== null && journeyChanged(merged, stored)) {
    return sealed(sourceKey, { ...merged, farePence: null });
  }
  return sealed(sourceKey, merged);
}

/**
 * The booking a refusal is about, when the job is one the sender already has (an amendment of
 * a cancelled booking, a cancel once the passenger is on board): `rejected` reports its
 * reference, so the partner sees which booking stood in the way.
 */
const bookingOfRefusal = new WeakMap<AppError, string>();

function aboutBooking<T>(reference: string, work: Promise<T>): Promise<T> {
  return work.catch((err: unknown) => {
    if (!(err instanceof AppError)) throw err;
    // A copy of its own: one error can refuse many jobs at once (a pricing batch that failed
    // rejects every waiter with the same object), each about its own booking.
    const own = new AppError(err.code, err.message, err.details, err.headers);
    bookingOfRefusal.set(own, reference);
    throw own;
  });
}

function rejected(index: number, jobRef: string | null, action: Action | null, err: AppError): PartnerJobResult {
  return {
    index,
    jobRef,
    action,
    outcome: 'rejected',
    status: err.status,
    bookingReference: bookingOfRefusal.get(err) ?? null,
    error: {
      code: err.code,
      message: err.message,
      details: err.details,
      // A refusal for now (the daily limit) says when, as its Retry-After would on a whole 429.
      ...retryAfterField(err),
    },
  };
}

/** Where a job comes from: the partner_jobs column that keys it and the owner's id. */
interface Source {
  column: 'partner_id' | 'supplier_id';
  id: string;
  /** Part of the content hash; a partner's is its bare id (hashes stored before suppliers). */
  key: string;
  actor: string;
  supplier: IntakeSupplier | null;
}

function sourceOf(caller: IntakeCaller): Source {
  if (caller.partner) {
    const id = caller.partner.id;
    return { column: 'partner_id', id, key: id, actor: `partner:${id}`, supplier: null };
  }
  const supplier = caller.supplier;
  if (!supplier) throw new Error('intake caller has neither a partner nor a supplier');
  return {
    column: 'supplier_id',
    id: supplier.id,
    key: `supplier:${supplier.id}`,
    actor: `supplier:${supplier.slug}`,
    supplier,
  };
}

/**
 * Whether the source's amendments are merged over the job as last received (a partner's: an
 * `amend` sends what changes) or replace it (a supplier's: its formats send the whole booking
 * on an update, so a field it leaves out is one the booking no longer has).
 */
function mergesAmendments(source: Source): boolean {
  return source.column === 'partner_id';
}

/** The columns of a received job and its booking that intake decides on. */
const JOB_COLUMNS = [
  'j.id',
  'j.job_ref',
  'j.booking_id',
  'j.content_hash',
  'j.last_action',
  'j.payload',
  'b.reference',
  'b.status',
  'b.test_mode',
] as const;

async function findJob(db: Db, source: Source, jobRef: string): Promise<PartnerJobRow | undefined> {
  return (await findJobs(db, source, [jobRef])).get(jobRef);
}

/**
 * The jobs of these jobRefs already received from the source, by jobRef (one query). The
 * jobRefs drive the join, one probe each of the (source, jobRef) unique index: the plan does
 * not depend on how many jobs the source has sent or on how fresh the table's statistics are
 * (with `job_ref in (...)` and stale statistics Postgres scanned all of a partner's jobs).
 */
async function findJobs(db: Db, source: Source, jobRefs: readonly string[]): Promise<Map<string, PartnerJobRow>> {
  if (jobRefs.length === 0) return new Map();
  const { rows } = await rawNamed<{ rows: PartnerJobRow[] }>(
    db,
    `select ${JOB_COLUMNS.join(', ')}
       from unnest(?::text[]) as r(job_ref)
       join partner_jobs j on j.${source.column} = ? and j.job_ref = r.job_ref
       join bookings b on b.id = j.booking_id`,
    [jobRefs as string[], source.id],
  );
  return new Map(rows.map((r) => [r.job_ref, r]));
}

/** Looked up once for a batch's new jobs: blocked passengers by job index, and the caller's rate card. */
interface BatchLookups {
  blocked: Map<number, AppError>;
  rateCard: { id: string } | null;
}

/** The guard of a batch of new jobs: their partner_jobs rows, skipping jobRefs that exist; returns the bookings written. */
/**
 * The daily limit a partner's new jobs are written under, named to the database for the
 * statement's transaction: the partner_jobs trigger refuses the statement with SQLSTATE
 * `DTNDL` when it takes the day's count over it (migration 20261126002400), so concurrent
 * batches cannot each spend the same allowance. Its one binding is the limit, after the rows'.
 */
const DAILY_LIMIT_SETTING = `(select set_config('dtn.daily_job_limit', ?::int::text, true)) as daily_limit`;

/** SQLSTATE of the partner_jobs trigger's refusal: the statement would go over the day's limit. */
const DAILY_LIMIT_REACHED = 'DTNDL';

const BATCH_GUARDS = {
  partner_id: `insert into partner_jobs (id, partner_id, job_ref, booking_id, last_action, content_hash, payload, job_fee_pence, test_mode, created_at, updated_at)
    select id, partner_id, job_ref, booking_id, last_action, content_hash, payload, job_fee_pence, test_mode, created_at, updated_at
    from json_populate_recordset(null::partner_jobs, ?::json) cross join ${DAILY_LIMIT_SETTING}
    on conflict (partner_id, job_ref) where partner_id is not null do nothing returning booking_id as key`,
  supplier_id: `insert into partner_jobs (id, supplier_id, job_ref, booking_id, last_action, content_hash, payload, job_fee_pence, test_mode, created_at, updated_at)
    select id, supplier_id, job_ref, booking_id, last_action, content_hash, payload, job_fee_pence, test_mode, created_at, updated_at
    from json_populate_recordset(null::partner_jobs, ?::json)
    on conflict (supplier_id, job_ref) where supplier_id is not null do nothing returning booking_id as key`,
} as const;

/** A job result that is not a rejection. */
function accepted(
  index: number,
  job: NormJob,
  outcome: PartnerJobResult['outcome'],
  status: number,
  ref: string,
): PartnerJobResult {
  return { index, jobRef: job.jobRef, action: job.action, outcome, status, bookingReference: ref, error: null };
}

/** The outcome of a job that failed for a reason other than its content: the rest of the batch stands. */
function failed(deps: IntakeDeps, index: number, job: NormJob, err: unknown): PartnerJobResult {
  if (err instanceof AppError) return rejected(index, job.jobRef, job.action, err);
  deps.logger?.error({ err, jobRef: job.jobRef }, 'partner job failed');
  return rejected(
    index,
    job.jobRef,
    job.action,
    new AppError('internal_error', 'This job could not be processed; retry it.'),
  );
}

/** Postgres's SQLSTATE for a transaction ended to break a deadlock. */
const DEADLOCK = '40P01';

const PARTNER_JOB_GUARD = `insert into partner_jobs (id, partner_id, job_ref, booking_id, last_action, content_hash, payload, test_mode, created_at, updated_at)
  select ?::uuid, ?::uuid, ?, ?::uuid, 'new', ?::bytea, ?::jsonb, ?::boolean, ?::timestamptz, ?::timestamptz from ${DAILY_LIMIT_SETTING}
  on conflict (partner_id, job_ref) where partner_id is not null do nothing returning id`;

const SUPPLIER_JOB_GUARD = `insert into partner_jobs (id, supplier_id, job_ref, booking_id, last_action, content_hash, payload, job_fee_pence, test_mode, created_at, updated_at)
  values (?, ?, ?, ?, 'new', ?, ?::jsonb, ?, ?, ?, ?)
  on conflict (supplier_id, job_ref) where supplier_id is not null do nothing returning id`;

/** The job was amended by another request after this amendment was decided on it (merged, priced or not): decide again. */
class AmendedMeanwhile extends Error {
  constructor() {
    super('partner job amended meanwhile');
  }
}

/**
 * Whether the booking's price still stands for this job: what it was priced on is what the job
 * as last received (`stored`, its payload) says, compared as the content hash compares, and a
 * tariff fare is not being restored in place of the partner's (its fare sent as null). `amend`
 * checks under the booking's lock that `stored` is still the job's (its content hash).
 */
function pricedOn(job: NormJob, stored: Record<string, unknown>): boolean {
  if (journeyChanged(job, stored)) return false;
  return !(job.farePence === null && typeof stored.farePence === 'number');
}

class Intake {
  constructor(
    private readonly deps: IntakeDeps,
    private readonly caller: IntakeCaller,
    private readonly baseUrl: string,
  ) {
    this.source = sourceOf(caller);
  }

  private readonly source: Source;

  private get partnerId(): string | null {
    return this.caller.partner?.id ?? null;
  }

  private bookingCaller(): BookingCaller {
    return {
      apiKeyId: this.caller.apiKeyId,
      partnerId: this.partnerId,
      testMode: this.caller.testMode,
      scope: this.caller.scope,
      testScenario: this.caller.testScenario ?? null,
    };
  }

  private checkFare(job: NormJob): void {
    // A supplier's price is the agreed fare; a partner needs permission to set one.
    // Only a fare the job sends: one kept by an amendment that leaves it out was allowed when set.
    if (
      job.farePence !== null &&
      job.sent.has('farePence') &&
      this.caller.partner &&
      !this.caller.partner.canSetFares
    ) {
      throw new AppError(
        'forbidden',
        'This partner may not set fares: leave "fare" out to be priced on the published tariffs.',
        [{ field: '/fare', problem: 'not allowed for this partner' }],
      );
    }
  }

  private async price(job: NormJob, rateCard?: { id: string } | null, now = new Date()): Promise<PricedQuote> {
    return priceQuote(
      this.deps,
      {
        pickup: job.pickup as string,
        dropoff: job.dropoff as string,
        departAt: (job.pickupTime as Date).toISOString(),
        passengers: job.passengers,
        vehicleType: job.vehicleType,
        meetAndGreet: false,
        worldwide: false,
      },
      this.quoteCaller(),
      this.baseUrl,
      now,
      rateCard,
    ).catch((err: unknown) => {
      // Pricing names the time as quotes do (/departAt); a job's is its pickupTime (and a
      // supplier's own name for it, which asSupplierSent puts on from there).
      if (!(err instanceof AppError)) throw err;
      const { message, details, changed } = repointed(err.message, err.details, (p) =>
        p === '/departAt' ? '/pickupTime' : p,
      );
      // A job has no `worldwide`: a place abroad is refused, without telling the sender to send it.
      const abroad = ': jobs are for journeys in the UK';
      const unhinted = details.map((d) => ({ ...d, problem: withoutWorldwideHint(d.problem, abroad) }));
      const rewritten = unhinted.some((d, i) => d.problem !== details[i]?.problem);
      if (!changed && !rewritten) throw err;
      throw new AppError(err.code, withoutWorldwideHint(message, abroad), unhinted, err.headers);
    });
  }

  /** A job's booking rows (`bookingWrite`), the booking naming its supplier when it came from one. */
  private bookingRows(job: NormJob, priced: PricedQuote, now: Date) {
    const write = bookingWrite(
      this.deps,
      priced.row as unknown as Parameters<typeof bookingWrite>[1],
      {
        origin: this.source.supplier ? 'supplier' : 'partner',
        quoteId: priced.quote.id,
        // bookings.passenger_phone is nullable: a partner job may come without a phone.
        passenger: { name: job.passengerName, phone: job.passengerPhone as string, email: job.passengerEmail },
        paymentMethod: 'account',
        flightNumber: job.flightNumber,
        notes: job.notes,
        farePenceOverride: job.farePence,
      },
      this.bookingCaller(),
      this.baseUrl,
      now,
    );
    // bookingWrite knows partners only: the booking row names its supplier.
    const supplier = this.source.supplier;
    if (supplier) {
      for (const insert of write.inserts) if (insert.table === 'bookings') insert.row.supplier_id = supplier.id;
    }
    return write;
  }

  /** The daily limit this partner's new jobs are written under; null for a supplier (none). */
  private dailyLimit(): number | null {
    const partner = this.caller.partner;
    return partner ? (partner.dailyJobLimit ?? this.deps.config.intake.dailyJobLimit) : null;
  }

  /** What is left of the day's allowance as it stands now, and the refusal for a job beyond it. */
  private async allowanceNow(): Promise<{ remaining: number; error: AppError }> {
    const partner = this.caller.partner;
    if (!partner) throw new Error('a supplier has no daily limit');
    const a = await dailyAllowance(this.deps, partner, this.caller.testMode);
    const error = dailyLimitError(a.limit, a.retryAfterSeconds, this.caller.testMode, '/jobRef');
    // A job the counter refused when written (a concurrent request spent the allowance): the
    // answer, should it be a 429, carries the limit's headers as an up-front refusal's does.
    this.limitHeaders = error.headers;
    return { remaining: a.remaining, error };
  }

  /** The daily limit's Retry-After and RateLimit headers, once a job of this request was refused by it. */
  limitHeaders: Record<string, string> | undefined;

  private quoteCaller() {
    return { apiKeyId: this.caller.apiKeyId, partnerId: this.partnerId, testMode: this.caller.testMode };
  }

  private async checkPassenger(job: NormJob): Promise<void> {
    if (job.passengerPhone || job.passengerEmail) {
      await assertNotBlocked(this.deps.db, {
        name: job.passengerName,
        phone: job.passengerPhone as string,
        email: job.passengerEmail,
      });
    }
  }

  async run(index: number, job: NormJob, overLimit: AppError | null): Promise<PartnerJobResult> {
    const ok = (outcome: PartnerJobResult['outcome'], status: number, ref: string) =>
      accepted(index, job, outcome, status, ref);
    const existing = await findJob(this.deps.db, this.source, job.jobRef);
    // Test and live jobs are kept apart: a key never reads or changes the other mode's job.
    if (existing && existing.test_mode !== this.caller.testMode) {
      throw new AppError(
        'conflict',
        `jobRef "${job.jobRef}" is already used by a ${existing.test_mode ? 'test-mode' : 'live'} job of yours; test and live jobs are kept apart, so use another jobRef.`,
        [{ field: '/jobRef', problem: `used in ${existing.test_mode ? 'test' : 'live'} mode` }],
      );
    }
    if (job.action === 'new') {
      if (!existing) {
        if (overLimit) throw overLimit;
        const made = await this.create(job);
        if (made) return ok('created', 201, made);
        // A concurrent request made it first: treat as a repeat of that job.
        const now = await findJob(this.deps.db, this.source, job.jobRef);
        if (!now) throw new Error('partner job guard refused but no job exists');
        return aboutBooking(now.reference, this.amendOrSame(job, now, ok));
      }
      return aboutBooking(existing.reference, this.amendOrSame(job, existing, ok));
    }
    if (!existing) {
      throw new AppError(
        'job_not_found',
        `No job with jobRef "${job.jobRef}" was received from this ${this.source.supplier ? 'supplier' : 'partner'}.`,
        [{ field: '/jobRef', problem: 'unknown job reference' }],
      );
    }
    if (job.action === 'amend') return aboutBooking(existing.reference, this.amendOrSame(job, existing, ok));
    return aboutBooking(existing.reference, this.cancel(job, existing, ok));
  }

  /**
   * A job received again: `unchanged` when its content is the job's as stored, else amended.
   * A partner's `amend` is merged over the stored job first (`mergedAmendment`). Every
   * amendment (a supplier's update and a repeated `new` too) is decided on the job as read
   * here: the merge, and whether it re-prices (`pricedOn`). Should another request amend the
   * job between that read and the write, it is decided again over what that request left (the
   * content hash is checked under the booking's lock), so neither amendment undoes the other
   * and the booking always matches the payload stored with it.
   */
  private async amendOrSame(
    job: NormJob,
    row: PartnerJobRow,
    ok: (o: PartnerJobResult['outcome'], s: number, r: string) => PartnerJobResult,
  ): Promise<PartnerJobResult> {
    const merges = job.action === 'amend' && mergesAmendments(this.source);
    let current = row;
    for (let attempt = 1; ; attempt++) {
      const target = merges ? mergedAmendment(this.source.key, job, current.payload) : job;
      const same = current.content_hash.equals(target.hash);
      if (same && current.last_action !== 'cancel') return ok('unchanged', 200, current.reference);
      if (same && target.action === 'new' && current.status === 'cancelled')
        return ok('unchanged', 200, current.reference);
      try {
        await this.amend(target, current);
        return ok('amended', 200, current.reference);
      } catch (err) {
        if (!(err instanceof AmendedMeanwhile)) throw err;
        // Each round one of the racing amendments is written, so this ends; the bound is for
        // a job amended without pause by many requests at once.
        if (attempt >= 10) {
          throw new AppError(
            'conflict',
            `Job "${job.jobRef}" was amended by other requests while this amendment was applied; send it again.`,
            [{ field: '/jobRef', problem: 'amended concurrently' }],
          );
        }
        const now = await findJob(this.deps.db, this.source, job.jobRef);
        if (!now) throw new Error(`partner job ${current.id} disappeared while amended`);
        current = now;
      }
    }
  }

  /** Price and write a new booking with its partner_jobs row in one statement; null when the jobRef was taken meanwhile. */
  private async create(job: NormJob): Promise<string | null> {
    this.checkFare(job);
    await this.checkPassenger(job);
    const priced = await this.price(job);
    for (let attempt = 0; ; attempt++) {
      const now = new Date();
      const write = this.bookingRows(job, priced, now);
      const supplier = this.source.supplier;
      const common = [uuidv7(), this.source.id, job.jobRef, write.row.id, job.hash, JSON.stringify(job.payload)];
      const guard = supplier
        ? {
            sql: SUPPLIER_JOB_GUARD,
            // SPEC.md 2.10: jobs from the named external platform carry its job fee (pass-through).
            bindings: [...common, supplier.externalPlatform ? supplier.jobFeePence : 0, this.caller.testMode, now, now],
          }
        : { sql: PARTNER_JOB_GUARD, bindings: [...common, this.caller.testMode, now, now, this.dailyLimit()] };
      try {
        const { passed } = await insertAllIf(this.deps.db, guard, [
          { table: 'quotes', row: { ...priced.row, redeemed_at: now } },
          ...write.inserts,
        ]);
        return passed ? write.row.reference : null;
      } catch (err) {
        const e = err as { constraint?: string; code?: string };
        // A booking reference collision is retried with a new reference.
        if (e.constraint === 'bookings_reference_unique' && attempt < 5) continue;
        // A concurrent request spent what was left of the day's allowance.
        if (e.code === DAILY_LIMIT_REACHED) throw (await this.allowanceNow()).error;
        throw err;
      }
    }
  }

  /**
   * New jobs with jobRefs not received before, written together: the fare permission and the
   * blocked contacts checked for all at once, every job priced by one pricing request (the
   * pricing client coalesces them), then every booking with its quote, history, dispatch job
   * and partner_jobs row in ONE statement whose partner_jobs insert skips jobRefs that exist
   * (`insertManyIf`). Writes each job's outcome into `results`; returns the jobs whose jobRef
   * a concurrent request wrote first, to be handled as repeats of that job.
   */
  /** What `createMany` looks up for new jobs, fetched while the batch's existing jobs are read. */
  async lookups(items: readonly { index: number; job: NormJob }[]): Promise<BatchLookups> {
    const [blocked, rateCard] = await Promise.all([
      blockedAmong(
        this.deps.db,
        items.map(({ job }) => ({ phone: job.passengerPhone, email: job.passengerEmail })),
      ),
      rateCardOf(this.deps.db, this.quoteCaller()),
    ]);
    const byIndex = new Map<number, AppError>();
    for (const [i, err] of blocked) byIndex.set((items[i] as { index: number }).index, err);
    return { blocked: byIndex, rateCard };
  }

  async createMany(
    items: readonly { index: number; job: NormJob }[],
    results: PartnerJobResult[],
    { blocked, rateCard }: BatchLookups,
  ): Promise<{ index: number; job: NormJob }[]> {
    const live: { index: number; job: NormJob }[] = [];
    for (const it of items) {
      try {
        this.checkFare(it.job);
        live.push(it);
      } catch (err) {
        results[it.index] = failed(this.deps, it.index, it.job, err);
      }
    }
    if (live.length === 0) return [];
    const now = new Date();
    const priced = await Promise.all(
      live.map(async (it) => {
        const hit = blocked.get(it.index);
        if (hit) {
          results[it.index] = failed(this.deps, it.index, it.job, hit);
          return null;
        }
        try {
          return { ...it, priced: await this.price(it.job, rateCard, now) };
        } catch (err) {
          results[it.index] = failed(this.deps, it.index, it.job, err);
          return null;
        }
      }),
    );
    // In jobRef order: batches of one sender overlapping in other orders then take their
    // partner_jobs rows in one order, so neither waits on the other's row while holding one it
    // wants (a deadlock, which Postgres ends by failing one batch whole).
    let ready = priced
      .filter((p): p is NonNullable<typeof p> => p !== null)
      .sort((a, b) => (a.job.jobRef < b.job.jobRef ? -1 : a.job.jobRef > b.job.jobRef ? 1 : 0));
    if (ready.length === 0) return [];
    const supplier = this.source.supplier;
    for (let attempt = 0; ; attempt++) {
      const writtenAt = new Date();
      const guardRows: Record<string, unknown>[] = [];
      const inserts: KeyedRowInsert[] = [];
      const byBooking = new Map<string, { index: number; job: NormJob; reference: string }>();
      for (const { index, job, priced: p } of ready) {
        const write = this.bookingRows(job, p, writtenAt);
        const key = write.row.id;
        byBooking.set(key, { index, job, reference: write.row.reference });
        guardRows.push({
          id: uuidv7(),
          [this.source.column]: this.source.id,
          job_ref: job.jobRef,
          booking_id: key,
          last_action: 'new',
          content_hash: `\\x${job.hash.toString('hex')}`,
          payload: job.payload,
          // SPEC.md 2.10: jobs from the named external platform carry its job fee (pass-through).
          job_fee_pence: supplier?.externalPlatform ? supplier.jobFeePence : 0,
          test_mode: this.caller.testMode,
          created_at: writtenAt,
          updated_at: writtenAt,
        });
        inserts.push({ table: 'quotes', key, row: { ...p.row, redeemed_at: writtenAt } });
        for (const insert of write.inserts) inserts.push({ ...insert, key });
      }
      let written: Set<string>;
      try {
        written = await insertManyIf(
          this.deps.db,
          {
            sql: BATCH_GUARDS[this.source.column],
            bindings: supplier ? [JSON.stringify(guardRows)] : [JSON.stringify(guardRows), this.dailyLimit()],
          },
          inserts,
        );
      } catch (err) {
        // A booking reference collision is retried with new references; a deadlock (should
        // another statement take these rows in another order) is retried as it is.
        const e = err as { constraint?: string; code?: string };
        if ((e.constraint === 'bookings_reference_unique' || e.code === DEADLOCK) && attempt < 5) continue;
        if (e.code === DAILY_LIMIT_REACHED) {
          // A concurrent batch spent part of the allowance this one counted on: what is left
          // now goes to the first jobs in the request's order, the rest are refused as over the
          // limit, and the write is tried again (it is refused again only if another batch
          // got in first once more).
          const { remaining, error } = await this.allowanceNow();
          const kept = new Set(
            [...ready]
              .sort((a, b) => a.index - b.index)
              .slice(0, remaining)
              .map((r) => r.index),
          );
          for (const { index, job } of ready) {
            if (!kept.has(index)) results[index] = rejected(index, job.jobRef, job.action, error);
          }
          ready = ready.filter((r) => kept.has(r.index));
          if (ready.length === 0) return [];
          if (attempt >= 5) {
            // Refused again and again by batches getting in first: what is left is over the
            // limit as far as this request can tell; the partner sends it again.
            for (const { index, job } of ready) results[index] = rejected(index, job.jobRef, job.action, error);
            return [];
          }
          continue;
        }
        for (const { index, job } of ready) results[index] = failed(this.deps, index, job, err);
        return [];
      }
      const raced: { index: number; job: NormJob }[] = [];
      for (const [bookingId, { index, job, reference }] of byBooking) {
        if (written.has(bookingId)) results[index] = accepted(index, job, 'created', 201, reference);
        else raced.push({ index, job });
      }
      return raced;
    }
  }

  /**
   * Update the booking and the job's content hash in one transaction, re-priced when what
   * the price depends on changed (the journey, the passengers, the vehicle, or the partner's
   * fare cleared): an amendment of the passenger's details, notes or flight alone keeps the
   * booking's quote and fare. Whether it re-prices is decided on `row` as read before the
   * lock (pricing is not called while the booking's row is locked): the job must still have
   * `row`'s content hash when the booking is locked, else `AmendedMeanwhile` (decided again
   * over the job as it is then), so the booking is never left at another request's journey
   * while the payload stored with it says this one's.
   */
  private async amend(job: NormJob, row: PartnerJobRow): Promise<void> {
    const notAmendable = (status: string) =>
      new AppError('conflict', `A booking that is ${status.replace(/_/g, ' ')} can no longer be amended.`, [
        { field: '/action', problem: `not allowed when ${status}` },
      ]);
    if (!AMENDABLE.has(row.status)) throw notAmendable(row.status);
    this.checkFare(job);
    await this.checkPassenger(job);
    const priced = pricedOn(job, row.payload) ? null : await this.price(job);
    await this.deps.db.transaction(async (trx) => {
      const booking = await trx<BookingRow>('bookings').where({ id: row.booking_id }).forUpdate().first();
      if (!booking) throw new Error(`partner job ${row.id} has no booking`);
      if (!AMENDABLE.has(booking.status)) throw notAmendable(booking.status);
      const stored = await trx('partner_jobs')
        .where({ id: row.id })
        .forUpdate()
        .first<{ content_hash: Buffer } | undefined>('content_hash');
      if (!stored?.content_hash.equals(row.content_hash)) throw new AmendedMeanwhile();
      const now = new Date();
      const current = booking as BookingRow & { flight_number: string | null; notes: string | null };
      // Not re-priced: the journey and the fare stay as the booking has them (the partner's
      // fare, when it sends one, is the fare).
      const fare = job.farePence ?? priced?.quote.farePence ?? current.fare_pence ?? 0;
      const journey = priced
        ? {
            pickup: priced.quote.pickup,
            dropoff: priced.quote.dropoff,
            pickupTime: priced.quote.departAt,
            passengers: job.passengers,
            vehicleType: priced.quote.vehicleType,
          }
        : {
            pickup: current.pickup,
            dropoff: current.dropoff,
            pickupTime: current.pickup_time,
            passengers: current.passengers,
            vehicleType: current.vehicle_type as VehicleType,
          };
      const changes = amendmentChanges(
        {
          pickup: current.pickup.name,
          dropoff: current.dropoff.name,
          pickupTime: current.pickup_time,
          passengers: current.passengers,
          vehicleType: current.vehicle_type,
          farePence: current.fare_pence,
          flightNumber: current.flight_number,
          passengerName: current.passenger_name,
          passengerPhone: current.passenger_phone,
          passengerEmail: current.passenger_email,
          notes: current.notes,
        },
        {
          pickup: journey.pickup.name,
          dropoff: journey.dropoff.name,
          pickupTime: journey.pickupTime,
          passengers: journey.passengers,
          vehicleType: journey.vehicleType,
          farePence: fare,
          flightNumber: job.flightNumber,
          passengerName: job.passengerName,
          passengerPhone: job.passengerPhone,
          passengerEmail: job.passengerEmail,
          notes: job.notes,
        },
      );
      await recordAmendment(trx, {
        id: uuidv7(),
        bookingId: booking.id,
        partnerJobId: row.id,
        actor: this.source.actor,
        farePenceBefore: booking.fare_pence ?? 0,
        farePenceAfter: fare,
        changes,
        at: now,
      });
      const partnerFare =
        job.farePence !== null
          ? JSON.stringify([{ code: 'partner_fare', description: 'Fare agreed by the partner', amountPence: fare }])
          : undefined;
      let repriced: Record<string, unknown> = {};
      if (priced) {
        const q = priced.row;
        await insertAllIf(trx, null, [{ table: 'quotes', row: { ...q, redeemed_at: now } }]);
        repriced = {
          quote_id: q.id,
          pickup: JSON.stringify(q.pickup),
          dropoff: JSON.stringify(q.dropoff),
          pickup_time: priced.quote.departAt,
          passengers: job.passengers,
          vehicle_type: priced.quote.vehicleType,
          fare_pence: fare,
          applied_rules: partnerFare ?? JSON.stringify(q.applied_rules),
          tariff_source: JSON.stringify(q.tariff_source),
        };
      } else if (partnerFare) {
        repriced = { fare_pence: fare, applied_rules: partnerFare };
      }
      await trx('bookings')
        .where({ id: booking.id })
        .update({
          ...repriced,
          passenger_name: job.passengerName,
          passenger_phone: job.passengerPhone,
          passenger_email: job.passengerEmail,
          flight_number: job.flightNumber,
          notes: job.notes,
          updated_at: now,
        });
      await trx('partner_jobs')
        .where({ id: row.id })
        .update({
          content_hash: job.hash,
          last_action: 'amend',
          payload: JSON.stringify(job.payload),
          updated_at: now,
        });
      // Whoever holds the job hears of it: an assigned driver is texted (or, when their
      // vehicle cannot take the amended job, the amendment is refused 409 and rolled back); an
      // open offer made with the old details is withdrawn and the job offered again.
      const lead = leadTimesOf(this.deps.config);
      const newDispatchAt = dispatchTimeMs(
        { pickupTime: journey.pickupTime, pickup: journey.pickup, dropoff: journey.dropoff },
        lead,
      );
      await amendmentReachesHolders(
        trx,
        booking as BookingRow & { vehicle_id: string | null; operator_partner_id: string | null },
        {
          passengers: journey.passengers,
          vehicleType: journey.vehicleType,
          changed: changes.map((c) => c.field),
          dispatchAt: newDispatchAt,
        },
        now,
      );
      // Moved earlier while not yet dispatched: dispatch at the new time (a repeated dispatch
      // job changes nothing, so the original delayed job is harmless). Moved later: the
      // original job comes too early, and dispatch's first step then waits for the new time
      // (`dispatchStep` in shared/services/dispatch.ts).
      const oldDispatchAt = dispatchTimeMs(
        { pickupTime: booking.pickup_time, pickup: booking.pickup, dropoff: booking.dropoff },
        lead,
      );
      if (booking.status === 'pending' && newDispatchAt < oldDispatchAt) {
        await enqueueJob(
          trx,
          'dispatch-booking',
          { bookingId: booking.id },
          {
            jobId: `dispatch-${booking.id}-amended-${now.getTime()}`,
            ...(newDispatchAt > now.getTime() ? { runAt: new Date(newDispatchAt) } : {}),
          },
        );
      }
    });
    // An amendment may have moved the booking back to pending: tracking streams re-read now.
    await publishBookingEvent(this.deps.redis, this.deps.config.queuePrefix, row.booking_id);
  }

  private async cancel(
    job: NormJob,
    row: PartnerJobRow,
    ok: (o: PartnerJobResult['outcome'], s: number, r: string) => PartnerJobResult,
  ): Promise<PartnerJobResult> {
    const already = row.status === 'cancelled';
    if (!already) {
      await cancelBooking(this.deps.db, row.booking_id, job.notes, this.source.actor);
      // The passenger's tracking page hears of it now, not at its next re-read.
      await publishBookingEvent(this.deps.redis, this.deps.config.queuePrefix, row.booking_id);
    }
    if (row.last_action !== 'cancel') {
      await this.deps
        .db('partner_jobs')
        .where({ id: row.id })
        .update({ last_action: 'cancel', updated_at: new Date() });
    }
    return ok(already ? 'unchanged' : 'cancelled', 200, row.reference);
  }
}

/** Run `fn` over items with at most `limit` at a time. */
async function pool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * Carry out a batch of jobs for a partner, one outcome per job in the order received.
 * Jobs with the same jobRef run one after another in order; others run concurrently.
 *
 * Daily limit: only `new` jobs with an unseen jobRef count (one partner_jobs row each, counted
 * per Europe/London day). The new jobs beyond what is left (in order) are rejected 429
 * `daily_limit_reached` one by one and the rest proceed, so a cancellation or amendment sent
 * beside new jobs is carried out even when none is left. `limitHeaders` are then the limit's
 * Retry-After and RateLimit headers, for an answer that is a 429 (`jobsAnswer`).
 */
export async function processJobs(
  deps: IntakeDeps,
  caller: IntakeCaller,
  jobs: readonly unknown[],
  baseUrl: string,
): Promise<{ results: PartnerJobResult[]; limitHeaders?: Record<string, string> }> {
  const source = sourceOf(caller);
  const results: PartnerJobResult[] = new Array(jobs.length);
  const valid: { index: number; job: NormJob }[] = [];
  // Jobs refused before they were read (their schema, the content screen, the e-mail check)
  // whose jobRef could be one: a job already received under it is named in the result.
  const refusedEarly: { index: number; jobRef: string }[] = [];
  await Promise.all(
    jobs.map(async (raw, index) => {
      try {
        valid.push({
          index,
          job: await normaliseJob(deps, source.key, raw, caller.testMode, mergesAmendments(source)),
        });
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        const r = raw as { jobRef?: unknown; action?: unknown } | null;
        // Echoed only when it could be a jobRef: an over-long one (100 KB, say) is not sent back,
        // nor one with a NUL or half a surrogate pair, which no column stores or looks up.
        const jobRef =
          typeof r?.jobRef === 'string' &&
          r.jobRef.length <= FIELD_LIMITS.reference &&
          unstorableText(r.jobRef) === null
            ? r.jobRef
            : null;
        const action =
          typeof r?.action === 'string' && ['new', 'amend', 'cancel'].includes(r.action)
            ? (r.action as Action)
            : r && typeof r === 'object' && !Array.isArray(r) && r.action === undefined
              ? 'new'
              : null;
        results[index] = rejected(index, jobRef, action, err);
        if (jobRef !== null) refusedEarly.push({ index, jobRef });
      }
    }),
  );
  valid.sort((a, b) => a.index - b.index);

  const refs = [...new Set([...valid.map((v) => v.job.jobRef), ...refusedEarly.map((r) => r.jobRef)])];
  const intake = new Intake(deps, caller, baseUrl);
  const hasNew = valid.some((v) => v.job.action === 'new');
  // The lookups a batch needs go out together: the jobs already received, the day's allowance
  // (the daily limit is a partner's; suppliers are configured by us), and for the new jobs the
  // blocked contacts and the caller's rate card.
  const [existing, allowance, lookups] = await Promise.all([
    findJobs(deps.db, source, refs),
    hasNew && caller.partner ? dailyAllowance(deps, caller.partner, caller.testMode) : null,
    hasNew ? intake.lookups(valid.filter((v) => v.job.action === 'new')) : null,
  ]);
  // A refused job of a jobRef already received names its booking, as a refusal raised later does.
  for (const { index, jobRef } of refusedEarly) {
    const known = existing.get(jobRef);
    const result = results[index];
    if (known && result) results[index] = { ...result, bookingReference: known.reference };
  }
  const seen = new Set(existing.keys());
  // Daily allowance for new jobs with jobRefs not seen before.
  const fresh: string[] = [];
  for (const { job } of valid) {
    if (job.action === 'new' && !seen.has(job.jobRef) && !fresh.includes(job.jobRef)) fresh.push(job.jobRef);
  }
  const overLimit = new Map<string, AppError>();
  let limitHeaders: Record<string, string> | undefined;
  if (fresh.length > 0 && allowance) {
    // A cancellation or amendment beside them still goes through: the limit is on new jobs only.
    for (const ref of fresh.slice(Math.max(0, allowance.remaining))) {
      const refused = dailyLimitError(allowance.limit, allowance.retryAfterSeconds, caller.testMode, '/jobRef');
      overLimit.set(ref, refused);
      limitHeaders = refused.headers;
    }
  }

  const groups = new Map<string, { index: number; job: NormJob }[]>();
  for (const v of valid) groups.set(v.job.jobRef, [...(groups.get(v.job.jobRef) ?? []), v]);
  // A lone `new` job with an unseen jobRef within the allowance joins the batch write; the rest
  // (amendments, cancellations, repeats, several actions on one jobRef) run job by job.
  const batchable: { index: number; job: NormJob }[] = [];
  const oneByOne: { index: number; job: NormJob }[][] = [];
  for (const group of groups.values()) {
    const first = group[0] as { index: number; job: NormJob };
    const ref = first.job.jobRef;
    if (group.length === 1 && first.job.action === 'new' && !seen.has(ref) && !overLimit.has(ref))
      batchable.push(first);
    else oneByOne.push(group);
  }
  const runOne = async ({ index, job }: { index: number; job: NormJob }) => {
    try {
      results[index] = await intake.run(index, job, overLimit.get(job.jobRef) ?? null);
    } catch (err) {
      // Other jobs of the batch may already be written: report this one as failed, not the batch.
      results[index] = failed(deps, index, job, err);
    }
  };
  await Promise.all([
    (async () => {
      const raced = batchable.length > 0 && lookups ? await intake.createMany(batchable, results, lookups) : [];
      // Written meanwhile by a concurrent request: the same as a repeat of that job.
      await pool(raced, CONCURRENCY, runOne);
    })(),
    pool(oneByOne, CONCURRENCY, async (group) => {
      for (const item of group) await runOne(item);
    }),
  ]);
  const headers = limitHeaders ?? intake.limitHeaders;
  return headers ? { results, limitHeaders: headers } : { results };
}

/**
 * A job to send again: it failed on our side (pricing briefly down, say) or hit the daily
 * limit. An answer holding one is not replayed under an idempotency key, so the retry runs it.
 */
export function retryableJob(r: PartnerJobResult): boolean {
  return r.status >= 500 || r.status === 429;
}

export function summarise(results: readonly PartnerJobResult[]) {
  const failed = results.filter((r) => r.outcome === 'rejected').length;
  return { received: results.length, succeeded: results.length - failed, failed };
}

/**
 * The answer to a request of jobs (partner jobs, supplier hooks), always `{results, summary}`:
 * 200 when every job succeeded, else 207, and a single-job body answers with its job's own
 * status, with the Retry-After its refusal carries (the daily limit, pricing briefly down). A
 * request every job of which the daily limit refused is 429 (SPEC.md section 7), in that shape
 * too, so a client reading `results` and one reading the status both understand it; a 429 carries
 * the limit's Retry-After and RateLimit headers (`limitHeaders`, CONTRACT.md section 1). An
 * answer with a job to be sent again is not remembered for replay, so that retry runs (the jobs
 * that succeeded are then `unchanged`).
 */
export function jobsAnswer(
  results: PartnerJobResult[],
  single: boolean,
  limitHeaders?: Record<string, string>,
): {
  status: number;
  body: { results: PartnerJobResult[]; summary: ReturnType<typeof summarise> };
  headers: Record<string, string>;
  remember: boolean;
} {
  const summary = summarise(results);
  const only = single ? results[0] : undefined;
  const allLimited = results.length > 0 && results.every((r) => r.error?.code === 'daily_limit_reached');
  const status = only ? only.status : allLimited ? 429 : summary.failed === 0 ? 200 : 207;
  const retryAfter = only?.error?.retryAfterSeconds;
  const headers =
    status === 429 && limitHeaders
      ? limitHeaders
      : retryAfter !== undefined
        ? { 'Retry-After': String(retryAfter) }
        : {};
  return { status, body: { results, summary }, headers, remember: !results.some(retryableJob) };
}
