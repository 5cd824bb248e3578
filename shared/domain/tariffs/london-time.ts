/**
 * Europe/London wall-clock time for an instant, for tariff periods (GMT in winter, BST in
 * summer). The offset comes from Intl.DateTimeFormat, which knows the zone rules; one shared
 * formatter is created at load and its answers are cached per UTC hour (UK clock changes happen
 * at 01:00 UTC, on the hour), so a lookup costs a Map access, not a formatToParts call.
 */

const LONDON = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  hourCycle: 'h23',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
});

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const offsetByHour = new Map<number, number>();

/** Minutes Europe/London is ahead of UTC at an instant (0 in GMT, 60 in BST). */
export function londonOffsetMinutes(utcMs: number): number {
  const hour = Math.floor(utcMs / HOUR_MS);
  const cached = offsetByHour.get(hour);
  if (cached !== undefined) return cached;
  const at = hour * HOUR_MS;
  const p: Record<string, number> = {};
  for (const part of LONDON.formatToParts(at)) {
    if (part.type !== 'literal') p[part.type] = Number(part.value);
  }
  const local = Date.UTC(p.year ?? 1970, (p.month ?? 1) - 1, p.day ?? 1, p.hour ?? 0, p.minute ?? 0);
  const offset = Math.round((local - at) / 60_000);
  if (offsetByHour.size > 100_000) offsetByHour.clear();
  offsetByHour.set(hour, offset);
  return offset;
}

export interface LondonTime {
  year: number;
  month: number;
  day: number;
  /** 0 = Monday ... 6 = Sunday. */
  weekday: number;
  /** Minutes since local midnight, 0..1439. */
  minutes: number;
  /** Local calendar day as days since 1970-01-01. */
  dayNumber: number;
  offsetMinutes: number;
}

/** Calendar date from days since 1970-01-01 (H. Hinnant's civil_from_days). */
export function civilFromDays(days: number): { year: number; month: number; day: number } {
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month, day };
}

/** The Europe/London wall-clock time of an instant (to the minute). */
export function londonTime(at: Date | number): LondonTime {
  const utcMs = typeof at === 'number' ? at : at.getTime();
  const offsetMinutes = londonOffsetMinutes(utcMs);
  const localMs = utcMs + offsetMinutes * 60_000;
  const dayNum = Math.floor(localMs / DAY_MS);
  const minutes = Math.floor((localMs - dayNum * DAY_MS) / 60_000);
  const { year, month, day } = civilFromDays(dayNum);
  // 1970-01-01 was a Thursday (3 when Monday is 0).
  const weekday = (((dayNum + 3) % 7) + 7) % 7;
  return { year, month, day, weekday, minutes, dayNumber: dayNum, offsetMinutes };
}

/**
 * The instant at which Europe/London clocks show a wall-clock time. A time skipped when clocks
 * go forward resolves to the instant one hour later on the new clock; a repeated time (clocks
 * go back) resolves to its first occurrence (BST).
 */
export function fromLondonTime(year: number, month: number, day: number, hour = 0, minute = 0): Date {
  const wall = Date.UTC(year, month - 1, day, hour, minute);
  // London is UTC+1 (BST) or UTC+0 (GMT); try BST first so a repeated time is its first occurrence.
  for (const offset of [60, 0]) {
    const t = wall - offset * 60_000;
    if (londonOffsetMinutes(t) === offset) return new Date(t);
  }
  // Skipped by the spring change: 01:30 GMT does not exist; 01:30 UTC is 02:30 BST.
  return new Date(wall);
}
