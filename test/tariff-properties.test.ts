import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { priceJourney } from '../shared/domain/tariffs/engine.ts';
import { dayNumber } from '../shared/domain/tariffs/holidays.ts';
import { civilFromDays, fromLondonTime } from '../shared/domain/tariffs/london-time.ts';
import { convertCouncilFile } from '../shared/domain/tariffs/table.ts';
import {
  type FareInput,
  type FareResult,
  type QuotePlace,
  type RateCard,
  VEHICLE_SEATS,
  VEHICLE_TYPES,
  type VehicleType,
} from '../shared/domain/tariffs/types.ts';

const TABLES = convertCouncilFile(
  JSON.parse(readFileSync(path.join(import.meta.dirname, '..', 'data', 'council-tariffs.json'), 'utf8')),
);

/** Every authority in the file, plus places with no table (England, Scotland, unknown). */
const CODES = [...TABLES.map((t) => t.localAuthorityCodes[0] ?? ''), 'E08000035', 'S12000036', null];
/** Fixed seed, so the runs are the same every time; TARIFF_PROPERTY_RUNS / _SEED widen a local search. */
const RUNS = {
  seed: Number(process.env.TARIFF_PROPERTY_SEED ?? 20261122),
  numRuns: Number(process.env.TARIFF_PROPERTY_RUNS ?? 10_000),
};

const code = fc.constantFrom(...CODES);
/** A local calendar day, 2025-2027 (the years whose bank holidays are known). */
const localDay = fc.integer({ min: dayNumber(2025, 1, 1), max: dayNumber(2027, 12, 31) }).map(civilFromDays);
const localMinute = fc.integer({ min: 0, max: 1439 });
/** Short trips (where flag falls and flat extras dominate) as often as long ones. */
const distance = fc.oneof(
  fc.double({ min: 0, max: 2_500, noNaN: true }),
  fc.double({ min: 0, max: 80_000, noNaN: true }),
  fc.constantFrom(0, 91.44, 160.9344, 804.672, 1609.344, 9656.064, 16093.44),
);
const slow = fc.integer({ min: 0, max: 3600 });
const vehicleAndParty = fc
  .constantFrom(...VEHICLE_TYPES)
  .chain((v) => fc.tuple(fc.constant(v), fc.integer({ min: 1, max: VEHICLE_SEATS[v] })));
const placeFor = (c: string | null) =>
  fc.oneof(
    fc.constant<QuotePlace>({ kind: 'address', localAuthorityCode: c, postcodeDistrict: 'M1', countryCode: 'GB' }),
    fc.constantFrom('MAN', 'LHR', 'GLA').map(
      (iata): QuotePlace => ({
        kind: 'airport',
        localAuthorityCode: c,
        postcodeDistrict: 'M90',
        iata,
        countryCode: 'GB',
      }),
    ),
    fc.constantFrom('MAN', 'MIA', 'SHF').map(
      (crs): QuotePlace => ({
        kind: 'station',
        localAuthorityCode: c,
        postcodeDistrict: 'M1',
        crs,
        countryCode: 'GB',
      }),
    ),
  );
const classMultipliers = fc.record(
  { executive: fc.double({ min: 1, max: 3, noNaN: true }), luxury: fc.double({ min: 1, max: 3, noNaN: true }) },
  { requiredKeys: [] },
);
const rateCard: fc.Arbitrary<RateCard | null> = fc.option(
  fc.record({
    kind: fc.constantFrom('driver_override' as const, 'partner_rate' as const),
    owner: fc.constant('Card owner'),
    asOf: fc.constant('2026-01-01'),
    perMilePence: fc.integer({ min: 0, max: 1000 }),
    minimumPence: fc.integer({ min: 0, max: 3000 }),
    flagFallPence: fc.integer({ min: 0, max: 800 }),
    fixedRoutes: fc.constant([{ from: 'M1', to: 'MAN', pricePence: 3499, bidirectional: true }]),
  }),
  { nil: null },
);

/** A whole journey; duration grows with distance (8 m/s) plus the slow time. */
const journey = fc
  .record({
    code,
    day: localDay,
    minute: localMinute,
    distanceMeters: distance,
    slowSeconds: slow,
    vp: vehicleAndParty,
    meetAndGreet: fc.boolean(),
    classMultipliers,
    chargeBookingFee: fc.boolean(),
  })
  .chain((j) => fc.record({ pickup: placeFor(j.code), dropoff: placeFor(j.code) }).map((p) => ({ ...j, ...p })));

type Journey = typeof journey extends fc.Arbitrary<infer T> ? T : never;

function input(j: Journey, over: Partial<FareInput> = {}): FareInput {
  const [vehicleType, passengers] = j.vp as [VehicleType, number];
  const distanceMeters = over.distanceMeters ?? j.distanceMeters;
  const slowSeconds = over.slowSeconds ?? j.slowSeconds;
  return {
    tables: TABLES,
    pickup: j.pickup,
    dropoff: j.dropoff,
    departAt: fromLondonTime(j.day.year, j.day.month, j.day.day, Math.floor(j.minute / 60), j.minute % 60),
    distanceMeters,
    durationSeconds: distanceMeters / 8 + slowSeconds,
    slowSeconds,
    passengers,
    vehicleType,
    meetAndGreet: j.meetAndGreet,
    classMultipliers: j.classMultipliers,
    chargeBookingFee: j.chargeBookingFee,
    ...over,
  };
}

const fareOf = (i: FareInput) => priceJourney(i).farePence;
const explain = (r: FareResult) =>
  `${r.farePence} ${r.tariffSource.kind} ${r.tariffSource.tariff} ${JSON.stringify(r.appliedRules)}`;

describe('tariff engine properties (fast-check, fixed seed)', () => {
  it('a longer trip is never cheaper', () => {
    fc.assert(
      fc.property(journey, distance, rateCard, (j, other, card) => {
        const [short, long] = j.distanceMeters <= other ? [j.distanceMeters, other] : [other, j.distanceMeters];
        const a = priceJourney(input(j, { distanceMeters: short, rateCard: card }));
        const b = priceJourney(input(j, { distanceMeters: long, rateCard: card }));
        expect(b.farePence, `${explain(a)}\n${explain(b)}`).toBeGreaterThanOrEqual(a.farePence);
      }),
      RUNS,
    );
  });

  it('more slow running is never cheaper', () => {
    fc.assert(
      fc.property(journey, slow, (j, other) => {
        const [few, many] = j.slowSeconds <= other ? [j.slowSeconds, other] : [other, j.slowSeconds];
        expect(fareOf(input(j, { slowSeconds: many }))).toBeGreaterThanOrEqual(fareOf(input(j, { slowSeconds: few })));
      }),
      RUNS,
    );
  });

  it('night (23:30) is never cheaper than day (12:00) on the same date, same distance and authority', () => {
    fc.assert(
      fc.property(journey, (j) => {
        const day = priceJourney(input(j, { departAt: fromLondonTime(j.day.year, j.day.month, j.day.day, 12, 0) }));
        const night = priceJourney(input(j, { departAt: fromLondonTime(j.day.year, j.day.month, j.day.day, 23, 30) }));
        expect(night.farePence, `${explain(day)}\n${explain(night)}`).toBeGreaterThanOrEqual(day.farePence);
      }),
      RUNS,
    );
  });

  it('more passengers is never cheaper (same vehicle)', () => {
    fc.assert(
      fc.property(journey, fc.integer({ min: 1, max: 8 }), (j, n) => {
        const [vehicleType, p] = j.vp as [VehicleType, number];
        const other = Math.min(n, VEHICLE_SEATS[vehicleType]);
        const [few, many] = p <= other ? [p, other] : [other, p];
        const a = priceJourney(input(j, { passengers: few }));
        const b = priceJourney(input(j, { passengers: many }));
        expect(b.farePence, `${explain(a)}\n${explain(b)}`).toBeGreaterThanOrEqual(a.farePence);
      }),
      RUNS,
    );
  });

  it('appliedRules always sum exactly to farePence, a non-negative integer', () => {
    fc.assert(
      fc.property(journey, rateCard, (j, card) => {
        const r = priceJourney(input(j, { rateCard: card }));
        expect(Number.isInteger(r.farePence)).toBe(true);
        expect(r.farePence).toBeGreaterThanOrEqual(0);
        let sum = 0;
        for (const rule of r.appliedRules) {
          expect(Number.isInteger(rule.amountPence)).toBe(true);
          sum += rule.amountPence;
        }
        expect(sum).toBe(r.farePence);
        if (r.tariffSource.kind === 'default') expect(r.warnings.length).toBeGreaterThan(0);
      }),
      RUNS,
    );
  });
});
