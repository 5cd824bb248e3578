import type { LatLng } from './geometry.ts';
import { roadMiles } from './matching.ts';

/** What decides a booking's dispatch time besides its pickup. */
export interface LeadTimes {
  /** `DISPATCH_LEAD_MINUTES`: every booking. */
  readonly dispatchLeadMinutes: number;
  /** `DISPATCH_DISTANCE_LEAD_MINUTES`: a distance hire (never shorter than the other). */
  readonly distanceLeadMinutes: number;
  /** `DISTANCE_HIRE_MILES`: a journey at least this long (as matching measures it) is a distance hire. */
  readonly distanceHireMiles: number;
}

/** The lead times as configured. */
export function leadTimesOf(config: {
  bookings: { dispatchLeadMinutes: number; distanceLeadMinutes: number };
  dispatch: { distanceHireMiles: number };
}): LeadTimes {
  return {
    dispatchLeadMinutes: config.bookings.dispatchLeadMinutes,
    distanceLeadMinutes: config.bookings.distanceLeadMinutes,
    distanceHireMiles: config.dispatch.distanceHireMiles,
  };
}

/** How long before pickup a journey from `pickup` to `dropoff` is dispatched, in minutes. */
export function leadMinutes(pickup: LatLng, dropoff: LatLng, lead: LeadTimes): number {
  return roadMiles(pickup, dropoff) >= lead.distanceHireMiles
    ? Math.max(lead.dispatchLeadMinutes, lead.distanceLeadMinutes)
    : lead.dispatchLeadMinutes;
}

/**
 * When a booking's dispatch starts, in epoch milliseconds: pickup minus the lead time
 * (`DISPATCH_LEAD_MINUTES`, or for a distance hire the longer `DISPATCH_DISTANCE_LEAD_MINUTES`:
 * CONTRACT.md section 4). The one rule behind the first dispatch job's delay (a new booking), an
 * amendment that moves the pickup, the first step that finds its job came too early, and the
 * check for lost dispatch jobs; a time already past means at once.
 */
export function dispatchTimeMs(
  booking: { pickupTime: Date; pickup: LatLng; dropoff: LatLng },
  lead: LeadTimes,
): number {
  return booking.pickupTime.getTime() - leadMinutes(booking.pickup, booking.dropoff, lead) * 60_000;
}
