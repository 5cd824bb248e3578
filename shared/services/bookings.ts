import { createHmac } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { Config } from '../config.ts';
import { sha256 } from '../crypto.ts';
import { insertAllIf, type RowInsert } from '../db/atomic.ts';
import { appendStatus, type BookingRow, findBookingByRef } from '../db/bookings.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { enqueueJob, outboxRow } from '../db/outbox.ts';
import { normaliseEmail } from '../domain/email-acceptance.ts';
import { newReference, normaliseReference } from '../domain/reference.ts';
import { AppError } from '../errors.ts';
import { verificationRow } from './email-verification.ts';
import { messageRows, type NewMessage } from './messages.ts';
import type { PricedQuote } from './quotes.ts';

export type Origin = 'website' | 'api' | 'agent' | 'partner' | 'supplier' | 'mcp';
export type PaymentMethod = 'cash' | 'card' | 'pay_link' | 'bank_transfer' | 'account';

export interface Passenger {
  name: string;
  phone: string;
  email: string | null;
}

export interface BookingCaller {
  apiKeyId: string | null;
  partnerId: string | null;
  testMode: boolean;
  /** Rate-limit and idempotency scope: the key, else the client IP. */
  scope: string;
}

export interface BookingView {
  id: string;
  reference: string;
  status: string;
  farePence: number;
  currency: string;
  pickupTime: Date;
  emailVerified: boolean;
  statusUrl: string;
  trackingUrl: string;
  payDriverUrl: string;
  /** false when an earlier identical booking (or redemption) was returned. */
  created: boolean;
}

type BookingDeps = { db: Db; config: Pick<Config, 'bookings' | 'dataEncryptionKey'> };

/** 15 minutes: a repeated instant or v1 booking with the same content returns the first. */
export const REPEAT_WINDOW_MS = 15 * 60 * 1000;

/** UK mobile numbers as typed (07700 900123, +44 7700 900123, 0044…) in E.164. */
export function normalisePhone(raw: string): string {
  const digits = raw
    .trim()
    .replace(/^whatsapp:/i, '')
    .replace(/[\s().-]/g, '');
  if (/^\+\d{7,15}$/.test(digits)) return digits;
  if (/^00\d{7,15}$/.test(digits)) return `+${digits.slice(2)}`;
  if (/^0\d{9,10}$/.test(digits)) return `+44${digits.slice(1)}`;
  throw new AppError('invalid_input', 'The phone number is not a valid mobile number in international format.', [
    { field: '/passengerPhone', problem: 'must be a mobile number such as +447700900123' },
  ]);
}

/**
 * The token in a booking's tracking and pay-the-driver links: an HMAC of the booking id with
 * the service's key, so it is unguessable, needs no e-mail in the URL, and can be given again
 * when a retried request returns the same booking. Only its SHA-256 is stored, for lookups.
 */
export function trackingToken(bookingId: string, key: Buffer): string {
  return createHmac('sha256', key).update(`tracking:${bookingId}`).digest('base64url');
}

function samePassenger(
  row: Pick<BookingRow, 'passenger_name' | 'passenger_phone' | 'passenger_email'>,
  p: Passenger,
): boolean {
  const norm = (s: string | null) => (s ?? '').trim().toLowerCase().replace(/\s+/g, ' ');
  return (
    norm(row.passenger_name) === norm(p.name) &&
    (row.passenger_phone ?? '') === p.phone &&
    norm(row.passenger_email) === norm(p.email)
  );
}

export function viewOf(row: BookingRow, baseUrl: string, key: Buffer, created: boolean): BookingView {
  const token = trackingToken(row.id, key);
  return {
    id: row.id,
    reference: row.reference,
    status: row.status,
    farePence: row.fare_pence ?? 0,
    currency: row.currency,
    pickupTime: row.pickup_time,
    emailVerified: row.email_verified,
    statusUrl: `${baseUrl}/api/public/v1/booking/${row.reference}`,
    trackingUrl: `${baseUrl}/track/${token}`,
    payDriverUrl: `${baseUrl}/pay/${token}`,
    created,
  };
}

interface QuoteRow {
  id: string;
  expires_at: Date;
  redeemed_at: Date | null;
  pickup: unknown;
  dropoff: unknown;
  depart_at: Date;
  vehicle_type: string;
  passengers: number;
  fare_pence: number;
  applied_rules: unknown;
  tariff_source: unknown;
  test_mode: boolean;
}

export interface NewBooking {
  origin: Origin;
  quoteId: string;
  passenger: Passenger;
  paymentMethod: PaymentMethod;
  flightNumber?: string | null;
  notes?: string | null;
  agent?: string | null;
  emailVerified?: boolean;
  /** A partner-set fare replacing the quote's (checked by the caller). */
  farePenceOverride?: number | null;
  /** For repeat detection of instant and v1 bookings. */
  contentHash?: Buffer | null;
  /** Queue the confirmation e-mail with the tracking link (v1 bookings); for an unverified
   * address it also carries a link that verifies it. */
  confirmByEmail?: boolean;
}

/** What a booking takes from its quote. */
type QuoteSource = Pick<
  QuoteRow,
  | 'id'
  | 'pickup'
  | 'dropoff'
  | 'depart_at'
  | 'vehicle_type'
  | 'passengers'
  | 'fare_pence'
  | 'applied_rules'
  | 'tariff_source'
  | 'test_mode'
>;

const REDEEM_GUARD =
  'update quotes set redeemed_at = now() where id = ? and redeemed_at is null and expires_at > now() returning id';
const REPEAT_GUARD = `insert into booking_repeat_guard (content_hash, booking_id, expires_at) values (?, ?, ?)
  on conflict (content_hash) do update set booking_id = excluded.booking_id, expires_at = excluded.expires_at
  where booking_repeat_guard.expires_at <= now() returning booking_id`;

/**
 * Redeem a quote into a booking. The booking, its first status, the job that will dispatch it
 * (at once when pickup is within the lead time, else delayed to pickup minus lead time) and,
 * for v1 bookings, the confirmation e-mail are written by one statement guarded by the quote's
 * redemption, so they commit together and a quote is redeemed once: redeeming it again for the
 * same passenger returns the same booking; for another passenger it is 409.
 */
export async function redeemQuote(
  deps: BookingDeps,
  input: NewBooking,
  caller: BookingCaller,
  baseUrl: string,
): Promise<BookingView> {
  const { db, config } = deps;
  const quoteId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(input.quoteId)
    ? input.quoteId.toLowerCase()
    : null;
  if (!quoteId) throw quoteNotFound(input.quoteId);
  const readQuote = () => db<QuoteRow>('quotes').where({ id: quoteId }).first();

  let quote = await readQuote();
  for (let attempt = 0; ; attempt++) {
    if (!quote) throw quoteNotFound(input.quoteId);
    if (quote.redeemed_at) {
      const existing = await db<BookingRow>('bookings').where({ quote_id: quote.id }).first();
      if (existing && samePassenger(existing, input.passenger))
        return viewOf(existing, baseUrl, config.dataEncryptionKey, false);
      throw new AppError(
        'quote_already_redeemed',
        'This quote has already been booked by another passenger; ask for a new quote.',
        [{ field: '/quote_id', problem: 'already redeemed' }],
      );
    }
    if (quote.expires_at.getTime() <= Date.now()) {
      throw new AppError(
        'quote_expired',
        'This quote has expired (quotes are valid for 24 hours); ask for a new quote.',
        [{ field: '/quote_id', problem: 'expired' }],
      );
    }
    if (quote.depart_at.getTime() < Date.now() - 5 * 60_000) {
      throw new AppError('pickup_in_past', 'The quoted pickup time has passed; ask for a new quote.', [
        { field: '/departAt', problem: 'is in the past' },
      ]);
    }
    const write = bookingWrite(deps, quote, input, caller, baseUrl, new Date());
    const passed = await writeOnce(() =>
      insertAllIf(db, { sql: REDEEM_GUARD, bindings: [quote?.id ?? ''] }, write.inserts),
    );
    if (passed === 'collision' && attempt < 5) continue;
    if (passed === true) return viewOf(write.row, baseUrl, config.dataEncryptionKey, true);
    // Another request redeemed it (or it expired) between the read and the write: decide again.
    quote = await readQuote();
  }
}

/**
 * Book a quote priced for this request (instant and v1 bookings): the quote, already redeemed,
 * is stored with the booking in the same statement, guarded by the 15-minute repeat rule, so
 * identical requests racing each other make one booking and the rest return it.
 */
export async function bookPricedQuote(
  deps: BookingDeps,
  priced: PricedQuote,
  input: Omit<NewBooking, 'quoteId'> & { contentHash: Buffer },
  caller: BookingCaller,
  baseUrl: string,
): Promise<BookingView> {
  const { db, config } = deps;
  const q = priced.row as unknown as QuoteSource & Record<string, unknown>;
  for (let attempt = 0; ; attempt++) {
    const now = new Date();
    const write = bookingWrite(deps, q, { ...input, quoteId: q.id }, caller, baseUrl, now);
    const guard = {
      sql: REPEAT_GUARD,
      bindings: [input.contentHash, write.row.id, new Date(now.getTime() + REPEAT_WINDOW_MS)],
    };
    const passed = await writeOnce(() =>
      insertAllIf(db, guard, [{ table: 'quotes', row: { ...priced.row, redeemed_at: now } }, ...write.inserts]),
    );
    if (passed === 'collision' && attempt < 5) continue;
    if (passed === true) return viewOf(write.row, baseUrl, config.dataEncryptionKey, true);
    const repeat = await repeatedBooking(db, input.contentHash);
    if (repeat) return viewOf(repeat, baseUrl, config.dataEncryptionKey, false);
    if (attempt >= 5) throw new Error('repeat guard held by a booking that does not exist');
  }
}

/** The booking an identical request made in the last 15 minutes, if any. */
export async function repeatedBooking(db: Queryable, contentHash: Buffer): Promise<BookingRow | undefined> {
  return db<BookingRow>('booking_repeat_guard as g')
    .join('bookings as b', 'b.id', 'g.booking_id')
    .where('g.content_hash', contentHash)
    .where('g.expires_at', '>', db.fn.now())
    .first('b.*');
}

/** Expired repeat guards are deleted hourly by the outbox relay's housekeeping. */
export async function pruneRepeatGuards(db: Db): Promise<number> {
  return db('booking_repeat_guard').where('expires_at', '<', new Date()).delete();
}

/** Run the booking statement: true when written, false when its guard refused, 'collision' on a reference clash. */
async function writeOnce(run: () => Promise<{ passed: boolean }>): Promise<boolean | 'collision'> {
  try {
    return (await run()).passed;
  } catch (err) {
    // A reference collision (1 in ~1e9 per existing booking) is retried with a new one.
    if ((err as { constraint?: string }).constraint === 'bookings_reference_unique') return 'collision';
    throw err;
  }
}

function quoteNotFound(id: string): AppError {
  return new AppError(
    'quote_not_found',
    `No quote ${id} exists: quote first with POST /api/public/v1/quote and use its quote_id.`,
    [{ field: '/quote_id', problem: 'unknown quote' }],
  );
}

/**
 * The rows of a new booking: the booking, its first status, its dispatch job and, for v1
 * bookings, the confirmation e-mail (with a verification for an unconfirmed address).
 */
export function bookingWrite(
  deps: BookingDeps,
  quote: QuoteSource,
  input: NewBooking,
  caller: BookingCaller,
  baseUrl: string,
  now: Date,
): { row: BookingRow; inserts: RowInsert[] } {
  const id = uuidv7();
  const fare = input.farePenceOverride ?? quote.fare_pence;
  const pickupTime = quote.depart_at;
  const values = {
    id,
    reference: newReference(deps.config.bookings.referencePrefix),
    origin: input.origin,
    status: 'pending',
    quote_id: quote.id,
    api_key_id: caller.apiKeyId,
    partner_id: caller.partnerId,
    passenger_name: input.passenger.name,
    passenger_email: input.passenger.email,
    passenger_phone: input.passenger.phone,
    email_verified: input.emailVerified ?? false,
    passengers: quote.passengers,
    vehicle_type: quote.vehicle_type,
    pickup: quote.pickup as BookingRow['pickup'],
    dropoff: quote.dropoff as BookingRow['dropoff'],
    pickup_time: pickupTime,
    fare_pence: fare,
    applied_rules:
      input.farePenceOverride != null
        ? [{ code: 'partner_fare', description: 'Fare agreed by the partner', amountPence: fare }]
        : quote.applied_rules,
    tariff_source: quote.tariff_source,
    payment_method: input.paymentMethod,
    flight_number: input.flightNumber ?? null,
    notes: input.notes ?? null,
    agent: input.agent ?? null,
    tracking_token_hash: sha256(trackingToken(id, deps.config.dataEncryptionKey)),
    content_hash: input.contentHash ?? null,
    test_mode: caller.testMode || quote.test_mode,
    status_seq: 1,
    created_at: now,
    updated_at: now,
  };
  const row: BookingRow = { ...values, currency: 'GBP', driver_id: null, vehicle_id: null };
  const leadMs = deps.config.bookings.dispatchLeadMinutes * 60_000;
  const dispatchAt = new Date(pickupTime.getTime() - leadMs);
  const inserts: RowInsert[] = [
    { table: 'bookings', row: values },
    {
      table: 'booking_status_history',
      row: { booking_id: id, seq: 1, status: 'pending', actor: `origin:${input.origin}`, details: {}, at: now },
    },
    {
      table: 'outbox',
      row: outboxRow(
        'dispatch-booking',
        { bookingId: id },
        { jobId: `dispatch-${id}`, ...(dispatchAt.getTime() > now.getTime() ? { runAt: dispatchAt } : {}) },
      ),
    },
  ];
  if (input.confirmByEmail && row.passenger_email) {
    let verifyLink: string | null = null;
    if (!row.email_verified) {
      const verification = verificationRow({ email: row.passenger_email, now });
      inserts.push({ table: 'email_verifications', row: verification.row });
      verifyLink = `${baseUrl}${VERIFY_LINK_PATH}?token=${verification.started.linkToken}`;
    }
    const message = messageRows(
      confirmation(row, viewOf(row, baseUrl, deps.config.dataEncryptionKey, true), verifyLink),
    );
    inserts.push(message.message, message.job);
  }
  return { row, inserts };
}

/** The passenger-verify link route (api/routes/passenger-verify.ts). */
const VERIFY_LINK_PATH = '/api/public/v1/passenger-verify/link';

const LONDON_WHEN = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  dateStyle: 'full',
  timeStyle: 'short',
});

function confirmation(row: BookingRow, view: BookingView, verifyLink: string | null): NewMessage {
  const when = LONDON_WHEN.format(row.pickup_time);
  return {
    channel: 'email',
    recipient: row.passenger_email as string,
    subject: `Your taxi ${row.reference}: ${when}`,
    body: [
      `Hello ${row.passenger_name},`,
      '',
      `Your booking ${row.reference} is confirmed: ${row.pickup.name} to ${row.dropoff.name}, ${when} (UK time).`,
      `Fare: £${((row.fare_pence ?? 0) / 100).toFixed(2)}, paid to your driver. We take no commission.`,
      '',
      `Track your ride: ${view.trackingUrl}`,
      ...(verifyLink ? [`Confirm your e-mail address: ${verifyLink}`] : []),
      `Pay your driver: ${view.payDriverUrl}`,
      `Cancel: ${view.trackingUrl} (free until your passenger is on board)`,
      '',
      'Direct Taxi Network',
    ].join('\n'),
    purpose: 'confirmation',
    bookingId: row.id,
    testMode: row.test_mode,
  };
}

/** The booking a passenger asks about, checked against their e-mail (case-insensitive). */
export async function bookingForPassenger(db: Db, rawRef: string, email: string, prefix: string): Promise<BookingRow> {
  const ref = normaliseReference(rawRef, prefix);
  const row = ref ? await findBookingByRef(db, ref) : undefined;
  if (!row)
    throw new AppError('booking_not_found', `No booking ${rawRef}.`, [
      { field: '/ref', problem: 'unknown booking reference' },
    ]);
  if ((row.passenger_email ?? '').toLowerCase() !== email.trim().toLowerCase()) {
    throw new AppError('email_mismatch', 'That e-mail address does not match the booking.', [
      { field: '/email', problem: 'does not match the booking' },
    ]);
  }
  return row;
}

export const CANCELLABLE: ReadonlySet<string> = new Set([
  'pending',
  'dispatching',
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'no_driver_available',
]);

/**
 * Cancel for the passenger: allowed until the passenger is on board; cancelling a cancelled
 * booking answers the same again. The dispatch worker then withdraws offers and tells drivers.
 */
export async function cancelBooking(
  db: Db,
  bookingId: string,
  reason: string | null,
  actor: string,
): Promise<BookingRow> {
  return db.transaction(async (trx) => {
    const row = await trx<BookingRow>('bookings').where({ id: bookingId }).forUpdate().first();
    if (!row) throw new AppError('booking_not_found', 'No such booking.');
    if (row.status === 'cancelled') return row;
    if (!CANCELLABLE.has(row.status)) {
      throw new AppError(
        'cannot_cancel',
        `A booking that is ${row.status.replace(/_/g, ' ')} can no longer be cancelled.`,
        [{ field: '/action', problem: `not allowed when ${row.status}` }],
      );
    }
    await trx('bookings').where({ id: bookingId }).update({ cancel_reason: reason });
    await appendStatus(trx, bookingId, 'cancelled', actor, reason ? { reason } : {});
    await enqueueJob(trx, 'booking-cancelled', { bookingId }, { jobId: `cancelled-${bookingId}` });
    return { ...row, status: 'cancelled' };
  });
}

/**
 * Whether the passenger may book (403 account_blocked when an operator blocked their e-mail or
 * phone: `npm run admin -- block`) and whether their e-mail is confirmed, in one query.
 */
export async function passengerStanding(db: Db, passenger: Passenger): Promise<{ emailVerified: boolean }> {
  const email = passenger.email ? normaliseEmail(passenger.email) : null;
  const { rows } = await db.raw<{ rows: { blocked: string | null; verified: boolean }[] }>(
    `select (select kind from blocked_contacts
              where (kind = 'phone' and value = ?) or (kind = 'email' and value = ?) limit 1) as blocked,
            exists (select 1 from email_verifications where email = ? and verified_at is not null) as verified`,
    [passenger.phone, email, email],
  );
  const blocked = rows[0]?.blocked ?? null;
  if (blocked) throw blockedError(blocked);
  return { emailVerified: rows[0]?.verified === true };
}

function blockedError(kind: string): AppError {
  return new AppError(
    'account_blocked',
    'Bookings for this passenger are blocked. Contact us if you think this is a mistake.',
    [{ field: kind === 'email' ? '/passengerEmail' : '/passengerPhone', problem: 'blocked' }],
  );
}

/** Operators block abusive passengers by e-mail or phone (`npm run admin -- block`): 403 account_blocked. */
export async function assertNotBlocked(db: Db, passenger: Passenger): Promise<void> {
  const hit = await db('blocked_contacts')
    .where((q) => {
      q.where({ kind: 'phone', value: passenger.phone });
      if (passenger.email) q.orWhere({ kind: 'email', value: passenger.email.toLowerCase() });
    })
    .first('kind');
  if (hit) throw blockedError(hit.kind);
}
