import { insertAllIf } from '../db/atomic.ts';
import type { Db } from '../db/knex.ts';
import { rawNamed } from '../db/prepared.ts';
import { SeatingError } from '../domain/tariffs/errors.ts';
import { type AppliedRule, type TariffSource, VEHICLE_SEATS, type VehicleType } from '../domain/tariffs/types.ts';
import { AppError, detailsText, type ErrorDetail } from '../errors.ts';
import { haversineMeters } from '../geo/route-estimate.ts';
import type { Place } from '../geo/types.ts';
import { uuidv7 } from '../ids.ts';
// A type only: bookings.ts imports this module, and types are erased, so no import cycle at run time.
import type { QuoteRow } from './bookings.ts';
import type { PricingClient } from './pricing-client.ts';

export const QUOTE_TTL_MS = 24 * 3600 * 1000;
/** A departure this far in the past is refused; a little slack absorbs clock skew and slow clients. */
const PAST_SLACK_MS = 5 * 60 * 1000;
const MAX_AHEAD_MS = 366 * 24 * 3600 * 1000;

export interface QuoteInput {
  pickup: string;
  dropoff: string;
  departAt?: string;
  passengers: number;
  vehicleType?: VehicleType;
  meetAndGreet: boolean;
  worldwide: boolean;
}

export interface QuoteCaller {
  apiKeyId: string | null;
  partnerId: string | null;
  testMode: boolean;
  /** A quote made through a driver (driver token): priced with their own map-provider key when they stored one. */
  driverId?: string | null;
}

export interface Quote {
  id: string;
  farePence: number;
  distanceMeters: number;
  durationSeconds: number;
  vehicleType: VehicleType;
  passengers: number;
  departAt: Date;
  pickup: Place;
  dropoff: Place;
  appliedRules: AppliedRule[];
  tariffSource: TariffSource;
  warnings: string[];
  bookingUrl: string;
  createdAt: Date;
  expiresAt: Date;
}

/** The vehicle a request that names none is priced and booked with: a saloon, or the smallest that seats the party. */
export function defaultVehicle(passengers: number): VehicleType {
  if (passengers <= 4) return 'saloon';
  return (['6seater', '7seater', 'mpv'] as const).find((v) => VEHICLE_SEATS[v] >= passengers) ?? 'mpv';
}

function chooseVehicle(input: QuoteInput, warnings: string[]): VehicleType {
  if (input.vehicleType) {
    if (VEHICLE_SEATS[input.vehicleType] < input.passengers)
      throw new SeatingError(input.vehicleType, input.passengers);
    return input.vehicleType;
  }
  const chosen = defaultVehicle(input.passengers);
  if (input.passengers <= 4) return chosen;
  warnings.push(`No vehicle type given: a ${chosen} was chosen to seat ${input.passengers} passengers.`);
  return chosen;
}

/**
 * A quote asked for without a departure time is for "now": it departs at the moment it was made
 * (its depart_at is its created_at, to the millisecond; a stated time never is). Redeemed later
 * within its 24 hours it books a pickup at the time of booking, at the quoted fare (SPEC.md
 * sections 1 and 3: the quote is fixed, and redeemable within 24 hours), where a quote for a
 * stated time that has passed is `pickup_in_past`.
 */
export function isQuoteForNow(q: { depart_at: Date; created_at: Date }): boolean {
  return q.depart_at.getTime() === q.created_at.getTime();
}

/** How far from now a time sent with a quote for "now" may be and still mean now. */
const FOR_NOW_SLACK_MS = 10 * 60_000;

/**
 * The pickup a redemption at `now` books: the quoted time; for a quote for "now", the time the
 * booking request stated when that is still ahead and within FOR_NOW_SLACK_MS (the times such a
 * quote agrees with: `assertQuotedRide`), so "in 8 minutes" is booked for then, not for the
 * moment of booking; else the later of the quote's time and `now`.
 */
export function redeemedPickup(q: { depart_at: Date; created_at: Date }, now: number, stated?: string): Date {
  if (!isQuoteForNow(q)) return q.depart_at;
  const at = stated === undefined ? Number.NaN : Date.parse(stated);
  if (at > now && at - now <= FOR_NOW_SLACK_MS) return new Date(at);
  return q.depart_at.getTime() < now ? new Date(now) : q.depart_at;
}

function departure(raw: string | undefined, now: Date): Date {
  if (raw === undefined) return now;
  const at = new Date(raw);
  // The schemas refuse what Date cannot read; a caller that skipped them gets the same answer.
  if (Number.isNaN(at.getTime())) {
    throw new AppError('invalid_input', 'The departure time is not a date and time.', [
      { field: '/departAt', problem: 'must be an RFC 3339 date-time, such as 2026-12-01T09:30:00Z' },
    ]);
  }
  if (at.getTime() < now.getTime() - PAST_SLACK_MS) {
    throw new AppError('pickup_in_past', 'The departure time is in the past.', [
      { field: '/departAt', problem: 'must not be in the past' },
    ]);
  }
  if (at.getTime() > now.getTime() + MAX_AHEAD_MS) {
    throw new AppError('invalid_input', 'Quotes are made up to a year ahead.', [
      { field: '/departAt', problem: 'must be within a year' },
    ]);
  }
  return at;
}

/** A priced quote and the row that stores it (jsonb columns as values, for `insertAllIf`). */
export interface PricedQuote {
  quote: Quote;
  row: Record<string, unknown>;
}

/** The approved rate card of the partner (their key) or the driver (their token) a quote is made through. */
export async function rateCardOf(db: Db, caller: QuoteCaller): Promise<{ id: string } | null> {
  const cardOwner = caller.partnerId
    ? { partner_id: caller.partnerId }
    : caller.driverId
      ? { driver_id: caller.driverId }
      : null;
  if (!cardOwner) return null;
  const card = await db('rate_cards')
    .where(cardOwner)
    .whereNotNull('approved_at')
    .first<{ id: string } | undefined>('id');
  return card ?? null;
}

/**
 * Price a quote without storing it: check the request, have the pricing worker price it
 * (request and reply). `createQuote` stores it; a direct booking stores it with the booking.
 */
export async function priceQuote(
  deps: { db: Db; pricing: PricingClient },
  input: QuoteInput,
  caller: QuoteCaller,
  baseUrl: string,
  now = new Date(),
  /** The caller's rate card when already looked up (`rateCardOf`), so a batch looks it up once. */
  knownRateCard?: { id: string } | null,
): Promise<PricedQuote> {
  const warnings: string[] = [];
  const departAt = departure(input.departAt, now);
  const vehicleType = chooseVehicle(input, warnings);
  const rateCard = knownRateCard === undefined ? await rateCardOf(deps.db, caller) : knownRateCard;

  const result = await deps.pricing.price({
    pickup: input.pickup,
    dropoff: input.dropoff,
    departAt: departAt.toISOString(),
    passengers: input.passengers,
    vehicleType,
    meetAndGreet: input.meetAndGreet,
    worldwide: input.worldwide,
    ...(rateCard ? { rateCardId: rateCard.id } : {}),
    ...(caller.driverId ? { driverId: caller.driverId } : {}),
  });
  if (!result.ok) throw new AppError(result.error.code, result.error.message, result.error.details);
  const j = result.journey;

  const id = uuidv7();
  const expiresAt = new Date(now.getTime() + QUOTE_TTL_MS);
  const allWarnings = [...warnings, ...j.warnings];
  const row = {
    id,
    created_at: now,
    expires_at: expiresAt,
    api_key_id: caller.apiKeyId,
    partner_id: caller.partnerId,
    driver_id: caller.driverId ?? null,
    pickup: j.pickup,
    dropoff: j.dropoff,
    depart_at: departAt,
    vehicle_type: vehicleType,
    passengers: input.passengers,
    meet_and_greet: input.meetAndGreet,
    worldwide: input.worldwide,
    distance_miles: j.distanceMeters / 1609.344,
    duration_minutes: Math.ceil(j.durationSeconds / 60),
    fare_pence: j.farePence,
    applied_rules: j.appliedRules,
    tariff_source: j.tariffSource,
    warnings: allWarnings,
    base_url: baseUrl,
    test_mode: caller.testMode,
    tariff_table_id: j.tariffTableId,
    rate_card_id: rateCard?.id ?? null,
    request: input,
  };
  const quote: Quote = {
    id,
    farePence: j.farePence,
    distanceMeters: j.distanceMeters,
    durationSeconds: j.durationSeconds,
    vehicleType,
    passengers: input.passengers,
    departAt,
    pickup: j.pickup,
    dropoff: j.dropoff,
    appliedRules: j.appliedRules,
    tariffSource: j.tariffSource,
    warnings: allWarnings,
    bookingUrl: `${baseUrl}/book/${id}`,
    createdAt: now,
    expiresAt,
  };
  return { quote, row };
}

/** Most quotes one INSERT carries. */
export const MAX_INSERT_BATCH = 100;

interface PendingQuote {
  row: Record<string, unknown>;
  resolve(): void;
  reject(err: unknown): void;
}

/** SQLSTATE classes that are about a row's content (22 data exception, 23 integrity constraint). */
const ROW_ERROR = /^2[23]/;

/**
 * Stores quotes, coalescing those made in the same callback into one multi-row INSERT (up to
 * MAX_INSERT_BATCH; one round trip and one commit for all of them). The quotes priced by one
 * `price-quotes` job (or by jobs answered in one read of the queue's events) resume together
 * in one run of promise callbacks, so under load they share a statement; the batch is sent
 * as soon as those callbacks have run (process.nextTick), without waiting for other I/O.
 * Each caller's promise settles only once its row is committed. When a batch is refused
 * because of a row's content, each row is retried on its own so only that caller fails.
 */
function createQuoteWriter(db: Db): (row: Record<string, unknown>) => Promise<void> {
  let pending: PendingQuote[] = [];
  let scheduled = false;

  async function single(p: PendingQuote): Promise<void> {
    try {
      await insertAllIf(db, null, [{ table: 'quotes', row: p.row }]);
      p.resolve();
    } catch (err) {
      p.reject(err);
    }
  }

  async function write(batch: PendingQuote[]): Promise<void> {
    if (batch.length === 1) return single(batch[0] as PendingQuote);
    // Every row is built by priceQuote, so all share one set of columns.
    const cols = Object.keys((batch[0] as PendingQuote).row)
      .map((c) => `"${c}"`)
      .join(', ');
    try {
      await rawNamed(
        db,
        `insert into quotes (${cols}) select ${cols} from json_populate_recordset(null::quotes, ?::json)`,
        [JSON.stringify(batch.map((p) => p.row))],
      );
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code === 'string' && ROW_ERROR.test(code)) {
        await Promise.all(batch.map(single));
      } else {
        for (const p of batch) p.reject(err);
      }
      return;
    }
    for (const p of batch) p.resolve();
  }

  const flush = () => {
    scheduled = false;
    const all = pending;
    pending = [];
    const byShape = new Map<string, PendingQuote[]>();
    for (const p of all) {
      const shape = Object.keys(p.row).join(',');
      const list = byShape.get(shape);
      if (list) list.push(p);
      else byShape.set(shape, [p]);
    }
    for (const list of byShape.values()) {
      for (let i = 0; i < list.length; i += MAX_INSERT_BATCH) void write(list.slice(i, i + MAX_INSERT_BATCH));
    }
  };

  return (row) =>
    new Promise<void>((resolve, reject) => {
      pending.push({ row, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        process.nextTick(flush);
      }
    });
}

const writers = new WeakMap<Db, (row: Record<string, unknown>) => Promise<void>>();

/** Store one priced quote (see createQuoteWriter); resolves once its row is committed. */
export function storeQuote(db: Db, row: Record<string, unknown>): Promise<void> {
  let write = writers.get(db);
  if (!write) {
    write = createQuoteWriter(db);
    writers.set(db, write);
  }
  return write(row);
}

/**
 * Make a quote: price it (`priceQuote`) and store it (fixed fare, valid 24 hours, redeemable
 * once) before answering. The fare never changes after this.
 */
export async function createQuote(
  deps: { db: Db; pricing: PricingClient },
  input: QuoteInput,
  caller: QuoteCaller,
  baseUrl: string,
  now = new Date(),
): Promise<Quote> {
  const priced = await priceQuote(deps, input, caller, baseUrl, now);
  await storeQuote(deps.db, priced.row);
  return priced.quote;
}

export const gbp = (pence: number): number => Math.round(pence) / 100;
export const miles = (meters: number): number => Math.round((meters / 1609.344) * 10) / 10;
export const minutes = (seconds: number): number => Math.ceil(seconds / 60);
export const placeOut = (p: Place) => ({ query: p.query, name: p.name, kind: p.kind, lat: p.lat, lng: p.lng });

/** An address as written, for comparing: case, accents' spelling, punctuation and spacing aside. */
const addressWords = (text: string) =>
  text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    // The country said or not ("…, London SW1A 2AA, UK"): every place priced here is the same.
    .replace(/ (uk|united kingdom|gb|great britain|england|scotland|wales|northern ireland)$/u, '')
    // Spacing inside a word aside too ("SW1A2AA", "SW1A 2AA").
    .replace(/ /g, '');

/** How far apart two resolutions of one place may be: a station's entrances, an airport's terminals. */
const SAME_PLACE_METRES = 500;

/** What a quote fixes of its ride, as its row holds it. */
export type QuotedRide = Pick<
  QuoteRow,
  | 'expires_at'
  | 'pickup'
  | 'dropoff'
  | 'depart_at'
  | 'created_at'
  | 'vehicle_type'
  | 'passengers'
  | 'meet_and_greet'
  | 'test_mode'
>;

/**
 * What a booking that names a quote also says about the ride (create, instant, v1, MCP), against the quote: a
 * quote fixes its ride, so a field that says otherwise is refused rather than dropped (the
 * caller would be booked a ride it did not ask for, or a second one beside the quote's). An
 * address is the quote's when it is the text the quote was asked with or the place it found,
 * written any way, or else when the pricing worker finds the same place (kind and name, within
 * SAME_PLACE_METRES: "MAN airport" for "Manchester Airport"; a street address only as
 * written); a time agrees to the minute (a quote for "now" books now: a time within
 * FOR_NOW_SLACK_MS of now agrees too). A time that cannot be read agrees with nothing.
 */
async function quotedRideConflicts(
  deps: { db: Db; pricing: PricingClient },
  caller: QuoteCaller,
  baseUrl: string,
  quote: QuotedRide,
  /** Each ride field the request sent, with its pointer as the route spells it. */
  ride: {
    pickup: Given<string>;
    dropoff: Given<string>;
    departAt: Given<string>;
    vehicleType: Given<VehicleType>;
    passengers: Given<number>;
    meetAndGreet: Given<boolean>;
  },
): Promise<ErrorDetail[]> {
  // An expired quote books nothing whatever the request says: its 410 answers first, and no
  // place is looked up for it (nor for anyone holding an old quote id).
  if (quote.expires_at.getTime() <= Date.now()) return [];
  const out: ErrorDetail[] = [];
  type Quoted = { query?: unknown; name?: unknown; kind?: unknown; lat?: unknown; lng?: unknown };
  const places = [
    { field: ride.pickup.field, given: ride.pickup.value, quoted: (quote.pickup ?? {}) as Quoted },
    { field: ride.dropoff.field, given: ride.dropoff.value, quoted: (quote.dropoff ?? {}) as Quoted },
  ];
  const textOf = (q: Quoted) => (typeof q.query === 'string' ? q.query : typeof q.name === 'string' ? q.name : '');
  const unmatched = places.filter(
    ({ given, quoted }) =>
      given !== undefined &&
      ![quoted.query, quoted.name]
        .filter((t): t is string => typeof t === 'string')
        .map(addressWords)
        .includes(addressWords(given)),
  );
  if (unmatched.length > 0) {
    // Resolved as a quote resolves them (the pricing worker), without storing anything.
    const [pickup, dropoff] = places.map((p) => p.given ?? textOf(p.quoted)) as [string, string];
    const found = await priceQuote(
      deps,
      {
        pickup,
        dropoff,
        departAt: undefined,
        passengers: quote.passengers,
        vehicleType: undefined,
        meetAndGreet: false,
        worldwide: true,
      },
      caller,
      baseUrl,
    ).then(
      (p) => [p.row.pickup, p.row.dropoff] as Quoted[],
      (err: unknown) => {
        if (err instanceof AppError && err.status < 500) return null;
        throw err;
      },
    );
    for (const p of unmatched) {
      const at = found?.[places.indexOf(p)];
      // The same place: the same kind and name, and (places of one name: two Newports) near.
      // Never for a street address: the gazetteer places one at its town or district centre,
      // so two streets of a town would be the same point ("10 Downing Street, London" for "12
      // Oxford Street, London"): an address agrees only as written.
      const same =
        at &&
        at.kind === p.quoted.kind &&
        at.kind !== 'address' &&
        at.name === p.quoted.name &&
        [at.lat, at.lng, p.quoted.lat, p.quoted.lng].every((n) => typeof n === 'number') &&
        haversineMeters(
          { lat: at.lat as number, lng: at.lng as number },
          { lat: p.quoted.lat as number, lng: p.quoted.lng as number },
        ) <= SAME_PLACE_METRES;
      if (!same)
        out.push({
          field: p.field,
          problem: `differs from the quote's (${typeof p.quoted.name === 'string' ? p.quoted.name : 'another place'}${typeof p.quoted.kind === 'string' && p.quoted.kind !== 'address' ? `, ${p.quoted.kind}` : ''})`,
        });
    }
  }
  const { departAt, vehicleType, passengers, meetAndGreet } = ride;
  if (departAt.value !== undefined) {
    // The quote's time, to the minute. A quote for "now" books a pickup now: a time within
    // FOR_NOW_SLACK_MS of now says so too (an assistant that fills in the current time; one a
    // few minutes ahead is then the pickup booked: `redeemedPickup`), and so does the quote's
    // own (the time its answer gave, echoed back later); another does not.
    const forNow = isQuoteForNow(quote);
    const at = Date.parse(departAt.value);
    const agrees =
      Math.abs(at - quote.depart_at.getTime()) < 60_000 || (forNow && Math.abs(at - Date.now()) <= FOR_NOW_SLACK_MS);
    if (!agrees)
      out.push({
        field: departAt.field,
        problem: forNow
          ? 'the quote is for a pickup now'
          : `differs from the quote's (${quote.depart_at.toISOString()})`,
      });
  }
  const same = <T>(g: Given<T>, quoted: T) => {
    if (g.value !== undefined && g.value !== quoted)
      out.push({ field: g.field, problem: `differs from the quote's (${String(quoted)})` });
  };
  same(vehicleType, quote.vehicle_type as VehicleType);
  same(passengers, quote.passengers);
  // Meet and greet is charged only at an airport pickup: elsewhere, asking for it or not is the
  // same ride (the quote asked with it said so in a warning and charged nothing).
  const atAirport = (quote.pickup as { kind?: unknown } | null)?.kind === 'airport';
  if (atAirport) same(meetAndGreet, quote.meet_and_greet);
  return out;
}

/** The refusal of a request whose ride fields say otherwise than its quote. */
function notTheQuotedRide(conflicts: ErrorDetail[]): AppError {
  return new AppError(
    'invalid_input',
    `quote_id books the quoted ride, and this request says otherwise: ${detailsText(conflicts)}. Leave these fields out to book the quote, or leave out quote_id to price this ride.`,
    conflicts,
  );
}

/**
 * Refuses (400 `invalid_input`, naming each field) a booking whose ride fields say otherwise
 * than the quote it names (`quotedRideConflicts`). A quote of the other mode (test or live) is
 * not the caller's, and its redemption answers 404: nothing is compared with it.
 */
export async function assertQuotedRide(
  deps: { db: Db; pricing: PricingClient },
  caller: QuoteCaller,
  baseUrl: string,
  quote: QuotedRide,
  ride: Parameters<typeof quotedRideConflicts>[4],
): Promise<void> {
  if (quote.test_mode !== caller.testMode) return;
  const conflicts = await quotedRideConflicts(deps, caller, baseUrl, quote, ride);
  if (conflicts.length > 0) throw notTheQuotedRide(conflicts);
}

/** A request field: its value (undefined when not sent) and its pointer as sent. */
export type Given<T> = { field: string; value: T | undefined };
