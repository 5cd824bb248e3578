/**
 * The one hour a year whose UK clock times happen twice: when British Summer Time ends, 01:00
 * to 02:00 on the last Sunday of October runs first in BST, then again in GMT. A time shown in
 * that hour ("Sun, 31 Oct 2027, 01:30") names its zone, so a passenger can tell which; at any
 * other time the zone is left out, as everyone reads "UK time" the same.
 */
const WALL = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
});
const ZONE = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/London', timeZoneName: 'short' });

/** " BST" or " GMT" for a moment whose UK clock time occurs twice, else "". */
export function repeatedHourZone(at: Date): string {
  const wall = WALL.format(at);
  const hour = 3600_000;
  const repeated =
    WALL.format(new Date(at.getTime() - hour)) === wall || WALL.format(new Date(at.getTime() + hour)) === wall;
  if (!repeated) return '';
  const zone = ZONE.formatToParts(at).find((p) => p.type === 'timeZoneName')?.value;
  return zone ? ` ${zone}` : '';
}
