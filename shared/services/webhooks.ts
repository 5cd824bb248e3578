import { createHmac } from 'node:crypto';
import type { Config } from '../config.ts';
import { safeEqual, seal } from '../crypto.ts';
import type { Db, Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { type HeldJob, heldJob, type JobColumns } from '../domain/dispatch/job-view.ts';
import { operatorDriverOf } from '../domain/operator-driver.ts';
import { uuidv7 } from '../ids.ts';
import { checkEndpointUrl, endpointUrlRules } from '../net/public-address.ts';
import { newWebhookSecret } from './partners.ts';

/**
 * Outbound webhooks (CONTRACT.md section 6): Standard Webhooks signing and verification, the
 * status fanout written in the transaction that changed a booking's status, the retry
 * schedule the delivery worker follows, and the operator actions behind the CLI.
 */

// ---------------------------------------------------------------------------------------
// Signing (pure)
// ---------------------------------------------------------------------------------------

/** The key bytes of a `whsec_<base64>` secret (a bare base64 secret is accepted too). */
export function webhookSecretKey(secret: string): Buffer {
  const b64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  const key = Buffer.from(b64, 'base64');
  if (key.length === 0) throw new Error('webhook secret is empty');
  return key;
}

/** `v1,<base64 HMAC-SHA256 of "${id}.${timestamp}.${body}">` for one secret. */
export function webhookSignature(secret: string, messageId: string, timestamp: number, body: string): string {
  const mac = createHmac('sha256', webhookSecretKey(secret)).update(`${messageId}.${timestamp}.${body}`).digest();
  return `v1,${mac.toString('base64')}`;
}

// A type, not an interface, so it is assignable to a plain header record.
export type SignedWebhookHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  /** One `v1,` signature per secret, space-separated (two while a rotation overlaps). */
  'webhook-signature': string;
};

/** The Standard Webhooks headers for a body, signed with every secret given (current first). */
export function signWebhook(
  secrets: readonly string[],
  messageId: string,
  body: string,
  now: Date = new Date(),
): SignedWebhookHeaders {
  if (secrets.length === 0) throw new Error('no webhook secret to sign with');
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => webhookSignature(s, messageId, timestamp, body)).join(' '),
  };
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(bag).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : bag[key];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Verify a Standard Webhooks request: the timestamp is within `toleranceSeconds` of `now`
 * (either side) and at least one `v1` signature in the header matches one of `secrets`
 * (compared in constant time). Any malformed input answers false.
 */
export function verifyWebhook(
  headers: HeaderBag,
  rawBody: string | Buffer,
  secrets: readonly string[],
  toleranceSeconds = 300,
  now: Date = new Date(),
): boolean {
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigHeader = header(headers, 'webhook-signature');
  if (!id || !ts || !sigHeader || !/^\d{1,12}$/.test(ts)) return false;
  const timestamp = Number(ts);
  if (Math.abs(Math.floor(now.getTime() / 1000) - timestamp) > toleranceSeconds) return false;
  const body = typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8');
  const given = sigHeader
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => s.trim());
  if (given.length === 0) return false;
  let ok = false;
  for (const secret of secrets) {
    let expected: string;
    try {
      expected = webhookSignature(secret, id, timestamp, body);
    } catch {
      continue;
    }
    // No early exit: every pair is compared, so timing says nothing about which matched.
    for (const g of given) if (safeEqual(g, expected)) ok = true;
  }
  return ok;
}

// ---------------------------------------------------------------------------------------
// Retry schedule
// ---------------------------------------------------------------------------------------

/** Deliveries are retried for at least this long before they are marked dead. */
export const WEBHOOK_RETRY_WINDOW_MS = 24 * 3600 * 1000;

export interface RetryPolicy {
  /** Delay after the first failed attempt; doubles each attempt. */
  baseMs: number;
  /** Longest delay between two attempts. */
  capMs: number;
  /**
   * Attempts in one schedule (the first one included) before the delivery is dead. A new
   * delivery has one schedule; each replay of a dead delivery starts another (`schedule_start`).
   */
  maxAttempts: number;
}

/** Attempts needed so that the un-jittered delays (jitter only lengthens them) cover `windowMs`. */
export function attemptsToCover(windowMs: number, baseMs: number, capMs: number): number {
  let total = 0;
  let attempts = 1;
  while (total < windowMs) {
    total += retryDelayMs(attempts, { baseMs, capMs, maxAttempts: Number.POSITIVE_INFINITY }, 0);
    attempts += 1;
  }
  return attempts;
}

/**
 * The schedule, read at call time so tests can shorten it: `WEBHOOK_RETRY_BASE_MS` (default
 * 1000), `WEBHOOK_RETRY_CAP_MS` (default 1 h), `WEBHOOK_RETRY_MAX_ATTEMPTS` (default: enough
 * to cover 24 h; 36 with the defaults: 1 s, 2 s, 4 s ... 2048 s, then 23 steps of 1 h).
 */
export function retryPolicy(env: NodeJS.ProcessEnv = process.env): RetryPolicy {
  const num = (name: string, dflt: number) => {
    const v = Number(env[name]);
    return Number.isFinite(v) && v > 0 ? v : dflt;
  };
  const baseMs = num('WEBHOOK_RETRY_BASE_MS', 1000);
  const capMs = num('WEBHOOK_RETRY_CAP_MS', 3600 * 1000);
  const maxAttempts = Math.floor(
    num('WEBHOOK_RETRY_MAX_ATTEMPTS', attemptsToCover(WEBHOOK_RETRY_WINDOW_MS, baseMs, capMs)),
  );
  return { baseMs, capMs, maxAttempts };
}

/**
 * The wait after failed attempt `attempt` (1-based, counted within the schedule: a replay's
 * first attempt is 1 again): min(base * 2^(attempt-1), cap), plus up
 * to 25 % random jitter (never less, so the schedule still covers the window).
 */
export function retryDelayMs(attempt: number, policy: RetryPolicy, random: number = Math.random()): number {
  const exp = Math.min(policy.baseMs * 2 ** Math.min(attempt - 1, 40), policy.capMs);
  return Math.round(exp * (1 + 0.25 * random));
}

// ---------------------------------------------------------------------------------------
// Status fanout (in the caller's transaction)
// ---------------------------------------------------------------------------------------

export interface BookingOwners {
  partnerId: string | null;
  supplierId: string | null;
  operatorPartnerId: string | null;
}

/** What every booking webhook's data begins with: which booking, and its status as it stands. */
interface BookingEventData {
  bookingReference: string;
  jobRef: string | null;
  status: string;
  /** The booking's status sequence (an amendment does not change it). */
  sequence: number;
}

export interface BookingStatusEvent {
  type: 'booking.status';
  timestamp: string;
  data: BookingEventData & {
    at: string;
    driver?: {
      name: string;
      phone?: string;
      vehicle?: { make: string; model: string; colour: string; registration: string };
    };
  };
}

/**
 * Queue a `booking.status` delivery to every active endpoint of the booking's partner,
 * supplier and tier-3 operator, with its outbox job, in the transaction that changed the
 * status. `owners` saves the lookup when the caller already has them (appendStatus does).
 * One query when none of them has an endpoint.
 */
export async function queueStatusFanout(
  trx: Tx,
  bookingId: string,
  status: string,
  seq: number,
  owners?: BookingOwners,
): Promise<string[]> {
  let o = owners;
  if (!o) {
    const b = await trx('bookings')
      .where({ id: bookingId })
      .first<{ partner_id: string | null; supplier_id: string | null; operator_partner_id: string | null }>(
        'partner_id',
        'supplier_id',
        'operator_partner_id',
      );
    if (!b) return [];
    o = { partnerId: b.partner_id, supplierId: b.supplier_id, operatorPartnerId: b.operator_partner_id };
  }
  const partnerIds = [...new Set([o.partnerId, o.operatorPartnerId].filter((v): v is string => !!v))];
  const supplierId = o.supplierId;
  if (partnerIds.length === 0 && !supplierId) return [];
  const endpoints = await trx('webhook_endpoints')
    .where({ active: true })
    .andWhere((q) => {
      if (partnerIds.length > 0) q.whereIn('partner_id', partnerIds);
      if (supplierId) q.orWhere('supplier_id', supplierId);
    })
    .select<{ id: string; partner_id: string | null; supplier_id: string | null }[]>('id', 'partner_id', 'supplier_id');
  if (endpoints.length === 0) return [];

  const booking = await trx('bookings as b')
    .leftJoin('drivers as d', 'd.id', 'b.driver_id')
    .leftJoin('vehicles as v', 'v.id', 'b.vehicle_id')
    .leftJoin('booking_status_history as h', (j) => j.on('h.booking_id', 'b.id').andOnVal('h.seq', seq))
    .where('b.id', bookingId)
    .first<{
      reference: string;
      driver_id: string | null;
      driver_name: string | null;
      driver_phone: string | null;
      operator_driver: unknown;
      make: string | null;
      model: string | null;
      colour: string | null;
      registration: string | null;
      at: Date | null;
    }>(
      'b.reference',
      'b.driver_id',
      'd.name as driver_name',
      'd.phone as driver_phone',
      'b.operator_driver',
      'v.make',
      'v.model',
      'v.colour',
      'v.registration',
      'h.at',
    );
  if (!booking) return [];
  const job = await trx('partner_jobs')
    .where({ booking_id: bookingId })
    .first<{ job_ref: string } | undefined>('job_ref');
  const now = new Date().toISOString();
  const data: BookingStatusEvent['data'] = {
    bookingReference: booking.reference,
    jobRef: job?.job_ref ?? null,
    status,
    sequence: seq,
    at: (booking.at ?? new Date()).toISOString(),
  };
  if (booking.driver_id && booking.driver_name) {
    data.driver = { name: booking.driver_name };
    if (booking.driver_phone) data.driver.phone = booking.driver_phone;
    if (booking.registration) {
      data.driver.vehicle = {
        make: booking.make ?? '',
        model: booking.model ?? '',
        colour: booking.colour ?? '',
        registration: booking.registration,
      };
    }
  } else {
    // A partner operator's own driver, written with the assignment this event reports.
    const named = operatorDriverOf(booking.operator_driver);
    if (named) {
      data.driver = { name: named.name };
      if (named.phone) data.driver.phone = named.phone;
      if (named.vehicle) data.driver.vehicle = named.vehicle;
    }
  }
  const event: BookingStatusEvent = { type: 'booking.status', timestamp: now, data };
  // The jobRef is the booker's own reference (partner or supplier): an operator holding the job
  // knows it by our booking reference, and is not sent another company's.
  const forOperator: BookingStatusEvent = { ...event, data: { ...data, jobRef: null } };
  return queueDeliveries(trx, endpoints, bookingId, seq, (e) =>
    (e.partner_id !== null && e.partner_id === o.partnerId) || (e.supplier_id !== null && e.supplier_id === supplierId)
      ? event
      : forOperator,
  );
}

/** One delivery per endpoint, each with its outbox job, in the caller's transaction. */
async function queueDeliveries<E extends { id: string }>(
  trx: Tx,
  endpoints: readonly E[],
  bookingId: string,
  seq: number,
  eventFor: (endpoint: E) => BookingStatusEvent | BookingAmendedEvent,
): Promise<string[]> {
  const ids: string[] = [];
  for (const endpoint of endpoints) {
    const event = eventFor(endpoint);
    const id = uuidv7();
    await trx('webhook_deliveries').insert({
      id,
      endpoint_id: endpoint.id,
      booking_id: bookingId,
      event_type: event.type,
      // The (endpoint, booking, sequence) key orders status deliveries: an amendment, which
      // leaves the status (and its sequence) as it was, carries the number in its payload only.
      sequence: event.type === 'booking.status' ? seq : null,
      message_id: `msg_${id}`,
      payload: JSON.stringify(event),
    });
    await enqueueJob(trx, 'deliver-webhook', { deliveryId: id }, { jobId: `webhook-${id}` });
    ids.push(id);
  }
  return ids;
}

/** The job as an operator holding it now has it: what its job feed shows of a held job. */
export interface BookingAmendedEvent {
  type: 'booking.amended';
  timestamp: string;
  data: BookingEventData & {
    /** What changed, by the job feed's names (`fareGBP`, `passengerName`, ...). */
    changed: string[];
    job: HeldJob;
  };
}

/** An amendment's field names (booking-history's) as the job feed and this event name them. */
const FEED_NAMES: Readonly<Record<string, string>> = { farePence: 'fareGBP' };
/** Changes an operator cannot see in its feed, so is not told of: the passenger's e-mail. */
const UNSEEN_BY_OPERATORS: ReadonlySet<string> = new Set(['passengerEmail']);

/**
 * Tell a partner operator holding a booking (it accepted the job; tier 3) that the booker
 * amended it: a `booking.amended` delivery to each of its active endpoints, signed and retried
 * as status webhooks are, carrying the job as it now is. Status webhooks carry status changes
 * only, so without it an operator kept the old pickup, time or passengers. Sent in the
 * amendment's transaction (the booking row already updated); none when only what the operator
 * cannot see changed, or when the operator has no endpoint.
 */
export async function queueAmendedFanout(
  trx: Tx,
  bookingId: string,
  operatorPartnerId: string,
  changedFields: readonly string[],
): Promise<string[]> {
  const changed = changedFields.filter((f) => !UNSEEN_BY_OPERATORS.has(f)).map((f) => FEED_NAMES[f] ?? f);
  if (changed.length === 0) return [];
  const endpoints = await trx('webhook_endpoints')
    .where({ active: true, partner_id: operatorPartnerId })
    .select<{ id: string }[]>('id');
  if (endpoints.length === 0) return [];
  const b = await trx('bookings as b')
    .leftJoin('partner_jobs as j', 'j.booking_id', 'b.id')
    .where('b.id', bookingId)
    .first<
      (JobColumns & { reference: string; status: string; job_ref: string | null; seq: number | null }) | undefined
    >(
      'b.*',
      // The booker's own reference, sent to an operator holding the job only when it booked it itself.
      trx.raw('case when b.partner_id = ? then j.job_ref end as job_ref', [operatorPartnerId]),
      trx.raw('(select max(h.seq) from booking_status_history h where h.booking_id = b.id) as seq'),
    );
  if (!b) return [];
  const seq = b.seq ?? 0;
  const event: BookingAmendedEvent = {
    type: 'booking.amended',
    timestamp: new Date().toISOString(),
    data: {
      bookingReference: b.reference,
      jobRef: b.job_ref,
      status: b.status,
      sequence: seq,
      changed,
      job: heldJob(b),
    },
  };
  return queueDeliveries(trx, endpoints, bookingId, seq, () => event);
}

// ---------------------------------------------------------------------------------------
// Operator actions (bin/admin.ts)
// ---------------------------------------------------------------------------------------

export class WebhookNotFoundError extends Error {}
export class WebhookConflictError extends Error {}

export type EndpointOwner = { partnerId: string } | { supplierId: string };

function ownerWhere(owner: EndpointOwner): Record<string, string> {
  return 'partnerId' in owner ? { partner_id: owner.partnerId } : { supplier_id: owner.supplierId };
}

/**
 * Create the owner's endpoint, or point its existing endpoint at `url` (re-activating it).
 * A new endpoint gets a new secret, returned once; a replaced URL keeps its secret. A URL the
 * deployment does not accept (`checkEndpointUrl`: not http(s), credentials in it, a non-public
 * address unless WEBHOOK_ALLOW_PRIVATE_NETWORKS) throws `EndpointUrlError`; it is stored normalised.
 */
export async function setWebhookEndpoint(
  db: Db,
  config: Pick<Config, 'dataEncryptionKey' | 'env' | 'webhooks'>,
  owner: EndpointOwner,
  rawUrl: string,
  actor: string,
): Promise<{ id: string; url: string; webhookSecret: string | null }> {
  const url = checkEndpointUrl(rawUrl, endpointUrlRules(config));
  return db.transaction(async (trx) => {
    const [table, ownerId] = 'partnerId' in owner ? ['partners', owner.partnerId] : ['suppliers', owner.supplierId];
    if (!(await trx(table).where({ id: ownerId }).first('id')))
      throw new WebhookNotFoundError(`no ${table.slice(0, -1)} ${ownerId}`);
    const existing = await trx('webhook_endpoints').where(ownerWhere(owner)).orderBy('created_at').forUpdate().first();
    let id: string;
    let webhookSecret: string | null = null;
    if (existing) {
      id = existing.id;
      await trx('webhook_endpoints').where({ id }).update({ url, active: true, updated_at: trx.fn.now() });
    } else {
      id = uuidv7();
      webhookSecret = newWebhookSecret();
      await trx('webhook_endpoints').insert({
        id,
        ...ownerWhere(owner),
        url,
        secret_sealed: seal(webhookSecret, config.dataEncryptionKey),
      });
    }
    await trx('audit_log').insert({
      actor,
      action: 'webhook.set',
      subject_type: 'webhook_endpoint',
      subject_id: id,
      details: JSON.stringify({ ...owner, url, newSecret: webhookSecret !== null }),
    });
    return { id, url, webhookSecret };
  });
}

/**
 * Give the owner's endpoint a new secret. The old one keeps signing (both signatures are
 * sent) until `overlapHours` from now, so the receiver can switch without losing events.
 * Only one previous secret is kept: while an earlier rotation's overlap is open, rotating again
 * would end it early (the secret the receiver may still hold would stop signing before the
 * `previousExpiresAt` it was promised), so that is a WebhookConflictError unless `force`.
 */
export async function rotateWebhookSecret(
  db: Db,
  config: Pick<Config, 'dataEncryptionKey'>,
  owner: EndpointOwner,
  overlapHours: number,
  actor: string,
  opts: { force?: boolean } = {},
): Promise<{ id: string; webhookSecret: string; previousExpiresAt: string }> {
  return db.transaction(async (trx) => {
    const endpoint = await trx('webhook_endpoints')
      .where(ownerWhere(owner))
      .orderBy('created_at')
      .forUpdate()
      .first(
        '*',
        trx.raw('(previous_secret_sealed is not null and previous_secret_expires_at > now()) as overlap_open'),
      );
    if (!endpoint) throw new WebhookNotFoundError('no webhook endpoint for that owner');
    if (endpoint.overlap_open === true && opts.force !== true) {
      const until = (endpoint.previous_secret_expires_at as Date).toISOString();
      throw new WebhookConflictError(
        `the previous webhook secret is still accepted until ${until} (the last rotation's overlap); rotating again now would stop it early. Rotate after ${until}, or pass --force to end that overlap now`,
      );
    }
    const webhookSecret = newWebhookSecret();
    const [row] = await trx('webhook_endpoints')
      .where({ id: endpoint.id })
      .update({
        secret_sealed: seal(webhookSecret, config.dataEncryptionKey),
        previous_secret_sealed: endpoint.secret_sealed,
        previous_secret_expires_at: trx.raw('now() + make_interval(secs => ?)', [overlapHours * 3600]),
        updated_at: trx.fn.now(),
      })
      .returning<{ previous_secret_expires_at: Date }[]>('previous_secret_expires_at');
    const previousExpiresAt = (row as { previous_secret_expires_at: Date }).previous_secret_expires_at.toISOString();
    await trx('audit_log').insert({
      actor,
      action: 'webhook.rotate',
      subject_type: 'webhook_endpoint',
      subject_id: endpoint.id,
      details: JSON.stringify({
        ...owner,
        previousExpiresAt,
        ...(endpoint.overlap_open === true ? { forced: true } : {}),
      }),
    });
    return { id: endpoint.id as string, webhookSecret, previousExpiresAt };
  });
}

export interface DeadDelivery {
  id: string;
  endpointUrl: string;
  bookingReference: string | null;
  eventType: string;
  sequence: number | null;
  attempts: number;
  lastError: string | null;
  createdAt: string;
}

export async function listDeadDeliveries(db: Db, limit = 500): Promise<DeadDelivery[]> {
  const rows = await db('webhook_deliveries as d')
    .join('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .leftJoin('bookings as b', 'b.id', 'd.booking_id')
    .where('d.state', 'dead')
    .orderBy('d.created_at')
    .limit(limit)
    .select(
      'd.id',
      'e.url',
      'b.reference',
      'd.event_type',
      'd.sequence',
      'd.attempts',
      'd.created_at',
      db.raw(
        '(select a.error from webhook_delivery_attempts a where a.delivery_id = d.id order by a.attempt desc limit 1) as last_error',
      ),
    );
  return rows.map((r) => ({
    id: r.id,
    endpointUrl: r.url,
    bookingReference: r.reference ?? null,
    eventType: r.event_type,
    sequence: r.sequence,
    attempts: r.attempts,
    lastError: r.last_error ?? null,
    createdAt: (r.created_at as Date).toISOString(),
  }));
}

/**
 * Put a dead delivery back to pending with a fresh retry schedule, and queue its first attempt
 * at once. It keeps its webhook-id (message_id) and its attempt numbers continue (a delivery
 * dead after 36 attempts is replayed as attempt 37): `schedule_start` records the attempts
 * made before the replay, and the worker gives the replay the whole `retryPolicy()` schedule
 * (backoff from its base, `maxAttempts` attempts) before the delivery is dead again. Later
 * attempts are queued by the worker as `webhook-<id>-<attempt>`, numbers no earlier schedule used.
 */
export async function replayDelivery(db: Db, id: string, actor: string): Promise<{ id: string; status: 'pending' }> {
  return db.transaction(async (trx) => {
    const row = await trx('webhook_deliveries').where({ id }).forUpdate().first<{ state: string; attempts: number }>();
    if (!row) throw new WebhookNotFoundError(`no webhook delivery ${id}`);
    if (row.state !== 'dead') throw new WebhookConflictError(`webhook delivery ${id} is ${row.state}, not dead`);
    await trx('webhook_deliveries')
      .where({ id })
      .update({ state: 'pending', next_attempt_at: null, schedule_start: row.attempts });
    await enqueueJob(trx, 'deliver-webhook', { deliveryId: id }, { jobId: `webhook-${id}-replay-${row.attempts + 1}` });
    await trx('audit_log').insert({
      actor,
      action: 'webhook.replay',
      subject_type: 'webhook_delivery',
      subject_id: id,
    });
    return { id, status: 'pending' as const };
  });
}
