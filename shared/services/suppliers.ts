import { createHmac } from 'node:crypto';
import type { Config } from '../config.ts';
import { randomBase62, safeEqual, seal } from '../crypto.ts';
import type { Db } from '../db/knex.ts';
import { type ErrorDetail, repointed } from '../errors.ts';
import { uuidv7 } from '../ids.ts';
import { checkEndpointUrl, endpointUrlRules } from '../net/public-address.ts';
import type { IntakeSupplier } from './intake.ts';
import { newWebhookSecret } from './partners.ts';

/**
 * Suppliers (CONTRACT.md section 6): job platforms that post bookings to
 * `/api/public/hooks/{slug}-booking` in their own format. Each supplier names an adapter that
 * authenticates its requests and maps its payload to partner-intake jobs (PartnerJob fields),
 * keyed on the supplier's own reference. Adding a supplier with a new format = one adapter in
 * ADAPTERS + `supplier create --adapter <name>`.
 */

export type SupplierAction = 'new' | 'amend' | 'cancel';

/** One job of a supplier request: the supplier's reference, the action and the intake job (PartnerJob fields). */
export interface AdapterJob {
  ref: string | null;
  action: SupplierAction | null;
  job: Record<string, unknown>;
}

/** `single`: the body was one job (answered with its own status), not a batch. */
export type ParseResult = { ok: true; single: boolean; jobs: AdapterJob[] } | { ok: false; message: string };

/** What an adapter sees of the request. */
export interface HookRequest {
  header(name: string): string | undefined;
  rawBody: Buffer | undefined;
}

/**
 * The outcome of an adapter's credential check; `message` (the 401's) says what to fix, never
 * the expected value. `messageId`, from adapters that sign each message, names this one signed
 * message: the same message delivered again is answered as it was the first time, not applied
 * again (so a captured amend replayed inside the timestamp window cannot undo a newer one).
 */
export type AuthResult = { ok: true; messageId?: string } | { ok: false; message: string };

export interface SupplierAdapter {
  name: string;
  /** The 401's WWW-Authenticate challenge (RFC 9110 section 11.6.1): the scheme and the supplier's headers. */
  challenge(supplier: { slug: string }): string;
  /**
   * Where each partner-job field is in the supplier's own job (a path of keys): the parser reads
   * the job through it, and a refusal names the field as the supplier sent it (`comments`, not
   * our `notes`), relative to the job as partner-job refusals are.
   */
  fields: FieldPaths;
  /**
   * Whether the request carries the supplier's credentials; secrets and signatures are compared
   * in constant time. `nowMs` is the server clock (for signed timestamps).
   */
  authenticate(req: HookRequest, supplier: { slug: string }, secret: string, nowMs?: number): AuthResult;
  parse(body: unknown): ParseResult;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown): Record<string, unknown> => (isObject(v) ? v : {});

/** The partner-job fields a supplier's format carries, each at a path of keys in its job. */
export type FieldPaths = Readonly<Record<string, readonly string[]>>;

/**
 * The partner job in a supplier's job (`fields`), undefined and null dropped so the intake's
 * schema sees only what the supplier sent. `jobRef` and `action` are the adapter's own reading.
 */
function jobOf(source: unknown, fields: FieldPaths, own: { jobRef: string | null; action: unknown }) {
  const job: Record<string, unknown> = {};
  for (const [field, path] of Object.entries(fields)) {
    if (field === 'jobRef' || field === 'action') continue;
    const v = path.reduce<unknown>((at, key) => (isObject(at) ? at[key] : undefined), source);
    if (v !== undefined && v !== null) job[field] = v;
  }
  if (own.jobRef !== null) job.jobRef = own.jobRef;
  if (own.action !== undefined && own.action !== null) job.action = own.action;
  return job;
}

/** A refusal's pointer at a partner-job field (`/notes`), as the supplier's format names it (`/comments`). */
export function supplierPointer(fields: FieldPaths, pointer: string): string {
  const [, field, ...rest] = pointer.split('/');
  const path = field !== undefined && Object.hasOwn(fields, field) ? fields[field] : undefined;
  return path ? `/${[...path, ...rest].join('/')}` : pointer;
}

/** A job's refusal with its pointers (and the message's mentions of them) in the supplier's names. */
export function asSupplierSent<R extends { error: { message: string; details: ErrorDetail[] } | null }>(
  fields: FieldPaths,
  result: R,
): R {
  if (!result.error || result.error.details.length === 0) return result;
  const { message, details } = repointed(result.error.message, result.error.details, (p) => supplierPointer(fields, p));
  return { ...result, error: { ...result.error, message, details } };
}

const refOf = (v: unknown): string | null =>
  typeof v === 'string' ? v : typeof v === 'number' && Number.isFinite(v) ? String(v) : null;

const SECRET_HEADER_EVENTS: Record<string, SupplierAction> = {
  'booking.created': 'new',
  'booking.updated': 'amend',
  'booking.cancelled': 'cancel',
};

/**
 * `secret-header`: one job per request, shared secret in `x-{slug}-secret`. Payload:
 * `{event: "booking.created"|"booking.updated"|"booking.cancelled", booking: {id, pickup_address,
 * dropoff_address, pickup_at, passenger: {name, phone, email}, pax, vehicle, flight, price?, notes}}`.
 */
const SECRET_HEADER_FIELDS: FieldPaths = {
  jobRef: ['booking', 'id'],
  action: ['event'],
  pickup: ['booking', 'pickup_address'],
  dropoff: ['booking', 'dropoff_address'],
  pickupTime: ['booking', 'pickup_at'],
  passengerName: ['booking', 'passenger', 'name'],
  passengerPhone: ['booking', 'passenger', 'phone'],
  passengerEmail: ['booking', 'passenger', 'email'],
  passengers: ['booking', 'pax'],
  vehicleType: ['booking', 'vehicle'],
  flightNumber: ['booking', 'flight'],
  fare: ['booking', 'price'],
  notes: ['booking', 'notes'],
};

export const secretHeaderAdapter: SupplierAdapter = {
  name: 'secret-header',
  fields: SECRET_HEADER_FIELDS,
  challenge: (s) => `SharedSecret realm="supplier-${s.slug}", header="x-${s.slug}-secret"`,
  authenticate(req, supplier, secret) {
    const given = req.header(`x-${supplier.slug}-secret`)?.trim() ?? '';
    // Compared in constant time even when missing, so a missing header costs as much as a wrong one.
    return safeEqual(given, secret) && given !== ''
      ? { ok: true }
      : { ok: false, message: `Send your supplier secret in the "x-${supplier.slug}-secret" header.` };
  },
  parse(body) {
    if (!isObject(body) || !isObject(body.booking)) {
      return {
        ok: false,
        message: 'Expected {"event": "booking.created|booking.updated|booking.cancelled", "booking": {...}}.',
      };
    }
    // Own keys only: "constructor" or "toString" would otherwise find Object's methods.
    const action =
      typeof body.event === 'string' && Object.hasOwn(SECRET_HEADER_EVENTS, body.event)
        ? SECRET_HEADER_EVENTS[body.event]
        : undefined;
    if (!action) {
      return { ok: false, message: 'event must be one of booking.created, booking.updated, booking.cancelled.' };
    }
    const ref = refOf(body.booking.id);
    return {
      ok: true,
      single: true,
      jobs: [{ ref, action, job: jobOf(body, SECRET_HEADER_FIELDS, { jobRef: ref, action }) }],
    };
  },
};

const HMAC_TYPES = new Set<string>(['new', 'amend', 'cancel']);
export const MAX_SUPPLIER_JOBS = 100;

/**
 * How far, in seconds either way, an `hmac` supplier's signed timestamp may be from the server
 * clock. Outside it the request is refused, so a captured request cannot be replayed later.
 */
export const SUPPLIER_SIGNATURE_TOLERANCE_SECONDS = 5 * 60;

/** Whole Unix seconds, as the timestamp header carries them. */
const UNIX_SECONDS = /^[0-9]{1,15}$/;

/**
 * `hmac`: single or batch. Headers: `x-{slug}-timestamp: <Unix seconds>` and
 * `x-{slug}-signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">` with the supplier
 * secret; the timestamp must be within SUPPLIER_SIGNATURE_TOLERANCE_SECONDS of the server clock
 * (a body-only signature, the first version of this scheme, is refused). Payload:
 * `{jobs: [job, ...]}` or one job, each `{reference, type: "new"|"amend"|"cancel", from, to,
 * when, passengers, customer: {name, phone, email}, vehicle_class, flight_no, fare, comments}`.
 */
const HMAC_FIELDS: FieldPaths = {
  jobRef: ['reference'],
  action: ['type'],
  pickup: ['from'],
  dropoff: ['to'],
  pickupTime: ['when'],
  passengerName: ['customer', 'name'],
  passengerPhone: ['customer', 'phone'],
  passengerEmail: ['customer', 'email'],
  passengers: ['passengers'],
  vehicleType: ['vehicle_class'],
  flightNumber: ['flight_no'],
  fare: ['fare'],
  notes: ['comments'],
};

export const hmacAdapter: SupplierAdapter = {
  name: 'hmac',
  fields: HMAC_FIELDS,
  challenge: (s) => `HMAC-SHA256 realm="supplier-${s.slug}", headers="x-${s.slug}-timestamp x-${s.slug}-signature"`,
  authenticate(req, supplier, secret, nowMs = Date.now()) {
    const tsHeader = `x-${supplier.slug}-timestamp`;
    const sigHeader = `x-${supplier.slug}-signature`;
    const how = `sign "<${tsHeader}>.<raw body>" with HMAC-SHA256 using your supplier secret and send "${sigHeader}: sha256=<hex>"`;
    const timestamp = req.header(tsHeader)?.trim() ?? '';
    if (timestamp === '') {
      return { ok: false, message: `Missing timestamp: send "${tsHeader}: <Unix seconds>" and ${how}.` };
    }
    if (!UNIX_SECONDS.test(timestamp)) {
      return {
        ok: false,
        message: `Invalid timestamp: "${tsHeader}" must be the time of signing in whole Unix seconds.`,
      };
    }
    if (Math.abs(Math.floor(nowMs / 1000) - Number(timestamp)) > SUPPLIER_SIGNATURE_TOLERANCE_SECONDS) {
      return {
        ok: false,
        message: `Stale timestamp: "${tsHeader}" must be within ${SUPPLIER_SIGNATURE_TOLERANCE_SECONDS} seconds of the current time (Unix seconds, not milliseconds); sign every attempt, retries included, when you send it.`,
      };
    }
    const header = req.header(sigHeader)?.trim() ?? '';
    const given = header.replace(/^sha256=/i, '').toLowerCase();
    const expected = createHmac('sha256', secret)
      .update(`${timestamp}.`)
      .update(req.rawBody ?? Buffer.alloc(0))
      .digest('hex');
    // Constant time whatever was sent; the expected value never leaves this function.
    // The signature covers the timestamp and the body: it names this one signed message.
    if (safeEqual(given, expected) && /^[0-9a-f]{64}$/.test(given)) return { ok: true, messageId: `sha256=${given}` };
    return { ok: false, message: `${header === '' ? 'Missing' : 'Invalid'} signature: ${how}.` };
  },
  parse(body) {
    if (!isObject(body)) return { ok: false, message: 'Expected one job object or {"jobs": [...]}.' };
    const list: unknown[] = Array.isArray(body.jobs) ? body.jobs : body.jobs === undefined ? [body] : [];
    if (list.length === 0 || list.length > MAX_SUPPLIER_JOBS) {
      return { ok: false, message: `"jobs" must be an array of 1 to ${MAX_SUPPLIER_JOBS} jobs.` };
    }
    return {
      ok: true,
      single: !Array.isArray(body.jobs),
      jobs: list.map((raw) => {
        const j = obj(raw);
        const ref = refOf(j.reference);
        const type = j.type === undefined ? 'new' : j.type;
        const action = typeof type === 'string' && HMAC_TYPES.has(type) ? (type as SupplierAction) : null;
        // An unknown type is passed on so the intake rejects this job (and only this one).
        return { ref, action, job: jobOf(j, HMAC_FIELDS, { jobRef: ref, action: type }) };
      }),
    };
  },
};

/** The adapter registry: `suppliers.adapter` names one of these. */
export const ADAPTERS: Readonly<Record<string, SupplierAdapter>> = {
  [secretHeaderAdapter.name]: secretHeaderAdapter,
  [hmacAdapter.name]: hmacAdapter,
};
export const ADAPTER_NAMES = Object.keys(ADAPTERS);

export interface SupplierRecord extends IntakeSupplier {
  adapter: string;
  secretSealed: string;
}

/** An active supplier by slug, or undefined. */
export async function activeSupplierBySlug(db: Db, slug: string): Promise<SupplierRecord | undefined> {
  if (!SLUG.test(slug)) return undefined;
  const row = await db('suppliers').where({ slug, active: true }).first<
    | {
        id: string;
        slug: string;
        adapter: string;
        secret_sealed: string;
        external_platform: boolean;
        job_fee_pence: number;
      }
    | undefined
  >('id', 'slug', 'adapter', 'secret_sealed', 'external_platform', 'job_fee_pence');
  return row
    ? {
        id: row.id,
        slug: row.slug,
        adapter: row.adapter,
        secretSealed: row.secret_sealed,
        externalPlatform: row.external_platform,
        jobFeePence: row.job_fee_pence,
      }
    : undefined;
}

export const SLUG = /^[a-z0-9][a-z0-9-]{0,39}$/;

export class SupplierInputError extends Error {}

export interface CreatedSupplier {
  id: string;
  slug: string;
  /** The shared secret (secret-header) or HMAC signing secret (hmac); shown once. */
  secret: string;
  /** Standard Webhooks secret for status fanout; null without a webhook URL. */
  webhookSecret: string | null;
}

/**
 * Create a supplier: its secret (`<serviceCode>_sup_<40 base62>`, stored sealed), and when a
 * webhook URL is given its webhook endpoint. Secrets are returned once. A webhook URL the
 * deployment does not accept (`checkEndpointUrl`) throws `EndpointUrlError`.
 */
export async function createSupplier(
  db: Db,
  config: Pick<Config, 'serviceCode' | 'dataEncryptionKey' | 'env' | 'webhooks'>,
  opts: {
    slug: string;
    adapter: string;
    externalPlatform?: boolean;
    jobFeePence?: number;
    webhookUrl?: string | null;
    actor: string;
  },
): Promise<CreatedSupplier> {
  if (!SLUG.test(opts.slug)) {
    throw new SupplierInputError(
      'slug must be 1 to 40 lower-case letters, digits or hyphens, starting with a letter or digit',
    );
  }
  if (!Object.hasOwn(ADAPTERS, opts.adapter)) {
    throw new SupplierInputError(`adapter must be one of: ${ADAPTER_NAMES.join(', ')}`);
  }
  const fee = opts.jobFeePence ?? 0;
  if (!Number.isInteger(fee) || fee < 0) throw new SupplierInputError('job fee must be a non-negative amount');
  // The fee is billed to drivers as the external job platform's (SPEC.md 2.10): a supplier that
  // is no such platform has none, and a fee stored for it would never be billed.
  if (fee > 0 && opts.externalPlatform !== true) {
    throw new SupplierInputError(
      'a job fee is charged for an external job platform only: add --external-platform, or leave the fee out',
    );
  }
  const webhookUrl = opts.webhookUrl ? checkEndpointUrl(opts.webhookUrl, endpointUrlRules(config)) : null;
  const exists = () => new SupplierInputError(`a supplier with slug "${opts.slug}" exists`);
  // Two creates of one slug at once: the loser meets the slug's unique index, and is told as
  // the check below tells a later one.
  return db.transaction(async (trx) => {
    if (await trx('suppliers').where({ slug: opts.slug }).first('id')) throw exists();
    const id = uuidv7();
    const secret = `${config.serviceCode}_sup_${randomBase62(40)}`;
    await trx('suppliers')
      .insert({
        id,
        slug: opts.slug,
        adapter: opts.adapter,
        secret_sealed: seal(secret, config.dataEncryptionKey),
        external_platform: opts.externalPlatform ?? false,
        job_fee_pence: fee,
      })
      .catch((err: unknown) => {
        throw (err as { code?: string }).code === '23505' ? exists() : err;
      });
    let webhookSecret: string | null = null;
    if (webhookUrl) {
      webhookSecret = newWebhookSecret();
      await trx('webhook_endpoints').insert({
        id: uuidv7(),
        supplier_id: id,
        url: webhookUrl,
        secret_sealed: seal(webhookSecret, config.dataEncryptionKey),
      });
    }
    await trx('audit_log').insert({
      actor: opts.actor,
      action: 'supplier.create',
      subject_type: 'supplier',
      subject_id: id,
      details: JSON.stringify({
        slug: opts.slug,
        adapter: opts.adapter,
        externalPlatform: opts.externalPlatform ?? false,
        jobFeePence: fee,
      }),
    });
    return { id, slug: opts.slug, secret, webhookSecret };
  });
}
