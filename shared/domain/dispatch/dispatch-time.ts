/**
 * When a booking's dispatch starts: pickup minus the lead time (`DISPATCH_LEAD_MINUTES`), in
 * epoch milliseconds. The one rule behind the first dispatch job's delay (a new booking), an
 * amendment that moves the pickup earlier, the first step that finds its job came too early,
 * and the check for lost dispatch jobs; a time already past means at once.
 */
export function dispatchTimeMs(pickupTime: Date, leadMinutes: number): number {
  return pickupTime.getTime() - leadMinutes * 60_000;
}
