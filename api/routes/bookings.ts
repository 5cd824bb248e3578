import { setTimeout as sleep } from 'node:timers/promises';
import { type TObject, Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import { sha256 } from '../../shared/crypto.ts';
import type { BookingRow } from '../../shared/db/bookings.ts';
import { type ScreenField, screenFields } from '../../shared/domain/content-screen.ts';
import {
  checkEmail,
  configuredCheck,
  EMAIL_PROBLEM_MESSAGES,
  mailboxKey,
} from '../../shared/domain/email-acceptance.ts';
import { operatorDriverOf } from '../../shared/domain/operator-driver.ts';
import { paymentState } from '../../shared/domain/payment-state.ts';
import { normaliseReference } from '../../shared/domain/reference.ts';
import { parseVehicleType } from '../../shared/domain/tariffs/vehicle.ts';
import { AppError, contentRejected, detailsText, type ErrorDetail, repointed } from '../../shared/errors.ts';
import {
  AliasBookingResponse,
  BookingLookupResponse,
  BookingRefParams,
  CancelRequest,
  CancelResponse,
  CreateBookingDocumented,
  CreateBookingRequest,
  InstantBookingDocumented,
  InstantBookingRequest,
  LookupQuery,
  PAYMENT_SPELLINGS,
  V1BookingDocumented,
  V1BookingRequest,
  V1BookingResponse,
} from '../../shared/schemas/bookings.ts';
import { assertMayBook } from '../../shared/services/api-keys.ts';
import { publishBookingEvent } from '../../shared/services/booking-events.ts';
import {
  assertNotBlocked,
  BOOKED_WITHOUT_EMAIL,
  type BookingCaller,
  type BookingView,
  bookingForPassenger,
  bookPricedQuote,
  cancelBooking,
  normalisePhone,
  type Passenger,
  passengerStanding,
  priceUnlessRepeated,
  type QuoteRow,
  quoteWarningsOf,
  redeemQuote,
  repeatedBooking,
  trackingToken,
  viewOf,
} from '../../shared/services/bookings.ts';
import {
  assertQuotedRide,
  defaultVehicle,
  type Given,
  gbp,
  type PricedQuote,
  priceQuote,
} from '../../shared/services/quotes.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { type Caller, callerTestMode } from '../middleware/auth.ts';
import {
  type BookingProofGuard,
  bookingProofGuard,
  countReleaser,
  fixedWindowCounter,
  unavailable,
} from '../middleware/rate-limit.ts';
import { callerScope } from '../mount.ts';
import { defineRoute, type RouteDef } from '../route.ts';
import { scenarioHeader } from '../sandbox.ts';
import { inAliasFields, quoteCaller } from './quotes.ts';
import { assertSpellingsAgree, SNAKE_SPELLINGS, SPELLINGS, snakeFilled } from './spellings.ts';

const UNVERIFIED_POINTS = 8;
const UNVERIFIED_WINDOW_SECONDS = 3600;

/**
 * An address nobody has confirmed yet gets 8 priced requests an hour, each a new booking (a
 * repeat or a refusal uses none: `countedIfBooked`) (SPEC.md section 8,
 * CONTRACT.md section 5); confirming it (passenger-verify, or the link in the confirmation
 * e-mail) lifts the limit. Counted on the route limits' fixed-window counter (one Redis script
 * call for the counts of requests arriving together), under
 * `<prefix>:rl:unverified-email:<hash of the mailbox>`: by `mailboxKey`, so `+tag` (and, at
 * Gmail, dotted) variants of one mailbox share one count rather than each starting afresh, and
 * hashed (SHA-256, 32 hex digits), so no passenger's address is a Redis key name in the clear.
 * Test-mode requests (a test key) count under `<prefix>:rl:unverified-email:test:<hash>`.
 */
async function limitUnverified(deps: ApiDeps, key: string): Promise<{ refusal: AppError | null; ttl: number }> {
  let reply: number[];
  try {
    reply = await fixedWindowCounter(deps.redis)([key], [String(UNVERIFIED_WINDOW_SECONDS)]);
  } catch {
    throw unavailable();
  }
  const consumed = Number(reply[0]);
  const ttl = Number(reply[1]);
  if (consumed <= UNVERIFIED_POINTS) return { refusal: null, ttl };
  const retryAfter = Math.max(1, Math.ceil(ttl / 1000));
  const refusal = new AppError(
    'rate_limited',
    'Too many bookings for an unconfirmed e-mail address: confirm it with the code or link we sent, or wait.',
    [{ field: '/passengerEmail', problem: 'unconfirmed address: 8 new bookings per hour' }],
    {
      'Retry-After': String(retryAfter),
      'RateLimit-Policy': `"unverified-email";q=${UNVERIFIED_POINTS};w=${UNVERIFIED_WINDOW_SECONDS}`,
      RateLimit: `"unverified-email";r=0;t=${retryAfter}`,
    },
  );
  return { refusal, ttl };
}

/** The unverified address's hourly count (test-mode requests count apart: a test key cannot use up a real passenger's hour). */
const unverifiedKey = (deps: ApiDeps, email: string, testMode: boolean) =>
  `${deps.config.queuePrefix}:rl:unverified-email:${testMode ? 'test:' : ''}${sha256(mailboxKey(email)).toString('hex').slice(0, 32)}`;

/**
 * `book`'s booking, with the unconfirmed address's hourly count taken for the request given
 * back unless it booked a new ride: a refusal of any kind (an unknown, expired or taken quote, a
 * ride field that contradicts it, an address not found, the limit itself) and a repeat
 * answered with its booking keep none. So the count holds the bookings made in the window and
 * the requests still under way, and nobody can use up an address's hour with requests that
 * book nothing (a stranger's garbage quote ids, an agent's retries).
 */
export async function countedIfBooked(
  uncount: () => Promise<void>,
  book: () => Promise<BookingView>,
): Promise<BookingView> {
  let view: BookingView;
  try {
    view = await book();
  } catch (err) {
    await uncount();
    throw err;
  }
  if (!view.created) await uncount();
  return view;
}

/** The passenger e-mail rules: malformed, disposable, role addresses, no mail server: 400. */
async function acceptEmail(deps: ApiDeps, raw: string, pointer: string, testMode: boolean): Promise<string> {
  const result = await checkEmail(raw, configuredCheck(deps.config.bookings, testMode));
  if (!result.accepted) {
    throw new AppError('email_not_accepted', EMAIL_PROBLEM_MESSAGES[result.problem], [
      { field: pointer, problem: result.problem },
    ]);
  }
  return result.email;
}

/**
 * Free text is screened before it reaches the booking engine: instructions aimed at a language
 * model, hidden or control characters and over-long text are 400 content_rejected naming the
 * field. The refusal is logged with the rule that fired, never the text.
 */
export function screen(req: Request, fields: ScreenField[]): void {
  const result = screenFields(fields);
  if (!result.ok) {
    req.log?.warn({ reasons: result.reasons }, 'content rejected');
    throw contentRejected(result.details);
  }
}

/**
 * The camelCase name shared code uses of each snake_case spelling (SNAKE_SPELLINGS, on the
 * alias routes and the v1 prose shape): a pointer names the field as the caller sent it.
 */
const CAMEL_OF = new Map(Object.entries(SNAKE_SPELLINGS).flatMap(([camel, snakes]) => snakes.map((k) => [k, camel])));

/**
 * Run a booking route's work; an error whose details point at a spelling the caller did not
 * send (a phone refused as `/passengerPhone` on `bookings/create`, say, or a quote as
 * `/quote_id` to a caller who sent `quoteId`) points at the spelling it did send instead, or,
 * when it sent neither, at the first snake_case one the route's schema has, if the route or
 * shape is snake_case (`snakeSchema`, the route's body schema; null for a camelCase shape).
 * The message's mentions of a pointer follow it.
 */
export async function pointersAsSent<T>(body: object, snakeSchema: TObject | null, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!(err instanceof AppError) || err.details.length === 0) throw err;
    const sent = body as Record<string, unknown>;
    const { message, details, changed } = repointed(err.message, err.details, (p) =>
      pointerAsSent(sent, snakeSchema, p),
    );
    if (!changed) throw err;
    throw new AppError(err.code, message, details, err.headers);
  }
}

/** One pointer as `pointersAsSent` reads it. */
function pointerAsSent(sent: Record<string, unknown>, snakeSchema: TObject | null, pointer: string): string {
  const given = pointer.slice(1);
  // A pointer at a snake_case spelling (`/quote_id` from the redemption) is read as its camelCase name.
  const name = CAMEL_OF.get(given) ?? given;
  const snakes = SNAKE_SPELLINGS[name];
  if (!pointer.startsWith('/') || !snakes) return pointer;
  // The camelCase spelling counts only where the route reads it (v1's shapes, not the alias routes).
  const readsCamel = snakeSchema === null || Object.hasOwn(snakeSchema.properties, name);
  if (sent[given] !== undefined && (given !== name || readsCamel)) return pointer;
  if (readsCamel && sent[name] !== undefined) return `/${name}`;
  const snake =
    snakes.find((k) => sent[k] !== undefined) ?? snakes.find((k) => snakeSchema?.properties[k] !== undefined);
  return snake ? `/${snake}` : pointer;
}

/**
 * An e-mail in a query string as it was meant: a `+` not percent-encoded (`?email=anna+taxi@…`,
 * a URL built by joining strings) arrives as a space, and an address has no spaces inside it.
 */
function plusRestored(email: string | undefined): string | undefined {
  return email?.trim().replace(/ /g, '+');
}

/**
 * A cancel's proof (the e-mail or the tracking token), from the body or the URL's query as the
 * lookup takes it; given in both with different values, which one was meant cannot be known:
 * 400 naming both.
 */
function cancelProof(
  body: { email?: string; t?: string },
  query: { email?: string; t?: string },
): { email?: string; t?: string } {
  const email = body.email ?? plusRestored(query.email);
  const t = body.t ?? query.t;
  const details: ErrorDetail[] = [];
  const queryEmail = plusRestored(query.email);
  if (
    body.email !== undefined &&
    queryEmail !== undefined &&
    body.email.trim().toLowerCase() !== queryEmail.toLowerCase()
  )
    details.push({ field: '/email', problem: 'differs from the email in the query string: send one of them' });
  if (body.t !== undefined && query.t !== undefined && body.t !== query.t)
    details.push({ field: '/t', problem: 'differs from the t in the query string: send one of them' });
  if (details.length > 0)
    throw new AppError('invalid_input', `The request says two things: ${detailsText(details)}.`, details);
  return { email, t };
}

/** A synchronous step's value or its error, to be thrown later than it happened. */
function settle<T>(step: () => T): { ok: true; value: T } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: step() };
  } catch (error) {
    return { ok: false, error };
  }
}

type V1Passenger = {
  passenger: Passenger;
  emailVerified: boolean;
  preloaded?: { quote: QuoteRow | null };
  /** Gives back this request's hourly count of the address (`countedIfBooked`), in its window; nothing when none was taken. */
  uncount: () => Promise<void>;
};

/**
 * The passenger redeeming a quote, on the v1 booking with `quote_id` and the website's form:
 * an accepted e-mail, an E.164 phone, not blocked, with the quote read alongside. Past an
 * unconfirmed address's hourly limit only a quote already redeemed goes on (to its booking for
 * this passenger, or 409 for another): a request sent again is answered, nothing new is booked.
 */
export async function redeemingPassenger(
  /** Aborted when the client has gone (`untilClientGone`): the looks for its booking stop. */
  clientGone: AbortSignal | undefined,
  ...args: Parameters<typeof v1PassengerOrLimit>
): Promise<V1Passenger & { preloaded?: { quote: QuoteRow | null }; quoted?: QuoteRow | null }> {
  const { refusal, ...checked } = await v1PassengerOrLimit(...args);
  if (!refusal) return { ...checked, quoted: checked.preloaded?.quote };
  const quote = checked.preloaded?.quote;
  if (quote?.redeemed_at) return { ...checked, quoted: quote };
  const refused = async () => {
    await checked.uncount();
    return refusal;
  };
  // Sent together with the request redeeming it: that one's booking is the answer once written.
  const [deps, , , , , , quoteId] = args;
  const redeemed =
    quote && quoteId
      ? await lookingAgain(
          () =>
            deps
              .db('quotes')
              .where({ id: quote.id })
              .whereNotNull('redeemed_at')
              .first<{ id: string } | undefined>('id'),
          clientGone,
        )
      : undefined;
  if (!redeemed) throw await refused();
  // Read again by the redemption, which answers with its booking (or 409 for another passenger);
  // the ride it fixes does not change, so the row read stays the one its fields are checked on.
  const { preloaded: _stale, ...rest } = checked;
  return { ...rest, quoted: quote };
}

/** Waits between looks for what an identical request sent at the same moment is writing (3.15 s in all). */
const LOOK_AGAIN_MS = [50, 100, 200, 400, 800, 1600] as const;

/**
 * Past an unconfirmed address's hourly limit, a request is still answered with the booking
 * already made for it. One sent at the same moment as the request making that booking (an
 * agent's parallel retries: 50 identical at once) finds it only once that request has written
 * it, so the look is repeated with growing waits before the 429. Nothing is written here: a
 * request past the limit never makes a booking; a new one is answered 429 after the waits.
 */
async function lookingAgain<T>(
  look: () => Promise<T | undefined>,
  /** Aborted when the client has gone: nobody is left to answer, so the looks (and waits) stop. */
  clientGone?: AbortSignal,
): Promise<T | undefined> {
  for (const wait of [0, ...LOOK_AGAIN_MS]) {
    if (wait > 0) await sleep(wait, undefined, { signal: clientGone }).catch(() => {});
    if (clientGone?.aborted) return undefined;
    const found = await look();
    if (found) return found;
  }
  return undefined;
}

/**
 * A signal aborted when the client disconnects before its answer is sent, for a handler that
 * may wait (`lookingAgain`). The answer it then gives reaches nobody: a refusal is thrown
 * (a 429, which is never kept for an Idempotency-Key, so a retry runs afresh).
 */
export function untilClientGone(res: Response): AbortSignal {
  const gone = new AbortController();
  // Gone already (its 'close' was before this was asked). The request's socket, not the
  // response's: a pipelined request's response has none until the one before it is sent.
  if (res.req.socket.destroyed) gone.abort();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone.signal;
}

/**
 * The v1 passenger (an accepted e-mail, an E.164 phone, not blocked), with the hourly limit's
 * refusal returned rather than thrown: the v1 route
 * still answers a repeat of a booking already made (the same request again, or a quote this
 * passenger already redeemed) with that booking, as CONTRACT.md section 2 says, and only a
 * request for a new booking gets the 429.
 */
async function v1PassengerOrLimit(
  deps: ApiDeps,
  name: string | undefined,
  email: string | undefined,
  phone: string | undefined,
  emailPointer: string,
  /** A test-mode booking: no mail-server lookup (`mxCheckFor`). */
  testMode: boolean,
  /** The quote to redeem: read with the passenger's standing (`passengerStanding`). */
  quoteId?: string,
): Promise<V1Passenger & { refusal: unknown }> {
  const passenger: Passenger = {
    name: name as string,
    email: await acceptEmail(deps, email as string, emailPointer, testMode),
    phone: normalisePhone(phone as string),
  };
  // The address's hourly count is taken while its standing is read, not after it: one round
  // trip less per booking. Counting a confirmed (or blocked) address's request is harmless: the
  // limit applies only while an address is unconfirmed, and a blocked one is refused anyway.
  const key = unverifiedKey(deps, passenger.email as string, testMode);
  // Counted (its window's time left, for giving it back), or the error that it could not be.
  let countedTtl: number | null = null;
  const limited = limitUnverified(deps, key).then(
    ({ refusal, ttl }) => {
      countedTtl = ttl;
      return refusal;
    },
    (err: unknown) => err,
  );
  const release = async () => {
    if (countedTtl !== null) await countReleaser(deps.redis)([key], [countedTtl]);
  };
  let standing: Awaited<ReturnType<typeof passengerStanding>>;
  try {
    standing = await passengerStanding(deps.db, passenger, quoteId, testMode).finally(() => limited);
  } catch (err) {
    // Refused (a blocked passenger) or not read: nothing was booked, so nothing stays counted.
    await release();
    throw err;
  }
  const { emailVerified, quote } = standing;
  const refusal = emailVerified ? null : await limited;
  // A confirmed address's count is never read (the limit is of unconfirmed ones): not given back.
  const uncount = emailVerified ? () => Promise.resolve() : release;
  return { passenger, emailVerified, refusal, uncount, ...(quote !== undefined ? { preloaded: { quote } } : {}) };
}

/** The passenger on the alias endpoints: WhatsApp (or plain) phone required, e-mail optional. */
async function aliasPassenger(
  deps: ApiDeps,
  body: {
    passenger_name: string;
    passenger_phone_whatsapp?: string;
    passenger_phone?: string;
    passenger_email?: string;
  },
  testMode: boolean,
): Promise<Passenger> {
  const phone = body.passenger_phone_whatsapp ?? body.passenger_phone;
  requireFields({ passenger_phone_whatsapp: phone });
  return {
    name: body.passenger_name,
    email:
      body.passenger_email === undefined
        ? null
        : await acceptEmail(deps, body.passenger_email, '/passenger_email', testMode),
    phone: normalisePhone(phone as string),
  };
}

/**
 * An alias booking of a quote (bookings/create, and instant with a quote_id): its passenger
 * checked (not blocked: 403) and the quote read in one query, `check` shown the quote first,
 * then the quote redeemed as CONTRACT.md section 2 says (the same passenger again gets the same
 * booking).
 */
async function redeemAliasQuote(
  deps: ApiDeps,
  bc: BookingCaller,
  base: string,
  body: Parameters<typeof aliasPassenger>[1] & {
    quote_id: string;
    payment_method?: Parameters<typeof payment>[0];
    flight_number?: string;
    notes?: string;
    agent?: string;
    depart_at?: string;
  },
  check?: (quote: QuoteRow) => Promise<void>,
): Promise<{ status: 200; body: ReturnType<typeof aliasBody> }> {
  const passenger = await aliasPassenger(deps, body, bc.testMode);
  const { quote } = await passengerStanding(deps.db, passenger, body.quote_id);
  if (quote && check) await check(quote);
  const view = await redeemQuote(
    deps,
    {
      origin: 'agent',
      quoteId: body.quote_id,
      passenger,
      paymentMethod: payment(body.payment_method),
      flightNumber: body.flight_number,
      notes: body.notes,
      agent: body.agent,
      statedPickup: body.depart_at,
    },
    bc,
    base,
    { quote: quote ?? null },
  );
  // The quote booked is the one read here (a redemption books the quote it names).
  return { status: 200, body: aliasBody(view, quote?.warnings ?? []) };
}

/**
 * Who books: the key, its partner and mode; with a request, the test scenario its header names.
 * A suspended partner's key is 403 here, before anything is priced or written.
 */
export function bookingCaller(caller: Caller, req?: Request): BookingCaller {
  if (caller.kind === 'api_key') assertMayBook(caller.key);
  const qc = quoteCaller(caller);
  return {
    ...qc,
    scope: callerScope(caller),
    ...(req ? { testScenario: scenarioHeader(req, qc.testMode) } : {}),
  };
}

/** Lookups and cancellations see the caller's mode only: a test key its test bookings, anyone else live ones. */
const testModeOf = (caller: Caller) => callerTestMode(caller);

function payment(raw: keyof typeof PAYMENT_SPELLINGS | undefined) {
  return raw ? PAYMENT_SPELLINGS[raw] : 'cash';
}

/** The alias routes' phone: either spelling, named by the one SPEC.md gives. */
const ALIAS_PHONE = ['passenger_phone_whatsapp', 'passenger_phone'];

/**
 * For a route's `alsoRequired`: of each group of spellings of one field, the first, when none
 * of them was sent.
 */
export function missingOf(body: Record<string, unknown>, groups: readonly (readonly string[])[]): string[] {
  return groups.filter((names) => names.every((n) => body[n] === undefined)).map((names) => names[0] as string);
}

export function requireFields(fields: Record<string, unknown>): void {
  const missing: ErrorDetail[] = Object.entries(fields)
    .filter(([, v]) => v === undefined || v === null || v === '')
    .map(([k]) => ({ field: `/${k}`, problem: 'is required' }));
  if (missing.length > 0) {
    throw new AppError('invalid_input', `Missing: ${detailsText(missing)}.`, missing);
  }
}

/** The pointer of whichever spelling of a field was sent (the first when neither). */
function given<T>(body: Record<string, unknown>, ...names: string[]): Given<T> {
  const name = names.find((n) => body[n] !== undefined) ?? (names[0] as string);
  return { field: `/${name}`, value: body[name] as T | undefined };
}

/** The ride fields the alias bookings (create, instant) take in their v1 spelling too (`snakeFilled`). */
const ALIAS_RIDE_SPELLINGS = [SPELLINGS.departAt, SPELLINGS.vehicleType, SPELLINGS.passengers, SPELLINGS.meetAndGreet];

/** The ride an alias booking (create, instant) says beside its quote_id, in the alias spellings (`snakeFilled`). */
function aliasQuotedRide(body: object): Parameters<typeof assertQuotedRide>[4] {
  const b = body as Record<string, unknown>;
  return {
    pickup: given(b, 'pickup_address'),
    dropoff: given(b, 'dropoff_address'),
    departAt: given(b, 'depart_at'),
    vehicleType: given(b, 'vehicle_type'),
    passengers: given(b, 'passenger_count'),
    meetAndGreet: given(b, 'meet_and_greet'),
  };
}

/**
 * Whether meet and greet asked for (`asked`) is arranged, for the repeat rule: only at an
 * airport pickup (elsewhere it is not charged and the driver is not told), so asking for it at a
 * station is the same ride as not asking, never a second one. Known once the request is priced:
 * waited for only when it was asked; a request that could not be priced keeps it.
 */
async function arranged(asked: boolean, priced: Promise<PricedQuote>): Promise<boolean> {
  if (!asked) return false;
  return priced.then(
    (p) => p.quote.pickup.kind === 'airport',
    () => true,
  );
}

/**
 * How a field's text is compared beyond case and spacing: a flight designator with or without
 * its space or hyphen (`BA 123`, `ba-123`), a departure to the second (an agent that computes
 * "in two hours" on each retry sends other milliseconds).
 */
const CONTENT_FOLDS: Readonly<Record<string, (text: string) => string>> = {
  flightNumber: (t) => t.replace(/[\s-]+/g, ''),
  departAt: (t) => {
    const at = Date.parse(t);
    return Number.isNaN(at) ? t : new Date(Math.floor(at / 1000) * 1000).toISOString();
  },
};

/**
 * Normalised content of a booking request (with what the driver is told), for the 15-minute
 * repeat rule. Callers pass the vehicle the booking gets (`defaultVehicle` when none was named),
 * so naming the default is the same request as leaving it out.
 */
export function contentHash(scope: string, parts: Record<string, unknown>): Buffer {
  // Case, spacing and Unicode spelling (composed or not, full-width or not) aside; an empty or
  // missing field is one absent field.
  const norm = (k: string, v: unknown) => {
    let text = typeof v === 'string' ? v.normalize('NFKC').trim().toLowerCase().replace(/\s+/g, ' ') : v;
    const fold = CONTENT_FOLDS[k];
    if (typeof text === 'string' && fold) text = fold(text);
    return text === '' || text === undefined ? null : text;
  };
  const entries = Object.keys(parts)
    .sort()
    .map((k) => [k, norm(k, parts[k])]);
  return sha256(JSON.stringify([scope, entries]));
}

async function partnerFare(deps: ApiDeps, caller: Caller, fareGBP: number | undefined): Promise<number | null> {
  if (fareGBP === undefined) return null;
  const partnerId = caller.kind === 'api_key' ? caller.key.partnerId : null;
  const partner = partnerId
    ? await deps.db('partners').where({ id: partnerId }).first<{ can_set_fares: boolean } | undefined>('can_set_fares')
    : undefined;
  if (!partner?.can_set_fares) {
    throw new AppError(
      'forbidden',
      'Only partners allowed to set fares may send fareGBP; leave it out to be priced on the published tariffs.',
      [{ field: '/fareGBP', problem: 'not allowed for this caller' }],
    );
  }
  return Math.round(fareGBP * 100);
}

/** The v1 answer; `warnings` are the booking's quote's (meet and greet not charged away from an airport, a vehicle chosen for the party, ...). */
function v1Body(v: BookingView, warnings: string[]): V1BookingResponse {
  return {
    bookingReference: v.reference,
    status: v.status,
    fareGBP: gbp(v.farePence),
    currency: v.currency,
    pickupTime: v.pickupTime.toISOString(),
    statusUrl: v.statusUrl,
    trackingUrl: v.trackingUrl,
    payDriverUrl: v.payDriverUrl,
    emailVerified: v.emailVerified,
    warnings,
  };
}

const aliasBody = (v: BookingView, warnings: string[]): AliasBookingResponse => ({
  booking_reference: v.reference,
  status: v.status,
  fare: gbp(v.farePence),
  currency: v.currency,
  status_url: v.statusUrl,
  tracking_url: v.trackingUrl,
  warnings,
});

/** The answer to a request that returned an earlier booking (a repeat): its quote's warnings are read back. */
async function repeatBody<T>(
  deps: ApiDeps,
  row: BookingRow,
  body: (v: BookingView, warnings: string[]) => T,
  base: string,
): Promise<T> {
  return body(viewOf(row, base, deps.config.dataEncryptionKey, false), await quoteWarningsOf(deps.db, row.id));
}

const V1_ERRORS = [
  'content_rejected',
  'email_not_accepted',
  'rate_limited',
  'pickup_in_past',
  'forbidden',
  'account_blocked',
  'quote_not_found',
  'quote_already_redeemed',
  'quote_expired',
  'address_not_found',
  'idempotency_in_progress',
  'idempotency_key_reused',
] as const;

/** The v1 booking's prose shape (a quote to redeem, snake_case passenger fields) or null for the camelCase one. */
/**
 * The prose shape's fields (CONTRACT.md section 0), for naming a missing one: its phone is
 * `passenger_phone`, though v1 reads `passenger_phone_whatsapp` too.
 */
const V1_PROSE_SHAPE = Type.Omit(V1BookingRequest, ['passenger_phone_whatsapp']);
const snakeShapeOf = (body: { quote_id?: unknown; quoteId?: unknown }): TObject | null =>
  body.quote_id !== undefined || body.quoteId !== undefined ? V1_PROSE_SHAPE : null;

const proofGuards = new WeakMap<ApiDeps['redis'], BookingProofGuard>();

/**
 * The booking a lookup or cancel proves (`bookingForPassenger`) with an e-mail, under the
 * failed-proof limits (`BOOKING_PROOF_LIMITS`): the attempt is counted first, and a caller past
 * a limit is refused (429) before anything is compared; a wrong e-mail, or an unknown
 * reference, stays counted, anything else is taken back. A proof by tracking token is not
 * limited: a token cannot be guessed, and its passenger is never locked out by someone's typos.
 */
async function provenBooking<T>(
  deps: ApiDeps,
  caller: Caller,
  rawRef: string,
  byEmail: boolean,
  prove: () => Promise<T>,
): Promise<T> {
  if (!byEmail) return prove();
  let guard = proofGuards.get(deps.redis);
  if (!guard) {
    guard = bookingProofGuard(deps.redis, deps.config.queuePrefix);
    proofGuards.set(deps.redis, guard);
  }
  // One booking however its reference is written (case, Crockford's look-alikes).
  const release = await guard.attempt(caller, normaliseReference(rawRef, deps.config.bookings.referencePrefix) ?? '-');
  try {
    const proven = await prove();
    await release();
    return proven;
  } catch (err) {
    if (!(err instanceof AppError && WRONG_PROOF.has(err.code))) await release();
    throw err;
  }
}

/** The refusals that count as a failed proof. */
const WRONG_PROOF = new Set(['email_mismatch', 'booking_not_found']);

/** Every field v1 booking takes in two spellings (its camelCase shape and its prose shape). */
const V1_SPELLINGS = [
  SPELLINGS.quoteId,
  SPELLINGS.passengerName,
  SPELLINGS.passengerEmail,
  SPELLINGS.v1Phone,
  SPELLINGS.departAt,
  SPELLINGS.vehicleType,
  SPELLINGS.meetAndGreet,
  SPELLINGS.paymentMethod,
  SPELLINGS.passengers,
  SPELLINGS.flightNumber,
];

export function bookingRoutes(): RouteDef[] {
  const v1 = (path: string, operationId: string, documented: boolean) =>
    defineRoute({
      method: 'post',
      path,
      operationId,
      summary: 'Book a ride: from pickup, dropoff and time, or by redeeming a quote_id',
      description:
        'Two shapes: (1) pickup, dropoff, departAt, passengerName, passengerEmail, passengerPhone (priced on the published tariffs; partners allowed to set fares may send fareGBP); (2) quote_id (or quoteId) with passenger_name, passenger_email, passenger_phone (or passenger_phone_whatsapp) and payment_method. A confirmation link is e-mailed. The same request repeated within 15 minutes, or with the same Idempotency-Key, returns the first booking.',
      tags: ['bookings'],
      auth: 'public',
      idempotent: true,
      testScenario: true,
      // Both spellings are one operation (CONTRACT.md section 0): one memory of their keys.
      idempotencyPath: '/api/public/v1/booking',
      documented,
      body: V1BookingRequest,
      documentedBody: V1BookingDocumented,
      errors: [...V1_ERRORS],
      responses: { 201: { description: 'The booking', schema: V1BookingResponse } },
      handler: async ({ body, deps, caller, req, res }) =>
        pointersAsSent(body, snakeShapeOf(body), async () => {
          assertSpellingsAgree(body, V1_SPELLINGS);
          const passengers = body.passengers ?? body.passenger_count ?? 1;
          const flightNumber = body.flightNumber ?? body.flight_number;
          screen(req, [
            { pointer: '/pickup', kind: 'address', value: body.pickup },
            { pointer: '/dropoff', kind: 'address', value: body.dropoff },
            {
              pointer: body.passengerName !== undefined ? '/passengerName' : '/passenger_name',
              kind: 'name',
              value: body.passengerName ?? body.passenger_name,
            },
            { pointer: '/notes', kind: 'notes', value: body.notes },
            { pointer: given(body, 'flightNumber', 'flight_number').field, kind: 'flightNumber', value: flightNumber },
          ]);
          const base = baseUrlFor(req, deps.config);
          const bc = bookingCaller(caller, req);
          const quoteId = body.quote_id ?? body.quoteId;
          const name = body.passengerName ?? body.passenger_name;
          const email = body.passengerEmail ?? body.passenger_email;
          const phone = body.passengerPhone ?? body.passenger_phone ?? body.passenger_phone_whatsapp;
          const departAt = body.departAt ?? body.depart_at;
          const method = payment(body.paymentMethod ?? body.payment_method);
          const emailPointer = body.passengerEmail !== undefined ? '/passengerEmail' : '/passenger_email';
          // A v1 booking of either shape: confirmed by e-mail, with what the driver is told.
          const v1Input = (passenger: Passenger, emailVerified: boolean, fare: number | null) => ({
            origin: 'api' as const,
            passenger,
            paymentMethod: method,
            emailVerified,
            flightNumber,
            notes: body.notes,
            farePenceOverride: fare,
            confirmByEmail: true,
          });
          const checkPassenger = (redeeming?: string) =>
            v1PassengerOrLimit(deps, name, email, phone, emailPointer, bc.testMode, redeeming);
          if (quoteId !== undefined) {
            requireFields({ passengerName: name, passengerEmail: email, passengerPhone: phone });
            // A partner allowed to set fares may book a quote at its own fare, as it may book
            // without one; anyone else sending fareGBP is refused before the quote is touched.
            const fare = await partnerFare(deps, caller, body.fareGBP);
            const {
              passenger,
              emailVerified,
              preloaded,
              quoted: quote,
              uncount,
            } = await redeemingPassenger(
              untilClientGone(res),
              deps,
              name,
              email,
              phone,
              emailPointer,
              bc.testMode,
              quoteId,
            );
            const view = await countedIfBooked(uncount, async () => {
              if (quote) {
                const vehicle = body.vehicleType ?? body.vehicle_type;
                const b = body as Record<string, unknown>;
                await assertQuotedRide(deps, bc, base, quote, {
                  pickup: given(b, 'pickup'),
                  dropoff: given(b, 'dropoff'),
                  departAt: given(b, 'departAt', 'depart_at'),
                  vehicleType: {
                    ...given(b, 'vehicleType', 'vehicle_type'),
                    value: vehicle === undefined ? undefined : parseVehicleType(vehicle),
                  },
                  passengers: given(b, 'passengers', 'passenger_count'),
                  meetAndGreet: given(b, 'meetAndGreet', 'meet_and_greet'),
                });
              }
              return redeemQuote(
                deps,
                { ...v1Input(passenger, emailVerified, fare), quoteId, statedPickup: body.departAt ?? body.depart_at },
                bc,
                base,
                preloaded,
              );
            });
            // The quote redeemed is the one read with the passenger (a redemption books the quote it names).
            // A booking returned that was made without an e-mail says so: nothing was e-mailed
            // to the address given, and it does not open the booking (its links do).
            return {
              status: 201,
              body: v1Body(view, [...(quote?.warnings ?? []), ...(view.withoutEmail ? [BOOKED_WITHOUT_EMAIL] : [])]),
            };
          }
          requireFields({
            pickup: body.pickup,
            dropoff: body.dropoff,
            departAt,
            passengerName: name,
            passengerEmail: email,
            passengerPhone: phone,
          });
          // Priced while the passenger is checked (standing, hourly limit, fare permission), not
          // after: one stage less in every booking's wait. A refused passenger's price is dropped
          // unused. The errors keep their order: the passenger's refusal, then the vehicle type.
          // `vehicle_type` too, as v1 quote takes it: an agent quoting with it books with it.
          const vehicle = settle(() => parseVehicleType(body.vehicleType ?? body.vehicle_type));
          const meetAndGreet = body.meetAndGreet ?? body.meet_and_greet ?? false;
          const priced = vehicle.ok
            ? priceQuote(
                deps,
                {
                  pickup: body.pickup as string,
                  dropoff: body.dropoff as string,
                  departAt,
                  passengers: passengers,
                  vehicleType: vehicle.value,
                  meetAndGreet,
                  worldwide: body.worldwide ?? false,
                },
                bc,
                base,
              )
            : Promise.reject(vehicle.error);
          priced.catch(() => {}); // awaited below, unless the passenger is refused first
          const { passenger, emailVerified, refusal, uncount } = await checkPassenger();
          // This request's own warnings once it is priced, also when it repeats a booking: they
          // speak of what it asked (a repeat naming the vehicle the first left to us is not told
          // "No vehicle type given"). Unpriced (past the limit, or pricing refused), a repeat
          // reads the first booking's back.
          let warnings: string[] | null = null;
          const view = await countedIfBooked(uncount, async () => {
            if (!vehicle.ok) throw vehicle.error;
            const vehicleType = vehicle.value;
            const fare = await partnerFare(deps, caller, body.fareGBP);
            const hash = contentHash(bc.scope, {
              pickup: body.pickup,
              dropoff: body.dropoff,
              departAt: new Date(departAt as string).toISOString(),
              ...passenger,
              passengers: passengers,
              vehicleType: vehicleType ?? defaultVehicle(passengers),
              fare,
              method,
              // What the driver is told is part of the request: a change is a new request, not a repeat.
              flightNumber,
              notes: body.notes,
              // Only when it is arranged: the content of a request without it hashes as before it
              // was taken, and asked for away from an airport it changes nothing (`arranged`).
              ...((await arranged(meetAndGreet, priced)) ? { meetAndGreet: true } : {}),
            });
            if (refusal) {
              // Past the hourly limit: the same request again (or at the same moment) still gets
              // its booking; a new one is 429.
              const repeat = await lookingAgain(() => repeatedBooking(deps.db, hash), untilClientGone(res));
              if (!repeat) throw refusal;
              return viewOf(repeat, base, deps.config.dataEncryptionKey, false);
            }
            const pricing = await priceUnlessRepeated(deps.db, hash, () => priced);
            if (pricing.repeat) return viewOf(pricing.repeat, base, deps.config.dataEncryptionKey, false);
            warnings = pricing.priced.quote.warnings;
            return bookPricedQuote(
              deps,
              pricing.priced,
              { ...v1Input(passenger, emailVerified, fare), contentHash: hash },
              bc,
              base,
            );
          });
          return {
            status: 201,
            body: v1Body(view, warnings ?? (await quoteWarningsOf(deps.db, view.id))),
          };
        }),
    });

  return [
    v1('/api/public/v1/booking', 'createBookingV1', true),
    v1('/api/public/v1/bookings', 'createBookingsV1', true),
    defineRoute({
      method: 'post',
      path: '/api/public/bookings/create',
      operationId: 'createBookingFromQuote',
      summary: 'Book by redeeming a quote_id (agent alias, snake_case)',
      description:
        "Redeems a quote within 24 hours. Redeeming it again for the same passenger returns the same booking; for another passenger it is 409. Ride fields are not needed (the quote fixes the ride), but sent, they must agree with the quote's (else 400 naming each that differs).",
      tags: ['bookings'],
      auth: 'public',
      idempotent: true,
      testScenario: true,
      body: CreateBookingRequest,
      documentedBody: CreateBookingDocumented,
      alsoRequired: (b) => missingOf(b, [ALIAS_PHONE]),
      errors: [
        'content_rejected',
        'email_not_accepted',
        'quote_not_found',
        'quote_expired',
        'quote_already_redeemed',
        'pickup_in_past',
        'account_blocked',
        'idempotency_in_progress',
        'idempotency_key_reused',
      ],
      responses: { 200: { description: 'The booking', schema: AliasBookingResponse } },
      handler: async ({ body: sent, deps, caller, req }) =>
        pointersAsSent(sent, CreateBookingRequest, async () => {
          const spellings = [SPELLINGS.passengerEmail, SPELLINGS.flightNumber, ...ALIAS_RIDE_SPELLINGS];
          assertSpellingsAgree(sent, [SPELLINGS.aliasPhone, SPELLINGS.quoteId, ...spellings]);
          const body = snakeFilled(sent, spellings);
          screen(req, [
            { pointer: '/pickup_address', kind: 'address', value: body.pickup_address },
            { pointer: '/dropoff_address', kind: 'address', value: body.dropoff_address },
            { pointer: '/passenger_name', kind: 'name', value: body.passenger_name },
            { pointer: '/notes', kind: 'notes', value: body.notes },
            { pointer: '/flight_number', kind: 'flightNumber', value: body.flight_number },
            { pointer: '/agent', kind: 'agent', value: body.agent },
          ]);
          const base = baseUrlFor(req, deps.config);
          const bc = bookingCaller(caller, req);
          // Ride fields sent beside the quote must agree with it, as on instant and v1.
          return redeemAliasQuote(deps, bc, base, body, (quote) =>
            assertQuotedRide(deps, bc, base, quote, aliasQuotedRide(body)),
          );
        }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/bookings/instant',
      operationId: 'instantBooking',
      summary: 'Quote and book in one call (for assistants that cannot carry a quote_id)',
      description:
        "Prices on the regulated tariff, creates the booking and dispatches it. Repeating the same request within 15 minutes returns the first booking. With a quote_id it books that quote instead, as bookings/create does; ride fields sent with it must agree with the quote's.",
      tags: ['bookings'],
      auth: 'public',
      idempotent: true,
      testScenario: true,
      body: InstantBookingRequest,
      documentedBody: InstantBookingDocumented,
      // The addresses unless a quote is named (either spelling), and a phone in either spelling.
      alsoRequired: (b) =>
        missingOf(b, [
          ...(b.quote_id === undefined && b.quoteId === undefined ? [['pickup_address'], ['dropoff_address']] : []),
          ALIAS_PHONE,
        ]),
      errors: [
        'content_rejected',
        'email_not_accepted',
        'address_not_found',
        'quote_not_found',
        'quote_expired',
        'quote_already_redeemed',
        'pickup_in_past',
        'account_blocked',
        'idempotency_in_progress',
        'idempotency_key_reused',
      ],
      responses: { 200: { description: 'The booking', schema: AliasBookingResponse } },
      handler: async ({ body: sent, deps, caller, req }) =>
        pointersAsSent(sent, InstantBookingRequest, async () => {
          const spellings = [
            SPELLINGS.quoteId,
            SPELLINGS.passengerEmail,
            SPELLINGS.paymentMethod,
            SPELLINGS.flightNumber,
            ...ALIAS_RIDE_SPELLINGS,
          ];
          assertSpellingsAgree(sent, [SPELLINGS.aliasPhone, ...spellings]);
          const body = snakeFilled(sent, spellings);
          screen(req, [
            { pointer: '/pickup_address', kind: 'address', value: body.pickup_address },
            { pointer: '/dropoff_address', kind: 'address', value: body.dropoff_address },
            { pointer: '/passenger_name', kind: 'name', value: body.passenger_name },
            { pointer: '/notes', kind: 'notes', value: body.notes },
            { pointer: '/flight_number', kind: 'flightNumber', value: body.flight_number },
            { pointer: '/agent', kind: 'agent', value: body.agent },
          ]);
          const base = baseUrlFor(req, deps.config);
          const bc = bookingCaller(caller, req);
          if (body.quote_id !== undefined) {
            // A quote named: it is redeemed as bookings/create redeems it (the same passenger
            // again gets the same booking), never priced again beside it.
            return redeemAliasQuote(deps, bc, base, { ...body, quote_id: body.quote_id }, (quote) =>
              assertQuotedRide(deps, bc, base, quote, aliasQuotedRide(body)),
            );
          }
          requireFields({ pickup_address: body.pickup_address, dropoff_address: body.dropoff_address });
          const departAt = body.depart_at ?? new Date().toISOString();
          // Priced while the passenger is checked, as on the v1 path.
          const priced = inAliasFields(
            priceQuote(
              deps,
              {
                pickup: body.pickup_address as string,
                dropoff: body.dropoff_address as string,
                departAt,
                passengers: body.passenger_count ?? 1,
                vehicleType: body.vehicle_type,
                meetAndGreet: body.meet_and_greet ?? false,
                worldwide: body.worldwide ?? false,
              },
              bc,
              base,
            ),
          );
          priced.catch(() => {}); // awaited below, unless the passenger is refused first
          const passenger = await aliasPassenger(deps, body, bc.testMode);
          await assertNotBlocked(deps.db, passenger);
          const method = payment(body.payment_method);
          const hash = contentHash(bc.scope, {
            pickup: body.pickup_address,
            dropoff: body.dropoff_address,
            // Without depart_at the ride is "now": repeats within the window are the same ride.
            departAt: body.depart_at ? new Date(body.depart_at).toISOString() : 'now',
            ...passenger,
            passengers: body.passenger_count ?? 1,
            vehicleType: body.vehicle_type ?? defaultVehicle(body.passenger_count ?? 1),
            method,
            flightNumber: body.flight_number,
            notes: body.notes,
            agent: body.agent,
            ...((await arranged(body.meet_and_greet ?? false, priced)) ? { meetAndGreet: true } : {}),
          });
          const pricing = await priceUnlessRepeated(deps.db, hash, () => priced);
          if (pricing.repeat) return { status: 200, body: await repeatBody(deps, pricing.repeat, aliasBody, base) };
          const view = await bookPricedQuote(
            deps,
            pricing.priced,
            {
              origin: 'agent',
              passenger,
              paymentMethod: method,
              flightNumber: body.flight_number,
              notes: body.notes,
              agent: body.agent,
              contentHash: hash,
            },
            bc,
            base,
          );
          return {
            status: 200,
            // This request's warnings, also on a repeat (see the v1 booking's).
            body: aliasBody(view, pricing.priced.quote.warnings),
          };
        }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/public/v1/booking/:ref',
      operationId: 'getBooking',
      summary: 'Look up a booking with the passenger e-mail (or, for one made without, its tracking token t)',
      description:
        "Proof is the e-mail the booking was made with (compared without regard to case; 403 email_mismatch) or its tracking token t, as in the booking's status_url. By e-mail a caller sees its own mode's bookings (a test key the sandbox's); the token opens the booking whatever the key. An unknown reference, or a wrong token, is 404 booking_not_found. Failed e-mail proofs are limited per caller and booking (429). The driver is null once the booking is cancelled.",
      tags: ['bookings'],
      auth: 'public',
      params: BookingRefParams,
      query: LookupQuery,
      errors: ['booking_not_found', 'email_mismatch'],
      responses: {
        200: { description: 'Status, pickup time, driver, payment and history', schema: BookingLookupResponse },
      },
      handler: async ({ deps, params, query, req, caller }) => {
        const row = await provenBooking(deps, caller, params.ref, query.email !== undefined, () =>
          bookingForPassenger(
            deps.db,
            params.ref,
            { email: plusRestored(query.email), token: query.t },
            deps.config.bookings.referencePrefix,
            testModeOf(caller),
          ),
        );
        const [history, records, driver] = await Promise.all([
          deps
            .db('booking_status_history')
            .where({ booking_id: row.id })
            .orderBy('seq')
            .select<Array<{ status: string; at: Date }>>('status', 'at'),
          deps.db('settlement_records').where({ booking_id: row.id }).orderBy('id').select<
            Array<{
              kind: string;
              method: string | null;
              amount_pence: number;
              processor_fee_pence: number;
              created_at: Date;
            }>
          >('kind', 'method', 'amount_pence', 'processor_fee_pence', 'created_at'),
          // A cancelled booking has no driver to show (the tracking and pay pages show none either).
          row.driver_id && row.status !== 'cancelled'
            ? deps
                .db('drivers as d')
                .leftJoin('vehicles as v', 'v.id', deps.db.raw('?', [row.vehicle_id]))
                .where('d.id', row.driver_id)
                .first<
                  | {
                      name: string;
                      licensing_authority: string;
                      make: string | null;
                      model: string | null;
                      colour: string | null;
                      registration: string | null;
                    }
                  | undefined
                >('d.name', 'd.licensing_authority', 'v.make', 'v.model', 'v.colour', 'v.registration')
            : Promise.resolve(undefined),
        ]);
        const state = paymentState(row, records);
        // A partner operator's own driver (no driver of ours on the booking), as it named them.
        const operatorDriver = driver || row.status === 'cancelled' ? null : operatorDriverOf(row.operator_driver);
        return {
          status: 200,
          // Personal data and the tracking link (a bearer link): stored by no browser or proxy.
          headers: { 'Cache-Control': 'no-store' },
          body: {
            bookingReference: row.reference,
            status: row.status,
            pickupTime: row.pickup_time.toISOString(),
            pickup: {
              query: row.pickup.query,
              name: row.pickup.name,
              kind: row.pickup.kind,
              lat: row.pickup.lat,
              lng: row.pickup.lng,
            },
            dropoff: {
              query: row.dropoff.query,
              name: row.dropoff.name,
              kind: row.dropoff.kind,
              lat: row.dropoff.lat,
              lng: row.dropoff.lng,
            },
            passengers: row.passengers,
            vehicleType: row.vehicle_type,
            fareGBP: gbp(row.fare_pence ?? 0),
            driver: driver
              ? {
                  name: driver.name,
                  vehicle: {
                    make: driver.make,
                    model: driver.model,
                    colour: driver.colour,
                    registration: driver.registration,
                  },
                  licensingAuthority: driver.licensing_authority,
                }
              : operatorDriver
                ? {
                    name: operatorDriver.name,
                    vehicle: {
                      make: operatorDriver.vehicle?.make ?? null,
                      model: operatorDriver.vehicle?.model ?? null,
                      colour: operatorDriver.vehicle?.colour ?? null,
                      registration: operatorDriver.vehicle?.registration ?? null,
                    },
                    licensingAuthority: operatorDriver.licensingAuthority ?? null,
                  }
                : null,
            payment: {
              state,
              method: row.payment_method,
              records: records.map((r) => ({
                kind: r.kind,
                method: r.method,
                amountGBP: gbp(r.amount_pence),
                processorFeeGBP: gbp(r.processor_fee_pence),
                at: r.created_at.toISOString(),
              })),
            },
            history: history.map((h) => ({ status: h.status, at: h.at.toISOString() })),
            trackingUrl: `${baseUrlFor(req, deps.config)}/track/${trackingToken(row.id, deps.config.dataEncryptionKey)}`,
          } satisfies BookingLookupResponse,
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/v1/booking/:ref',
      operationId: 'cancelBooking',
      summary: 'Cancel a booking (allowed until the passenger is on board)',
      description:
        '{action: "cancel", email or t, reason?}: the same proof as the lookup (either may come in the query string instead). Cancelling a cancelled booking answers 200 again; once the passenger is on board it is 409 cannot_cancel. The driver or partner holding the job is told.',
      tags: ['bookings'],
      auth: 'public',
      params: BookingRefParams,
      // The proof may come in the URL as the lookup takes it: the status_url an alias booking
      // answers with carries `?t=`, and an assistant cancels by posting to it.
      query: LookupQuery,
      body: CancelRequest,
      errors: ['booking_not_found', 'email_mismatch', 'cannot_cancel', 'content_rejected'],
      responses: { 200: { description: 'The booking is cancelled', schema: CancelResponse } },
      handler: async ({ deps, params, body, query, caller, req }) => {
        // The reason is kept in the booking's history, which operators and partners read.
        screen(req, [{ pointer: '/reason', kind: 'notes', value: body.reason }]);
        const { email, t } = cancelProof(body, query);
        const row = await provenBooking(deps, caller, params.ref, email !== undefined, () =>
          bookingForPassenger(
            deps.db,
            params.ref,
            { email, token: t },
            deps.config.bookings.referencePrefix,
            testModeOf(caller),
          ),
        );
        const cancelled = await cancelBooking(deps.db, row.id, body.reason ?? null, 'passenger');
        await publishBookingEvent(deps.redis, deps.config.queuePrefix, row.id);
        return {
          status: 200,
          body: {
            bookingReference: cancelled.reference,
            status: 'cancelled',
            cancelled: true,
          } satisfies CancelResponse,
        };
      },
    }),
  ];
}
