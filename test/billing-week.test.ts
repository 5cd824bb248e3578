import { describe, expect, it } from 'vitest';
import { parseWeek, weekBefore, weekOf, weeksInYear } from '../shared/domain/billing/week.ts';

/** Billing weeks: ISO weeks, Monday 00:00 to Sunday 24:00 Europe/London (CONTRACT.md section 8). */
describe('billing weeks', () => {
  it('bounds a winter week in GMT', () => {
    const w = parseWeek('2026-W47');
    expect(w).toEqual({
      week: '2026-W47',
      start: new Date('2026-11-16T00:00:00Z'),
      end: new Date('2026-11-23T00:00:00Z'),
    });
  });

  it('bounds a summer week in BST (Monday 00:00 London is Sunday 23:00 UTC)', () => {
    expect(parseWeek('2026-W27')).toEqual({
      week: '2026-W27',
      start: new Date('2026-06-28T23:00:00Z'),
      end: new Date('2026-07-05T23:00:00Z'),
    });
  });

  it('gives the weeks with a clock change their real length', () => {
    // Clocks go forward on Sunday 29 March 2026 (week 13) and back on Sunday 25 October (week 43).
    const spring = parseWeek('2026-W13');
    const autumn = parseWeek('2026-W43');
    expect(spring && (spring.end.getTime() - spring.start.getTime()) / 3_600_000).toBe(167);
    expect(autumn && (autumn.end.getTime() - autumn.start.getTime()) / 3_600_000).toBe(169);
  });

  it('follows ISO week-numbering years across New Year', () => {
    // 1 January 2027 is a Friday: it belongs to 2026-W53, which 2026 has.
    expect(weeksInYear(2026)).toBe(53);
    expect(weeksInYear(2027)).toBe(52);
    expect(weekOf(new Date('2027-01-01T12:00:00Z'))).toBe('2026-W53');
    expect(parseWeek('2026-W53')?.start).toEqual(new Date('2026-12-28T00:00:00Z'));
    expect(parseWeek('2027-W01')?.start).toEqual(new Date('2027-01-04T00:00:00Z'));
    // 29 December 2025 (a Monday) starts 2026-W01.
    expect(weekOf(new Date('2025-12-29T00:00:00Z'))).toBe('2026-W01');
  });

  it('places an instant by its London calendar day', () => {
    // Sunday 23:30 BST is still Sunday in London though it is Sunday 22:30 UTC ...
    expect(weekOf(new Date('2026-07-05T22:30:00Z'))).toBe('2026-W27');
    // ... and Sunday 23:30 UTC in summer is already Monday 00:30 in London.
    expect(weekOf(new Date('2026-07-05T23:30:00Z'))).toBe('2026-W28');
  });

  it('names the week just ended for the Monday 02:00 run', () => {
    expect(weekBefore(new Date('2026-11-23T02:00:00Z'))).toBe('2026-W47');
    // A run that starts late (Wednesday) still bills the week before its own.
    expect(weekBefore(new Date('2026-11-25T09:00:00Z'))).toBe('2026-W47');
    expect(weekBefore(new Date('2027-01-04T02:00:00Z'))).toBe('2026-W53');
  });

  it('refuses what is not a week', () => {
    for (const bad of ['2026-47', '2026-W00', '2027-W53', '2026-W54', 'W47', '', '2026-W4', '1999-W10']) {
      expect(parseWeek(bad), bad).toBeNull();
    }
    expect(parseWeek(' 2026-w05 ')?.week).toBe('2026-W05');
  });
});
