import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config.ts';
import { sha256 } from '../crypto.ts';
import { type Guard, insertAllIf, insertManyIf, type RowInsert } from '../db/atomic.ts';
import { appendStatus, type BookingRow, findBookingByRef } from '../db/bookings.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { enqueueJob, outboxRow } from '../db/outbox.ts';
import { rawNamed } from '../db/prepared.ts';
import { dispatchTimeMs, leadTimesOf } from '../domain/dispatch/dispatch-time.ts';
import { isWellFormedEmail, mailboxKey, normaliseEmail } from '../domain/email-acceptance.ts';
import { repeatedHourZone } from '../domain/london-zone.ts';
import { placeLabel } from '../domain/place-label.ts';
import { newReference, normaliseReference, referenceForMessage } from '../domain/reference.ts';
import { scenarioInNotes, type TestScenario } from '../domain/sandbox.ts';
import { AppError, type ErrorDetail } from '../errors.ts';
import { uuidv7 } from '../ids.ts';
import { BOOKING_LINK_TTL_MS, bookingVerifyToken, SANDBOX_PURPOSES } from './email-verification.ts';
import { messageRows, type NewMessage } from './messages.ts';
import { isQuoteForNow, type PricedQuote, redeemedPickup } from './quotes.ts';

export type Origin = 'website' | 'api' | 'agent' | 'partner' | 'supplier' | 'mcp';

import type { PaymentMethod } from '../domain/payment-state.ts';

export type { PaymentMethod };

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
  /** Test mode: the scenario the request asked for (X-Test-Scenario); else `scenario:<name>` in the notes. */
  testScenario?: TestScenario | null;
  /**
   * The website's booking page: it has no key and follows the quote's mode (a sandbox quote's
   * booking page books in test mode). Everyone else redeems quotes of their own mode only, and
   * without a key that is live.
   */
  followsQuoteMode?: boolean;
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
  /** Made without an e-mail (a quote booked on an alias route first): nothing was e-mailed. */
  withoutEmail: boolean;
}

/**
 * What a booking answer says when it returns a booking made earlier without an e-mail to a
 * request that gave one (the same passenger by name and phone redeeming the quote again):
 * no confirmation was sent, and the address does not open the booking; its links do.
 */
export const BOOKED_WITHOUT_EMAIL =
  'This quote was booked earlier without an e-mail address, so no confirmation e-mail was sent: give the passenger the trackingUrl (status, driver, cancellation).';

type BookingDeps = { db: Db; config: Pick<Config, 'bookings' | 'dispatch' | 'dataEncryptionKey' | 'serviceName'> };

/** 15 minutes: a repeated instant or v1 booking with the same content returns the first. */
export const REPEAT_WINDOW_MS = 15 * 60 * 1000;

/**
 * UK mobile numbers as typed (07700 900123, +44 7700 900123, +44 (0)7700 900123, 0044…) in
 * E.164: one number, one spelling, which is what is stored and what operators' blocks match.
 * The UK trunk 0 written after +44 or 0044 ("(0)") is dropped, as a national number's is.
 */
export function normalisePhone(raw: string): string {
  const digits = raw
    .trim()
    .replace(/^whatsapp:/i, '')
    .replace(/[\s().-]/g, '');
  // However many trunk zeros were written ("+44 (0)(0)7700…"): no UK number starts with 0 after +44.
  const ukTrunk = (e164: string) => e164.replace(/^\+440+/, '+44');
  // A country code never starts with 0 (E.164): "+0044…" or "000044…" is no number at all,
  // and read as one it would slip past an operator's block on the number it spells.
  if (/^\+[1-9]\d{6,14}$/.test(digits)) return ukTrunk(digits);
  if (/^00[1-9]\d{6,14}$/.test(digits)) return ukTrunk(`+${digits.slice(2)}`);
  if (/^0\d{9,10}$/.test(digits)) return `+44${digits.slice(1)}`;
  throw new AppError('invalid_input', 'The phone number is not a valid mobile number in international format.', [
    { field: '/passengerPhone', problem: 'must be a mobile number such as +447700900123' },
  ]);
}

/**
 * The token in a booking's tracking link (and its status_url when it has no e-mail): an HMAC of
 * the booking id with the service's key, so it is unguessable, needs no e-mail in the URL, and
 * can be given again when a retried request returns the same booking. Only its SHA-256 is
 * stored, for lookups. It opens the tracking page, which can cancel the booking.
 */
export function trackingToken(bookingId: string, key: Buffer): string {
  return createHmac('sha256', key).update(`tracking:${bookingId}`).digest('base64url');
}

/** Bytes of the pay token's MAC: 128 bits. */
const PAY_MAC_BYTES = 16;

function payMac(bookingId: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(`pay:${bookingId}`).digest().subarray(0, PAY_MAC_BYTES);
}

/**
 * The token in a booking's pay-the-driver link: the booking id (16 bytes) and a 128-bit MAC of
 * it under the service's key, 43 characters of base64url like the tracking token. It opens the
 * pay page and nothing else, so a passenger can forward the pay link to whoever pays without
 * handing over the tracking page and its cancel button. The page reads the booking id out of
 * it (`bookingIdOfPayToken`), so nothing more is stored; like the tracking token it is the same
 * each time the booking is answered.
 */
export function payToken(bookingId: string, key: Buffer): string {
  const id = Buffer.from(bookingId.replaceAll('-', ''), 'hex');
  return Buffer.concat([id, payMac(bookingId, key)]).toString('base64url');
}

/** The booking id a pay token names, when its MAC is right (compared in constant time); else null. */
export function bookingIdOfPayToken(token: string, key: Buffer): string | null {
  const raw = Buffer.from(token, 'base64url');
  // Only the canonical spelling: base64url's last character carries two spare bits, and a
  // token that differs in them (or in anything the decoder skips) is not this link.
  if (raw.length !== 16 + PAY_MAC_BYTES || raw.toString('base64url') !== token) return null;
  const hex = raw.subarray(0, 16).toString('hex');
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return timingSafeEqual(raw.subarray(16), payMac(id, key)) ? id : null;
}

/** Whether a quote's booking is this passenger's: what redeeming the quote again is answered with (else 409). */
export function samePassenger(
  row: Pick<BookingRow, 'passenger_name' | 'passenger_phone' | 'passenger_email'>,
  p: Passenger,
): boolean {
  const norm = (s: string | null) => (s ?? '').trim().toLowerCase().replace(/\s+/g, ' ');
  // The e-mail is optional on the alias routes: a booking made without one is answered to a
  // retry that adds one (name and phone were all it took). A booking made with one is answered
  // only to that address: the answer carries links that open and cancel it.
  const booked = norm(row.passenger_email);
  return (
    norm(row.passenger_name) === norm(p.name) &&
    (row.passenger_phone ?? '') === p.phone &&
    (booked === '' || booked === norm(p.email))
  );
}

/**
 * A quote redeemed again by its passenger is answered with its booking only when the request
 * asks for that booking: with another payment method, note or flight number for the driver it
 * would be told its change was booked, and the booking (redeemed once) is not changed by it.
 * So it is 409 naming what differs, as the 15-minute rule treats such a request as a new ride.
 * Unsent notes or flight number match a booking without them; the method defaults to cash.
 * `detailsDiffer` names what differs; `assertSameDetails` refuses it.
 */
export function detailsDiffer(
  row: Pick<BookingRow, 'reference' | 'payment_method' | 'notes' | 'flight_number'>,
  input: Pick<NewBooking, 'paymentMethod' | 'notes' | 'flightNumber'>,
): ErrorDetail[] {
  const text = (s: string | null | undefined) => (s ?? '').trim().replace(/\s+/g, ' ');
  const flight = (s: string | null | undefined) =>
    (s ?? '')
      .normalize('NFKC')
      .replace(/[\s-]+/g, '')
      .toUpperCase();
  const differ: ErrorDetail[] = [];
  if (row.payment_method !== input.paymentMethod)
    differ.push({
      field: '/paymentMethod',
      problem: `differs from its booking's (${row.payment_method.replace('_', ' ')})`,
    });
  if (text(row.notes) !== text(input.notes)) differ.push({ field: '/notes', problem: "differs from its booking's" });
  if (flight(row.flight_number) !== flight(input.flightNumber))
    differ.push({ field: '/flightNumber', problem: "differs from its booking's" });
  return differ;
}

function assertSameDetails(
  row: Pick<BookingRow, 'reference' | 'payment_method' | 'notes' | 'flight_number'>,
  input: Pick<NewBooking, 'paymentMethod' | 'notes' | 'flightNumber'>,
): void {
  const differ = detailsDiffer(row, input);
  if (differ.length === 0) return;
  throw new AppError(
    'quote_already_redeemed',
    `This quote is already booked as ${row.reference}, with other details (${differ.map((d) => d.field.slice(1)).join(', ')}); a quote books once and booking it again does not change its booking. Look up or cancel ${row.reference}, and ask for a new quote to book the ride differently.`,
    differ,
  );
}

export function viewOf(
  row: BookingRow,
  baseUrl: string,
  key: Buffer,
  created: boolean,
  /** The row's tracking token, when the caller has it already (`bookingWrite`). */
  token = trackingToken(row.id, key),
): BookingView {
  return {
    id: row.id,
    reference: row.reference,
    status: row.status,
    farePence: row.fare_pence ?? 0,
    currency: row.currency,
    pickupTime: row.pickup_time,
    emailVerified: row.email_verified,
    // The API lookup: with the e-mail the caller adds, or, for a booking made without one, the
    // tracking token in the URL (as in the tracking link the same answer carries).
    statusUrl: `${baseUrl}/api/public/v1/booking/${row.reference}${row.passenger_email ? '' : `?t=${token}`}`,
    trackingUrl: `${baseUrl}/track/${token}`,
    payDriverUrl: `${baseUrl}/pay/${payToken(row.id, key)}`,
    created,
    withoutEmail: !row.passenger_email,
  };
}

/**
 * The quote columns a redemption reads (`QUOTE_COLUMNS`): not the rest of the row. Its rules
 * and tariff source are not among them: the booking copies them inside its statement
 * (`REDEEMED_COLUMNS`).
 */
export interface QuoteRow {
  id: string;
  expires_at: Date;
  redeemed_at: Date | null;
  pickup: unknown;
  dropoff: unknown;
  depart_at: Date;
  created_at: Date;
  vehicle_type: string;
  passengers: number;
  fare_pence: number;
  test_mode: boolean;
  /** Asked for; charged only at an airport pickup (the tariff engine's `meet_and_greet` rule). */
  meet_and_greet: boolean;
  /** What the quote's answer warned of (meet and greet not charged, a vehicle chosen, ...): a booking's answer repeats them. */
  warnings: string[];
}

const QUOTE_COLUMNS = [
  'id',
  'expires_at',
  'redeemed_at',
  'pickup',
  'dropoff',
  'depart_at',
  'created_at',
  'vehicle_type',
  'passengers',
  'fare_pence',
  'test_mode',
  'meet_and_greet',
  'warnings',
] as const satisfies readonly (keyof QuoteRow)[];

/**
 * The warnings of the quote a booking was made from, for the answer to a request that returned
 * an earlier booking (a repeat): the first answer had them from the quote it priced.
 */
export async function quoteWarningsOf(db: Queryable, bookingId: string): Promise<string[]> {
  const row = await db('bookings as b')
    .join('quotes as q', 'q.id', 'b.quote_id')
    .where('b.id', bookingId)
    .first<{ warnings: string[] } | undefined>('q.warnings');
  return row?.warnings ?? [];
}

/**
 * What a redemption's booking copies from its quote inside the write statement, returned by the
 * redemption guard: Postgres has them already, so they are neither read out, encoded nor sent
 * back (about a third of a v1 booking's statement parameters).
 */
const REDEEMED_COLUMNS = ['pickup', 'dropoff', 'applied_rules', 'tariff_source'] as const;

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
  /**
   * The departure time the request stated beside the quote it redeems (as sent): a quote for
   * "now" books a pickup at it when it is a few minutes ahead (`redeemedPickup`).
   */
  statedPickup?: string;
  /** For repeat detection of instant and v1 bookings. */
  contentHash?: Buffer | null;
  /** Queue the confirmation e-mail with the tracking link (v1 bookings); for an unverified
   * address it also carries a link that verifies it. */
  confirmByEmail?: boolean;
}

/**
 * What a booking takes from its quote: a quote priced for this booking carries its rules and
 * tariff source; a redeemed one (`redeemed: true`) leaves them to the redemption guard.
 */
type QuoteSource = Pick<
  QuoteRow,
  | 'id'
  | 'pickup'
  | 'dropoff'
  | 'depart_at'
  | 'vehicle_type'
  | 'passengers'
  | 'fare_pence'
  | 'test_mode'
  | 'meet_and_greet'
> &
  ({ redeemed: true } | { redeemed?: false; applied_rules: unknown; tariff_source: unknown });

const REDEEM_GUARD = `update quotes set redeemed_at = now() where id = ? and redeemed_at is null and expires_at > now()
  returning id, ${REDEEMED_COLUMNS.join(', ')}`;
/**
 * The 15-minute repeat rule's guard: a request identical to one in the last 15 minutes gets
 * that booking, unless it was cancelled since (a passenger who cancels and books the same ride
 * again means it). Only a conflict reads the earlier booking's status.
 */
const REPEAT_TAKEN_OVER = `booking_repeat_guard.expires_at <= now()
    or exists (select 1 from bookings c where c.id = booking_repeat_guard.booking_id and c.status = 'cancelled')`;
const REPEAT_GUARD = `insert into booking_repeat_guard (content_hash, booking_id, expires_at) values (?, ?, ?)
  on conflict (content_hash) do update set booking_id = excluded.booking_id, expires_at = excluded.expires_at
  where ${REPEAT_TAKEN_OVER} returning booking_id`;

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
  /** The quote as `passengerStanding` already read it (null: no such quote), saving a round trip. */
  preloaded?: { quote: QuoteRow | null },
): Promise<BookingView> {
  const { db, config } = deps;
  const quoteId = quoteIdOf(input.quoteId);
  if (!quoteId) throw quoteNotFound(input.quoteId);
  const readQuote = () =>
    db<QuoteRow>('quotes')
      .where({ id: quoteId })
      .first(...QUOTE_COLUMNS);

  let quote = preloaded ? (preloaded.quote ?? undefined) : await readQuote();
  for (let attempt = 0; ; attempt++) {
    // Test and live are kept apart: a caller never redeems a quote of the other mode (without a
    // key, live), but for the booking page, which follows the quote's.
    if (!quote) throw quoteNotFound(input.quoteId);
    if (!caller.followsQuoteMode && quote.test_mode !== caller.testMode)
      throw quoteOfOtherMode(input.quoteId, quote.test_mode);
    if (quote.redeemed_at) {
      const existing = await db<BookingRow>('bookings').where({ quote_id: quote.id }).first();
      if (existing && samePassenger(existing, input.passenger)) {
        assertSameDetails(existing, input);
        return viewOf(existing, baseUrl, config.dataEncryptionKey, false);
      }
      throw new AppError(
        'quote_already_redeemed',
        'This quote has already been booked by another passenger; ask for a new quote.',
        [{ field: '/quote_id', problem: 'already redeemed' }],
      );
    }
    // Expired by our clock, or, after the guard refused a quote nobody redeemed a few times
    // over, by the database's (the guard's `expires_at > now()`; the clocks can differ by a
    // moment at the quote's expiry, and this loop would otherwise spin until they agree).
    if (quote.expires_at.getTime() <= Date.now() || attempt >= 5) {
      throw new AppError(
        'quote_expired',
        'This quote has expired (quotes are valid for 24 hours); ask for a new quote.',
        [{ field: '/quote_id', problem: 'expired' }],
      );
    }
    const now = new Date();
    // A quote for "now" books a pickup now; one for a stated time that has passed cannot.
    if (!isQuoteForNow(quote) && quote.depart_at.getTime() < now.getTime() - 5 * 60_000) {
      throw new AppError('pickup_in_past', 'The quoted pickup time has passed; ask for a new quote.', [
        // The quote's time, not a field of this request: the error points at the quote.
        { field: '/quote_id', problem: 'its pickup time has passed' },
      ]);
    }
    const write = bookingWrite(
      deps,
      { ...quote, depart_at: redeemedPickup(quote, now.getTime(), input.statedPickup), redeemed: true },
      input,
      caller,
      baseUrl,
      now,
    );
    const quoteKey = quote.id;
    const passed = await writeOnce(() => redeemWriter(db)(quoteKey, write.inserts));
    if (passed === 'collision' && attempt < 5) continue;
    if (passed === true) return write.view;
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
      hash: input.contentHash,
      bookingId: write.row.id,
      expiresAt: new Date(now.getTime() + REPEAT_WINDOW_MS),
    };
    const passed = await writeOnce(() =>
      repeatWriter(db)(guard, [{ table: 'quotes', row: { ...priced.row, redeemed_at: now } }, ...write.inserts]),
    );
    if (passed === 'collision' && attempt < 5) continue;
    if (passed === true) return write.view;
    const repeat = await repeatedBooking(db, input.contentHash);
    if (repeat) return viewOf(repeat, baseUrl, config.dataEncryptionKey, false);
    if (attempt >= 5) throw new Error('repeat guard held by a booking that does not exist');
  }
}

/**
 * Price a booking that may repeat one of the last 15 minutes (instant, v1 and MCP bookings),
 * without looking the repeat up first: `bookPricedQuote`'s guarded write finds it and returns
 * the earlier booking, so a first request (nearly every request) pays no extra round trip.
 * When pricing refuses a repeat (its pickup time has passed since the first, say), the
 * earlier booking is looked up and returned instead of the error.
 */
export async function priceUnlessRepeated<T>(
  db: Queryable,
  contentHash: Buffer,
  price: () => Promise<T>,
): Promise<{ priced: T; repeat?: undefined } | { repeat: BookingRow }> {
  try {
    return { priced: await price() };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const repeat = await repeatedBooking(db, contentHash);
    if (repeat) return { repeat };
    throw err;
  }
}

/** The booking an identical request made in the last 15 minutes, if any and not cancelled since. */
export async function repeatedBooking(db: Queryable, contentHash: Buffer): Promise<BookingRow | undefined> {
  return db<BookingRow>('booking_repeat_guard as g')
    .join('bookings as b', 'b.id', 'g.booking_id')
    .where('g.content_hash', contentHash)
    .where('g.expires_at', '>', db.fn.now())
    .whereNot('b.status', 'cancelled')
    .first('b.*');
}

/** Expired repeat guards are deleted hourly by the outbox relay's housekeeping. */
export async function pruneRepeatGuards(db: Db): Promise<number> {
  return db('booking_repeat_guard').where('expires_at', '<', new Date()).delete();
}

/** Run the booking statement: true when written, false when its guard refused, 'collision' on a reference clash. */
/** Most bookings one statement carries. */
const MAX_WRITE_BATCH = 100;

/**
 * The ids travel as an array (`= any`), not as a JSON set: the planner guesses 100 rows for a
 * JSON set function and then hashed all quotes to match them, a scan of the table on every
 * statement until it held some 15,000 quotes (test/hot-path-plans.int.test.ts).
 */
export const REDEEM_MANY_GUARD = `update quotes set redeemed_at = now()
  where id = any(?::uuid[]) and redeemed_at is null and expires_at > now()
  returning id::text as key, ${REDEEMED_COLUMNS.join(', ')}`;

const REPEAT_MANY_GUARD = `insert into booking_repeat_guard (content_hash, booking_id, expires_at)
  select decode(g->>'hash', 'hex'), (g->>'booking')::uuid, (g->>'expires')::timestamptz from json_array_elements(?::json) g
  on conflict (content_hash) do update set booking_id = excluded.booking_id, expires_at = excluded.expires_at
  where ${REPEAT_TAKEN_OVER} returning encode(content_hash, 'hex') as key`;

/** One booking to write: its rows, guarded by the statement `single` names, known in a batch by `key`. */
interface PendingWrite {
  key: string;
  single: Guard;
  /** What the batch guard needs of this booking (a quote id, or a repeat hash and booking id). */
  batchItem: unknown;
  inserts: RowInsert[];
  resolve(r: { passed: boolean }): void;
  reject(err: unknown): void;
}

type BookingWriter = (
  w: Pick<PendingWrite, 'key' | 'single' | 'batchItem' | 'inserts'>,
) => Promise<{ passed: boolean }>;

const bookingWriters = new WeakMap<Db, Map<string, BookingWriter>>();

/** How long a writer's statement may run before the bookings waiting behind it go without it. */
const WRITE_STALL_MS = 100;

/**
 * Writes bookings, coalescing those waiting for it into ONE
 * statement (`insertManyIf`): the batch guard (`manyGuard`, over every booking's `batchItem`)
 * returns the keys it let through, and only those bookings are written. One statement and one
 * commit for many bookings share the round trip, the statement's fixed cost in Postgres and the
 * WAL flush (measured, bookings a second are bounded by CPU, not by the flush: bench/NOTES.md,
 * Bookings). A key appears once per statement (a second
 * booking with it waits for the next); when a statement fails (a reference collision, a row's
 * content, a guard hit twice) each booking of it is written with its own guard, so only its
 * own caller sees the error.
 *
 * The next statement goes when the one in flight completes, not at the next turn of the event
 * loop: the bookings that arrive meanwhile share it, so under load there are fewer, fuller
 * statements (9 to 12% more redemptions a second at 50 clients, and less CPU per booking in
 * the API and Postgres: bench/NOTES.md, Bookings). A statement that has run WRITE_STALL_MS (a lock
 * wait, a stalled commit) no longer holds the others: the bookings waiting behind it then go
 * in a statement of their own.
 */
function bookingWriter(db: Db, kind: string, manyGuard: (items: unknown[]) => Guard): BookingWriter {
  let writers = bookingWriters.get(db);
  if (!writers) {
    writers = new Map();
    bookingWriters.set(db, writers);
  }
  const existing = writers.get(kind);
  if (existing) return existing;
  let pending: PendingWrite[] = [];
  let scheduled = false;
  let inFlight = 0;
  let lastSentAt = 0;
  let stallTimer: NodeJS.Timeout | null = null;

  const single = async (p: PendingWrite): Promise<void> => {
    try {
      p.resolve(await insertAllIf(db, p.single, p.inserts));
    } catch (err) {
      p.reject(err);
    }
  };

  const write = async (batch: PendingWrite[]): Promise<void> => {
    if (batch.length === 1) return single(batch[0] as PendingWrite);
    let passed: Set<string>;
    try {
      passed = await insertManyIf(
        db,
        manyGuard(batch.map((p) => p.batchItem)),
        batch.flatMap((p) => p.inserts.map((ins) => ({ ...ins, key: p.key }))),
      );
    } catch {
      await Promise.all(batch.map(single));
      return;
    }
    for (const p of batch) p.resolve({ passed: passed.has(p.key) });
  };

  const flush = () => {
    scheduled = false;
    if (stallTimer) {
      clearTimeout(stallTimer);
      stallTimer = null;
    }
    if (pending.length === 0) return;
    const all = pending;
    pending = [];
    const batch: PendingWrite[] = [];
    const keys = new Set<string>();
    for (const p of all) {
      // The same key twice in one statement would let one guard pass for two bookings.
      if (keys.has(p.key) || batch.length >= MAX_WRITE_BATCH) {
        pending.push(p);
        continue;
      }
      keys.add(p.key);
      batch.push(p);
    }
    inFlight++;
    lastSentAt = performance.now();
    // write() settles every booking of the batch itself and never rejects.
    void write(batch).then(() => {
      inFlight--;
      if (pending.length > 0) schedule();
    });
    if (pending.length > 0) schedule();
  };
  const schedule = () => {
    if (scheduled) return;
    if (inFlight === 0) {
      scheduled = true;
      setImmediate(flush);
    } else if (!stallTimer) {
      stallTimer = setTimeout(flush, Math.max(0, WRITE_STALL_MS - (performance.now() - lastSentAt)));
    }
  };

  const writer: BookingWriter = (w) =>
    new Promise((resolve, reject) => {
      pending.push({ ...w, resolve, reject });
      schedule();
    });
  writers.set(kind, writer);
  return writer;
}

/** Redemptions: guarded by marking the quote redeemed, keyed by quote id. */
function redeemWriter(db: Db): (quoteId: string, inserts: RowInsert[]) => Promise<{ passed: boolean }> {
  const write = bookingWriter(db, 'redeem', (ids) => ({ sql: REDEEM_MANY_GUARD, bindings: [ids as string[]] }));
  return (quoteId, inserts) =>
    write({ key: quoteId, single: { sql: REDEEM_GUARD, bindings: [quoteId] }, batchItem: quoteId, inserts });
}

/**
 * Priced bookings (instant, v1): guarded by the 15-minute repeat rule on the content hash, and
 * keyed by it, so identical requests arriving together go in successive statements (a key
 * appears once per statement): the first is written and the others find its guard row. Keyed
 * by booking id, they shared a statement that Postgres refused (ON CONFLICT cannot affect a row
 * twice), and every booking of it was then written on its own.
 */
function repeatWriter(
  db: Db,
): (guard: { hash: Buffer; bookingId: string; expiresAt: Date }, inserts: RowInsert[]) => Promise<{ passed: boolean }> {
  const write = bookingWriter(db, 'repeat', (items) => ({ sql: REPEAT_MANY_GUARD, bindings: [JSON.stringify(items)] }));
  return (g, inserts) =>
    write({
      key: g.hash.toString('hex'),
      single: { sql: REPEAT_GUARD, bindings: [g.hash, g.bookingId, g.expiresAt] },
      batchItem: { hash: g.hash.toString('hex'), booking: g.bookingId, expires: g.expiresAt.toISOString() },
      inserts,
    });
}

async function writeOnce(run: () => Promise<{ passed: boolean }>): Promise<boolean | 'collision'> {
  try {
    return (await run()).passed;
  } catch (err) {
    // A reference collision (1 in ~1e9 per existing booking) is retried with a new one.
    if ((err as { constraint?: string }).constraint === 'bookings_reference_unique') return 'collision';
    throw err;
  }
}

/** The quote_id echoed in a 404: a UUID as sent; anything else is not repeated (it may be long, and is unchecked text). */
const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function quoteNotFound(id: string): AppError {
  return new AppError(
    'quote_not_found',
    `${UUID_SHAPE.test(id) ? `No quote ${id} exists` : 'No quote has this quote_id (quote ids are UUIDs)'}: quote first with POST /api/public/v1/quote and use its quote_id.`,
    [{ field: '/quote_id', problem: 'unknown quote' }],
  );
}

/**
 * A quote of the other mode: still 404 (this caller cannot redeem it), but saying why, so an
 * integrator moving between the sandbox and live is not told the quote it just made is gone.
 */
function quoteOfOtherMode(id: string, testQuote: boolean): AppError {
  return new AppError(
    'quote_not_found',
    testQuote
      ? `Quote ${id} was made with a test key (the sandbox): book it with a test key, or quote again with POST /api/public/v1/quote to book live.`
      : `Quote ${id} is a live quote, and a test key books sandbox quotes only: book it without the test key, or quote again with POST /api/public/v1/quote using the test key.`,
    [{ field: '/quote_id', problem: testQuote ? 'a test-mode quote' : 'a live quote' }],
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
): { row: BookingRow; view: BookingView; inserts: RowInsert[] } {
  const id = uuidv7();
  const token = trackingToken(id, deps.config.dataEncryptionKey);
  const fare = input.farePenceOverride ?? quote.fare_pence;
  const pickupTime = quote.depart_at;
  const testMode = caller.testMode || quote.test_mode;
  // Charged by the quote: asked for, at an airport pickup (the tariff engine's rule). A
  // redemption's rules are copied inside the statement, so this is read from the quote's request.
  const meetAndGreet = quote.meet_and_greet && (quote.pickup as { kind?: unknown } | null)?.kind === 'airport';
  // The partner's fare replaces the quote's rules; meet and greet the quote charged stays a
  // rule of its own (at no amount: the fare is the partner's), so the driver is still told.
  const partnerFare =
    input.farePenceOverride != null
      ? [
          { code: 'partner_fare', description: 'Fare agreed by the partner', amountPence: fare },
          ...(meetAndGreet
            ? [
                {
                  code: 'meet_and_greet',
                  description: 'Meet and greet in the arrivals hall (in the fare)',
                  amountPence: 0,
                },
              ]
            : []),
        ]
      : null;
  // What a redemption's booking does not carry (REDEEMED_COLUMNS) is copied from the quote
  // inside the statement.
  const fromQuote: Record<string, unknown> = quote.redeemed
    ? {}
    : {
        pickup: quote.pickup,
        dropoff: quote.dropoff,
        applied_rules: quote.applied_rules,
        tariff_source: quote.tariff_source,
      };
  if (partnerFare) fromQuote.applied_rules = partnerFare;
  const copied = quote.redeemed ? REDEEMED_COLUMNS.filter((c) => !(c in fromQuote)) : [];
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
    pickup_time: pickupTime,
    fare_pence: fare,
    ...fromQuote,
    payment_method: input.paymentMethod,
    flight_number: input.flightNumber ?? null,
    notes: input.notes ?? null,
    agent: input.agent ?? null,
    tracking_token_hash: sha256(token),
    content_hash: input.contentHash ?? null,
    test_mode: testMode,
    test_scenario: testMode ? (caller.testScenario ?? scenarioInNotes(input.notes)) : null,
    status_seq: 1,
    created_at: now,
    updated_at: now,
  };
  const row: BookingRow = {
    ...values,
    pickup: quote.pickup as BookingRow['pickup'],
    dropoff: quote.dropoff as BookingRow['dropoff'],
    currency: 'GBP',
    driver_id: null,
    vehicle_id: null,
    operator_driver: null,
  };
  const view = viewOf(row, baseUrl, deps.config.dataEncryptionKey, true, token);
  const dispatchAt = new Date(
    dispatchTimeMs({ pickupTime, pickup: row.pickup, dropoff: row.dropoff }, leadTimesOf(deps.config)),
  );
  const inserts: RowInsert[] = [
    { table: 'bookings', row: values, ...(copied.length > 0 ? { fromGuard: copied } : {}) },
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
    // An unconfirmed address gets a link that confirms it, signed, not stored: no row here. A
    // test-mode booking's too, as a live one's would (the sandbox's recorded messages show it),
    // but opening it confirms the address for test-mode bookings only (`verifyBookingLink`):
    // whoever holds a test key reads the link, and must not confirm an address for live use.
    const verifyLink = row.email_verified
      ? null
      : `${baseUrl}${VERIFY_LINK_PATH}?token=${bookingVerifyToken(id, row.passenger_email, deps.config.dataEncryptionKey, new Date(now.getTime() + BOOKING_LINK_TTL_MS))}`;
    const message = messageRows(confirmation(row, view, verifyLink, deps.config.serviceName, meetAndGreet));
    inserts.push(message.message, message.job);
  }
  return { row, view, inserts };
}

/** The passenger-verify link route (api/routes/passenger-verify.ts). */
const VERIFY_LINK_PATH = '/api/public/v1/passenger-verify/link';

const LONDON_WHEN = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  dateStyle: 'full',
  timeStyle: 'short',
});

function confirmation(
  row: BookingRow,
  view: BookingView,
  verifyLink: string | null,
  serviceName: string,
  meetAndGreet: boolean,
): NewMessage {
  const when = `${LONDON_WHEN.format(row.pickup_time)}${repeatedHourZone(row.pickup_time)}`;
  return {
    channel: 'email',
    recipient: row.passenger_email as string,
    subject: `Your taxi ${row.reference}: ${when}`,
    body: [
      `Hello ${row.passenger_name},`,
      '',
      `Your booking ${row.reference} is confirmed: ${placeLabel(row.pickup)} to ${placeLabel(row.dropoff)}, ${when} (UK time).`,
      `Fare: £${((row.fare_pence ?? 0) / 100).toFixed(2)}, paid to your driver. We take no commission.`,
      ...(meetAndGreet ? ['Meet and greet: your driver meets you in the arrivals hall with a name board.'] : []),
      '',
      `Track your ride: ${view.trackingUrl}`,
      ...(verifyLink ? [`Confirm your e-mail address: ${verifyLink}`] : []),
      `Pay your driver: ${view.payDriverUrl}`,
      `Cancel: ${view.trackingUrl} (free until you are on board)`,
      '',
      serviceName,
    ].join('\n'),
    purpose: 'confirmation',
    bookingId: row.id,
    testMode: row.test_mode,
  };
}

/**
 * The booking a passenger asks about, checked against their e-mail: any address the booking
 * routes accept (400 `invalid_input` if it is not well-formed by their rules), compared in
 * canonical form (`normaliseEmail`: case-insensitive, an internationalised domain in any of
 * its spellings, Unicode or punycode). By e-mail, test and live are kept apart: a test-mode
 * booking is found only with a test key (`testMode`), a live one only without one; the other
 * mode's bookings are 404 as if they did not exist. The tracking token (`t`, as in the booking's
 * status_url) proves the booking whatever the caller's mode.
 */
export async function bookingForPassenger(
  db: Db,
  rawRef: string,
  proof: { email?: string | undefined; token?: string | undefined },
  prefix: string,
  testMode = false,
): Promise<BookingRow> {
  const { email, token } = proof;
  if (email === undefined && token === undefined) {
    throw new AppError('invalid_input', 'Give the e-mail address the booking was made with, or its tracking token.', [
      { field: '/email', problem: 'is required (or t, the tracking token)' },
    ]);
  }
  if (email !== undefined && !isWellFormedEmail(email)) {
    throw new AppError('invalid_input', 'The e-mail address is not a valid e-mail address.', [
      { field: '/email', problem: 'must be an e-mail address' },
    ]);
  }
  const ref = normaliseReference(rawRef, prefix);
  const row = ref ? await findBookingByRef(db, ref) : undefined;
  // Proved by token, an unknown reference and a wrong token are one answer, as the event
  // stream's: a token proof is not under the failed-proof limits (a token cannot be guessed),
  // so two answers would let anyone test which references exist at speed.
  // By e-mail, a caller sees the bookings of its own mode (a test key the sandbox's, no key or
  // a live key the live ones). The tracking token proves the booking whatever the caller's
  // mode: a sandbox booking's own status_url and tracking link are opened without the key.
  if (!row || (email !== undefined && row.test_mode !== testMode)) {
    if (email === undefined) throw noBookingOrToken(rawRef);
    throw new AppError('booking_not_found', `No booking ${referenceForMessage(rawRef)}.`, [
      { field: '/ref', problem: 'unknown booking reference' },
    ]);
  }
  if (email !== undefined) {
    if (normaliseEmail(row.passenger_email ?? '') !== normaliseEmail(email)) {
      throw new AppError('email_mismatch', 'That e-mail address does not match the booking.', [
        { field: '/email', problem: 'does not match the booking' },
      ]);
    }
    return row;
  }
  // The tracking token (the one in the booking's tracking link and status_url): how a booking
  // made without an e-mail (the alias routes take none) is looked up and cancelled. Only its
  // SHA-256 is stored; compared in constant time.
  const stored = (row as BookingRow & { tracking_token_hash: Buffer }).tracking_token_hash;
  const presented = sha256(token as string);
  if (!stored || stored.length !== presented.length || !timingSafeEqual(stored, presented)) {
    throw noBookingOrToken(rawRef);
  }
  return row;
}

/** The one answer to a tracking token proof that fails: no such booking, or the token is not its. */
export function noBookingOrToken(rawRef: string): AppError {
  return new AppError(
    'booking_not_found',
    `No booking ${referenceForMessage(rawRef)}, or the tracking token does not match it.`,
    [{ field: '/ref', problem: 'unknown booking reference or tracking token' }],
  );
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
 * A blocked contact's bookings that can still be cancelled (`CANCELLABLE`), soonest pickup
 * first: a phone in E.164, an e-mail by its mailbox (`mailboxKey`, as blocks match it, so its
 * `+tag` and Gmail dotted variants are among them). Read for `block`, which lists them and, asked
 * to, cancels them (`cancelBooking`).
 */
export async function cancellableBookingsOf(
  db: Db,
  contact: { kind: 'email' | 'phone'; value: string },
): Promise<Array<Pick<BookingRow, 'id' | 'reference' | 'status' | 'pickup_time'>>> {
  const open = db<BookingRow>('bookings')
    .whereIn('status', [...CANCELLABLE])
    .orderBy('pickup_time')
    .orderBy('id');
  if (contact.kind === 'phone') {
    return open.where({ passenger_phone: contact.value }).select('id', 'reference', 'status', 'pickup_time');
  }
  // Stored e-mails are normalised (`normaliseEmail`): their domain is the mailbox's, or Gmail's other name.
  const domain = contact.value.slice(contact.value.lastIndexOf('@') + 1);
  const domains = domain === 'gmail.com' ? ['gmail.com', 'googlemail.com'] : [domain];
  const rows = await open
    .whereRaw(`lower(split_part(passenger_email, '@', 2)) = any(?)`, [domains])
    .select('id', 'reference', 'status', 'pickup_time', 'passenger_email');
  return rows
    .filter((r) => r.passenger_email !== null && mailboxKey(r.passenger_email) === contact.value)
    .map(({ id, reference, status, pickup_time }) => ({ id, reference, status, pickup_time }));
}

/** A quote id as stored (lower-case UUID; spaces around it, as copied from a page, do not count), or null when the text cannot be one. */
export function quoteIdOf(raw: string): string | null {
  const id = raw.trim();
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id) ? id.toLowerCase() : null;
}

/**
 * Whether the passenger may book (403 `account_blocked` if not) and whether their e-mail is
 * verified. With `quoteId`, the quote to redeem is read by the same query (`quote`: null when
 * there is none), for `redeemQuote`'s `preloaded`: a redemption then costs two round trips.
 * Reads of requests that arrive in the same turn of the event loop share one query
 * (`standingReader`).
 */
export async function passengerStanding(
  db: Db,
  passenger: Passenger,
  quoteId?: string,
  /** A test-mode booking: verified by a sandbox verification too (`SANDBOX_PURPOSES`). */
  testMode = false,
): Promise<{ emailVerified: boolean; quote?: QuoteRow | null }> {
  const email = passenger.email ? normaliseEmail(passenger.email) : null;
  const id = quoteId === undefined ? null : quoteIdOf(quoteId);
  const mailbox = email === null ? null : mailboxKey(email);
  const row = await standingReader(db)({ phone: passenger.phone, email, mailbox, quote: id, test: testMode });
  if (row?.blocked) throw blockedError(row.blocked);
  const emailVerified = row?.verified === true;
  if (quoteId === undefined) return { emailVerified };
  if (!row?.id) return { emailVerified, quote: null };
  const { i: _i, blocked: _b, verified: _v, ...quote } = row;
  return { emailVerified, quote: quote as QuoteRow };
}

/** Most passengers one standing query reads. */
const MAX_READ_BATCH = 100;

/**
 * One row per asked passenger (`i`, its position in the batch): an operator's block on the
 * phone or the e-mail's mailbox (`mailboxKey`, computed by the caller: blocks are stored by it,
 * so the probe stays on the (kind, value) index), whether the e-mail (the address itself, in
 * canonical form) is verified, and the quote's columns (null when no such quote or none
 * asked). Every part is an index probe per asked row, whatever the planner guesses of the
 * batch's size (it guesses 100 rows for any JSON batch):
 * - `verified` is a scalar subquery with `limit 1`, not `exists`: Postgres may run an `exists`
 *   as a hashed subplan, which reads every verified row of `email_verifications` to answer a
 *   batch. That was a sequential scan of the whole table on every booking's standing read,
 *   growing with every verification ever sent (3.3 ms a read at 30,000 rows, 0.4 ms now).
 * - the quote's lookup has `limit 1` (ids are unique), which keeps it a lateral probe rather
 *   than a join the planner may turn into a hash over all quotes.
 * The test "reads the standing by index probes" holds this on a table of thousands of rows.
 */
export const STANDING_SQL = `select x.i,
    (select b.kind from blocked_contacts b
       where (b.kind = 'phone' and b.value = x.phone) or (b.kind = 'email' and b.value = x.mailbox) limit 1) as blocked,
    -- Confirmed: this address, or another spelling of its mailbox (\`+tag\`, Gmail's dots), as
    -- the unconfirmed-address limit counts by mailbox: its owner has shown they read it.
    ((select true from email_verifications v
        where v.email = x.email and v.verified_at is not null
          and (x.test or v.purpose not in (${SANDBOX_PURPOSES.map((p) => `'${p}'`).join(', ')})) limit 1) is not null
     or (select true from email_verifications v
        where v.mailbox_key = x.mailbox and v.verified_at is not null
          and (x.test or v.purpose not in (${SANDBOX_PURPOSES.map((p) => `'${p}'`).join(', ')})) limit 1) is not null)
      as verified,
    ${QUOTE_COLUMNS.map((c) => `q.${c}`).join(', ')}
  from json_to_recordset(?::json) as x(i int, phone text, email text, mailbox text, quote uuid, test boolean)
  left join lateral (select ${QUOTE_COLUMNS.join(', ')} from quotes where quotes.id = x.quote limit 1) q on true`;

interface StandingAsk {
  phone: string | null;
  /** Canonical address (`normaliseEmail`): what verification is by. */
  email: string | null;
  /** Its `mailboxKey`: what blocks are by. */
  mailbox: string | null;
  /** A quote id as stored, or null. */
  quote: string | null;
  /** A test-mode booking's: a sandbox verification (`SANDBOX_PURPOSES`) counts too. */
  test: boolean;
}
type StandingRow = Partial<QuoteRow> & { i: number; blocked: string | null; verified: boolean };
type StandingReader = (ask: StandingAsk) => Promise<StandingRow | undefined>;

const standingReaders = new WeakMap<Db, StandingReader>();

/**
 * Reads passenger standings, coalescing those asked in the same turn of the event loop into ONE
 * query (up to MAX_READ_BATCH): under load, concurrent bookings share its round trip and
 * Postgres's fixed cost per statement, as their writes share one statement (`bookingWriter`).
 * A failed query fails each of its readers, as their own queries would have.
 */
function standingReader(db: Db): StandingReader {
  const existing = standingReaders.get(db);
  if (existing) return existing;
  let pending: { ask: StandingAsk; resolve(r: StandingRow | undefined): void; reject(err: unknown): void }[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const batch = pending.slice(0, MAX_READ_BATCH);
    pending = pending.slice(MAX_READ_BATCH);
    if (pending.length > 0) schedule();
    const items = batch.map((p, i) => ({ i, ...p.ask }));
    rawNamed<{ rows: StandingRow[] }>(db, STANDING_SQL, [JSON.stringify(items)])
      .then(({ rows }) => {
        const byIndex = new Map(rows.map((r) => [r.i, r]));
        batch.forEach((p, i) => {
          p.resolve(byIndex.get(i));
        });
      })
      // Every waiting reader settles, whatever went wrong (a settled one ignores this).
      .catch((err: unknown) => {
        for (const p of batch) p.reject(err);
      });
  };
  const schedule = () => {
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  const reader: StandingReader = (ask) =>
    new Promise((resolve, reject) => {
      pending.push({ ask, resolve, reject });
      schedule();
    });
  standingReaders.set(db, reader);
  return reader;
}

function blockedError(kind: string): AppError {
  return new AppError(
    'account_blocked',
    'Bookings for this passenger are blocked. Contact us if you think this is a mistake.',
    [{ field: kind === 'email' ? '/passengerEmail' : '/passengerPhone', problem: 'blocked' }],
  );
}

/**
 * Operators block abusive passengers by e-mail or phone (`npm run admin -- block`): 403
 * account_blocked. A block is stored, and matched, by the phone in E.164 (`normalisePhone`) and
 * the e-mail's mailbox (`mailboxKey`: no `+tag`, no dots at Gmail), so variants of a blocked
 * address are blocked too.
 */
export async function assertNotBlocked(db: Db, passenger: Passenger): Promise<void> {
  const hit = await db('blocked_contacts')
    .where((q) => {
      q.where({ kind: 'phone', value: passenger.phone });
      if (passenger.email) q.orWhere({ kind: 'email', value: mailboxKey(passenger.email) });
    })
    .first('kind');
  if (hit) throw blockedError(hit.kind);
}

/**
 * `assertNotBlocked` for many passengers in one query: the error for each blocked one, by its
 * position in `passengers` (absent when not blocked).
 */
export async function blockedAmong(
  db: Db,
  passengers: readonly { phone: string | null; email: string | null }[],
): Promise<Map<number, AppError>> {
  const phones = [...new Set(passengers.flatMap((p) => (p.phone ? [p.phone] : [])))];
  const emails = [...new Set(passengers.flatMap((p) => (p.email ? [mailboxKey(p.email)] : [])))];
  const out = new Map<number, AppError>();
  if (phones.length === 0 && emails.length === 0) return out;
  const hits = await db('blocked_contacts')
    .where((q) => {
      q.where('kind', 'phone').whereIn('value', phones);
    })
    .orWhere((q) => {
      q.where('kind', 'email').whereIn('value', emails);
    })
    .select<{ kind: string; value: string }[]>('kind', 'value');
  if (hits.length === 0) return out;
  const blocked = new Set(hits.map((h) => `${h.kind}:${h.value}`));
  passengers.forEach((p, i) => {
    // The phone is checked first, as assertNotBlocked reports whichever row it finds.
    if (p.phone && blocked.has(`phone:${p.phone}`)) out.set(i, blockedError('phone'));
    else if (p.email && blocked.has(`email:${mailboxKey(p.email)}`)) out.set(i, blockedError('email'));
  });
  return out;
}
