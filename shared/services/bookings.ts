import { createHmac } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { Config } from '../config.ts';
import { sha256 } from '../crypto.ts';
import { appendStatus, type BookingRow, findBookingByRef } from '../db/bookings.ts';
import type { Db, Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { newReference, normaliseReference } from '../domain/reference.ts';
import { AppError } from '../errors.ts';
import { startVerification } from './email-verification.ts';
import { queueMessage } from './messages.ts';

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

/**
 * Redeem a quote into a booking, in one transaction with the job that will dispatch it (at
 * once when pickup is within the lead time, else delayed to pickup minus lead time) and, for
 * v1 bookings, the confirmation e-mail. A quote is redeemed once: redeeming it again for the
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

  for (let attempt = 0; ; attempt++) {
    try {
      return await db.transaction(async (trx) => {
        const quote = await trx<QuoteRow>('quotes').where({ id: quoteId }).forUpdate().first();
        if (!quote) throw quoteNotFound(input.quoteId);
        if (quote.redeemed_at) {
          const existing = await trx<BookingRow>('bookings').where({ quote_id: quote.id }).first();
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
        if (input.contentHash) {
          // Serialise identical requests, then return one made in the last 15 minutes.
          await trx.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', [input.contentHash.toString('hex')]);
          const repeat = await trx<BookingRow>('bookings')
            .where('content_hash', input.contentHash)
            .where('created_at', '>', new Date(Date.now() - REPEAT_WINDOW_MS))
            .orderBy('created_at')
            .first();
          if (repeat) return viewOf(repeat, baseUrl, config.dataEncryptionKey, false);
        }
        const row = await insertBooking(trx, deps, quote, input, caller);
        if (input.confirmByEmail && row.passenger_email) {
          const verifyLink = row.email_verified
            ? null
            : `${baseUrl}${VERIFY_LINK_PATH}?token=${(await startVerification(trx, { email: row.passenger_email })).linkToken}`;
          await queueConfirmation(trx, row, viewOf(row, baseUrl, config.dataEncryptionKey, true), verifyLink);
        }
        return viewOf(row, baseUrl, config.dataEncryptionKey, true);
      });
    } catch (err) {
      // A reference collision (1 in ~1e9 per existing booking) is retried with a new one.
      if ((err as { constraint?: string }).constraint === 'bookings_reference_unique' && attempt < 5) continue;
      throw err;
    }
  }
}

function quoteNotFound(id: string): AppError {
  return new AppError(
    'quote_not_found',
    `No quote ${id} exists: quote first with POST /api/public/v1/quote and use its quote_id.`,
    [{ field: '/quote_id', problem: 'unknown quote' }],
  );
}

async function insertBooking(
  trx: Tx,
  deps: BookingDeps,
  quote: QuoteRow,
  input: NewBooking,
  caller: BookingCaller,
): Promise<BookingRow> {
  const id = uuidv7();
  const reference = newReference(deps.config.bookings.referencePrefix);
  const fare = input.farePenceOverride ?? quote.fare_pence;
  const [row] = await trx('bookings')
    .insert({
      id,
      reference,
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
      pickup: JSON.stringify(quote.pickup),
      dropoff: JSON.stringify(quote.dropoff),
      pickup_time: quote.depart_at,
      fare_pence: fare,
      applied_rules:
        input.farePenceOverride != null
          ? JSON.stringify([{ code: 'partner_fare', description: 'Fare agreed by the partner', amountPence: fare }])
          : JSON.stringify(quote.applied_rules),
      tariff_source: JSON.stringify(quote.tariff_source),
      payment_method: input.paymentMethod,
      flight_number: input.flightNumber ?? null,
      notes: input.notes ?? null,
      agent: input.agent ?? null,
      tracking_token_hash: sha256(trackingToken(id, deps.config.dataEncryptionKey)),
      content_hash: input.contentHash ?? null,
      test_mode: caller.testMode || quote.test_mode,
      status_seq: 0,
    })
    .returning<BookingRow[]>('*');
  if (!row) throw new Error('booking insert returned no row');
  await trx('quotes').where({ id: quote.id }).update({ redeemed_at: trx.fn.now() });
  await appendStatus(trx, id, 'pending', `origin:${input.origin}`);
  const leadMs = deps.config.bookings.dispatchLeadMinutes * 60_000;
  const dispatchAt = new Date(row.pickup_time.getTime() - leadMs);
  await enqueueJob(
    trx,
    'dispatch-booking',
    { bookingId: id },
    { jobId: `dispatch-${id}`, ...(dispatchAt.getTime() > Date.now() ? { runAt: dispatchAt } : {}) },
  );
  return { ...row, status: 'pending', status_seq: 1 };
}

/** The passenger-verify link route (api/routes/passenger-verify.ts). */
const VERIFY_LINK_PATH = '/api/public/v1/passenger-verify/link';

async function queueConfirmation(
  trx: Tx,
  row: BookingRow,
  view: BookingView,
  verifyLink: string | null,
): Promise<void> {
  const when = row.pickup_time.toLocaleString('en-GB', {
    timeZone: 'Europe/London',
    dateStyle: 'full',
    timeStyle: 'short',
  });
  await queueMessage(trx, {
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
  });
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

const CANCELLABLE = new Set([
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

/** Operators block abusive passengers by e-mail or phone (`npm run admin -- block`): 403 account_blocked. */
export async function assertNotBlocked(db: Db, passenger: Passenger): Promise<void> {
  const hit = await db('blocked_contacts')
    .where((q) => {
      q.where({ kind: 'phone', value: passenger.phone });
      if (passenger.email) q.orWhere({ kind: 'email', value: passenger.email.toLowerCase() });
    })
    .first('kind');
  if (hit) {
    throw new AppError(
      'account_blocked',
      'Bookings for this passenger are blocked. Contact us if you think this is a mistake.',
      [{ field: hit.kind === 'email' ? '/passengerEmail' : '/passengerPhone', problem: 'blocked' }],
    );
  }
}
