/**
 * Our normalised, machine-readable tariff table: one per licensing authority and date in force.
 * TariffTableSchema is JSON Schema (TypeBox), so an operator's import is checked with ajv; the
 * engine (engine.ts) reads nothing else. Money is integer pence, distances metres, times local
 * Europe/London wall-clock HH:MM.
 *
 * A figure the source does not give is null. The engine never fills one in: a tariff, surcharge
 * or extra that needs a null figure for a journey makes that journey's council price unusable,
 * and the engine prices it on its documented default rate with a warning instead.
 */
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { StringEnum } from '../../schemas/common.ts';
import { VEHICLE_TYPES } from './types.ts';

export { convertCouncilFile } from './council-file.ts';

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Pence = Type.Integer({ minimum: 0, description: 'integer pence' });
const NullablePence = Nullable(Pence);

export const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Day = (typeof DAYS)[number];

const HourMinute = Type.String({
  pattern: '^(?:(?:[01]\\d|2[0-3]):[0-5]\\d|24:00)$',
  description: 'local Europe/London HH:MM; 24:00 is the end of the day',
});
const MonthDay = Type.String({ pattern: '^(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\\d|3[01])$', description: 'MM-DD' });
const MonthDayTime = Type.String({
  pattern: '^(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\\d|3[01])T(?:[01]\\d|2[0-3]):[0-5]\\d$',
  description: 'MM-DDTHH:MM, local time, every year',
});
const IsoDate = Type.String({
  pattern: '^\\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\\d|3[01])$',
  description: 'YYYY-MM-DD',
});
const Priority = Type.Optional(
  Type.Integer({
    description:
      'when rules of several tariffs match, the highest priority wins (ties: the tariff listed first). ' +
      'Defaults: dates 300, holiday 200, weekly 100, always 0 (festive > holidays > day/time > fallback)',
  }),
);
const Note = Type.Optional(Type.String());

/** A weekly window: on each listed day from start to end; end <= start runs past midnight into the next day. */
export const WeeklyRuleSchema = Type.Object({
  kind: Type.Literal('weekly'),
  days: Type.Array(StringEnum(DAYS), { minItems: 1, description: 'the days a window starts on' }),
  start: HourMinute,
  end: HourMinute,
  priority: Priority,
  note: Note,
});

/** On each bank/public holiday of the pickup's nation, from start to end (end <= start: into the next day). */
export const HolidayRuleSchema = Type.Object({
  kind: Type.Literal('holiday'),
  holidays: StringEnum(['bank', 'public'] as const, {
    description: 'the wording of the source; both match every GOV.UK bank holiday of the nation',
  }),
  start: HourMinute,
  end: HourMinute,
  exceptDates: Type.Array(MonthDay, { description: 'holidays observed on these dates do not count' }),
  priority: Priority,
  note: Note,
});

/** A fixed window every year, from (inclusive) to (exclusive); to before from crosses the year end. */
export const DateRuleSchema = Type.Object({
  kind: Type.Literal('dates'),
  from: MonthDayTime,
  to: MonthDayTime,
  priority: Priority,
  note: Note,
});

/** Always matches: the fallback tariff ("all hirings not covered by other tariffs"). */
export const AlwaysRuleSchema = Type.Object({ kind: Type.Literal('always'), priority: Priority, note: Note });

export const WhenRuleSchema = Type.Union([WeeklyRuleSchema, HolidayRuleSchema, DateRuleSchema, AlwaysRuleSchema]);

export const FlagFallSchema = Type.Object({
  amountPence: NullablePence,
  /** Distance the flag fall covers, metres (null: not stated). */
  coversMetres: Nullable(Type.Number({ minimum: 0 })),
  /** Time it covers instead, whichever is reached first (null: distance only). */
  coversSeconds: Nullable(Type.Number({ exclusiveMinimum: 0 })),
  stated: Type.Optional(Type.String({ description: "the source's own words, e.g. '381.1 yards'" })),
});

/** One rate band: amountPence for each perMetres (or perSeconds, whichever first), or part thereof. */
export const IncrementBandSchema = Type.Object({
  amountPence: NullablePence,
  perMetres: Nullable(Type.Number({ exclusiveMinimum: 0 })),
  perSeconds: Nullable(Type.Number({ exclusiveMinimum: 0 })),
  /** Cumulative distance from the start of the hire at which this band starts; null: where the flag fall ends. */
  fromMetres: Nullable(Type.Number({ minimum: 0 })),
  /** Cumulative distance at which it stops; null: no end. */
  untilMetres: Nullable(Type.Number({ exclusiveMinimum: 0 })),
  stated: Type.Optional(Type.String()),
});

/** Waiting / slow-running time: amountPence per perSeconds or part thereof (proRata: charged per second). */
export const WaitingSchema = Type.Object({
  amountPence: NullablePence,
  perSeconds: Type.Number({ exclusiveMinimum: 0 }),
  proRata: Type.Boolean(),
  stated: Type.Optional(Type.String()),
});

export const OwnRatesSchema = Type.Object({
  kind: Type.Literal('own'),
  flagFall: Nullable(FlagFallSchema),
  increments: Nullable(Type.Array(IncrementBandSchema)),
  waiting: Nullable(WaitingSchema),
});

/** The source's "rate_equals": the figures of another tariff of the same table (times this tariff's multiplier). */
export const SameAsRatesSchema = Type.Object({
  kind: Type.Literal('same_as'),
  tariffId: Type.String({ minLength: 1 }),
});

export const TariffSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  name: Type.String(),
  when: Type.Array(WhenRuleSchema, { description: 'empty: never chosen by time (e.g. a distance-based tariff)' }),
  excludesPublicHolidays: Type.Boolean(),
  rates: Type.Union([OwnRatesSchema, SameAsRatesSchema]),
  /** Applied to the meter fare (flag fall, distance, time): 1.5 is "fare and a half". */
  multiplier: Type.Number({ exclusiveMinimum: 0 }),
  note: Note,
});

export const SurchargeSchema = Type.Object({
  id: Type.String({ minLength: 1, description: 'night, weekend, bank_holiday, christmas, ...' }),
  name: Type.String(),
  /** flat: amountPence once per hiring; multiplier: the meter fare times (multiplier - 1) is added. */
  kind: StringEnum(['flat', 'multiplier'] as const),
  amountPence: NullablePence,
  multiplier: Nullable(Type.Number({ exclusiveMinimum: 0 })),
  when: Type.Array(WhenRuleSchema),
  /** start: the hiring begins in a window; start_or_end: it begins or ends in one. */
  evaluatedAt: StringEnum(['start', 'start_or_end'] as const),
  /** Ids of other surcharges not payable when this one is. */
  excludes: Type.Array(Type.String()),
  /** Not payable while one of these tariffs applies. */
  exceptDuringTariffs: Type.Array(Type.String()),
  note: Note,
});

export const LargePartyEffectSchema = Type.Union([
  /** Charge another tariff instead (e.g. T1 -> T2); when none is mapped, add otherwisePence. */
  Type.Object({
    kind: Type.Literal('use_tariff'),
    map: Type.Array(Type.Object({ from: Type.String(), to: Type.String() })),
    otherwisePence: NullablePence,
  }),
  /** The meter fare times (multiplier - 1) is added (1.5: a surcharge of 50% of the meter fare). */
  Type.Object({ kind: Type.Literal('multiplier'), multiplier: Nullable(Type.Number({ exclusiveMinimum: 0 })) }),
  Type.Object({ kind: Type.Literal('flat'), amountPence: NullablePence }),
]);

export const LargePartyRuleSchema = Type.Object({
  code: Type.String({ description: 'applied rule code: large_vehicle or large_party' }),
  description: Type.String(),
  /** Applies when passengers >= minPassengers, or the vehicle type is listed. */
  minPassengers: Nullable(Type.Integer({ minimum: 1 })),
  vehicleTypes: Type.Array(StringEnum(VEHICLE_TYPES)),
  effect: LargePartyEffectSchema,
});

/** A charge for picking up or setting down at a place (airport or rank barrier charges). */
export const PlaceChargeSchema = Type.Object({
  code: Type.String({ description: 'airport_pickup, airport_dropoff, station_pickup, ...' }),
  at: StringEnum(['pickup', 'dropoff'] as const),
  placeKind: StringEnum(['airport', 'station'] as const),
  /** Matches a place whose IATA code is listed, or whose CRS code is listed; both empty: any place of the kind. */
  iata: Type.Array(Type.String()),
  crs: Type.Array(Type.String()),
  amountPence: NullablePence,
  description: Type.String(),
});

export const TableExtrasSchema = Type.Object({
  additionalPassengers: Nullable(
    Type.Object({
      /** Each passenger beyond this many is charged amountPence. */
      beyond: Type.Integer({ minimum: 0 }),
      amountPence: NullablePence,
      description: Type.String(),
    }),
  ),
  largeParty: Nullable(LargePartyRuleSchema),
  placeCharges: Type.Array(PlaceChargeSchema),
  /** Charged only when the caller asks (FareInput.chargeBookingFee); a stated maximum is charged when no fixed amount is given. */
  bookingFee: Nullable(
    Type.Object({ amountPence: NullablePence, maxAmountPence: NullablePence, description: Type.String() }),
  ),
  /** Extras kept for reference that a quote cannot know about (soiling, luggage, animals...): never charged. */
  other: Type.Array(
    Type.Object({
      type: Type.String(),
      amountPence: NullablePence,
      maxAmountPence: NullablePence,
      note: Type.String(),
    }),
  ),
});

export const TariffTableSchema = Type.Object(
  {
    id: Type.String({ minLength: 1, description: 'authority id, e.g. manchester' }),
    authority: Type.String({ minLength: 1 }),
    localAuthorityCodes: Type.Array(Type.String({ pattern: '^[ENSW]\\d{8}$' }), {
      description: 'GSS codes of the local authorities whose pickups this table prices',
    }),
    effectiveFrom: IsoDate,
    /** stated: the source gives it; as_of: read from the as-of text; assumed: 2000-01-01, no date found. */
    effectiveFromBasis: Type.Optional(StringEnum(['stated', 'as_of', 'assumed'] as const)),
    asOf: Type.String(),
    completeness: StringEnum(['full', 'full-core', 'partial', 'summary-only'] as const),
    gaps: Type.Array(Type.String()),
    sources: Type.Array(Type.Object({ url: Type.String(), usedFor: Type.String() })),
    minimumFarePence: Type.Optional(NullablePence),
    tariffs: Type.Array(TariffSchema),
    surcharges: Type.Array(SurchargeSchema),
    extras: TableExtrasSchema,
    /** Beyond afterMetres the distance is charged at tariffId's increments, whatever tariff the time chose. */
    longJourney: Type.Optional(
      Nullable(
        Type.Object({
          afterMetres: Type.Number({ exclusiveMinimum: 0 }),
          tariffId: Type.String({ minLength: 1 }),
          description: Type.String(),
        }),
      ),
    ),
    notes: Type.Optional(Type.Array(Type.String())),
  },
  { description: 'A licensing authority tariff table (shared/domain/tariffs/table.ts)' },
);

export type TariffTable = Static<typeof TariffTableSchema>;
export type Tariff = Static<typeof TariffSchema>;
export type WhenRule = Static<typeof WhenRuleSchema>;
export type Surcharge = Static<typeof SurchargeSchema>;
export type FlagFall = Static<typeof FlagFallSchema>;
export type IncrementBand = Static<typeof IncrementBandSchema>;
export type Waiting = Static<typeof WaitingSchema>;
export type LargePartyRule = Static<typeof LargePartyRuleSchema>;
export type PlaceCharge = Static<typeof PlaceChargeSchema>;
export type TableExtras = Static<typeof TableExtrasSchema>;

/** Default priorities by rule kind: festive dates > holidays > day/time windows > fallback. */
export const DEFAULT_PRIORITY: Readonly<Record<WhenRule['kind'], number>> = {
  dates: 300,
  holiday: 200,
  weekly: 100,
  always: 0,
};
