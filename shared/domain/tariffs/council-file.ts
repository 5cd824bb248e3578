/**
 * convertCouncilFile: data/council-tariffs.json (the shared council file format, see
 * data/README.md upstream) to our TariffTable format (table.ts).
 *
 * Structured parts (day/time windows, date windows, "all day" holidays, flag falls, increments,
 * waiting, rate_equals naming another tariff) convert generically. Everything the source states
 * in prose is held back as "pending" and is used only where an explicit, reviewed translation
 * below consumes it; each translation quotes the exact words it translates and is applied only
 * while the source still says exactly that. Prose nobody translated goes into the table's gaps
 * and is not used; a figure the source lacks stays null (the engine never invents one).
 */
import type { FlagFall, IncrementBand, Surcharge, Tariff, TariffTable, Waiting, WhenRule } from './table.ts';
import { VEHICLE_SEATS, VEHICLE_TYPES, type VehicleType } from './types.ts';

type Obj = Record<string, unknown>;

/** Vehicle classes seating five or more passengers: the "larger vehicles" of council tables. */
const LARGE_VEHICLES: VehicleType[] = VEHICLE_TYPES.filter((v) => VEHICLE_SEATS[v] >= 5);
type Day = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';

const ALL_DAYS: Day[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
/** Priorities written into converted rules: festive dates > holidays > day/time windows > fallback. */
const P_DATES = 300;
const P_HOLIDAY = 200;
const P_WEEKLY = 100;
const P_ALWAYS = 0;

const YARD_M = 0.9144;
const MILE_M = 1609.344;
const ASSUMED_EFFECTIVE_FROM = '2000-01-01';
const ALL_DAY_TEXTS = new Set(['all day', '24 hours']);
/** Extras that a quote cannot know about (soiling, luggage, animals...): kept for reference, never charged. */
const REFERENCE_ONLY_EXTRAS = new Set([
  'soiling',
  'soiling_exterior',
  'luggage',
  'animal',
  'bulky_items',
  'wheelchair',
  'card_payment',
]);
const COMPLETENESS = ['full', 'full-core', 'partial', 'summary-only'] as const;

const KNOWN_AUTHORITY_KEYS = new Set([
  'id',
  'authority',
  'local_authority_codes',
  'former_local_authority_codes',
  'completeness',
  'effective_from',
  'as_of',
  'gaps',
  'meter_rules',
  'minimum_fare_pence',
  'tariffs',
  'surcharges',
  'extras',
  'sources',
  'published_examples',
  'published_examples_note',
]);
const KNOWN_TARIFF_KEYS = new Set([
  'id',
  'name',
  'applies',
  'excludes_public_holidays',
  'flag_fall',
  'increments',
  'waiting',
  'rate_equals',
  'multiplier',
  'note',
]);

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const pence = (v: unknown): number | null => (Number.isInteger(v) && (v as number) >= 0 ? (v as number) : null);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const HHMM = /^(?:(?:[01]\d|2[0-3]):[0-5]\d|24:00)$/;
const MMDDTHHMM = /^(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d$/;

/** Metres of a source distance `{value, unit, metres}`, recomputed exactly from yards or miles. */
function metresOf(d: unknown): number | null {
  if (!isObj(d)) return null;
  const value = num(d.value);
  if (value !== null && d.unit === 'yard') return value * YARD_M;
  if (value !== null && d.unit === 'mile') return value * MILE_M;
  if (value !== null && (d.unit === 'metre' || d.unit === 'm')) return value;
  return num(d.metres);
}

function statedOf(d: unknown): string | undefined {
  if (!isObj(d) || num(d.value) === null || str(d.unit) === null) return undefined;
  return `${d.value} ${d.unit}s`;
}

// Rule builders (the converted form written out in the translations below).
const weekly = (days: Day[], start: string, end: string, priority = P_WEEKLY): WhenRule => ({
  kind: 'weekly',
  days,
  start,
  end,
  priority,
});
const holiday = (
  holidays: 'bank' | 'public',
  start = '00:00',
  end = '24:00',
  exceptDates: string[] = [],
  priority = P_HOLIDAY,
): WhenRule => ({ kind: 'holiday', holidays, start, end, exceptDates, priority });
const dates = (from: string, to: string, priority = P_DATES): WhenRule => ({ kind: 'dates', from, to, priority });

type PendingKind = 'rule' | 'note' | 'info';

/** One authority being converted: the table so far, the prose not yet translated, and the raw source. */
class Draft {
  readonly pending = new Map<string, { prose: string; kind: PendingKind }>();
  constructor(
    readonly raw: Obj,
    readonly table: TariffTable,
  ) {}

  hold(path: string, prose: string, kind: PendingKind = 'rule'): void {
    this.pending.set(path, { prose, kind });
  }
  tariff(id: string): Tariff {
    const t = this.table.tariffs.find((x) => x.id === id);
    if (!t) throw new Error(`no tariff ${id}`);
    return t;
  }
  surcharge(id: string): Surcharge {
    const s = this.table.surcharges.find((x) => x.id === id);
    if (!s) throw new Error(`no surcharge ${id}`);
    return s;
  }
  rawTariff(id: string): Obj {
    const t = list(this.raw.tariffs).find((x) => isObj(x) && x.id === id);
    if (!isObj(t)) throw new Error(`no source tariff ${id}`);
    return t;
  }
  /** The n-th (0-based) source extra of a type. */
  rawExtra(type: string, n = 0): Obj {
    const e = list(this.raw.extras).filter((x) => isObj(x) && x.type === type)[n];
    if (!isObj(e)) throw new Error(`no source extra ${type}#${n}`);
    return e;
  }
  note(text: string): void {
    this.table.notes = [...(this.table.notes ?? []), text];
  }
}

interface Translation {
  /** The source text consumed, by path; applied only if every path is pending with exactly this text (null: any). */
  claims: ReadonlyArray<readonly [path: string, prose: string | null]>;
  apply(d: Draft): void;
}

const noop = () => {};

/**
 * The reviewed per-authority translations of the source's prose. Each claim quotes the exact
 * source text; the comment says how it is read.
 */
const TRANSLATIONS: Readonly<Record<string, readonly Translation[]>> = {
  'london-tfl': [
    {
      // "distance-based, after ~6 miles of a journey" with rate_equals T2, and meter_rules:
      // "Once a journey reaches approximately six miles a different rate applies (historically
      // 'Tariff 4'). From 20 April 2024 the over-six-miles rate equals the Tariff 2 rate."
      // Read as: beyond six miles every journey's distance is charged at Tariff 4 (= Tariff 2)
      // increments, whatever tariff the time of day chose. T4 is never chosen by time. The
      // threshold is stated as approximate: six miles is used, and that is recorded as a gap.
      claims: [
        ['tariffs.T4.applies', 'distance-based, after ~6 miles of a journey'],
        [
          'meter_rules.long_journey_rule',
          "Once a journey reaches approximately six miles a different rate applies (historically 'Tariff 4'). From 20 April 2024 the over-six-miles rate equals the Tariff 2 rate.",
        ],
      ],
      apply(d) {
        d.tariff('T4').when = [];
        d.table.longJourney = {
          afterMetres: 6 * MILE_M,
          tariffId: 'T4',
          description: 'Tariff 4: beyond about six miles the distance is charged at Tariff 4 (equal to Tariff 2) rates',
        };
        d.table.gaps.push('Tariff 4 starts after "approximately six miles": exactly six miles (9,656 m) is used.');
      },
    },
    {
      // "every night": the structured window (all days 22:00-05:00) already says so.
      claims: [['tariffs.T3.applies[0].note', 'every night']],
      apply: noop,
    },
    {
      // Time charging is how the engine treats slowSeconds; the units themselves are missing (null).
      claims: [
        [
          'meter_rules.time_charging',
          'Meter adds time-based charge when speed is low (historically below 10.4 mph); distance OR time increments, whichever reached first.',
        ],
      ],
      apply: (d) =>
        d.note('Time is charged for slow running (historically below 10.4 mph); the time units are not known.'),
    },
    {
      // Not a fare rule: kept as a note.
      claims: [
        [
          'meter_rules.compellable_distance',
          'Drivers must accept hirings up to 12 miles (20 miles if starting at Heathrow) or up to one hour, if the destination is in Greater London.',
        ],
      ],
      apply: (d) =>
        d.note('Compellable: hirings up to 12 miles (20 from Heathrow) or one hour, destination in Greater London.'),
    },
    {
      // The additional_passenger extra has no note; the luggage extra says: "No extra charges for
      // luggage, additional passengers or assistance dogs". Every passenger beyond the hirer: 0p.
      claims: [['extras.additional_passenger#0', '{"type":"additional_passenger","amount_pence":0}']],
      apply(d) {
        d.table.extras.additionalPassengers = {
          beyond: 1,
          amountPence: pence(d.rawExtra('additional_passenger').amount_pence),
          description: 'No extra charge for additional passengers',
        };
      },
    },
    {
      // "Telephone/app/online booked taxi extra of up to £2": a maximum, no fixed amount.
      claims: [
        [
          'extras.booking#0',
          'Telephone/app/online booked taxi extra of up to £2 (maximum £2.00 per 2023 TfL consultation)',
        ],
      ],
      apply(d) {
        const e = d.rawExtra('booking');
        d.table.extras.bookingFee = {
          amountPence: pence(e.amount_pence),
          maxAmountPence: pence(e.max_amount_pence),
          description: 'Booked taxi extra (telephone/app/online), up to the maximum',
        };
      },
    },
    {
      // "journeys starting from a Heathrow Airport taxi rank": pickups at an airport whose IATA is LHR.
      claims: [['extras.airport_heathrow_pickup#0', 'journeys starting from a Heathrow Airport taxi rank']],
      apply(d) {
        d.table.extras.placeCharges.push({
          code: 'airport_pickup',
          at: 'pickup',
          placeKind: 'airport',
          iata: ['LHR'],
          crs: [],
          amountPence: pence(d.rawExtra('airport_heathrow_pickup').amount_pence),
          description: 'Heathrow extra (journeys starting from a Heathrow Airport taxi rank)',
        });
      },
    },
    {
      // The Christmas/New Year £4 extra is "historical - ... current value not verified": the
      // windows are kept as a surcharge but the amount is treated as unknown (null), not used.
      claims: [
        [
          'extras.christmas_new_year#0',
          'historical - from an older (c. 2016/17) copy of the TfL page; current value not verified',
        ],
      ],
      apply(d) {
        const e = d.rawExtra('christmas_new_year');
        const when = list(e.applies).flatMap((w) =>
          isObj(w) && typeof w.from === 'string' && typeof w.to === 'string' ? [dates(w.from, w.to)] : [],
        );
        d.table.surcharges.push({
          id: 'christmas_new_year',
          name: 'Christmas and New Year extra',
          kind: 'flat',
          amountPence: null,
          multiplier: null,
          when,
          evaluatedAt: 'start',
          excludes: [],
          exceptDuringTariffs: [],
          note: `historical amount ${String(e.amount_pence)}p (c. 2016/17), not verified as current`,
        });
        d.table.gaps.push('Christmas/New Year extra: only a historical (c. 2016/17) amount is known; not used.');
      },
    },
  ],

  manchester: [
    {
      // "each passenger additional to hirer": every passenger beyond the first.
      claims: [['extras.additional_passenger#0', 'each passenger additional to hirer']],
      apply(d) {
        d.table.extras.additionalPassengers = {
          beyond: 1,
          amountPence: pence(d.rawExtra('additional_passenger').amount_pence),
          description: 'Each passenger additional to the hirer',
        };
      },
    },
    {
      // "journeys through Piccadilly Station taxi rank barrier": pickups at the station whose CRS
      // is MAN (Manchester Piccadilly). Charged only when the quote names the station's CRS.
      claims: [['extras.station_rank#0', 'journeys through Piccadilly Station taxi rank barrier']],
      apply(d) {
        d.table.extras.placeCharges.push({
          code: 'station_pickup',
          at: 'pickup',
          placeKind: 'station',
          iata: [],
          crs: ['MAN'],
          amountPence: pence(d.rawExtra('station_rank').amount_pence),
          description: 'Piccadilly Station taxi rank barrier charge',
        });
      },
    },
    {
      // "Manchester Airport: pick up at Airport Rail Link (barrier charge)": pickups at the
      // Manchester Airport railway station (CRS MIA; a station carrying the airport's IATA MAN).
      claims: [['extras.airport#0', 'Manchester Airport: pick up at Airport Rail Link (barrier charge)']],
      apply(d) {
        d.table.extras.placeCharges.push({
          code: 'station_pickup',
          at: 'pickup',
          placeKind: 'station',
          iata: ['MAN'],
          crs: ['MIA'],
          amountPence: pence(d.rawExtra('airport', 0).amount_pence),
          description: 'Manchester Airport barrier charge (pick-up at the Airport Rail Link)',
        });
      },
    },
    {
      // "Manchester Airport: drop off at any air terminal (barrier charge)": drop-offs at IATA MAN.
      claims: [['extras.airport#1', 'Manchester Airport: drop off at any air terminal (barrier charge)']],
      apply(d) {
        d.table.extras.placeCharges.push({
          code: 'airport_dropoff',
          at: 'dropoff',
          placeKind: 'airport',
          iata: ['MAN'],
          crs: [],
          amountPence: pence(d.rawExtra('airport', 1).amount_pence),
          description: 'Manchester Airport barrier charge (drop-off at an air terminal)',
        });
      },
    },
    {
      // "Manchester Airport: pick up at any air terminal (barrier charge)": pickups at IATA MAN.
      claims: [['extras.airport#2', 'Manchester Airport: pick up at any air terminal (barrier charge)']],
      apply(d) {
        d.table.extras.placeCharges.push({
          code: 'airport_pickup',
          at: 'pickup',
          placeKind: 'airport',
          iata: ['MAN'],
          crs: [],
          amountPence: pence(d.rawExtra('airport', 2).amount_pence),
          description: 'Manchester Airport barrier charge (pick-up at an air terminal)',
        });
      },
    },
    {
      claims: [['meter_rules.card_surcharge', 'None allowed']],
      apply: (d) => d.note('No card surcharge is allowed.'),
    },
  ],

  glasgow: [
    {
      // "additional charge for hires after 9pm and before 6am": the structured window (every day
      // 21:00-06:00) evaluated when the hire starts. The source does not say that the night and
      // Christmas/New Year surcharges exclude each other, so both are added when both apply.
      claims: [['surcharges.night.note', 'additional charge for hires after 9pm and before 6am']],
      apply: (d) => d.note('Night and Christmas/New Year surcharges are both added when both apply.'),
    },
  ],

  sheffield: [
    {
      // T3 "between 7pm and 7am on Fridays, Saturdays and Sundays": the listed days are the
      // evenings a window starts on (Fri 19:00-Sat 07:00, Sat-Sun, Sun 19:00-Mon 07:00). It
      // overlaps T2 (every night 19:00-07:00) and, being the weekend tariff, wins over it.
      claims: [['tariffs.T3.applies[0].note', "verbatim: 'between 7pm and 7am on Fridays, Saturdays and Sundays'"]],
      apply(d) {
        d.tariff('T3').when = [weekly(['fri', 'sat', 'sun'], '19:00', '07:00', P_WEEKLY + 50)];
      },
    },
    {
      // "any other official bank holiday, 07:00 to 07:00 the following day": from 07:00 on a bank
      // holiday to 07:00 the next day. "Other" than Christmas Day, Boxing Day and New Year's Day,
      // which the Christmas and New Year surcharges cover; a substitute day outside those
      // windows (e.g. 28 Dec 2026) is an official bank holiday and counts.
      claims: [
        ['surcharges.bank_holiday.applies', 'any other official bank holiday, 07:00 to 07:00 the following day'],
      ],
      apply(d) {
        d.surcharge('bank_holiday').when = [holiday('bank', '07:00', '07:00', ['12-25', '12-26', '01-01'])];
        d.surcharge('christmas').excludes.push('bank_holiday');
        d.surcharge('new_year').excludes.push('bank_holiday');
      },
    },
    {
      // Gap "Extra for carrying 5-8 passengers was truncated in the source copy.": parties of 5
      // or more owe an extra whose amount is unknown, so Sheffield cannot price them.
      claims: [['gaps#0', 'Extra for carrying 5-8 passengers was truncated in the source copy.']],
      apply(d) {
        d.table.extras.largeParty = {
          code: 'large_party',
          description: 'Extra for carrying 5-8 passengers (amount not known)',
          minPassengers: 5,
          vehicleTypes: [],
          effect: { kind: 'flat', amountPence: null },
        };
      },
    },
  ],

  'brighton-and-hove': [
    {
      // T1 "all hirings not covered by other tariffs": the fallback, lowest priority.
      claims: [['tariffs.T1.applies', 'all hirings not covered by other tariffs']],
      apply(d) {
        d.tariff('T1').when = [{ kind: 'always', priority: P_ALWAYS }];
      },
    },
    {
      // T2 bank holidays "all day, excluding Christmas/New Year periods": all day on a bank
      // holiday; the Christmas/New Year periods are T3 and T4, whose date windows outrank it.
      claims: [['tariffs.T2.applies[2]', 'all day, excluding Christmas/New Year periods']],
      apply(d) {
        d.tariff('T2').when.push(holiday('bank'));
      },
    },
    {
      // Gap "Tariffs 5-8 (larger-vehicle/5+ passenger tariffs) ... not captured": a larger vehicle
      // (one seating 5+ passengers) or a party of 5+ needs a tariff we do not have, so Brighton
      // cannot price it.
      claims: [['gaps#1', 'Tariffs 5-8 (larger-vehicle/5+ passenger tariffs) and extras (soiling etc.) not captured']],
      apply(d) {
        d.table.extras.largeParty = {
          code: 'large_vehicle',
          description: 'Tariffs 5-8 (larger vehicles, 5+ passengers): not known',
          minPassengers: 5,
          vehicleTypes: LARGE_VEHICLES,
          effect: { kind: 'use_tariff', map: [], otherwisePence: null },
        };
      },
    },
  ],

  cardiff: [
    {
      // "does not apply when the Christmas/New Year extra applies".
      claims: [
        [
          'surcharges.night_sunday_bank_holiday.note',
          'amount not captured; does not apply when the Christmas/New Year extra applies',
        ],
      ],
      apply(d) {
        d.surcharge('christmas_new_year').excludes.push('night_sunday_bank_holiday');
      },
    },
    {
      // "each passenger exceeding four".
      claims: [['extras.additional_passenger#0', 'each passenger exceeding four']],
      apply(d) {
        d.table.extras.additionalPassengers = {
          beyond: 4,
          amountPence: pence(d.rawExtra('additional_passenger').amount_pence),
          description: 'Each passenger exceeding four',
        };
      },
    },
  ],

  'south-gloucestershire': [
    {
      // "each hiring beginning or ending between 18:00 and 06:00".
      claims: [['surcharges.night.applies', 'each hiring beginning or ending between 18:00 and 06:00']],
      apply(d) {
        const s = d.surcharge('night');
        s.when = [weekly(ALL_DAYS, '18:00', '06:00')];
        s.evaluatedAt = 'start_or_end';
      },
    },
    {
      // "each hiring beginning or ending between 18:00 Friday and 06:00 Monday; night charge then
      // not payable": Fri 18:00-24:00, all Saturday and Sunday, Mon 00:00-06:00; excludes night.
      claims: [
        [
          'surcharges.weekend.applies',
          'each hiring beginning or ending between 18:00 Friday and 06:00 Monday; night charge then not payable',
        ],
      ],
      apply(d) {
        const s = d.surcharge('weekend');
        s.when = [
          weekly(['fri'], '18:00', '24:00'),
          weekly(['sat', 'sun'], '00:00', '24:00'),
          weekly(['mon'], '00:00', '06:00'),
        ];
        s.evaluatedAt = 'start_or_end';
        s.excludes = ['night'];
      },
    },
    {
      // "each hiring on a public holiday (excl. Christmas/New Year); night and weekend charges
      // then not payable": a hiring beginning or ending on a public holiday; the Christmas and
      // New Year surcharges exclude it (they cover those holidays); excludes night and weekend.
      claims: [
        [
          'surcharges.bank_holiday.applies',
          'each hiring on a public holiday (excl. Christmas/New Year); night and weekend charges then not payable',
        ],
      ],
      apply(d) {
        const s = d.surcharge('bank_holiday');
        s.when = [holiday('public')];
        s.evaluatedAt = 'start_or_end';
        s.excludes = ['night', 'weekend'];
      },
    },
    {
      // "each hiring beginning or ending between 18:00 24 Dec and 06:00 27 Dec; other surcharges not payable".
      claims: [
        [
          'surcharges.christmas.applies',
          'each hiring beginning or ending between 18:00 24 Dec and 06:00 27 Dec; other surcharges not payable',
        ],
      ],
      apply(d) {
        const s = d.surcharge('christmas');
        s.when = [dates('12-24T18:00', '12-27T06:00')];
        s.evaluatedAt = 'start_or_end';
        s.excludes = ['night', 'weekend', 'bank_holiday', 'new_year'];
      },
    },
    {
      // "each hiring beginning or ending between 18:00 31 Dec and 06:00 2 Jan; other surcharges not payable".
      claims: [
        [
          'surcharges.new_year.applies',
          'each hiring beginning or ending between 18:00 31 Dec and 06:00 2 Jan; other surcharges not payable',
        ],
      ],
      apply(d) {
        const s = d.surcharge('new_year');
        s.when = [dates('12-31T18:00', '01-02T06:00')];
        s.evaluatedAt = 'start_or_end';
        s.excludes = ['night', 'weekend', 'bank_holiday', 'christmas'];
      },
    },
    {
      // "each additional passenger after the first (children under 3 disregarded; two children
      // 3-10 count as one)": beyond the first. A quote does not know ages: every passenger counts.
      claims: [
        [
          'extras.additional_passenger#0',
          'each additional passenger after the first (children under 3 disregarded; two children 3-10 count as one)',
        ],
      ],
      apply(d) {
        d.table.extras.additionalPassengers = {
          beyond: 1,
          amountPence: pence(d.rawExtra('additional_passenger').amount_pence),
          description: 'Each additional passenger after the first',
        };
        d.table.gaps.push(
          'Additional passengers: the child rules (under 3 free, two aged 3-10 count as one) are not applied; quotes count every passenger.',
        );
      },
    },
  ],

  'newport-wales': [
    {
      // T3 "Bank holidays": applies "hirings commenced on bank holidays", rate_equals "T1 or T2 by
      // time of day", surcharge_pence 150. Read as: on a bank holiday the day/night tariff
      // applies as usual plus a flat surcharge for hirings that start on the holiday. The
      // Christmas/New Year tariff T4 is a tariff of its own, so the surcharge is not added then.
      claims: [
        ['tariffs.T3.applies[0]', 'hirings commenced on bank holidays'],
        ['tariffs.T3.rate_equals', 'T1 or T2 by time of day'],
        ['tariffs.T3.surcharge_pence', null],
      ],
      apply(d) {
        const raw = d.rawTariff('T3');
        d.table.tariffs = d.table.tariffs.filter((t) => t.id !== 'T3');
        d.table.surcharges.push({
          id: 'bank_holiday',
          name: 'Tariff 3 bank holiday surcharge (Tariff 1 or 2 by time of day)',
          kind: 'flat',
          amountPence: pence(raw.surcharge_pence),
          multiplier: null,
          when: [holiday('bank')],
          evaluatedAt: 'start',
          excludes: [],
          exceptDuringTariffs: ['T4'],
        });
      },
    },
    {
      // "verbatim 'between Midnight on 31 December and 6:00 on 2 January'": the structured
      // window 12-31T00:00 is the file's reading of "Midnight on 31 December"; kept as it is.
      claims: [['tariffs.T4.applies[1].note', "verbatim 'between Midnight on 31 December and 6:00 on 2 January'"]],
      apply: noop,
    },
    {
      // "each passenger in excess of four".
      claims: [['extras.additional_passenger#0', 'each passenger in excess of four']],
      apply(d) {
        d.table.extras.additionalPassengers = {
          beyond: 4,
          amountPence: pence(d.rawExtra('additional_passenger').amount_pence),
          description: 'Each passenger in excess of four',
        };
      },
    },
    {
      // "pre-booking fee via phone/computer device, maximum".
      claims: [['extras.booking#0', 'pre-booking fee via phone/computer device, maximum']],
      apply(d) {
        const e = d.rawExtra('booking');
        d.table.extras.bookingFee = {
          amountPence: pence(e.amount_pence),
          maxAmountPence: pence(e.max_amount_pence),
          description: 'Pre-booking fee via phone/computer device (maximum)',
        };
      },
    },
  ],

  'argyll-and-bute': [
    {
      // Waiting "amount_pence_per_minute": 40 with "charged pro rata per second" (stated on T1;
      // the same 40p-per-minute waiting line of the table applies to T2 and T3): 40p per 60 s, pro rata.
      claims: [
        ['tariffs.T1.waiting', '{"amount_pence_per_minute":40,"note":"charged pro rata per second"}'],
        ['tariffs.T2.waiting', '{"amount_pence_per_minute":40}'],
        ['tariffs.T3.waiting', '{"amount_pence_per_minute":40}'],
      ],
      apply(d) {
        for (const id of ['T1', 'T2', 'T3']) {
          const w = d.rawTariff(id).waiting;
          const t = d.tariff(id);
          if (t.rates.kind !== 'own' || !isObj(w)) throw new Error(`${id} has no own rates`);
          t.rates.waiting = {
            amountPence: pence(w.amount_pence_per_minute),
            perSeconds: 60,
            proRata: true,
            stated: 'per minute, charged pro rata per second',
          };
        }
      },
    },
    {
      // "taxi called by telephone": a fixed booking fee, charged only when the caller asks for it.
      claims: [['extras.booking#0', 'taxi called by telephone']],
      apply(d) {
        const e = d.rawExtra('booking');
        d.table.extras.bookingFee = {
          amountPence: pence(e.amount_pence),
          maxAmountPence: pence(e.max_amount_pence),
          description: 'Taxi called by telephone',
        };
      },
    },
    {
      // "Minibus (5+ passengers together at their request): where T1 applies charge T2; where T2
      // applies charge T3; where T3 applies add £1.15": for parties of 5 or more (who need a
      // 5+ seat vehicle), T1 becomes T2, T2 becomes T3, and under T3 the amount_pence is added.
      claims: [
        [
          'extras.large_vehicle#0',
          'Minibus (5+ passengers together at their request): where T1 applies charge T2; where T2 applies charge T3; where T3 applies add £1.15',
        ],
      ],
      apply(d) {
        d.table.extras.largeParty = {
          code: 'large_vehicle',
          description: 'Minibus, 5+ passengers together',
          minPassengers: 5,
          vehicleTypes: [],
          effect: {
            kind: 'use_tariff',
            map: [
              { from: 'T1', to: 'T2' },
              { from: 'T2', to: 'T3' },
            ],
            otherwisePence: pence(d.rawExtra('large_vehicle').amount_pence),
          },
        };
      },
    },
  ],

  'bracknell-forest': [
    {
      // NIGHT "except Christmas Day night": the CHRISTMAS tariff (25 Dec 00:00 to 26 Dec 07:00)
      // is a date window, which outranks the nightly window, so nothing more is needed.
      claims: [['tariffs.NIGHT.applies[0].note', 'except Christmas Day night']],
      apply: noop,
    },
    {
      // "more than 4 passengers: surcharge of 50% of the meter fare": 5+ passengers, meter x 1.5.
      claims: [['extras.large_party#0', 'more than 4 passengers: surcharge of 50% of the meter fare']],
      apply(d) {
        d.table.extras.largeParty = {
          code: 'large_party',
          description: 'More than 4 passengers: 50% of the meter fare',
          minPassengers: 5,
          vehicleTypes: [],
          effect: { kind: 'multiplier', multiplier: num(d.rawExtra('large_party').multiplier) },
        };
      },
    },
  ],

  nottingham: [
    {
      // "fare and a half": the multiplier 1.5 applies to the meter fare.
      claims: [['surcharges.christmas_new_year.note', 'fare and a half']],
      apply: noop,
    },
    {
      // "statutory bank holidays outside the above periods": all day on a bank holiday, and the
      // Christmas/New Year surcharge (the "above periods") excludes it.
      claims: [
        ['surcharges.bank_holiday.applies', 'statutory bank holidays outside the above periods'],
        ['surcharges.bank_holiday.note', 'fare and a half'],
      ],
      apply(d) {
        d.surcharge('bank_holiday').when = [holiday('bank')];
        d.surcharge('christmas_new_year').excludes.push('bank_holiday');
      },
    },
  ],
};

function convertWhen(entry: unknown, path: string, d: Draft): WhenRule | null {
  if (!isObj(entry)) {
    d.hold(path, JSON.stringify(entry));
    return null;
  }
  const note = str(entry.note);
  if (note !== null) d.hold(`${path}.note`, note, 'note');
  const withNote = (r: WhenRule): WhenRule => (note === null ? r : { ...r, note });
  const start = str(entry.start);
  const end = str(entry.end);
  if (Array.isArray(entry.days) && start !== null && end !== null && HHMM.test(start) && HHMM.test(end)) {
    const days = entry.days.filter((x): x is Day => ALL_DAYS.includes(x as Day));
    if (days.length === entry.days.length && days.length > 0) return withNote(weekly(days, start, end));
  }
  const from = str(entry.from);
  const to = str(entry.to);
  if (from !== null && to !== null && MMDDTHHMM.test(from) && MMDDTHHMM.test(to)) return withNote(dates(from, to));
  for (const key of ['bank_holidays', 'public_holidays'] as const) {
    const text = str(entry[key]);
    if (text === null) continue;
    if (ALL_DAY_TEXTS.has(text)) return withNote(holiday(key === 'bank_holidays' ? 'bank' : 'public'));
    d.hold(path, text);
    return null;
  }
  if (entry.sundays === 'all day') return withNote(weekly(['sun'], '00:00', '24:00'));
  d.hold(path, JSON.stringify(entry));
  return null;
}

function convertWhenList(applies: unknown, path: string, d: Draft): WhenRule[] {
  if (typeof applies === 'string') {
    d.hold(path, applies);
    return [];
  }
  const out: WhenRule[] = [];
  list(applies).forEach((entry, i) => {
    const r = convertWhen(entry, `${path}[${i}]`, d);
    if (r) out.push(r);
  });
  return out;
}

function convertFlagFall(v: unknown): FlagFall | null {
  if (!isObj(v)) return null;
  const coversMetres = metresOf(v.covers) ?? num(v.covers_metres_stated);
  const stated = [statedOf(v.covers), num(v.covers_seconds) !== null ? `${v.covers_seconds} seconds` : undefined]
    .filter(Boolean)
    .join(' or ');
  return {
    amountPence: pence(v.amount_pence),
    coversMetres,
    coversSeconds: num(v.covers_seconds),
    ...(stated ? { stated } : {}),
  };
}

function convertIncrements(v: unknown): IncrementBand[] | null {
  if (!Array.isArray(v)) return null;
  return v.map((b): IncrementBand => {
    const o = isObj(b) ? b : {};
    const stated = statedOf(o.per_distance);
    return {
      amountPence: pence(o.amount_pence),
      perMetres: metresOf(o.per_distance),
      perSeconds: num(o.or_per_seconds),
      fromMetres: metresOf(o.after),
      untilMetres: metresOf(o.until),
      ...(stated
        ? { stated: num(o.or_per_seconds) !== null ? `${stated} or ${o.or_per_seconds} seconds` : stated }
        : {}),
    };
  });
}

function convertWaiting(v: unknown, path: string, d: Draft): Waiting | null {
  if (!isObj(v)) return null;
  const perSeconds = num(v.per_seconds);
  if ('amount_pence' in v && perSeconds !== null && perSeconds > 0) {
    const note = str(v.note);
    return { amountPence: pence(v.amount_pence), perSeconds, proRata: false, ...(note ? { stated: note } : {}) };
  }
  d.hold(path, JSON.stringify(v));
  return null;
}

function convertTariff(raw: Obj, index: number, ids: ReadonlySet<string>, d: Draft): Tariff {
  const id = str(raw.id) ?? `T${index + 1}`;
  const path = `tariffs.${id}`;
  for (const key of Object.keys(raw)) {
    if (!KNOWN_TARIFF_KEYS.has(key)) d.hold(`${path}.${key}`, JSON.stringify(raw[key]));
  }
  const when = convertWhenList(raw.applies, `${path}.applies`, d);
  const rateEquals = str(raw.rate_equals);
  let rates: Tariff['rates'];
  if (rateEquals !== null && ids.has(rateEquals) && rateEquals !== id) {
    rates = { kind: 'same_as', tariffId: rateEquals };
  } else {
    if (rateEquals !== null) d.hold(`${path}.rate_equals`, rateEquals);
    rates = {
      kind: 'own',
      flagFall: convertFlagFall(raw.flag_fall),
      increments: convertIncrements(raw.increments),
      waiting: convertWaiting(raw.waiting, `${path}.waiting`, d),
    };
  }
  const note = str(raw.note);
  return {
    id,
    name: str(raw.name) ?? id,
    when,
    excludesPublicHolidays: raw.excludes_public_holidays === true,
    rates,
    multiplier: num(raw.multiplier) ?? 1,
    ...(note ? { note } : {}),
  };
}

function convertSurcharge(raw: Obj, index: number, d: Draft): Surcharge {
  const id = str(raw.type) ?? `surcharge_${index + 1}`;
  const path = `surcharges.${id}`;
  const note = str(raw.note);
  if (note !== null) d.hold(`${path}.note`, note);
  const isMultiplier = 'multiplier' in raw;
  return {
    id,
    name: id.replace(/_/g, ' '),
    kind: isMultiplier ? 'multiplier' : 'flat',
    amountPence: pence(raw.amount_pence),
    multiplier: num(raw.multiplier),
    when: convertWhenList(raw.applies, `${path}.applies`, d),
    evaluatedAt: 'start',
    excludes: [],
    exceptDuringTariffs: [],
    ...(note ? { note } : {}),
  };
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const pad = (n: number) => String(n).padStart(2, '0');

/**
 * The first date written in an as-of text (earliest in the text; at the same place the most
 * precise): YYYY-MM-DD, "12 March 2018", "August 2025", "2022-04", "2022". Month-only or
 * year-only dates become the first day of that month or year.
 */
export function dateFromAsOf(text: string): string | null {
  const month = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\\.?';
  const found: Array<{ index: number; precision: number; date: string }> = [];
  const scan = (re: RegExp, precision: number, toDate: (m: RegExpExecArray) => string | null) => {
    for (const m of text.matchAll(re)) {
      const date = toDate(m);
      if (date !== null) found.push({ index: m.index ?? 0, precision, date });
    }
  };
  const valid = (y: number, mo: number, day: number) => {
    const dt = new Date(Date.UTC(y, mo - 1, day));
    return dt.getUTCFullYear() === y && dt.getUTCMonth() === mo - 1 && dt.getUTCDate() === day;
  };
  scan(/\b(\d{4})-(\d{2})-(\d{2})\b/g, 4, (m) =>
    valid(Number(m[1]), Number(m[2]), Number(m[3])) ? `${m[1]}-${m[2]}-${m[3]}` : null,
  );
  scan(new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)? ${month} (\\d{4})\\b`, 'gi'), 3, (m) => {
    const mo = MONTHS.indexOf(String(m[2]).toLowerCase()) + 1;
    const y = Number(m[3]);
    const day = Number(m[1]);
    return valid(y, mo, day) ? `${y}-${pad(mo)}-${pad(day)}` : null;
  });
  scan(new RegExp(`\\b${month} (\\d{4})\\b`, 'gi'), 2, (m) => {
    const mo = MONTHS.indexOf(String(m[1]).toLowerCase()) + 1;
    return `${m[2]}-${pad(mo)}-01`;
  });
  scan(/\b(\d{4})-(0[1-9]|1[0-2])\b/g, 2, (m) => `${m[1]}-${m[2]}-01`);
  scan(/\b((?:19|20)\d{2})\b/g, 1, (m) => `${m[1]}-01-01`);
  found.sort((a, b) => a.index - b.index || b.precision - a.precision);
  return found[0]?.date ?? null;
}

function effectiveDate(raw: Obj, gaps: string[]): Pick<TariffTable, 'effectiveFrom' | 'effectiveFromBasis'> {
  const stated = str(raw.effective_from);
  if (stated !== null && /^\d{4}-\d{2}-\d{2}$/.test(stated))
    return { effectiveFrom: stated, effectiveFromBasis: 'stated' };
  const asOf = str(raw.as_of) ?? '';
  // An "undated" snapshot names other tables' years, not its own date.
  const parsed = /\bundated\b/i.test(asOf) ? null : dateFromAsOf(asOf);
  if (parsed !== null) {
    gaps.push(`Effective date not stated: ${parsed} is read from the as-of text "${asOf}".`);
    return { effectiveFrom: parsed, effectiveFromBasis: 'as_of' };
  }
  gaps.push(`Effective date not known (as of: "${asOf}"): ${ASSUMED_EFFECTIVE_FROM} is assumed.`);
  return { effectiveFrom: ASSUMED_EFFECTIVE_FROM, effectiveFromBasis: 'assumed' };
}

function convertAuthority(raw: Obj, index: number): TariffTable {
  const id = str(raw.id) ?? `authority-${index + 1}`;
  const gaps = list(raw.gaps).filter((g): g is string => typeof g === 'string');
  const completenessRaw = str(raw.completeness);
  const completeness = COMPLETENESS.find((c) => c === completenessRaw) ?? 'partial';
  if (completeness !== completenessRaw) gaps.push(`Completeness "${String(completenessRaw)}" read as partial.`);
  const codes = [...list(raw.local_authority_codes), ...list(raw.former_local_authority_codes)].filter(
    (c): c is string => typeof c === 'string' && /^[ENSW]\d{8}$/.test(c),
  );
  const table: TariffTable = {
    id,
    authority: str(raw.authority) ?? id,
    localAuthorityCodes: [...new Set(codes)],
    ...effectiveDate(raw, gaps),
    asOf: str(raw.as_of) ?? str(raw.effective_from) ?? '',
    completeness,
    gaps,
    sources: list(raw.sources).flatMap((s) =>
      isObj(s) && typeof s.url === 'string' ? [{ url: s.url, usedFor: str(s.used_for) ?? '' }] : [],
    ),
    minimumFarePence: pence(raw.minimum_fare_pence),
    tariffs: [],
    surcharges: [],
    extras: { additionalPassengers: null, largeParty: null, placeCharges: [], bookingFee: null, other: [] },
    longJourney: null,
    notes: [],
  };
  const d = new Draft(raw, table);
  gaps.forEach((g, i) => {
    d.hold(`gaps#${i}`, g, 'info');
  });
  for (const key of Object.keys(raw)) {
    if (!KNOWN_AUTHORITY_KEYS.has(key)) d.hold(key, JSON.stringify(raw[key]));
  }

  const rawTariffs = list(raw.tariffs).filter(isObj);
  const ids = new Set(rawTariffs.map((t, i) => str(t.id) ?? `T${i + 1}`));
  table.tariffs = rawTariffs.map((t, i) => convertTariff(t, i, ids, d));
  table.surcharges = list(raw.surcharges)
    .filter(isObj)
    .map((s, i) => convertSurcharge(s, i, d));

  const seen = new Map<string, number>();
  for (const e of list(raw.extras).filter(isObj)) {
    const type = str(e.type) ?? 'unknown';
    const n = seen.get(type) ?? 0;
    seen.set(type, n + 1);
    if (REFERENCE_ONLY_EXTRAS.has(type)) {
      const note = [str(e.note), str(e.status), str(e.as_of) ? `as of ${e.as_of}` : null].filter(Boolean).join('; ');
      table.extras.other.push({
        type,
        amountPence: pence(e.amount_pence),
        maxAmountPence: pence(e.max_amount_pence),
        note,
      });
    } else {
      d.hold(`extras.${type}#${n}`, str(e.applies) ?? str(e.note) ?? str(e.status) ?? JSON.stringify(e));
    }
  }
  if (isObj(raw.meter_rules)) {
    for (const [key, value] of Object.entries(raw.meter_rules)) d.hold(`meter_rules.${key}`, String(value));
  }
  if (Array.isArray(raw.published_examples)) {
    const examples = raw.published_examples
      .filter(isObj)
      .map((e) => `${e.miles} mi: day ${e.day_pence}p, night ${e.night_pence}p`)
      .join('; ');
    d.note(`Published example fares: ${examples}. ${str(raw.published_examples_note) ?? ''}`.trim());
  }

  for (const t of TRANSLATIONS[id] ?? []) {
    const stale = t.claims.filter(([path, prose]) => {
      const p = d.pending.get(path);
      return p === undefined || (prose !== null && p.prose !== prose);
    });
    if (stale.length > 0) {
      gaps.push(
        `Translation not applied, the source no longer says: ${stale.map(([p, prose]) => `${p} "${prose ?? '*'}"`).join('; ')}.`,
      );
      continue;
    }
    try {
      t.apply(d);
      for (const [path] of t.claims) d.pending.delete(path);
    } catch (err) {
      gaps.push(`Translation of ${t.claims.map(([p]) => p).join(', ')} failed: ${(err as Error).message}.`);
    }
  }

  for (const [path, { prose, kind }] of d.pending) {
    if (kind === 'rule') gaps.push(`Not translated, not used: ${path}: "${prose}".`);
    else if (kind === 'note')
      gaps.push(`Note not reviewed (the structured rule is used as stated): ${path}: "${prose}".`);
  }
  // A surcharge whose conditions were not translated cannot be applied.
  table.surcharges = table.surcharges.filter((s) => s.when.length > 0);
  return table;
}

/** Convert the council file format (`{authorities: [...]}`) to tariff tables. Throws on a malformed file. */
export function convertCouncilFile(json: unknown): TariffTable[] {
  if (!isObj(json) || !Array.isArray(json.authorities)) {
    throw new TypeError('council tariff file: expected an object with an "authorities" array');
  }
  return json.authorities.map((a, i) => {
    if (!isObj(a)) throw new TypeError(`council tariff file: authorities[${i}] is not an object`);
    return convertAuthority(a, i);
  });
}
