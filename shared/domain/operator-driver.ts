/**
 * The driver a tier-3 partner operator names for a booking it holds
 * (`POST /api/public/hooks/booking-status`, `driver_assigned`), as stored in
 * `bookings.operator_driver`. The booking lookup, the tracking stream, the pay page and the
 * booker's `booking.status` webhooks show it where a driver of ours would be shown.
 */
export interface OperatorDriver {
  name: string;
  phone?: string;
  /** The council that licensed the driver, when the operator says. */
  licensingAuthority?: string;
  vehicle?: { make: string; model: string; colour: string; registration: string };
}

const text = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

/**
 * The stored value read back: null unless it is an object with a name. Optional parts that
 * are missing or malformed are left out (the column is written only from the validated hook,
 * so this guards against hand edits, not against callers).
 */
export function operatorDriverOf(stored: unknown): OperatorDriver | null {
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return null;
  const o = stored as Record<string, unknown>;
  if (!text(o.name)) return null;
  const driver: OperatorDriver = { name: o.name };
  if (text(o.phone)) driver.phone = o.phone;
  if (text(o.licensingAuthority)) driver.licensingAuthority = o.licensingAuthority;
  const v = o.vehicle;
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const { make, model, colour, registration } = v as Record<string, unknown>;
    if (text(make) && text(model) && text(colour) && text(registration)) {
      driver.vehicle = { make, model, colour, registration };
    }
  }
  return driver;
}
