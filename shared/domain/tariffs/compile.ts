/**
 * A tariff table preprocessed for the engine: times as minutes, day sets as bit masks, rate_equals
 * chains resolved, the long-journey rate spliced into the bands. Compiled once per table object
 * (a WeakMap keyed by the table), so pricing a quote does no parsing.
 */
import type { HolidayOnDay } from './holidays.ts';
import type {
  FlagFall,
  IncrementBand,
  LargePartyRule,
  PlaceCharge,
  TableExtras,
  Tariff,
  TariffTable,
  Waiting,
  WhenRule,
} from './table.ts';

const DAY_INDEX: Readonly<Record<string, number>> = { mon: 0, tue: 1, wed: 2, thu: 3, fri: 4, sat: 5, sun: 6 };
const DEFAULT_PRIORITY = { dates: 300, holiday: 200, weekly: 100, always: 0 } as const;

/** The local time a rule is tested against. */
export interface Moment {
  /** 0 = Monday ... 6 = Sunday. */
  weekday: number;
  /** Minutes since local midnight. */
  minutes: number;
  /** (month * 32 + day) * 1440 + minutes: orders times within a year, for MM-DDTHH:MM windows. */
  yearKey: number;
  /** The bank holiday observed today / yesterday in the pickup's nation. */
  today: HolidayOnDay | undefined;
  yesterday: HolidayOnDay | undefined;
}

export type CompiledRule =
  | { kind: 'weekly'; priority: number; mask: number; start: number; end: number; crosses: boolean }
  | { kind: 'holiday'; priority: number; start: number; end: number; crosses: boolean; except: readonly string[] }
  | { kind: 'dates'; priority: number; from: number; to: number }
  | { kind: 'always'; priority: number };

export interface CompiledBand {
  pence: number | null;
  per: number | null;
  /** Absolute start in metres; null: where the flag fall ends. */
  from: number | null;
  until: number;
  text: string;
}

export interface CompiledRates {
  flagPence: number | null;
  flagMetres: number | null;
  flagSeconds: number | null;
  flagText: string;
  /** null: the source has no increments. */
  bands: CompiledBand[] | null;
  time: { pence: number | null; perSeconds: number; proRata: boolean; text: string } | null;
}

export interface CompiledTariff {
  id: string;
  /** "T2 Night and Bank Holidays", "Night". */
  label: string;
  rules: CompiledRule[];
  excludesPublicHolidays: boolean;
  /** The figures charged (after rate_equals), or null when a reference cannot be resolved. */
  rates: CompiledRates | null;
  /** Label of the tariff whose figures are used (itself, or the rate_equals target). */
  ratesFrom: string;
  /** Product of the multipliers along the rate_equals chain. */
  multiplier: number;
  problem: string | null;
}

export interface CompiledSurcharge {
  id: string;
  name: string;
  kind: 'flat' | 'multiplier';
  amountPence: number | null;
  multiplier: number | null;
  rules: CompiledRule[];
  startOrEnd: boolean;
  excludes: readonly string[];
  exceptDuringTariffs: readonly string[];
}

export interface CompiledTable {
  table: TariffTable;
  codes: ReadonlySet<string>;
  tariffs: CompiledTariff[];
  byId: ReadonlyMap<string, CompiledTariff>;
  surcharges: CompiledSurcharge[];
  needsEnd: boolean;
  additionalPassengers: TableExtras['additionalPassengers'];
  largeParty: LargePartyRule | null;
  placeCharges: readonly PlaceCharge[];
  bookingFee: TableExtras['bookingFee'];
  minimumPence: number | null;
  /** tariffSource.asOf: the stated effective date, else the table's as-of text. */
  asOf: string;
}

export function minutesOf(hhmm: string): number {
  return Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
}

export function yearKey(month: number, day: number, minutes: number): number {
  return (month * 32 + day) * 1440 + minutes;
}

function monthDayTimeKey(s: string): number {
  return yearKey(Number(s.slice(0, 2)), Number(s.slice(3, 5)), minutesOf(s.slice(6, 11)));
}

export function compileRule(r: WhenRule): CompiledRule {
  const priority = r.priority ?? DEFAULT_PRIORITY[r.kind];
  switch (r.kind) {
    case 'weekly': {
      const start = minutesOf(r.start);
      const end = minutesOf(r.end);
      const mask = r.days.reduce((m, d) => m | (1 << (DAY_INDEX[d] ?? 0)), 0);
      return { kind: 'weekly', priority, mask, start, end, crosses: end <= start };
    }
    case 'holiday': {
      const start = minutesOf(r.start);
      const end = minutesOf(r.end);
      return { kind: 'holiday', priority, start, end, crosses: end <= start, except: r.exceptDates };
    }
    case 'dates':
      return { kind: 'dates', priority, from: monthDayTimeKey(r.from), to: monthDayTimeKey(r.to) };
    case 'always':
      return { kind: 'always', priority };
  }
}

export function ruleMatches(r: CompiledRule, m: Moment): boolean {
  switch (r.kind) {
    case 'weekly': {
      const today = (r.mask >> m.weekday) & 1;
      if (!r.crosses) return today === 1 && m.minutes >= r.start && m.minutes < r.end;
      const yesterday = (r.mask >> ((m.weekday + 6) % 7)) & 1;
      return (today === 1 && m.minutes >= r.start) || (yesterday === 1 && m.minutes < r.end);
    }
    case 'holiday': {
      const today = m.today !== undefined && !r.except.includes(m.today.monthDay);
      if (!r.crosses) return today && m.minutes >= r.start && m.minutes < r.end;
      const yesterday = m.yesterday !== undefined && !r.except.includes(m.yesterday.monthDay);
      return (today && m.minutes >= r.start) || (yesterday && m.minutes < r.end);
    }
    case 'dates':
      return r.from <= r.to ? m.yearKey >= r.from && m.yearKey < r.to : m.yearKey >= r.from || m.yearKey < r.to;
    case 'always':
      return true;
  }
}

/** The highest priority among a list of rules matching a moment, or -Infinity. */
export function bestMatch(rules: readonly CompiledRule[], m: Moment): number {
  let best = Number.NEGATIVE_INFINITY;
  for (const r of rules) if (r.priority > best && ruleMatches(r, m)) best = r.priority;
  return best;
}

export function tariffLabel(t: Pick<Tariff, 'id' | 'name'>): string {
  if (/^T\d+$/.test(t.id) && !/^Tariff \d/i.test(t.name) && !t.name.startsWith(t.id)) return `${t.id} ${t.name}`;
  return t.name;
}

const fmtMetres = (m: number) => `${Math.round(m * 100) / 100} m`;

function compileFlag(f: FlagFall | null): Pick<CompiledRates, 'flagPence' | 'flagMetres' | 'flagSeconds' | 'flagText'> {
  return {
    flagPence: f?.amountPence ?? null,
    flagMetres: f?.coversMetres ?? null,
    flagSeconds: f?.coversSeconds ?? null,
    flagText: f?.stated ?? (f?.coversMetres != null ? fmtMetres(f.coversMetres) : 'distance not stated'),
  };
}

function compileBands(bands: readonly IncrementBand[] | null): CompiledBand[] | null {
  if (bands === null) return null;
  return bands.map((b) => ({
    pence: b.amountPence,
    per: b.perMetres,
    from: b.fromMetres,
    until: b.untilMetres ?? Number.POSITIVE_INFINITY,
    text: b.stated ?? (b.perMetres != null ? fmtMetres(b.perMetres) : 'distance not stated'),
  }));
}

function compileTime(w: Waiting | null, bands: readonly IncrementBand[] | null): CompiledRates['time'] {
  if (w) return { pence: w.amountPence, perSeconds: w.perSeconds, proRata: w.proRata, text: w.stated ?? '' };
  const timed = bands?.find((b) => b.perSeconds != null);
  if (timed?.perSeconds != null)
    return { pence: timed.amountPence, perSeconds: timed.perSeconds, proRata: false, text: '' };
  return null;
}

function resolve(
  table: TariffTable,
  t: Tariff,
  seen: Set<string>,
): { rates: CompiledRates | null; ratesFrom: string; multiplier: number; problem: string | null } {
  if (t.rates.kind === 'own') {
    const own = t.rates;
    return {
      rates: {
        ...compileFlag(own.flagFall),
        bands: compileBands(own.increments),
        time: compileTime(own.waiting, own.increments),
      },
      ratesFrom: tariffLabel(t),
      multiplier: t.multiplier,
      problem: null,
    };
  }
  const targetId = t.rates.tariffId;
  const target = table.tariffs.find((x) => x.id === targetId);
  if (!target || seen.has(targetId)) {
    return {
      rates: null,
      ratesFrom: targetId,
      multiplier: t.multiplier,
      problem: target ? `rate_equals loop at ${targetId}` : `rates of unknown tariff ${targetId}`,
    };
  }
  seen.add(targetId);
  const inner = resolve(table, target, seen);
  return { ...inner, multiplier: inner.multiplier * t.multiplier };
}

/** Splice the long-journey tariff's bands in beyond afterMetres. */
function spliceLongJourney(
  rates: CompiledRates,
  long: CompiledRates | null,
  after: number,
  label: string,
): CompiledRates {
  const own = (rates.bands ?? [])
    .filter((b) => (b.from ?? 0) < after)
    .map((b) => ({ ...b, until: Math.min(b.until, after) }));
  const tail: CompiledBand[] = long?.bands?.map((b) => ({
    ...b,
    from: Math.max(b.from ?? after, after),
    text: `${b.text} (${label})`,
  })) ?? [
    // The long-journey tariff has no increments: its rate is unknown beyond `after`.
    { pence: null, per: null, from: after, until: Number.POSITIVE_INFINITY, text: label },
  ];
  return { ...rates, bands: rates.bands === null ? null : [...own, ...tail] };
}

export function compileTable(table: TariffTable): CompiledTable {
  const tariffs = table.tariffs.map((t): CompiledTariff => {
    const r = resolve(table, t, new Set([t.id]));
    return {
      id: t.id,
      label: tariffLabel(t),
      rules: t.when.map(compileRule),
      excludesPublicHolidays: t.excludesPublicHolidays,
      rates: r.rates,
      ratesFrom: r.ratesFrom,
      multiplier: r.multiplier,
      problem: r.problem,
    };
  });
  const long = table.longJourney;
  if (long) {
    const target = table.tariffs.find((t) => t.id === long.tariffId);
    const longRates = target ? resolve(table, target, new Set([target.id])).rates : null;
    for (const t of tariffs) {
      if (t.rates && t.id !== long.tariffId)
        t.rates = spliceLongJourney(t.rates, longRates, long.afterMetres, long.description);
    }
  }
  const surcharges = table.surcharges.map(
    (s): CompiledSurcharge => ({
      id: s.id,
      name: s.name,
      kind: s.kind,
      amountPence: s.amountPence,
      multiplier: s.multiplier,
      rules: s.when.map(compileRule),
      startOrEnd: s.evaluatedAt === 'start_or_end',
      excludes: s.excludes,
      exceptDuringTariffs: s.exceptDuringTariffs,
    }),
  );
  return {
    table,
    codes: new Set(table.localAuthorityCodes),
    tariffs,
    byId: new Map(tariffs.map((t) => [t.id, t])),
    surcharges,
    needsEnd: surcharges.some((s) => s.startOrEnd),
    additionalPassengers: table.extras.additionalPassengers,
    largeParty: table.extras.largeParty,
    placeCharges: table.extras.placeCharges,
    bookingFee: table.extras.bookingFee,
    minimumPence: table.minimumFarePence ?? null,
    asOf: (table.effectiveFromBasis ?? 'stated') === 'stated' ? table.effectiveFrom : table.asOf,
  };
}

const compiled = new WeakMap<TariffTable, CompiledTable>();

/** The compiled form of a table, built on first use and kept while the table object lives. */
export function compiledTable(table: TariffTable): CompiledTable {
  let c = compiled.get(table);
  if (!c) {
    c = compileTable(table);
    compiled.set(table, c);
  }
  return c;
}
