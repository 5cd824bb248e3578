import type { PaymentMethod } from '../payment-state.ts';
import { placeLabel } from '../place-label.ts';
import { hasMeetAndGreet } from './job-card.ts';

/**
 * A job as those who fulfil it see it: the driver and operator job feed (`jobFeed` in
 * shared/services/driver-jobs.ts) and an operator's `booking.amended` webhook
 * (`queueAmendedFanout` in shared/services/webhooks.ts) both say it so.
 */

interface PlaceColumn {
  name: string;
  /** The place's kind (station, airport, …): a station is shown as one (`placeLabel`). */
  kind?: string;
  lat: number;
  lng: number;
}

export type { PaymentMethod as JobPaymentMethod } from '../payment-state.ts';

/** The booking columns a job view is made of. */
export interface JobColumns {
  pickup: PlaceColumn;
  dropoff: PlaceColumn;
  pickup_time: Date;
  passengers: number;
  vehicle_type: string;
  fare_pence: number | null;
  /** How the passenger pays the driver (cash, card, pay_link, bank_transfer, account). */
  payment_method: string;
  passenger_name: string;
  passenger_phone: string | null;
  notes?: string | null;
  flight_number?: string | null;
  /** The fare's rules (jsonb): a charged `meet_and_greet` one makes `meetAndGreet` true. */
  applied_rules?: unknown;
}

const place = (p: PlaceColumn) => ({ name: placeLabel(p), lat: p.lat, lng: p.lng });

/** What anyone offered the job sees: the journey and the fare, no passenger. */
export function offeredJob(b: JobColumns) {
  return {
    pickup: place(b.pickup),
    dropoff: place(b.dropoff),
    pickupTime: b.pickup_time.toISOString(),
    passengers: b.passengers,
    vehicleType: b.vehicle_type,
    fareGBP: b.fare_pence === null ? null : b.fare_pence / 100,
    /** How the passenger pays the driver, as the job card says it: cash, card, pay_link, bank_transfer, account. */
    paymentMethod: b.payment_method as PaymentMethod,
    /** Meet the passenger inside the terminal with a name board (charged to the passenger). */
    meetAndGreet: hasMeetAndGreet(b.applied_rules),
  };
}

/** What whoever holds the job (it accepted it) sees: also who to pick up, and their notes. */
export function heldJob(b: JobColumns) {
  return {
    ...offeredJob(b),
    passenger: { name: b.passenger_name, phone: b.passenger_phone },
    notes: b.notes ?? null,
    flightNumber: b.flight_number ?? null,
  };
}

export type HeldJob = ReturnType<typeof heldJob>;
