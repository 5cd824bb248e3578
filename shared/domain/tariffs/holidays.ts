/**
 * UK bank and public holidays, 2025 to 2027, as a static table: no I/O, no clock.
 *
 * Source: https://www.gov.uk/bank-holidays (the GOV.UK list, also published as
 * https://www.gov.uk/bank-holidays.json), one list per nation. Substitute days are included
 * where the holiday falls on a weekend (e.g. 2026-12-28 "Boxing Day (substitute day)",
 * 2027-01-04 "2nd January (substitute day)" in Scotland). Scotland has 2 January, the first
 * Monday of August (not the last) and St Andrew's Day (30 November, or its substitute), and no
 * Easter Monday. Northern Ireland adds St Patrick's Day and the Battle of the Boyne.
 * Christmas Day and Good Friday are common-law holidays rather than bank holidays in England
 * and Wales; GOV.UK lists them with the bank holidays, and so do we: a council rule for "bank
 * holidays" or "public holidays" matches every date in its nation's list.
 *
 * Outside 2025-2027 nothing is known: callers must say so (the engine adds a warning).
 */

export const HOLIDAY_NATIONS = ['england-and-wales', 'scotland', 'northern-ireland'] as const;
export type Nation = (typeof HOLIDAY_NATIONS)[number];

export const HOLIDAY_YEARS = { first: 2025, last: 2027 } as const;

export interface BankHoliday {
  /** YYYY-MM-DD, the day the holiday is observed (a substitute day where there is one). */
  date: string;
  name: string;
}

const h = (date: string, name: string): BankHoliday => ({ date, name });

export const BANK_HOLIDAYS: Readonly<Record<Nation, readonly BankHoliday[]>> = {
  'england-and-wales': [
    h('2025-01-01', "New Year's Day"),
    h('2025-04-18', 'Good Friday'),
    h('2025-04-21', 'Easter Monday'),
    h('2025-05-05', 'Early May bank holiday'),
    h('2025-05-26', 'Spring bank holiday'),
    h('2025-08-25', 'Summer bank holiday'),
    h('2025-12-25', 'Christmas Day'),
    h('2025-12-26', 'Boxing Day'),
    h('2026-01-01', "New Year's Day"),
    h('2026-04-03', 'Good Friday'),
    h('2026-04-06', 'Easter Monday'),
    h('2026-05-04', 'Early May bank holiday'),
    h('2026-05-25', 'Spring bank holiday'),
    h('2026-08-31', 'Summer bank holiday'),
    h('2026-12-25', 'Christmas Day'),
    h('2026-12-28', 'Boxing Day (substitute day)'),
    h('2027-01-01', "New Year's Day"),
    h('2027-03-26', 'Good Friday'),
    h('2027-03-29', 'Easter Monday'),
    h('2027-05-03', 'Early May bank holiday'),
    h('2027-05-31', 'Spring bank holiday'),
    h('2027-08-30', 'Summer bank holiday'),
    h('2027-12-27', 'Christmas Day (substitute day)'),
    h('2027-12-28', 'Boxing Day (substitute day)'),
  ],
  scotland: [
    h('2025-01-01', "New Year's Day"),
    h('2025-01-02', '2nd January'),
    h('2025-04-18', 'Good Friday'),
    h('2025-05-05', 'Early May bank holiday'),
    h('2025-05-26', 'Spring bank holiday'),
    h('2025-08-04', 'Summer bank holiday'),
    h('2025-12-01', "St Andrew's Day (substitute day)"),
    h('2025-12-25', 'Christmas Day'),
    h('2025-12-26', 'Boxing Day'),
    h('2026-01-01', "New Year's Day"),
    h('2026-01-02', '2nd January'),
    h('2026-04-03', 'Good Friday'),
    h('2026-05-04', 'Early May bank holiday'),
    h('2026-05-25', 'Spring bank holiday'),
    h('2026-08-03', 'Summer bank holiday'),
    h('2026-11-30', "St Andrew's Day"),
    h('2026-12-25', 'Christmas Day'),
    h('2026-12-28', 'Boxing Day (substitute day)'),
    h('2027-01-01', "New Year's Day"),
    h('2027-01-04', '2nd January (substitute day)'),
    h('2027-03-26', 'Good Friday'),
    h('2027-05-03', 'Early May bank holiday'),
    h('2027-05-31', 'Spring bank holiday'),
    h('2027-08-02', 'Summer bank holiday'),
    h('2027-11-30', "St Andrew's Day"),
    h('2027-12-27', 'Christmas Day (substitute day)'),
    h('2027-12-28', 'Boxing Day (substitute day)'),
  ],
  'northern-ireland': [
    h('2025-01-01', "New Year's Day"),
    h('2025-03-17', "St Patrick's Day"),
    h('2025-04-18', 'Good Friday'),
    h('2025-04-21', 'Easter Monday'),
    h('2025-05-05', 'Early May bank holiday'),
    h('2025-05-26', 'Spring bank holiday'),
    h('2025-07-14', 'Battle of the Boyne (Orangemen\u2019s Day) (substitute day)'),
    h('2025-08-25', 'Summer bank holiday'),
    h('2025-12-25', 'Christmas Day'),
    h('2025-12-26', 'Boxing Day'),
    h('2026-01-01', "New Year's Day"),
    h('2026-03-17', "St Patrick's Day"),
    h('2026-04-03', 'Good Friday'),
    h('2026-04-06', 'Easter Monday'),
    h('2026-05-04', 'Early May bank holiday'),
    h('2026-05-25', 'Spring bank holiday'),
    h('2026-07-13', 'Battle of the Boyne (Orangemen\u2019s Day) (substitute day)'),
    h('2026-08-31', 'Summer bank holiday'),
    h('2026-12-25', 'Christmas Day'),
    h('2026-12-28', 'Boxing Day (substitute day)'),
    h('2027-01-01', "New Year's Day"),
    h('2027-03-17', "St Patrick's Day"),
    h('2027-03-26', 'Good Friday'),
    h('2027-03-29', 'Easter Monday'),
    h('2027-05-03', 'Early May bank holiday'),
    h('2027-05-31', 'Spring bank holiday'),
    h('2027-07-12', 'Battle of the Boyne (Orangemen\u2019s Day)'),
    h('2027-08-30', 'Summer bank holiday'),
    h('2027-12-27', 'Christmas Day (substitute day)'),
    h('2027-12-28', 'Boxing Day (substitute day)'),
  ],
};

/**
 * The nation whose holidays apply, from a GSS code's first letter: E (England) and W (Wales)
 * share one list, S is Scotland, N is Northern Ireland. Null when the code is missing or unknown.
 */
export function nationForGssCode(code: string | null | undefined): Nation | null {
  switch (code?.charAt(0).toUpperCase()) {
    case 'E':
    case 'W':
      return 'england-and-wales';
    case 'S':
      return 'scotland';
    case 'N':
      return 'northern-ireland';
    default:
      return null;
  }
}

/** Days since 1970-01-01 for a calendar date (proleptic Gregorian). */
export function dayNumber(year: number, month: number, day: number): number {
  return Math.floor(Date.UTC(year, month - 1, day) / 86_400_000);
}

/** The holiday observed on a day (days since 1970-01-01), for fast lookups by the engine. */
export interface HolidayOnDay {
  name: string;
  /** MM-DD of the day it is observed. */
  monthDay: string;
}

const BY_DAY: Readonly<Record<Nation, ReadonlyMap<number, HolidayOnDay>>> = {
  'england-and-wales': index(BANK_HOLIDAYS['england-and-wales']),
  scotland: index(BANK_HOLIDAYS.scotland),
  'northern-ireland': index(BANK_HOLIDAYS['northern-ireland']),
};

function index(list: readonly BankHoliday[]): ReadonlyMap<number, HolidayOnDay> {
  const m = new Map<number, HolidayOnDay>();
  for (const { date, name } of list) {
    const [y, mo, d] = date.split('-').map(Number) as [number, number, number];
    m.set(dayNumber(y, mo, d), { name, monthDay: date.slice(5) });
  }
  return m;
}

/** The holiday on a day number in a nation, or undefined. */
export function holidayOnDay(nation: Nation, day: number): HolidayOnDay | undefined {
  return BY_DAY[nation].get(day);
}

/** The holiday on a date (YYYY-MM-DD) in a nation, or undefined. */
export function bankHoliday(nation: Nation, date: string): BankHoliday | undefined {
  return BANK_HOLIDAYS[nation].find((x) => x.date === date);
}

export function isBankHoliday(nation: Nation, date: string): boolean {
  return bankHoliday(nation, date) !== undefined;
}

/** Whether the static table covers a calendar year. */
export function holidaysKnownFor(year: number): boolean {
  return year >= HOLIDAY_YEARS.first && year <= HOLIDAY_YEARS.last;
}
