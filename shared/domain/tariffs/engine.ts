/**
 * The tariff engine: priceJourney(input) -> fare. Pure (no I/O, no clock: departAt comes in),
 * integer pence out, every penny explained by appliedRules.
 *
 * Order of work:
 *  1. seating: a party larger than the vehicle type seats is a SeatingError (HTTP 400);
 *  2. an approved rate card (driver override / partner rate), when given, replaces the council
 *     tariff: a fixed route price when both ends match, else flag fall + per mile, with a minimum;
 *  3. otherwise the council table whose localAuthorityCodes hold the pickup's GSS code (none: the
 *     default rate below, with a warning);
 *  4. the tariff in force at departAt, in Europe/London time: the matching when-rule with the
 *     highest priority wins (festive date windows > bank/public holidays > day/time windows >
 *     fallback), tariffs that exclude public holidays skipped on one;
 *  5. the meter fare as the council defines it: flag fall covering its distance (and time, whichever
 *     first), then each increment band per distance "or part thereof", then slow/waiting time;
 *     as a meter does, the distance covered while running slow (`slowMeters`) is charged by time
 *     only, not by distance as well;
 *     then the tariff's multiplier (e.g. "Night rate + 50%"), surcharges (flat once per hiring, or
 *     a multiplier of the meter fare, with their exclusions), the large-party/vehicle rule,
 *     additional passengers and the minimum fare;
 *  6. when anything this journey needs has no figure (null) in the council table, nothing is
 *     invented: the journey is priced on the default rate and tariffSource/warnings say why;
 *  7. the class multiplier (executive, luxury...) on that fare; then charges passed through as
 *     they are: airport / station barrier charges, a booking fee if asked, meet and greet (£25,
 *     airport pickups only);
 *  8. each rule rounded to whole pence, and any difference from the rounded total put into a
 *     "rounding" rule, so appliedRules always sum exactly to farePence.
 *
 * Speed: tables are compiled once (WeakMap by table object) and London time uses one cached
 * Intl.DateTimeFormat, so a quote costs a few microseconds.
 */
import {
  bestMatch,
  type CompiledSurcharge,
  type CompiledTable,
  type CompiledTariff,
  compiledTable,
  type Moment,
  yearKey,
} from './compile.ts';
import { FareInputError, SeatingError } from './errors.ts';
import { holidayOnDay, holidaysKnownFor, type Nation, nationForGssCode } from './holidays.ts';
import { type LondonTime, londonTime } from './london-time.ts';
import type { PlaceCharge, TariffTable } from './table.ts';
import {
  type AppliedRule,
  type FareInput,
  type FareResult,
  type QuotePlace,
  type RateCard,
  type TariffSource,
  VEHICLE_SEATS,
} from './types.ts';

export { FareInputError, SeatingError, suitableVehicleTypes } from './errors.ts';

/** Meet and greet in the arrivals hall, airport pickups only (CONTRACT.md section 3). */
export const MEET_AND_GREET_PENCE = 2500;
export const DEFAULT_AUTHORITY = 'Direct Taxi Network default';

const MILE_M = 1609.344;
const TENTH_MILE_M = MILE_M / 10;

/**
 * The default rate, used where no council table covers the pickup, or the council's table lacks
 * a figure the journey needs. It is shaped like English councils' hackney tariffs in
 * data/council-tariffs.json (day flag falls £2.00-£4.50, day rates £1.76-£3.03 a mile, night
 * +25% to +50%, festive fare-and-a-half to double), set at the upper end of that range so that
 * an incomplete council table never makes a quote cheaper than the council's own figures would:
 *  - day: £4.00 flag fall covering the first 1/10 mile, then 30p per 1/10 mile or part thereof
 *    (£3.00 a mile); waiting/slow running 20p per 30 seconds or part (£24 an hour);
 *  - night (22:00-07:00) and all day on bank/public holidays: the day rate x 1.5;
 *  - Christmas and New Year (24 Dec 18:00 to 27 Dec 07:00, 31 Dec 18:00 to 2 Jan 07:00): x 2;
 *  - £1.00 for each passenger beyond four.
 * It is a TariffTable, priced by the same code as the councils' (and validated by the same schema).
 */
export const DEFAULT_TABLE: TariffTable = {
  id: 'default',
  authority: DEFAULT_AUTHORITY,
  localAuthorityCodes: [],
  effectiveFrom: '2026-11-22',
  effectiveFromBasis: 'stated',
  asOf: '2026-11-22',
  completeness: 'full',
  gaps: [],
  sources: [],
  minimumFarePence: null,
  tariffs: [
    {
      id: 'DAY',
      name: 'Default day rate',
      when: [{ kind: 'always', priority: 0 }],
      excludesPublicHolidays: false,
      rates: {
        kind: 'own',
        flagFall: { amountPence: 400, coversMetres: TENTH_MILE_M, coversSeconds: null, stated: 'the first 1/10 mile' },
        increments: [
          {
            amountPence: 30,
            perMetres: TENTH_MILE_M,
            perSeconds: null,
            fromMetres: null,
            untilMetres: null,
            stated: '1/10 mile',
          },
        ],
        waiting: { amountPence: 20, perSeconds: 30, proRata: false, stated: '30 seconds' },
      },
      multiplier: 1,
    },
    {
      id: 'NIGHT',
      name: 'Default night and holiday rate (day rate x 1.5)',
      when: [
        {
          kind: 'weekly',
          days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'],
          start: '22:00',
          end: '07:00',
          priority: 100,
        },
        { kind: 'holiday', holidays: 'public', start: '00:00', end: '24:00', exceptDates: [], priority: 200 },
      ],
      excludesPublicHolidays: false,
      rates: { kind: 'same_as', tariffId: 'DAY' },
      multiplier: 1.5,
    },
    {
      id: 'FESTIVE',
      name: 'Default Christmas and New Year rate (day rate x 2)',
      when: [
        { kind: 'dates', from: '12-24T18:00', to: '12-27T07:00', priority: 300 },
        { kind: 'dates', from: '12-31T18:00', to: '01-02T07:00', priority: 300 },
      ],
      excludesPublicHolidays: false,
      rates: { kind: 'same_as', tariffId: 'DAY' },
      multiplier: 2,
    },
  ],
  surcharges: [],
  extras: {
    additionalPassengers: { beyond: 4, amountPence: 100, description: 'Each passenger beyond four' },
    largeParty: null,
    placeCharges: [],
    bookingFee: null,
    other: [],
  },
  longJourney: null,
  notes: ['Direct Taxi Network default rate: see shared/domain/tariffs/engine.ts.'],
};

const DEFAULT_COMPILED = compiledTable(DEFAULT_TABLE);
/** Tolerance for "or part thereof": a distance that is a whole number of units up to float error is not a started unit. */
const EPS = 1e-9;

interface Line {
  code: string;
  description: string;
  /** Pence, possibly fractional until the final rounding. */
  amount: number;
}

type Attempt =
  | { ok: true; lines: Line[]; passThrough: Line[]; tariff: string }
  | { ok: false; reason: string; tariff: string };

interface Ctx {
  input: FareInput;
  local: LondonTime;
  nation: Nation;
  start: Moment;
  end: Moment | null;
}

const gbp = (pence: number) => `£${(pence / 100).toFixed(2)}`;
const unitPrice = (pence: number) => (pence < 100 ? `${pence}p` : gbp(pence));
const hhmm = (minutes: number) =>
  `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
const localText = (t: LondonTime) =>
  `${t.year}-${String(t.month).padStart(2, '0')}-${String(t.day).padStart(2, '0')} ${hhmm(t.minutes)}`;

function momentOf(t: LondonTime, nation: Nation): Moment {
  return {
    weekday: t.weekday,
    minutes: t.minutes,
    yearKey: yearKey(t.month, t.day, t.minutes),
    today: holidayOnDay(nation, t.dayNumber),
    yesterday: holidayOnDay(nation, t.dayNumber - 1),
  };
}

function endMoment(ctx: Ctx): Moment {
  if (ctx.end === null) {
    const endAt = ctx.input.departAt.getTime() + ctx.input.durationSeconds * 1000;
    ctx.end = momentOf(londonTime(endAt), ctx.nation);
  }
  return ctx.end;
}

/** The table for a pickup: the latest in force on `date` (YYYY-MM-DD) among those covering its GSS code. */
export function findTable(tables: readonly TariffTable[], code: string | null, date?: string): TariffTable | null {
  if (!code) return null;
  let found: TariffTable | null = null;
  for (const t of tables) {
    if (!compiledTable(t).codes.has(code)) continue;
    if (date !== undefined && t.effectiveFrom > date) continue;
    if (found === null || t.effectiveFrom > found.effectiveFrom) found = t;
  }
  return found;
}

/** Per authority id, the latest table in force on a date (YYYY-MM-DD, Europe/London). */
export function tablesInForce(tables: readonly TariffTable[], date: string): TariffTable[] {
  const best = new Map<string, TariffTable>();
  for (const t of tables) {
    if (t.effectiveFrom > date) continue;
    const cur = best.get(t.id);
    if (!cur || t.effectiveFrom > cur.effectiveFrom) best.set(t.id, t);
  }
  return [...best.values()];
}

function selectTariff(ct: CompiledTable, m: Moment): CompiledTariff | null {
  let best: CompiledTariff | null = null;
  let bestPriority = Number.NEGATIVE_INFINITY;
  for (const t of ct.tariffs) {
    if (t.excludesPublicHolidays && m.today !== undefined) continue;
    const p = bestMatch(t.rules, m);
    if (p > bestPriority) {
      best = t;
      bestPriority = p;
    }
  }
  return best;
}

/**
 * Flag fall, distance bands and time at a tariff's rates; returns a reason when a needed figure is
 * missing. `distance` is the distance charged by distance (the slow-running stretch taken off).
 */
function meter(
  t: CompiledTariff,
  name: string,
  distance: number,
  slow: number,
  lines: Line[],
  slowDistance = 0,
): string | null {
  const r = t.rates;
  if (r === null) return `${t.label}: ${t.problem ?? 'no rates'}`;
  if (r.flagPence === null) return `${t.label} has no flag fall amount`;
  if (r.flagMetres === null) return `${t.label} has no distance for its flag fall`;
  lines.push({ code: 'flag_fall', description: `Flag fall, ${name} (covers ${r.flagText})`, amount: r.flagPence });
  if (distance > r.flagMetres) {
    if (r.bands === null || r.bands.length === 0) return `${t.label} has no distance rate`;
    for (const b of r.bands) {
      const from = Math.max(b.from ?? r.flagMetres, r.flagMetres);
      const to = Math.min(distance, b.until);
      if (to <= from) continue;
      if (b.pence === null || b.per === null) return `${t.label} has no amount for its distance rate (${b.text})`;
      const units = Math.ceil((to - from) / b.per - EPS);
      lines.push({
        code: 'distance',
        description: `Distance, ${name}: ${units} x ${unitPrice(b.pence)} per ${b.text} or part`,
        amount: units * b.pence,
      });
    }
  }
  const covered = r.flagSeconds !== null && distance < r.flagMetres ? r.flagSeconds * (1 - distance / r.flagMetres) : 0;
  const chargeable = slow - covered;
  if (chargeable > 0) {
    const time = r.time;
    if (time === null || time.pence === null) return `${t.label} has no waiting/slow-running time rate`;
    const secs = Math.round(chargeable * 10) / 10;
    // The stretch covered meanwhile is charged by this time, not by distance as well.
    const stretch =
      slowDistance >= 100 ? ` (${(slowDistance / MILE_M).toFixed(1)} miles of the route, not charged by distance)` : '';
    if (time.proRata) {
      lines.push({
        code: 'waiting',
        description: `Slow running/waiting ${secs} s${stretch}, ${name}: ${unitPrice(time.pence)} per ${time.perSeconds} s, pro rata`,
        amount: (chargeable * time.pence) / time.perSeconds,
      });
    } else {
      const units = Math.ceil(chargeable / time.perSeconds - EPS);
      lines.push({
        code: 'waiting',
        description: `Slow running/waiting ${secs} s${stretch}, ${name}: ${units} x ${unitPrice(time.pence)} per ${time.perSeconds} s or part`,
        amount: units * time.pence,
      });
    }
  }
  return null;
}

const sum = (lines: readonly Line[]) => {
  let s = 0;
  for (const l of lines) s += l.amount;
  return s;
};

function placeMatches(pc: PlaceCharge, place: QuotePlace): boolean {
  if (place.kind !== pc.placeKind) return false;
  if (pc.iata.length === 0 && pc.crs.length === 0) return true;
  const iata = place.iata?.toUpperCase();
  const crs = place.crs?.toUpperCase();
  return (iata !== undefined && pc.iata.includes(iata)) || (crs !== undefined && pc.crs.includes(crs));
}

function payableSurcharges(ct: CompiledTable, tariffId: string, ctx: Ctx): CompiledSurcharge[] {
  const payable: CompiledSurcharge[] = [];
  for (const s of ct.surcharges) {
    if (s.exceptDuringTariffs.includes(tariffId)) continue;
    const applies =
      bestMatch(s.rules, ctx.start) > Number.NEGATIVE_INFINITY ||
      (s.startOrEnd && bestMatch(s.rules, endMoment(ctx)) > Number.NEGATIVE_INFINITY);
    if (!applies) continue;
    if (payable.some((p) => p.excludes.includes(s.id))) continue;
    for (let i = payable.length - 1; i >= 0; i--) {
      const p = payable[i];
      if (p && s.excludes.includes(p.id)) payable.splice(i, 1);
    }
    payable.push(s);
  }
  return payable;
}

/** Price a journey on one compiled table; fails (with the reason) when a needed figure is missing. */
function priceOnTable(ct: CompiledTable, ctx: Ctx): Attempt {
  const { input } = ctx;
  const period = selectTariff(ct, ctx.start);
  if (period === null) {
    // A council whose data gives only a summary of fares (an average, a first mile) has no
    // tariff to meter on at all: said so, not as if this hour alone were missing.
    const reason =
      ct.tariffs.length === 0
        ? 'it gives only a summary of fares, no tariff to meter on'
        : `no tariff in its table covers ${localText(ctx.local)}`;
    return { ok: false, reason, tariff: '' };
  }
  let tariff = period;
  let tariffName = period.label;
  const lines: Line[] = [];

  // Large vehicle / large party (e.g. Argyll and Bute: "where T1 applies charge T2 ...").
  const lp = ct.largeParty;
  const lpApplies =
    lp !== null &&
    ((lp.minPassengers !== null && input.passengers >= lp.minPassengers) ||
      lp.vehicleTypes.includes(input.vehicleType));
  let lpFlat: number | null = null;
  let lpMultiplier: number | null = null;
  if (lp !== null && lpApplies) {
    const e = lp.effect;
    if (e.kind === 'use_tariff') {
      const to = e.map.find((m) => m.from === period.id)?.to;
      const target = to === undefined ? undefined : ct.byId.get(to);
      if (to !== undefined && target !== undefined) {
        tariff = target;
        tariffName = `${target.label} (${lp.description}: instead of ${period.label})`;
      } else if (to !== undefined) {
        return { ok: false, reason: `${lp.description}: tariff ${to} is not in the table`, tariff: tariffName };
      } else if (e.otherwisePence === null) {
        return { ok: false, reason: `${lp.description}: no figure for ${period.label}`, tariff: tariffName };
      } else lpFlat = e.otherwisePence;
    } else if (e.kind === 'multiplier') {
      if (e.multiplier === null) return { ok: false, reason: `${lp.description}: no multiplier`, tariff: tariffName };
      lpMultiplier = e.multiplier;
    } else {
      if (e.amountPence === null) return { ok: false, reason: `${lp.description}: no amount`, tariff: tariffName };
      lpFlat = e.amountPence;
    }
  }

  const charged = Math.max(0, input.distanceMeters - (input.slowMeters ?? 0));
  const missing = meter(tariff, tariffName, charged, input.slowSeconds, lines, input.distanceMeters - charged);
  if (missing !== null) return { ok: false, reason: missing, tariff: tariffName };
  if (tariff.multiplier !== 1) {
    lines.push({
      code: 'tariff_multiplier',
      description: `${tariff.label}: ${tariff.ratesFrom} rates x ${tariff.multiplier}`,
      amount: sum(lines) * (tariff.multiplier - 1),
    });
  }
  const meterFare = sum(lines);

  for (const s of payableSurcharges(ct, period.id, ctx)) {
    if (s.kind === 'flat') {
      if (s.amountPence === null)
        return { ok: false, reason: `the ${s.name} surcharge has no amount`, tariff: tariffName };
      lines.push({ code: `${s.id}_surcharge`, description: `${capitalise(s.name)} surcharge`, amount: s.amountPence });
    } else {
      if (s.multiplier === null)
        return { ok: false, reason: `the ${s.name} surcharge has no multiplier`, tariff: tariffName };
      lines.push({
        code: `${s.id}_surcharge`,
        description: `${capitalise(s.name)}: meter fare x ${s.multiplier}`,
        amount: meterFare * (s.multiplier - 1),
      });
    }
  }

  if (lp !== null && lpFlat !== null) lines.push({ code: lp.code, description: lp.description, amount: lpFlat });
  if (lp !== null && lpMultiplier !== null) {
    lines.push({
      code: lp.code,
      description: `${lp.description}: meter fare x ${lpMultiplier}`,
      amount: meterFare * (lpMultiplier - 1),
    });
  }

  const ap = ct.additionalPassengers;
  const extra = ap === null ? 0 : input.passengers - ap.beyond;
  if (ap !== null && extra > 0) {
    if (ap.amountPence === null)
      return { ok: false, reason: 'the additional-passenger charge has no amount', tariff: tariffName };
    if (ap.amountPence > 0) {
      lines.push({
        code: 'additional_passengers',
        description: `${ap.description}: ${extra} x ${unitPrice(ap.amountPence)}`,
        amount: extra * ap.amountPence,
      });
    }
  }

  const subtotal = sum(lines);
  if (ct.minimumPence !== null && subtotal < ct.minimumPence) {
    lines.push({
      code: 'minimum_fare',
      description: `Minimum fare ${gbp(ct.minimumPence)}`,
      amount: ct.minimumPence - subtotal,
    });
  }

  const passThrough: Line[] = [];
  for (const pc of ct.placeCharges) {
    if (!placeMatches(pc, pc.at === 'pickup' ? input.pickup : input.dropoff)) continue;
    if (pc.amountPence === null) return { ok: false, reason: `${pc.description} has no amount`, tariff: tariffName };
    passThrough.push({ code: pc.code, description: pc.description, amount: pc.amountPence });
  }
  if (input.chargeBookingFee === true && ct.bookingFee !== null) {
    const fee = ct.bookingFee.amountPence ?? ct.bookingFee.maxAmountPence;
    if (fee === null) return { ok: false, reason: 'the booking fee has no amount', tariff: tariffName };
    passThrough.push({ code: 'booking_fee', description: ct.bookingFee.description, amount: fee });
  }
  return { ok: true, lines, passThrough, tariff: tariffName };
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1).replace(/_/g, ' ');

function nationFor(place: QuotePlace, warnings: string[]): Nation {
  const byCode = nationForGssCode(place.localAuthorityCode);
  if (byCode !== null) return byCode;
  if (place.postcodeDistrict?.toUpperCase().startsWith('BT')) return 'northern-ireland';
  warnings.push("The pickup's UK nation is not known: bank holidays of England and Wales were used.");
  return 'england-and-wales';
}

function checkInput(input: FareInput): void {
  if (!(input.departAt instanceof Date) || Number.isNaN(input.departAt.getTime())) {
    throw new FareInputError('/departAt', 'must be a valid date-time');
  }
  const nonNegative: Array<[string, number]> = [
    ['/distanceMeters', input.distanceMeters],
    ['/durationSeconds', input.durationSeconds],
    ['/slowSeconds', input.slowSeconds],
    ['/slowMeters', input.slowMeters ?? 0],
  ];
  for (const [field, v] of nonNegative) {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new FareInputError(field, 'must be a number >= 0');
  }
  if (!Number.isInteger(input.passengers) || input.passengers < 1) {
    throw new FareInputError('/passengers', 'must be an integer >= 1');
  }
  if (!Object.hasOwn(VEHICLE_SEATS, input.vehicleType)) {
    throw new FareInputError('/vehicleType', `must be one of: ${Object.keys(VEHICLE_SEATS).join(', ')}`);
  }
  if (input.passengers > VEHICLE_SEATS[input.vehicleType]) throw new SeatingError(input.vehicleType, input.passengers);
}

const placeKeys = (p: QuotePlace) =>
  [p.postcodeDistrict, p.iata].filter((k): k is string => typeof k === 'string').map((k) => k.trim().toUpperCase());

function priceRateCard(card: RateCard, input: FareInput, lines: Line[]): TariffSource {
  for (const [field, v] of [
    ['/rateCard/perMilePence', card.perMilePence],
    ['/rateCard/minimumPence', card.minimumPence],
    ['/rateCard/flagFallPence', card.flagFallPence ?? 0],
  ] as const) {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new FareInputError(field, 'must be a number >= 0');
  }
  const from = placeKeys(input.pickup);
  const to = placeKeys(input.dropoff);
  const route = card.fixedRoutes?.find((r) => {
    const a = r.from.trim().toUpperCase();
    const b = r.to.trim().toUpperCase();
    return (from.includes(a) && to.includes(b)) || (r.bidirectional === true && from.includes(b) && to.includes(a));
  });
  if (route) {
    lines.push({
      code: 'fixed_route',
      description: `Fixed price ${route.from} to ${route.to} (${card.owner})`,
      amount: route.pricePence,
    });
    return { kind: card.kind, authority: card.owner, tariff: `Fixed route ${route.from}-${route.to}`, asOf: card.asOf };
  }
  const flag = card.flagFallPence ?? 0;
  if (flag > 0) lines.push({ code: 'flag_fall', description: `Flag fall (${card.owner})`, amount: flag });
  const miles = input.distanceMeters / MILE_M;
  lines.push({
    code: 'distance',
    description: `Distance ${miles.toFixed(2)} miles x ${gbp(card.perMilePence)} per mile (${card.owner})`,
    amount: miles * card.perMilePence,
  });
  const subtotal = sum(lines);
  if (subtotal < card.minimumPence) {
    lines.push({
      code: 'minimum_fare',
      description: `Minimum fare ${gbp(card.minimumPence)}`,
      amount: card.minimumPence - subtotal,
    });
  }
  return {
    kind: card.kind,
    authority: card.owner,
    tariff: `Rate card: ${gbp(card.perMilePence)} per mile, minimum ${gbp(card.minimumPence)}`,
    asOf: card.asOf,
  };
}

const roundPence = (v: number) => Math.round(Math.round(v * 1e6) / 1e6) + 0;

function finish(lines: readonly Line[], tariffSource: TariffSource, warnings: string[]): FareResult {
  const farePence = roundPence(sum(lines));
  const appliedRules: AppliedRule[] = [];
  let total = 0;
  for (const l of lines) {
    if (l.amount === 0) continue;
    const amountPence = roundPence(l.amount);
    appliedRules.push({ code: l.code, description: l.description, amountPence });
    total += amountPence;
  }
  if (total !== farePence) {
    appliedRules.push({ code: 'rounding', description: 'Rounding to whole pence', amountPence: farePence - total });
  }
  return { farePence, appliedRules, tariffSource, warnings };
}

/** Price one journey. Throws SeatingError / FareInputError (both HTTP 400) on inputs it cannot price. */
export function priceJourney(input: FareInput): FareResult {
  checkInput(input);
  const warnings: string[] = [];
  const lines: Line[] = [];
  let source: TariffSource;

  if (input.rateCard) {
    source = priceRateCard(input.rateCard, input, lines);
  } else {
    const local = londonTime(input.departAt);
    const nation = nationFor(input.pickup, warnings);
    if (!holidaysKnownFor(local.year)) {
      warnings.push(`Bank holidays are known for 2025-2027 only: none were assumed in ${local.year}.`);
    }
    const ctx: Ctx = { input, local, nation, start: momentOf(local, nation), end: null };
    const code = input.pickup.localAuthorityCode;
    const date = `${local.year}-${String(local.month).padStart(2, '0')}-${String(local.day).padStart(2, '0')}`;
    const table = findTable(input.tables, code, date);
    const council = table === null ? null : compiledTable(table);
    let attempt = council === null ? null : priceOnTable(council, ctx);
    if (table !== null && council !== null && attempt?.ok) {
      source = { kind: 'council', authority: table.authority, tariff: attempt.tariff, asOf: council.asOf };
    } else {
      const why =
        table === null || attempt === null
          ? `No council tariff table covers the pickup's local authority (${code ?? 'unknown'})`
          : `${table.authority}'s tariff table is incomplete (${table.completeness}): ${attempt.ok ? '' : attempt.reason}`;
      attempt = priceOnTable(DEFAULT_COMPILED, ctx);
      if (!attempt.ok) throw new Error(`default rate cannot price: ${attempt.reason}`);
      warnings.push(`${why}; priced on the ${DEFAULT_AUTHORITY} rate instead (no council figure was invented).`);
      source = {
        kind: 'default',
        authority:
          table === null ? DEFAULT_AUTHORITY : `${DEFAULT_AUTHORITY} (${table.authority}'s table is incomplete)`,
        tariff: attempt.tariff,
        asOf: DEFAULT_COMPILED.asOf,
      };
    }
    lines.push(...attempt.lines);
    const m = input.classMultipliers?.[input.vehicleType];
    if (m !== undefined && m !== 1) {
      if (typeof m === 'number' && Number.isFinite(m) && m > 0) {
        lines.push({
          code: 'class_multiplier',
          description: `${capitalise(input.vehicleType)} class: fare x ${m}`,
          amount: sum(lines) * (m - 1),
        });
      } else {
        warnings.push(
          `The class multiplier for ${input.vehicleType} (${String(m)}) is not a positive number: not applied.`,
        );
      }
    }
    lines.push(...attempt.passThrough);
  }

  if (input.meetAndGreet) {
    if (input.pickup.kind === 'airport') {
      lines.push({
        code: 'meet_and_greet',
        description: 'Meet and greet in the arrivals hall',
        amount: MEET_AND_GREET_PENCE,
      });
    } else {
      warnings.push(
        'Meet and greet is offered for airport pickups only: the pickup is not an airport, so it was not charged.',
      );
    }
  }
  return finish(lines, source, warnings);
}
