import { civilFromDays, fromLondonTime, londonTime } from '../tariffs/london-time.ts';

/**
 * Billing weeks (CONTRACT.md section 8): ISO 8601 weeks, Monday 00:00 to Sunday 24:00
 * Europe/London, named `YYYY-Www`. A week's bounds are instants, so a week that contains a
 * clock change is 167 or 169 hours long.
 */
export interface BillingWeek {
  week: string;
  /** Monday 00:00 Europe/London (inclusive). */
  start: Date;
  /** The next Monday 00:00 Europe/London (exclusive). */
  end: Date;
}

const DAY_MS = 86_400_000;
const WEEK_RE = /^(\d{4})-W(\d{2})$/;

const daysFromCivil = (year: number, month: number, day: number) => Math.floor(Date.UTC(year, month - 1, day) / DAY_MS);
/** 0 = Monday ... 6 = Sunday, for days since 1970-01-01 (a Thursday). */
const weekdayOf = (dayNumber: number) => (((dayNumber + 3) % 7) + 7) % 7;

/** Days since 1970-01-01 of the Monday of ISO week 1 of `year` (the week holding 4 January). */
function week1Monday(year: number): number {
  const jan4 = daysFromCivil(year, 1, 4);
  return jan4 - weekdayOf(jan4);
}

/** ISO weeks in a year: 53 when 28 December falls in week 53, else 52. */
export function weeksInYear(year: number): number {
  return (week1Monday(year + 1) - week1Monday(year)) / 7;
}

function weekName(year: number, week: number): string {
  return `${year}-W${String(week).padStart(2, '0')}`;
}

/** The ISO week (`YYYY-Www`) of a local calendar day given as days since 1970-01-01. */
function weekOfDay(dayNumber: number): string {
  const thursday = dayNumber - weekdayOf(dayNumber) + 3;
  const { year } = civilFromDays(thursday);
  return weekName(year, Math.floor((thursday - week1Monday(year)) / 7) + 1);
}

/** The billing week an instant falls in (by its Europe/London calendar day). */
export function weekOf(at: Date | number): string {
  return weekOfDay(londonTime(at).dayNumber);
}

/**
 * The billing week that ended most recently before an instant: the weekly run at Monday
 * 02:00 bills the week that ended two hours earlier, and a run that starts late (workers were
 * down on Monday) still bills that week.
 */
export function weekBefore(at: Date | number): string {
  return weekOfDay(londonTime(at).dayNumber - 7);
}

/** Parse `YYYY-Www` into its bounds; null for anything else, including week 53 of a 52-week year. */
export function parseWeek(text: string): BillingWeek | null {
  const m = WEEK_RE.exec(text.trim().toUpperCase());
  if (!m) return null;
  const year = Number(m[1]);
  const week = Number(m[2]);
  if (year < 2000 || year > 2999 || week < 1 || week > weeksInYear(year)) return null;
  const monday = week1Monday(year) + (week - 1) * 7;
  const at = (days: number) => {
    const { year: y, month, day } = civilFromDays(days);
    return fromLondonTime(y, month, day, 0, 0);
  };
  return { week: weekName(year, week), start: at(monday), end: at(monday + 7) };
}
