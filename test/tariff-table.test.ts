import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dateFromAsOf } from '../shared/domain/tariffs/council-file.ts';
import { DEFAULT_TABLE, priceJourney } from '../shared/domain/tariffs/engine.ts';
import { BANK_HOLIDAYS, HOLIDAY_NATIONS, isBankHoliday, nationForGssCode } from '../shared/domain/tariffs/holidays.ts';
import { fromLondonTime } from '../shared/domain/tariffs/london-time.ts';
import {
  convertCouncilFile,
  type Tariff,
  type TariffTable,
  TariffTableSchema,
} from '../shared/domain/tariffs/table.ts';
import { compileSchema } from '../shared/schemas/validate.ts';

const RAW: unknown = JSON.parse(
  readFileSync(path.join(import.meta.dirname, '..', 'data', 'council-tariffs.json'), 'utf8'),
);
const TABLES = convertCouncilFile(RAW);
const byId = (id: string): TariffTable => {
  const t = TABLES.find((x) => x.id === id);
  if (!t) throw new Error(id);
  return t;
};
const tariff = (table: string, id: string): Tariff => {
  const t = byId(table).tariffs.find((x) => x.id === id);
  if (!t) throw new Error(`${table} ${id}`);
  return t;
};
const surcharge = (table: string, id: string) => byId(table).surcharges.find((s) => s.id === id);

describe('convertCouncilFile', () => {
  it('converts all 12 authorities into valid TariffTables (ajv, as an operator import is checked)', () => {
    expect(TABLES.map((t) => t.id)).toEqual([
      'london-tfl',
      'manchester',
      'glasgow',
      'sheffield',
      'brighton-and-hove',
      'cardiff',
      'south-gloucestershire',
      'newport-wales',
      'argyll-and-bute',
      'bracknell-forest',
      'nottingham',
      'birmingham',
    ]);
    const validate = compileSchema(TariffTableSchema);
    for (const t of [...TABLES, DEFAULT_TABLE]) expect(validate(structuredClone(t)), t.id).toEqual([]);
    expect(validate({ ...structuredClone(byId('manchester')), effectiveFrom: '15/09/2023' })).toEqual([
      expect.objectContaining({ field: '/effectiveFrom' }),
    ]);
  });

  it('applies every reviewed translation to the shipped file', () => {
    for (const t of TABLES) {
      for (const g of t.gaps) expect(g, t.id).not.toMatch(/^Translation (not applied|of .* failed)/);
    }
  });

  it('reads the effective date: stated, else from as_of, else 2000-01-01 with a gap', () => {
    expect(byId('manchester')).toMatchObject({ effectiveFrom: '2023-09-15', effectiveFromBasis: 'stated' });
    expect(byId('cardiff')).toMatchObject({ effectiveFrom: '2018-03-12', effectiveFromBasis: 'as_of' });
    expect(byId('london-tfl')).toMatchObject({ effectiveFrom: '2024-04-20', effectiveFromBasis: 'as_of' });
    expect(byId('glasgow')).toMatchObject({ effectiveFrom: '2025-08-01', effectiveFromBasis: 'as_of' });
    expect(byId('sheffield')).toMatchObject({ effectiveFrom: '2000-01-01', effectiveFromBasis: 'assumed' });
    expect(byId('sheffield').gaps.join(' ')).toMatch(/Effective date not known.*2000-01-01 is assumed/);
    expect(byId('cardiff').gaps.join(' ')).toMatch(/2018-03-12 is read from the as-of text/);
    expect(dateFromAsOf('c. 2022-04 (public notice); committees met 13 Oct 2022')).toBe('2022-04-01');
    expect(dateFromAsOf('tariff in force from 12 March 2018')).toBe('2018-03-12');
    expect(dateFromAsOf('2023/24 (Annual Review)')).toBe('2023-01-01');
    expect(dateFromAsOf('no date at all')).toBeNull();
  });

  it('keeps figures the source lacks as null', () => {
    const t1 = tariff('london-tfl', 'T1');
    expect(t1.rates).toEqual({ kind: 'own', flagFall: null, increments: null, waiting: null });
    const night = tariff('nottingham', 'NIGHT');
    expect(night.rates.kind === 'own' && night.rates.flagFall?.amountPence).toBeNull();
    const t4 = tariff('brighton-and-hove', 'T4');
    expect(t4.rates.kind === 'own' && t4.rates.increments?.[0]?.amountPence).toBeNull();
    expect(surcharge('cardiff', 'night_sunday_bank_holiday')?.amountPence).toBeNull();
    expect(byId('sheffield').extras.largeParty?.effect).toEqual({ kind: 'flat', amountPence: null });
    expect(byId('london-tfl').minimumFarePence).toBe(380);
  });

  it('converts structured rules: windows, rate_equals, bands, exact yards', () => {
    const manchester = byId('manchester');
    expect(tariff('manchester', 'T2').when).toEqual([
      {
        kind: 'weekly',
        days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'],
        start: '22:00',
        end: '06:00',
        priority: 100,
      },
      { kind: 'holiday', holidays: 'bank', start: '00:00', end: '24:00', exceptDates: [], priority: 200 },
    ]);
    expect(tariff('manchester', 'T4')).toMatchObject({
      rates: { kind: 'same_as', tariffId: 'T2' },
      multiplier: 1.5,
      when: [
        { kind: 'dates', from: '12-24T20:00', to: '12-27T06:00', priority: 300 },
        { kind: 'dates', from: '12-31T20:00', to: '01-02T06:00', priority: 300 },
      ],
    });
    const t1 = tariff('manchester', 'T1');
    expect(t1.rates.kind === 'own' && t1.rates.flagFall?.coversMetres).toBeCloseTo(381.1 * 0.9144, 9);
    const sheffield = tariff('sheffield', 'T1');
    expect(sheffield.rates.kind === 'own' && sheffield.rates.increments).toEqual([
      expect.objectContaining({ amountPence: 20, fromMetres: null, untilMetres: 16093.44 }),
      expect.objectContaining({ amountPence: 20, fromMetres: 16093.44, untilMetres: null }),
    ]);
    expect(tariff('bracknell-forest', 'DAY').excludesPublicHolidays).toBe(true);
    expect(manchester.sources[0]?.url).toMatch(/^https:\/\/www\.manchester\.gov\.uk\//);
    expect(byId('sheffield').localAuthorityCodes).toEqual(['E08000039', 'E08000019']);
  });

  it('translates the prose rules as reviewed', () => {
    // South Gloucestershire: "each hiring beginning or ending between 18:00 and 06:00", etc.
    expect(surcharge('south-gloucestershire', 'night')).toMatchObject({
      evaluatedAt: 'start_or_end',
      when: [{ kind: 'weekly', start: '18:00', end: '06:00' }],
    });
    expect(surcharge('south-gloucestershire', 'weekend')?.when).toHaveLength(3);
    expect(surcharge('south-gloucestershire', 'weekend')?.excludes).toEqual(['night']);
    expect(surcharge('south-gloucestershire', 'bank_holiday')?.excludes).toEqual(['night', 'weekend']);
    expect(surcharge('south-gloucestershire', 'christmas')?.excludes).toEqual([
      'night',
      'weekend',
      'bank_holiday',
      'new_year',
    ]);
    // Sheffield: "any other official bank holiday, 07:00 to 07:00 the following day".
    expect(surcharge('sheffield', 'bank_holiday')?.when).toEqual([
      {
        kind: 'holiday',
        holidays: 'bank',
        start: '07:00',
        end: '07:00',
        exceptDates: ['12-25', '12-26', '01-01'],
        priority: 200,
      },
    ]);
    expect(tariff('sheffield', 'T3').when[0]?.priority).toBe(150);
    // London: Tariff 4 beyond six miles, never chosen by time.
    expect(byId('london-tfl').longJourney).toMatchObject({ afterMetres: 9656.064, tariffId: 'T4' });
    expect(tariff('london-tfl', 'T4').when).toEqual([]);
    expect(byId('london-tfl').extras.placeCharges).toEqual([
      expect.objectContaining({ iata: ['LHR'], amountPence: 200 }),
    ]);
    // Newport: T3 becomes a bank holiday surcharge on T1/T2, not payable under T4.
    expect(byId('newport-wales').tariffs.map((t) => t.id)).toEqual(['T1', 'T2', 'T4']);
    expect(surcharge('newport-wales', 'bank_holiday')).toMatchObject({ amountPence: 150, exceptDuringTariffs: ['T4'] });
    // Brighton: T1 "all hirings not covered by other tariffs".
    expect(tariff('brighton-and-hove', 'T1').when).toEqual([{ kind: 'always', priority: 0 }]);
    expect(tariff('brighton-and-hove', 'T2').when.at(-1)).toMatchObject({ kind: 'holiday', holidays: 'bank' });
    // Argyll and Bute: minibus steps up a tariff; waiting 40p a minute pro rata.
    expect(byId('argyll-and-bute').extras.largeParty).toMatchObject({
      minPassengers: 5,
      effect: {
        kind: 'use_tariff',
        map: [
          { from: 'T1', to: 'T2' },
          { from: 'T2', to: 'T3' },
        ],
        otherwisePence: 115,
      },
    });
    const a3 = tariff('argyll-and-bute', 'T3');
    expect(a3.rates.kind === 'own' && a3.rates.waiting).toMatchObject({
      amountPence: 40,
      perSeconds: 60,
      proRata: true,
    });
    // Bracknell: "more than 4 passengers: surcharge of 50% of the meter fare".
    expect(byId('bracknell-forest').extras.largeParty).toMatchObject({
      minPassengers: 5,
      effect: { kind: 'multiplier', multiplier: 1.5 },
    });
    // Manchester: the three airport barrier charges and Piccadilly.
    expect(byId('manchester').extras.placeCharges.map((p) => [p.code, p.placeKind, p.amountPence])).toEqual([
      ['station_pickup', 'station', 60],
      ['station_pickup', 'station', 60],
      ['airport_dropoff', 'airport', 300],
      ['airport_pickup', 'airport', 180],
    ]);
    expect(byId('manchester').extras.additionalPassengers).toMatchObject({ beyond: 1, amountPence: 20 });
    // Cardiff and Nottingham exclusions.
    expect(surcharge('cardiff', 'christmas_new_year')?.excludes).toEqual(['night_sunday_bank_holiday']);
    expect(surcharge('nottingham', 'christmas_new_year')?.excludes).toEqual(['bank_holiday']);
    // Birmingham: a summary only; nothing usable.
    expect(byId('birmingham').tariffs).toEqual([]);
    expect(byId('birmingham').gaps.join('\n')).toMatch(/Not translated, not used: summary_tariff_1/);
    // Untranslated prose is a gap.
    expect(byId('manchester').gaps).toEqual([
      expect.stringMatching(/^Not translated, not used: meter_rules\.outside_area/),
    ]);
  });

  it('does not apply a translation when the source words change: the rule goes to gaps, unused', () => {
    const raw = structuredClone(RAW) as {
      authorities: Array<{ id: string; surcharges?: Array<{ type: string; applies: unknown }> }>;
    };
    const sg = raw.authorities.find((a) => a.id === 'south-gloucestershire');
    const night = sg?.surcharges?.find((s) => s.type === 'night');
    if (!night) throw new Error('fixture');
    night.applies = 'each hiring beginning or ending between 19:00 and 06:00';
    const table = convertCouncilFile(raw).find((t) => t.id === 'south-gloucestershire');
    expect(table?.surcharges.map((s) => s.id)).not.toContain('night');
    expect(table?.gaps.join('\n')).toMatch(
      /Translation not applied, the source no longer says: surcharges\.night\.applies/,
    );
    expect(table?.gaps.join('\n')).toMatch(
      /Not translated, not used: surcharges\.night\.applies: "each hiring .* 19:00/,
    );
  });

  it('rejects a file that is not in the council format', () => {
    expect(() => convertCouncilFile([])).toThrow(TypeError);
    expect(() => convertCouncilFile({ authorities: [1] })).toThrow(/authorities\[0\]/);
  });
});

describe('long journeys (London Tariff 4 mechanics)', () => {
  it('charges the long-journey tariff beyond its distance, whatever tariff the time chose', () => {
    // London's own figures are missing; fill them in a copy to test the mechanism only.
    const london = structuredClone(byId('london-tfl'));
    const own = (flag: number, per: number): Tariff['rates'] => ({
      kind: 'own',
      flagFall: { amountPence: flag, coversMetres: 200, coversSeconds: null },
      increments: [{ amountPence: 20, perMetres: per, perSeconds: null, fromMetres: null, untilMetres: null }],
      waiting: { amountPence: 20, perSeconds: 30, proRata: false },
    });
    for (const t of london.tariffs) {
      if (t.id === 'T1') t.rates = own(300, 100);
      if (t.id === 'T2') t.rates = own(300, 80);
      if (t.id === 'T3') t.rates = own(400, 60);
    }
    const r = priceJourney({
      tables: [london],
      pickup: { kind: 'address', localAuthorityCode: 'E09000001', postcodeDistrict: 'EC1A', countryCode: 'GB' },
      dropoff: { kind: 'address', localAuthorityCode: 'E09000001', postcodeDistrict: 'EC2A', countryCode: 'GB' },
      departAt: fromLondonTime(2026, 3, 11, 12, 0),
      distanceMeters: 12_000,
      durationSeconds: 1800,
      slowSeconds: 0,
      passengers: 1,
      vehicleType: 'saloon',
      meetAndGreet: false,
      classMultipliers: {},
    });
    // T1 to six miles: (9656.064 - 200) / 100 = 94.56 -> 95 x 20p = 1900; then T4 = T2's 20p per 80 m:
    // (12000 - 9656.064) / 80 = 29.30 -> 30 x 20p = 600. 300 + 1900 + 600 = 2800.
    expect(r.tariffSource.kind).toBe('council');
    expect(r.farePence).toBe(2800);
    expect(r.appliedRules.map((x) => x.amountPence)).toEqual([300, 1900, 600]);
  });
});

describe('bank holidays', () => {
  it('lists England and Wales, Scotland and Northern Ireland for 2025-2027 (GOV.UK)', () => {
    const perYear = (n: (typeof HOLIDAY_NATIONS)[number], y: number) =>
      BANK_HOLIDAYS[n].filter((h) => h.date.startsWith(String(y))).length;
    for (const y of [2025, 2026, 2027]) {
      expect(perYear('england-and-wales', y)).toBe(8);
      expect(perYear('scotland', y)).toBe(9);
      expect(perYear('northern-ireland', y)).toBe(10);
    }
    for (const n of HOLIDAY_NATIONS) {
      for (const h of BANK_HOLIDAYS[n]) {
        const day = new Date(`${h.date}T12:00:00Z`).getUTCDay();
        expect(day, `${n} ${h.date} is a weekday`).not.toBe(0);
        expect(day, `${n} ${h.date} is a weekday`).not.toBe(6);
      }
    }
  });

  it('has the substitute days and the Scottish rules', () => {
    expect(isBankHoliday('england-and-wales', '2026-12-28')).toBe(true); // Boxing Day (substitute day)
    expect(isBankHoliday('england-and-wales', '2026-12-26')).toBe(false);
    expect(isBankHoliday('england-and-wales', '2027-12-27')).toBe(true);
    expect(isBankHoliday('scotland', '2026-01-02')).toBe(true);
    expect(isBankHoliday('england-and-wales', '2026-01-02')).toBe(false);
    expect(isBankHoliday('scotland', '2027-01-04')).toBe(true); // 2 January (substitute day)
    expect(isBankHoliday('scotland', '2025-12-01')).toBe(true); // St Andrew's Day (substitute day)
    expect(isBankHoliday('scotland', '2026-11-30')).toBe(true);
    expect(isBankHoliday('scotland', '2026-04-06')).toBe(false); // no Easter Monday
    expect(isBankHoliday('england-and-wales', '2026-04-06')).toBe(true);
    expect(isBankHoliday('scotland', '2026-08-03')).toBe(true); // first Monday of August
    expect(isBankHoliday('england-and-wales', '2026-08-31')).toBe(true); // last Monday of August
    expect(isBankHoliday('northern-ireland', '2026-07-13')).toBe(true);
    expect(isBankHoliday('northern-ireland', '2026-03-17')).toBe(true);
  });

  it('picks the nation from the GSS code', () => {
    expect(nationForGssCode('E08000003')).toBe('england-and-wales');
    expect(nationForGssCode('W06000015')).toBe('england-and-wales');
    expect(nationForGssCode('S12000049')).toBe('scotland');
    expect(nationForGssCode('N09000003')).toBe('northern-ireland');
    expect(nationForGssCode(null)).toBeNull();
    expect(nationForGssCode('X1')).toBeNull();
  });
});
