import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_AUTHORITY,
  DEFAULT_TABLE,
  FareInputError,
  findTable,
  MEET_AND_GREET_PENCE,
  priceJourney,
  SeatingError,
  tablesInForce,
} from '../shared/domain/tariffs/engine.ts';
import { fromLondonTime, londonTime } from '../shared/domain/tariffs/london-time.ts';
import { convertCouncilFile, type TariffTable } from '../shared/domain/tariffs/table.ts';
import {
  type FareInput,
  type FareResult,
  type QuotePlace,
  type RateCard,
  VEHICLE_SEATS,
  VEHICLE_TYPES,
} from '../shared/domain/tariffs/types.ts';
import { AppError } from '../shared/errors.ts';

const TABLES = convertCouncilFile(
  JSON.parse(readFileSync(path.join(import.meta.dirname, '..', 'data', 'council-tariffs.json'), 'utf8')),
);

/** A pickup GSS code in each authority. */
const CODE = {
  london: 'E09000033',
  manchester: 'E08000003',
  glasgow: 'S12000049',
  sheffield: 'E08000039',
  brighton: 'E06000043',
  cardiff: 'W06000015',
  southGlos: 'E06000025',
  newport: 'W06000022',
  argyll: 'S12000035',
  bracknell: 'E06000036',
  nottingham: 'E06000018',
  birmingham: 'E08000025',
  leeds: 'E08000035',
  edinburgh: 'S12000036',
} as const;

const place = (code: string | null, extra: Partial<QuotePlace> = {}): QuotePlace => ({
  kind: 'address',
  localAuthorityCode: code,
  postcodeDistrict: null,
  countryCode: 'GB',
  ...extra,
});

/** Local Europe/London wall-clock time. */
const at = (y: number, mo: number, d: number, h = 12, mi = 0) => fromLondonTime(y, mo, d, h, mi);

/** The golden journey: 6,000 m with 120 s of slow running, one passenger in a saloon, 15 minutes. */
function quote(code: string | null, departAt: Date, over: Partial<FareInput> = {}): FareResult {
  return priceJourney({
    tables: TABLES,
    pickup: place(code),
    dropoff: place(code),
    departAt,
    distanceMeters: 6000,
    durationSeconds: 900,
    slowSeconds: 120,
    passengers: 1,
    vehicleType: 'saloon',
    meetAndGreet: false,
    classMultipliers: {},
    ...over,
  });
}

const total = (r: FareResult) => r.appliedRules.reduce((s, x) => s + x.amountPence, 0);
const codes = (r: FareResult) => r.appliedRules.map((x) => x.code);

// Dates used below (2026): Wed 11 Mar (an ordinary weekday, GMT), Easter Monday 6 Apr (bank
// holiday in England and Wales, BST), Mon 4 May (Early May bank holiday, also in Scotland),
// Fri 25 Dec (Christmas Day).
const DAY = at(2026, 3, 11, 12, 0);
const NIGHT = at(2026, 3, 11, 23, 30);
const EASTER_MONDAY = at(2026, 4, 6, 12, 0);
const MAY_BANK_HOLIDAY = at(2026, 5, 4, 12, 0);
const CHRISTMAS_DAY = at(2026, 12, 25, 12, 0);

interface Golden {
  name: string;
  code: string;
  departAt: Date;
  fare: number;
  tariff: RegExp;
}

/*
 * Golden fares, every one worked by hand from the council's published table (source URL per
 * council, as cited in data/council-tariffs.json). Journey: 6,000 m, 120 s slow running, one
 * passenger. "Or part thereof": every started unit is charged (ceil). 1 yard = 0.9144 m.
 */
const GOLDEN: Golden[] = [
  // Manchester City Council, effective 15 Sep 2023.
  // https://www.manchester.gov.uk/info/1126/taxi_and_private_hire_passenger_information/7783/taxi_fares_and_charges/2
  // T1 Day 06:00-22:00: £3.40 for the first 381.1 yd (348.478 m); 20p per 134.7 yd (123.172 m); waiting 20p per 31.57 s.
  //   distance (6000 - 348.478) / 123.172 = 45.88 -> 46 x 20p = 920; waiting 120 / 31.57 = 3.80 -> 4 x 20p = 80
  //   340 + 920 + 80 = 1340
  { name: 'Manchester day', code: CODE.manchester, departAt: DAY, fare: 1340, tariff: /^T1 Day$/ },
  // T2 Night and Bank Holidays 22:00-06:00: £3.80 for 230.39 yd (210.669 m); 20p per 101.2 yd (92.537 m); 20p per 23.84 s.
  //   (6000 - 210.669) / 92.537 = 62.56 -> 63 x 20p = 1260; 120 / 23.84 = 5.03 -> 6 x 20p = 120; 380 + 1260 + 120 = 1760
  { name: 'Manchester night', code: CODE.manchester, departAt: NIGHT, fare: 1760, tariff: /^T2 Night/ },
  // Bank holidays: T2 for 24 hours -> 1760.
  { name: 'Manchester bank holiday', code: CODE.manchester, departAt: EASTER_MONDAY, fare: 1760, tariff: /^T2 Night/ },
  // T4 Christmas/New Year (24 Dec 20:00-27 Dec 06:00): T2 rates + 50% -> 1760 x 1.5 = 2640.
  { name: 'Manchester Christmas', code: CODE.manchester, departAt: CHRISTMAS_DAY, fare: 2640, tariff: /^T4 Christmas/ },

  // Sheffield City Council (undated council page).
  // https://sheffield.gov.uk/taxi-licensing/passenger-information/hackney-carriage-fares-and-charges
  // T1 Day 07:00-19:00: £3.50 for the first 100 yd (91.44 m); 20p per 176 yd (160.934 m) to 10 miles; 20p per 45 s.
  //   (6000 - 91.44) / 160.934 = 36.71 -> 37 x 20p = 740; 120 / 45 = 2.67 -> 3 x 20p = 60; 350 + 740 + 60 = 1150
  { name: 'Sheffield day', code: CODE.sheffield, departAt: DAY, fare: 1150, tariff: /^T1 Day$/ },
  // T2 Night 19:00-07:00 (a Wednesday): £3.70 flag, same increments -> 370 + 740 + 60 = 1170
  { name: 'Sheffield night', code: CODE.sheffield, departAt: NIGHT, fare: 1170, tariff: /^T2 Night$/ },
  // T3 Weekend, 19:00-07:00 on Fri/Sat/Sun (Friday 13 Mar 23:30): £4.70 flag -> 470 + 740 + 60 = 1270
  {
    name: 'Sheffield weekend night',
    code: CODE.sheffield,
    departAt: at(2026, 3, 13, 23, 30),
    fare: 1270,
    tariff: /^T3 Weekend$/,
  },
  // Easter Monday 12:00: T1 1150 + bank holiday surcharge (07:00 to 07:00) £1.20 = 1270
  { name: 'Sheffield bank holiday', code: CODE.sheffield, departAt: EASTER_MONDAY, fare: 1270, tariff: /^T1 Day$/ },
  // Christmas Day 12:00: T1 1150 + Christmas surcharge (24 Dec 18:00-27 Dec 06:00) £2.50 = 1400 (no bank holiday extra)
  { name: 'Sheffield Christmas', code: CODE.sheffield, departAt: CHRISTMAS_DAY, fare: 1400, tariff: /^T1 Day$/ },

  // Newport City Council, effective 23 Sep 2022.
  // https://www.thenational.wales/announcements/public_notices/notice/212633.Newport__Hackney_Carriage_Rates_Notice/
  // Tariff 1 06:00-23:00: £3.50 for the first 100 yd (91.44 m); 10p per 100 yd; waiting 10p per 30 s.
  //   (6000 - 91.44) / 91.44 = 64.62 -> 65 x 10p = 650; 120 / 30 = 4 exactly -> 4 x 10p = 40; 350 + 650 + 40 = 1040
  { name: 'Newport day', code: CODE.newport, departAt: DAY, fare: 1040, tariff: /^Tariff 1$/ },
  // Tariff 2 23:00-06:00: £4.50 flag -> 450 + 650 + 40 = 1140
  { name: 'Newport night', code: CODE.newport, departAt: NIGHT, fare: 1140, tariff: /^Tariff 2$/ },
  // Tariff 3, bank holidays: Tariff 1 by time of day plus £1.50 -> 1040 + 150 = 1190
  { name: 'Newport bank holiday', code: CODE.newport, departAt: EASTER_MONDAY, fare: 1190, tariff: /^Tariff 1$/ },
  // Tariff 4 Christmas/New Year: Tariff 1 x 2 -> 1040 x 2 = 2080 (no bank holiday surcharge)
  { name: 'Newport Christmas', code: CODE.newport, departAt: CHRISTMAS_DAY, fare: 2080, tariff: /^T4 Christmas/ },

  // South Gloucestershire Council, 2023/24.
  // https://consultations.southglos.gov.uk/Review_of_Hackney_Carriage_Fares/consultationHome
  // Standard: £2.40 for the first 134.8 yd (123.261 m); 20p per 129.4 yd (118.323 m); waiting 20p per 27.8 s.
  //   (6000 - 123.261) / 118.323 = 49.67 -> 50 x 20p = 1000; 120 / 27.8 = 4.32 -> 5 x 20p = 100; 240 + 1000 + 100 = 1340
  { name: 'South Gloucestershire day', code: CODE.southGlos, departAt: DAY, fare: 1340, tariff: /^Standard charge$/ },
  // Night: hiring beginning between 18:00 and 06:00 -> 1340 + 165 = 1505
  { name: 'South Gloucestershire night', code: CODE.southGlos, departAt: NIGHT, fare: 1505, tariff: /^Standard/ },
  // Public holiday: £4.00, night and weekend not payable -> 1340 + 400 = 1740
  {
    name: 'South Gloucestershire bank holiday',
    code: CODE.southGlos,
    departAt: EASTER_MONDAY,
    fare: 1740,
    tariff: /^Standard/,
  },
  // Christmas (18:00 24 Dec to 06:00 27 Dec): £6.50, other surcharges not payable -> 1340 + 650 = 1990
  {
    name: 'South Gloucestershire Christmas',
    code: CODE.southGlos,
    departAt: CHRISTMAS_DAY,
    fare: 1990,
    tariff: /^Standard/,
  },

  // Argyll and Bute Council, effective 22 Apr 2022.
  // https://theresident.co.uk/announcements/public_notices/notice/198765.Argyll___Bute__Civic_Government__Scotland__Act_1982_Taxi_Fare_Review
  // Tariff 1 07:00-22:00: £3.45 for the first 860 yd (786.384 m); 23p per 176 yd (160.934 m); waiting 40p a minute pro rata.
  //   (6000 - 786.384) / 160.934 = 32.40 -> 33 x 23p = 759; 120 s x 40p / 60 s = 80; 345 + 759 + 80 = 1184
  { name: 'Argyll and Bute day', code: CODE.argyll, departAt: DAY, fare: 1184, tariff: /^Tariff 1$/ },
  // Tariff 2 22:00-07:00: £4.14 flag; 23p per 150 yd (137.16 m): 5213.616 / 137.16 = 38.01 -> 39 x 23p = 897; 414 + 897 + 80 = 1391
  { name: 'Argyll and Bute night', code: CODE.argyll, departAt: NIGHT, fare: 1391, tariff: /^Tariff 2$/ },
  // No bank-holiday tariff in the table: Early May bank holiday 12:00 is Tariff 1 -> 1184
  {
    name: 'Argyll and Bute bank holiday',
    code: CODE.argyll,
    departAt: MAY_BANK_HOLIDAY,
    fare: 1184,
    tariff: /^Tariff 1$/,
  },
  // Tariff 3 festive (24 Dec 22:00-27 Dec 07:00): £4.83; 23p per 120 yd (109.728 m): 5213.616 / 109.728 = 47.51 -> 48 x 23p = 1104
  //   483 + 1104 + 80 = 1667
  { name: 'Argyll and Bute Christmas', code: CODE.argyll, departAt: CHRISTMAS_DAY, fare: 1667, tariff: /^Tariff 3/ },

  // Bracknell Forest Council (undated council page).
  // https://www.bracknell-forest.gov.uk/roads-parking-and-transport/travel-and-public-transport/taxis
  // Day 07:00-23:00: £3.00 for the first 700 yd (640.08 m) or 156 s; 20p per 200 yd (182.88 m); waiting 20p per 45 s.
  //   (6000 - 640.08) / 182.88 = 29.31 -> 30 x 20p = 600; 120 / 45 = 2.67 -> 3 x 20p = 60; 300 + 600 + 60 = 960
  { name: 'Bracknell day', code: CODE.bracknell, departAt: DAY, fare: 960, tariff: /^Day$/ },
  // Night 23:00-07:00: £4.50, 30p per 200 yd, 30p per 45 s -> 450 + 30 x 30 + 3 x 30 = 450 + 900 + 90 = 1440
  { name: 'Bracknell night', code: CODE.bracknell, departAt: NIGHT, fare: 1440, tariff: /^Night$/ },
  // Bank and public holidays: the same figures as Night -> 1440
  {
    name: 'Bracknell bank holiday',
    code: CODE.bracknell,
    departAt: EASTER_MONDAY,
    fare: 1440,
    tariff: /^Bank and public holidays$/,
  },
  // Christmas Day to 07:00 Boxing Day: £6.00, 40p, 40p -> 600 + 30 x 40 + 3 x 40 = 600 + 1200 + 120 = 1920
  { name: 'Bracknell Christmas', code: CODE.bracknell, departAt: CHRISTMAS_DAY, fare: 1920, tariff: /^Christmas Day/ },

  // Glasgow City Council, approved Aug 2025.
  // https://www.glasgowworld.com/news/glasgow-taxi-fares-increase-5261182
  // £4.50 for the first 880 yd (804.672 m) or 165 s; 30p per 174 yd (159.106 m) or 37 s; waiting 30p per 37 s.
  //   (6000 - 804.672) / 159.106 = 32.65 -> 33 x 30p = 990; 120 / 37 = 3.24 -> 4 x 30p = 120; 450 + 990 + 120 = 1560
  { name: 'Glasgow day', code: CODE.glasgow, departAt: DAY, fare: 1560, tariff: /^T1 Standard/ },
  // Night surcharge (hires after 21:00, before 06:00) £1.50 -> 1710
  { name: 'Glasgow night', code: CODE.glasgow, departAt: NIGHT, fare: 1710, tariff: /^T1 Standard/ },
  // No bank-holiday rule in the table -> 1560
  { name: 'Glasgow bank holiday', code: CODE.glasgow, departAt: MAY_BANK_HOLIDAY, fare: 1560, tariff: /^T1 Standard/ },
  // Christmas/New Year surcharge (24 Dec 21:00-27 Dec 06:00) £2.70 -> 1830
  { name: 'Glasgow Christmas', code: CODE.glasgow, departAt: CHRISTMAS_DAY, fare: 1830, tariff: /^T1 Standard/ },
  // Christmas Eve 23:30: night £1.50 and festive £2.70, both (the source does not make them exclusive) -> 1980
  {
    name: 'Glasgow Christmas Eve night',
    code: CODE.glasgow,
    departAt: at(2026, 12, 24, 23, 30),
    fare: 1980,
    tariff: /^T1/,
  },
];

describe('golden fares, worked by hand from the councils tables', () => {
  it.each(GOLDEN)('$name: $fare p', ({ code, departAt, fare, tariff }) => {
    const r = quote(code, departAt);
    expect(r.farePence).toBe(fare);
    expect(total(r)).toBe(fare);
    expect(r.tariffSource.kind).toBe('council');
    expect(r.tariffSource.tariff).toMatch(tariff);
    expect(r.warnings).toEqual([]);
  });

  it('itemises the rules: Manchester Christmas is T2 figures plus 50%', () => {
    const r = quote(CODE.manchester, CHRISTMAS_DAY);
    expect(r.appliedRules).toEqual([
      expect.objectContaining({ code: 'flag_fall', amountPence: 380 }),
      expect.objectContaining({ code: 'distance', amountPence: 1260 }),
      expect.objectContaining({ code: 'waiting', amountPence: 120 }),
      expect.objectContaining({ code: 'tariff_multiplier', amountPence: 880 }),
    ]);
    expect(r.tariffSource).toEqual({
      kind: 'council',
      authority: 'Manchester City Council',
      tariff: 'T4 Christmas/New Year',
      asOf: '2023-09-15',
    });
  });

  it('names surcharges: South Gloucestershire night and Newport bank holiday', () => {
    expect(codes(quote(CODE.southGlos, NIGHT))).toContain('night_surcharge');
    expect(codes(quote(CODE.newport, EASTER_MONDAY))).toContain('bank_holiday_surcharge');
  });

  it('matches Manchester published example fares within 20p (1, 5 and 10 miles, day and night)', () => {
    // Council's "average cost (not including any waiting time)".
    const examples = [
      { miles: 1, day: 580, night: 680 },
      { miles: 5, day: 1620, night: 2080 },
      { miles: 10, day: 2920, night: 3800 },
    ];
    for (const e of examples) {
      const over = { distanceMeters: e.miles * 1609.344, slowSeconds: 0 };
      const day = quote(CODE.manchester, DAY, over).farePence;
      const night = quote(CODE.manchester, NIGHT, over).farePence;
      expect(Math.abs(day - e.day), `${e.miles} mi day ${day}`).toBeLessThanOrEqual(20);
      expect(Math.abs(night - e.night), `${e.miles} mi night ${night}`).toBeLessThanOrEqual(20);
    }
    // By hand, day 1 mile: (1609.344 - 348.478) / 123.172 = 10.24 -> 11 x 20p + 340 = 560.
    expect(quote(CODE.manchester, DAY, { distanceMeters: 1609.344, slowSeconds: 0 }).farePence).toBe(560);
  });

  it('South Gloucestershire: a hiring ending after 18:00 pays the night charge ("beginning or ending")', () => {
    // Starts Wed 17:50, 15 minutes: ends 18:05.
    expect(quote(CODE.southGlos, at(2026, 3, 11, 17, 50)).farePence).toBe(1505);
    expect(quote(CODE.southGlos, at(2026, 3, 11, 17, 30)).farePence).toBe(1340);
    // Saturday: weekend charge, night not payable as well: 1340 + 165.
    const sat = quote(CODE.southGlos, at(2026, 3, 14, 23, 30));
    expect(sat.farePence).toBe(1505);
    expect(codes(sat)).toContain('weekend_surcharge');
    expect(codes(sat)).not.toContain('night_surcharge');
  });

  // found in a fare probe: slow running was charged by time on top of the whole distance
  it('charges the stretch covered running slow by time only, not by distance as well, as a meter does', () => {
    const trip = { distanceMeters: 1609.344, slowSeconds: 120 };
    const distanceOf = (r: FareResult) =>
      r.appliedRules.filter((x) => x.code === 'distance').reduce((s, x) => s + x.amountPence, 0);
    const waitingOf = (r: FareResult) => r.appliedRules.find((x) => x.code === 'waiting');
    const reading = quote(CODE.manchester, DAY, trip);
    // 200 m of the mile covered in the slow 120 s: (1409.344 - 348.478) / 123.172 = 8.61 -> 9 x 20p
    const slow = quote(CODE.manchester, DAY, { ...trip, slowMeters: 200 });
    expect(distanceOf(reading)).toBe(220);
    expect(distanceOf(slow)).toBe(180);
    expect(waitingOf(slow)?.amountPence).toBe(waitingOf(reading)?.amountPence);
    expect(waitingOf(slow)?.description).toMatch(/0\.1 miles of the route, not charged by distance/);
    expect(slow.farePence).toBe(reading.farePence - 40);
    // all of it slow: the flag fall and the time, no distance
    const crawl = quote(CODE.manchester, DAY, { ...trip, slowSeconds: 900, slowMeters: 5000 });
    expect(codes(crawl)).not.toContain('distance');
    expect(codes(crawl)).toContain('waiting');
    expect(() => quote(CODE.manchester, DAY, { ...trip, slowMeters: -1 })).toThrow(/slowMeters/);
  });

  it('the flag fall covers time, whichever first: Bracknell, 100 m with 200 s waiting', () => {
    // 100 m uses 100 / 640.08 of the flag; the rest covers (1 - 0.15623) x 156 = 131.63 s of waiting.
    // 200 - 131.63 = 68.37 s -> 2 units of 45 s -> 40p; fare 300 + 40 = 340.
    expect(quote(CODE.bracknell, DAY, { distanceMeters: 100, slowSeconds: 200 }).farePence).toBe(340);
  });
});

describe('periods in Europe/London time', () => {
  const tariffAt = (code: string, d: Date) => quote(code, d).tariffSource.tariff;

  it('converts instants with BST and GMT', () => {
    expect(londonTime(new Date('2026-03-29T00:59:00Z'))).toMatchObject({ day: 29, minutes: 59, offsetMinutes: 0 });
    expect(londonTime(new Date('2026-03-29T01:00:00Z'))).toMatchObject({ day: 29, minutes: 120, offsetMinutes: 60 });
    expect(londonTime(new Date('2026-10-25T00:59:00Z'))).toMatchObject({ minutes: 119, offsetMinutes: 60 });
    expect(londonTime(new Date('2026-10-25T01:00:00Z'))).toMatchObject({ minutes: 60, offsetMinutes: 0 });
    expect(fromLondonTime(2026, 7, 1, 22, 0).toISOString()).toBe('2026-07-01T21:00:00.000Z');
    expect(fromLondonTime(2026, 1, 1, 22, 0).toISOString()).toBe('2026-01-01T22:00:00.000Z');
    // 01:30 on the night clocks go back happens twice: the first (BST) is taken.
    expect(fromLondonTime(2026, 10, 25, 1, 30).toISOString()).toBe('2026-10-25T00:30:00.000Z');
  });

  it('applies night rates by local time around the clock changes', () => {
    // Sat 28 Mar 2026 21:30 UTC is 21:30 GMT (day); Sun 29 Mar 21:30 UTC is 22:30 BST (night).
    expect(tariffAt(CODE.manchester, new Date('2026-03-28T21:30:00Z'))).toBe('T1 Day');
    expect(tariffAt(CODE.manchester, new Date('2026-03-29T21:30:00Z'))).toMatch(/^T2/);
    // Sat 24 Oct 21:30 UTC is 22:30 BST (night); Sun 25 Oct 21:30 UTC is 21:30 GMT (day).
    expect(tariffAt(CODE.manchester, new Date('2026-10-24T21:30:00Z'))).toMatch(/^T2/);
    expect(tariffAt(CODE.manchester, new Date('2026-10-25T21:30:00Z'))).toBe('T1 Day');
    // Sheffield's weekend night ends at 07:00 local: 06:00 UTC on the first BST morning is 07:00.
    expect(tariffAt(CODE.sheffield, new Date('2026-03-29T05:59:00Z'))).toBe('T3 Weekend');
    expect(tariffAt(CODE.sheffield, new Date('2026-03-29T06:00:00Z'))).toBe('T1 Day');
  });

  it('handles windows that cross midnight', () => {
    expect(tariffAt(CODE.manchester, at(2026, 3, 11, 21, 59))).toBe('T1 Day');
    expect(tariffAt(CODE.manchester, at(2026, 3, 11, 22, 0))).toMatch(/^T2/);
    expect(tariffAt(CODE.manchester, at(2026, 3, 12, 5, 59))).toMatch(/^T2/);
    expect(tariffAt(CODE.manchester, at(2026, 3, 12, 6, 0))).toBe('T1 Day');
    // Sheffield: T3 on the nights starting Fri, Sat and Sun; Thursday night is T2 until Friday 07:00.
    expect(tariffAt(CODE.sheffield, at(2026, 3, 12, 23, 0))).toBe('T2 Night');
    expect(tariffAt(CODE.sheffield, at(2026, 3, 13, 6, 59))).toBe('T2 Night');
    expect(tariffAt(CODE.sheffield, at(2026, 3, 13, 19, 0))).toBe('T3 Weekend');
    expect(tariffAt(CODE.sheffield, at(2026, 3, 16, 6, 59))).toBe('T3 Weekend');
    expect(tariffAt(CODE.sheffield, at(2026, 3, 16, 7, 0))).toBe('T1 Day');
    expect(tariffAt(CODE.sheffield, at(2026, 3, 16, 19, 0))).toBe('T2 Night');
  });

  it('handles Christmas and New Year windows across the year end', () => {
    expect(tariffAt(CODE.manchester, at(2026, 12, 31, 19, 59))).toBe('T1 Day');
    expect(tariffAt(CODE.manchester, at(2026, 12, 31, 20, 0))).toMatch(/^T4/);
    expect(tariffAt(CODE.manchester, at(2027, 1, 1, 12, 0))).toMatch(/^T4/);
    expect(tariffAt(CODE.manchester, at(2027, 1, 2, 5, 59))).toMatch(/^T4/);
    expect(tariffAt(CODE.manchester, at(2027, 1, 2, 6, 0))).toBe('T1 Day');
    // Argyll and Bute: T2 18:00-22:00 on 31 Dec, T3 22:00 to 07:00 on 2 Jan, T2 to 07:00 on 3 Jan.
    expect(tariffAt(CODE.argyll, at(2026, 12, 31, 17, 59))).toBe('Tariff 1');
    expect(tariffAt(CODE.argyll, at(2026, 12, 31, 21, 59))).toBe('Tariff 2');
    expect(tariffAt(CODE.argyll, at(2026, 12, 31, 22, 0))).toBe('Tariff 3 (festive)');
    expect(tariffAt(CODE.argyll, at(2027, 1, 2, 6, 59))).toBe('Tariff 3 (festive)');
    expect(tariffAt(CODE.argyll, at(2027, 1, 2, 12, 0))).toBe('Tariff 2');
    expect(tariffAt(CODE.argyll, at(2027, 1, 3, 7, 0))).toBe('Tariff 1');
    // Bracknell: Christmas Eve evening from 18:00, the Christmas tariff from midnight to 07:00 Boxing Day.
    expect(tariffAt(CODE.bracknell, at(2026, 12, 24, 18, 0))).toBe("Christmas Eve and New Year's Eve evening");
    expect(tariffAt(CODE.bracknell, at(2026, 12, 26, 6, 59))).toBe('Christmas Day to 07:00 Boxing Day');
    // South Gloucestershire: a New Year's Eve hiring pays the New Year charge only: 1340 + 650.
    expect(quote(CODE.southGlos, at(2026, 12, 31, 23, 30)).farePence).toBe(1990);
  });

  it('treats 2 January as a holiday in Scotland only, and substitute days as holidays', () => {
    // No table for Edinburgh or Leeds: the default rate, whose night-and-holiday rate applies on bank holidays.
    expect(quote(CODE.edinburgh, at(2026, 1, 2, 12, 0)).tariffSource.tariff).toMatch(/night and holiday/);
    expect(quote(CODE.leeds, at(2026, 1, 2, 12, 0)).tariffSource.tariff).toBe('Default day rate');
    // 2 Jan 2027 is a Saturday: Scotland's holiday moves to Monday 4 Jan.
    expect(quote(CODE.edinburgh, at(2027, 1, 4, 12, 0)).tariffSource.tariff).toMatch(/night and holiday/);
    expect(quote(CODE.leeds, at(2027, 1, 4, 12, 0)).tariffSource.tariff).toBe('Default day rate');
    // The Manchester table, if it priced a Scottish authority, would use T2 (bank holidays) on 2 January.
    const scottish: TariffTable = { ...structuredClone(tableOf('manchester')), localAuthorityCodes: [CODE.edinburgh] };
    expect(
      priceJourney({ ...baseInput(CODE.edinburgh, at(2026, 1, 2, 12, 0)), tables: [scottish] }).tariffSource.tariff,
    ).toMatch(/^T2/);
    expect(tariffAt(CODE.manchester, at(2026, 1, 2, 12, 0))).toBe('T1 Day');
    // Boxing Day 2026 is a Saturday; Monday 28 Dec is the substitute bank holiday.
    expect(tariffAt(CODE.bracknell, at(2026, 12, 28, 12, 0))).toBe('Bank and public holidays');
    expect(quote(CODE.sheffield, at(2026, 12, 28, 12, 0)).farePence).toBe(1150 + 120);
    // Sheffield's bank holiday extra runs 07:00 to 07:00 the next day: not yet at 06:59 on Easter
    // Monday (still Sunday night's T3, 1270), still at 06:59 on the Tuesday (T2 1170 + 120).
    expect(quote(CODE.sheffield, at(2026, 4, 6, 6, 59)).farePence).toBe(1270);
    expect(quote(CODE.sheffield, at(2026, 4, 7, 6, 59)).farePence).toBe(1170 + 120);
  });

  it('warns outside the years whose bank holidays are known', () => {
    const r = quote(CODE.manchester, at(2028, 3, 8, 12, 0));
    expect(r.tariffSource.kind).toBe('council');
    expect(r.warnings.join(' ')).toMatch(/2025-2027/);
  });
});

function tableOf(id: string): TariffTable {
  const t = TABLES.find((x) => x.id === id);
  if (!t) throw new Error(id);
  return t;
}

function baseInput(code: string | null, departAt: Date): FareInput {
  return {
    tables: TABLES,
    pickup: place(code),
    dropoff: place(code),
    departAt,
    distanceMeters: 6000,
    durationSeconds: 900,
    slowSeconds: 120,
    passengers: 1,
    vehicleType: 'saloon',
    meetAndGreet: false,
    classMultipliers: {},
  };
}

describe('incomplete council tables: the default rate, never an invented figure', () => {
  // The default rate, by hand, for the golden journey: £4.00 covers 1/10 mile (160.934 m);
  // (6000 - 160.934) / 160.934 = 36.28 -> 37 x 30p = 1110; 120 / 30 = 4 x 20p = 80; day 400 + 1110 + 80 = 1590.
  // Night and holidays x 1.5 = 2385; Christmas and New Year x 2 = 3180.
  const expectDefault = (r: FareResult, council: RegExp, fare: number) => {
    expect(r.tariffSource.kind).toBe('default');
    expect(r.tariffSource.authority).toMatch(council);
    expect(r.tariffSource.authority).toContain(DEFAULT_AUTHORITY);
    expect(r.warnings.some((w) => council.test(w) && /default/.test(w))).toBe(true);
    expect(r.farePence).toBe(fare);
    expect(total(r)).toBe(fare);
  };

  it('London: no per-unit figures at all', () => {
    const r = quote(CODE.london, DAY);
    expectDefault(r, /Transport for London/, 1590);
    expect(r.warnings[0]).toMatch(/Tariff 1 has no flag fall amount/);
    expectDefault(quote(CODE.london, NIGHT), /Transport for London/, 2385);
  });

  it('Nottingham: council figures by day, default at night', () => {
    // Day by hand: £2.00 for 122.2 yd (111.739 m); 20p per 86.2 yd (78.821 m) to 1 mile: (1609.344 - 111.739) / 78.821
    // = 19.00 -> 19 x 20p = 380; then 20p per 160 yd (146.304 m): (6000 - 1609.344) / 146.304 = 30.01 -> 31 x 20p = 620;
    // waiting 120 / 38 = 3.16 -> 4 x 20p = 80. 200 + 380 + 620 + 80 = 1280.
    const day = quote(CODE.nottingham, DAY);
    expect(day.tariffSource.kind).toBe('council');
    expect(day.farePence).toBe(1280);
    const night = quote(CODE.nottingham, NIGHT);
    expectDefault(night, /Nottingham/, 2385);
    expect(night.warnings[0]).toMatch(/22:00-06:00 has no flag fall amount/);
    // Bank holiday by day: fare and a half -> 1280 x 1.5 = 1920.
    expect(quote(CODE.nottingham, EASTER_MONDAY).farePence).toBe(1920);
  });

  it('Cardiff: the night/Sunday/bank holiday extra has no amount', () => {
    // Day by hand: £2.50 for 103 yd (94.183 m); 20p per 195 yd (178.308 m): (6000 - 94.183) / 178.308 = 33.12 -> 34
    // x 20p = 680; 120 / 48 = 2.5 -> 3 x 20p = 60. 250 + 680 + 60 = 990.
    expect(quote(CODE.cardiff, DAY).farePence).toBe(990);
    const early = quote(CODE.cardiff, at(2026, 3, 11, 1, 0));
    expectDefault(early, /Cardiff/, 2385);
    expect(early.warnings[0]).toMatch(/night sunday bank holiday surcharge has no amount/);
    expectDefault(quote(CODE.cardiff, at(2026, 3, 15, 12, 0)), /Cardiff/, 1590); // a Sunday: default day rate
    // At Christmas the Christmas/New Year extra (£3.00) applies instead, so Cardiff prices it: 990 + 300.
    const xmas = quote(CODE.cardiff, CHRISTMAS_DAY);
    expect(xmas.tariffSource.kind).toBe('council');
    expect(xmas.farePence).toBe(1290);
  });

  it('Birmingham: a summary only', () => {
    const r = quote(CODE.birmingham, DAY);
    expectDefault(r, /Birmingham/, 1590);
    // Not "no tariff covers 12:00", as if that hour alone were missing.
    expect(r.warnings[0]).toMatch(/it gives only a summary of fares, no tariff to meter on/);
  });

  it('Brighton: Tariff 4 (New Year) has no increment amount; Sheffield: no figure for 5+ passengers', () => {
    expectDefault(quote(CODE.brighton, at(2026, 12, 31, 23, 30)), /Brighton/, 3180);
    expect(quote(CODE.brighton, at(2026, 12, 31, 12, 0)).tariffSource.kind).toBe('council');
    const five = quote(CODE.sheffield, DAY, { passengers: 5, vehicleType: 'mpv' });
    // Default day rate plus £1.00 for the fifth passenger.
    expectDefault(five, /Sheffield/, 1690);
    expect(five.warnings[0]).toMatch(/5-8 passengers/);
  });

  it('no table for the pickup', () => {
    const r = quote(CODE.leeds, DAY);
    expect(r.tariffSource).toEqual({
      kind: 'default',
      authority: DEFAULT_AUTHORITY,
      tariff: 'Default day rate',
      asOf: '2026-11-22',
    });
    expect(r.farePence).toBe(1590);
    expect(r.warnings[0]).toMatch(/No council tariff table covers the pickup's local authority \(E08000035\)/);
    expect(quote(null, CHRISTMAS_DAY).farePence).toBe(3180);
  });

  it('the default table is complete', () => {
    for (const t of DEFAULT_TABLE.tariffs)
      expect(t.rates.kind === 'same_as' || t.rates.flagFall?.amountPence).toBeTruthy();
  });
});

describe('rate cards', () => {
  const card: RateCard = {
    kind: 'driver_override',
    owner: 'Driver 42',
    asOf: '2026-11-01',
    perMilePence: 250,
    minimumPence: 600,
    flagFallPence: 100,
    fixedRoutes: [{ from: 'M1', to: 'MAN', pricePence: 3500, bidirectional: true }],
  };

  it('replaces the council tariff: flag fall plus per mile', () => {
    // 4 miles: 100 + 4 x 250 = 1100.
    const r = quote(CODE.manchester, NIGHT, { rateCard: card, distanceMeters: 4 * 1609.344 });
    expect(r.farePence).toBe(1100);
    expect(r.tariffSource).toEqual({
      kind: 'driver_override',
      authority: 'Driver 42',
      tariff: 'Rate card: £2.50 per mile, minimum £6.00',
      asOf: '2026-11-01',
    });
    expect(codes(r)).toEqual(['flag_fall', 'distance']);
  });

  it('applies its minimum', () => {
    // 1 mile: 100 + 250 = 350, raised to the £6.00 minimum.
    const r = quote(CODE.manchester, DAY, { rateCard: card, distanceMeters: 1609.344 });
    expect(r.farePence).toBe(600);
    expect(r.appliedRules.at(-1)).toMatchObject({ code: 'minimum_fare', amountPence: 250 });
  });

  it('charges a fixed route matched by postcode district and IATA, both ways when bidirectional', () => {
    const input = baseInput(CODE.manchester, DAY);
    const city = place(CODE.manchester, { postcodeDistrict: 'M1' });
    const airport = place(CODE.manchester, { kind: 'airport', postcodeDistrict: 'M90', iata: 'MAN' });
    const out = priceJourney({ ...input, rateCard: { ...card, kind: 'partner_rate' }, pickup: city, dropoff: airport });
    expect(out.farePence).toBe(3500);
    expect(out.tariffSource).toMatchObject({ kind: 'partner_rate', tariff: 'Fixed route M1-MAN' });
    const back = priceJourney({ ...input, rateCard: card, pickup: airport, dropoff: city, meetAndGreet: true });
    expect(back.farePence).toBe(3500 + MEET_AND_GREET_PENCE);
    const oneWay = { ...card, fixedRoutes: [{ from: 'M1', to: 'MAN', pricePence: 3500 }] };
    expect(priceJourney({ ...input, rateCard: oneWay, pickup: airport, dropoff: city }).appliedRules[0]?.code).toBe(
      'flag_fall',
    );
  });

  it('rejects nonsense figures', () => {
    expect(() => quote(CODE.manchester, DAY, { rateCard: { ...card, perMilePence: -1 } })).toThrow(FareInputError);
  });
});

describe('extras', () => {
  const airport = (iata: string) => place(CODE.manchester, { kind: 'airport', postcodeDistrict: 'M90', iata });

  it('meet and greet: £25 at an airport pickup, otherwise a warning and no charge', () => {
    // Manchester day 1340 + terminal pick-up barrier charge 180 + meet and greet 2500.
    const r = quote(CODE.manchester, DAY, { pickup: airport('MAN'), meetAndGreet: true });
    expect(r.farePence).toBe(1340 + 180 + 2500);
    expect(r.appliedRules.slice(-2)).toEqual([
      expect.objectContaining({ code: 'airport_pickup', amountPence: 180 }),
      expect.objectContaining({ code: 'meet_and_greet', amountPence: 2500 }),
    ]);
    const town = quote(CODE.manchester, DAY, { meetAndGreet: true });
    expect(town.farePence).toBe(1340);
    expect(town.warnings).toEqual([expect.stringMatching(/airport pickups only.*not charged/)]);
  });

  it("Manchester's barrier charges by place", () => {
    expect(quote(CODE.manchester, DAY, { dropoff: airport('MAN') }).farePence).toBe(1340 + 300);
    // Another airport in the pickup's authority is not Manchester Airport: no barrier charge.
    expect(quote(CODE.manchester, DAY, { pickup: airport('LBA') }).farePence).toBe(1340);
    const station = (crs: string) => place(CODE.manchester, { kind: 'station', crs });
    expect(quote(CODE.manchester, DAY, { pickup: station('MIA') }).farePence).toBe(1340 + 60);
    expect(quote(CODE.manchester, DAY, { pickup: station('MAN') }).farePence).toBe(1340 + 60);
    expect(quote(CODE.manchester, DAY, { pickup: station('MCV') }).farePence).toBe(1340);
  });

  it('additional passengers beyond the threshold', () => {
    // Manchester: 20p for each passenger additional to the hirer; 3 passengers -> +40.
    expect(quote(CODE.manchester, DAY, { passengers: 3 }).farePence).toBe(1380);
    // Newport: £1.00 for each passenger in excess of four; 6 in a 6-seater -> +200.
    expect(quote(CODE.newport, DAY, { passengers: 6, vehicleType: '6seater' }).farePence).toBe(1040 + 200);
  });

  it('large party and large vehicle rules', () => {
    // Bracknell, more than 4 passengers: 50% of the meter fare -> 960 x 1.5 = 1440.
    const b = quote(CODE.bracknell, DAY, { passengers: 5, vehicleType: 'mpv' });
    expect(b.farePence).toBe(1440);
    expect(b.appliedRules.at(-1)).toMatchObject({ code: 'large_party', amountPence: 480 });
    expect(quote(CODE.bracknell, DAY, { passengers: 4, vehicleType: 'mpv' }).farePence).toBe(960);
    // Argyll and Bute minibus, 5+ passengers: by day Tariff 2 is charged (1391, the golden night figure) ...
    const day = quote(CODE.argyll, DAY, { passengers: 6, vehicleType: '7seater' });
    expect(day.farePence).toBe(1391);
    expect(day.tariffSource.tariff).toMatch(/^Tariff 2 \(Minibus.*instead of Tariff 1\)$/);
    // ... at night Tariff 3 (1667), and under Tariff 3 £1.15 is added (1667 + 115).
    expect(quote(CODE.argyll, NIGHT, { passengers: 6, vehicleType: '7seater' }).farePence).toBe(1667);
    expect(quote(CODE.argyll, CHRISTMAS_DAY, { passengers: 6, vehicleType: '7seater' }).farePence).toBe(1782);
  });

  it('class multipliers apply to the fare, not to pass-through charges', () => {
    // Executive x 1.4 on Manchester day: 1340 x 1.4 = 1876; the airport charge (180) is added after.
    const r = quote(CODE.manchester, DAY, {
      vehicleType: 'executive',
      classMultipliers: { executive: 1.4, luxury: 1.8 },
      pickup: airport('MAN'),
    });
    expect(r.farePence).toBe(1876 + 180);
    expect(r.appliedRules.find((x) => x.code === 'class_multiplier')?.amountPence).toBe(536);
    expect(quote(CODE.manchester, DAY, { classMultipliers: { executive: 1.4 } }).farePence).toBe(1340);
    const bad = quote(CODE.manchester, DAY, { vehicleType: 'luxury', classMultipliers: { luxury: Number.NaN } });
    expect(bad.farePence).toBe(1340);
    expect(bad.warnings[0]).toMatch(/class multiplier/);
  });

  it('booking fees only when asked', () => {
    expect(quote(CODE.argyll, DAY, { chargeBookingFee: true }).farePence).toBe(1184 + 35);
    // Newport states a maximum only (£3.00): that is what is charged when asked.
    expect(quote(CODE.newport, DAY, { chargeBookingFee: true }).farePence).toBe(1040 + 300);
    expect(quote(CODE.newport, DAY).farePence).toBe(1040);
  });

  it('puts rounding into a rule so the rules sum to the fare', () => {
    // Argyll waiting is pro rata: 100 s x 40p / 60 s = 66.67p.
    const r = quote(CODE.argyll, DAY, {
      slowSeconds: 100,
      vehicleType: 'executive',
      classMultipliers: { executive: 1.33 },
    });
    expect(total(r)).toBe(r.farePence);
    expect(Number.isInteger(r.farePence)).toBe(true);
    for (const rule of r.appliedRules) expect(Number.isInteger(rule.amountPence)).toBe(true);
  });
});

describe('input errors', () => {
  it('throws a SeatingError naming suitable vehicle types (HTTP 400)', () => {
    let err: unknown;
    try {
      quote(CODE.manchester, DAY, { passengers: 6, vehicleType: 'saloon' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SeatingError);
    expect(err).toBeInstanceOf(AppError);
    const s = err as SeatingError;
    expect(s.status).toBe(400);
    expect(s.code).toBe('invalid_input');
    // Whatever VEHICLE_SEATS says seats six, smallest first.
    const fits = VEHICLE_TYPES.filter((v) => VEHICLE_SEATS[v] >= 6);
    expect(fits).toEqual(expect.arrayContaining(['6seater', '7seater', 'mpv']));
    expect([...s.suitableVehicleTypes].sort()).toEqual([...fits].sort());
    expect(s.suitableVehicleTypes.map((v) => VEHICLE_SEATS[v])).toEqual(
      fits.map((v) => VEHICLE_SEATS[v]).sort((a, b) => a - b),
    );
    expect(s.message).toMatch(/^A saloon seats 4 passengers; for 6 choose 6seater, 7seater, mpv/);
    expect(s.details).toEqual([{ field: '/passengers', problem: s.message }]);
    expect(() => quote(CODE.manchester, DAY, { passengers: 9, vehicleType: 'mpv' })).toThrow(/No vehicle type seats 9/);
    expect(() => quote(CODE.manchester, DAY, { passengers: 8, vehicleType: 'mpv' })).not.toThrow();
    for (const v of VEHICLE_TYPES) {
      const n = VEHICLE_SEATS[v];
      expect(() => quote(CODE.manchester, DAY, { passengers: n, vehicleType: v })).not.toThrow();
      expect(() => quote(CODE.manchester, DAY, { passengers: n + 1, vehicleType: v })).toThrow(SeatingError);
    }
  });

  it('rejects inputs it cannot price', () => {
    expect(() => quote(CODE.manchester, new Date(Number.NaN))).toThrow(FareInputError);
    expect(() => quote(CODE.manchester, DAY, { distanceMeters: -1 })).toThrow(/distanceMeters/);
    expect(() => quote(CODE.manchester, DAY, { passengers: 0 })).toThrow(/passengers/);
  });
});

describe('table selection', () => {
  it('picks the table in force for the pickup', () => {
    const older: TariffTable = { ...tableOf('manchester'), effectiveFrom: '2020-01-01' };
    const newer: TariffTable = {
      ...tableOf('manchester'),
      effectiveFrom: '2027-06-01',
      authority: 'Manchester (2027)',
    };
    const all = [older, tableOf('manchester'), newer];
    expect(findTable(all, CODE.manchester, '2026-03-11')).toBe(tableOf('manchester'));
    expect(findTable(all, CODE.manchester, '2027-06-01')).toBe(newer);
    expect(findTable(all, CODE.leeds, '2026-03-11')).toBeNull();
    expect(tablesInForce(all, '2021-01-01')).toEqual([older]);
    expect(priceJourney({ ...baseInput(CODE.manchester, at(2027, 7, 1)), tables: all }).tariffSource.authority).toBe(
      'Manchester (2027)',
    );
    // Sheffield's former GSS code still finds its table.
    expect(findTable(TABLES, 'E08000019')?.id).toBe('sheffield');
  });
});

describe('speed', () => {
  it('prices at least 50,000 quotes a second on one core', () => {
    const ids = Object.values(CODE);
    const inputs = Array.from({ length: 500 }, (_, i) => ({
      ...baseInput(ids[i % ids.length] ?? null, new Date(Date.UTC(2025, 0, 1) + i * 86_400_000 * 2.13)),
      distanceMeters: (i * 97) % 40_000,
      slowSeconds: i % 400,
      passengers: 1 + (i % 4),
    }));
    const run = (n: number) => {
      const t0 = performance.now();
      for (let i = 0; i < n; i++) priceJourney(inputs[i % inputs.length] as FareInput);
      return (n / (performance.now() - t0)) * 1000;
    };
    run(5_000);
    const best = Math.max(run(20_000), run(20_000), run(20_000));
    expect(best).toBeGreaterThan(50_000);
  });
});
