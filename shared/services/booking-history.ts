import type { Db, Queryable } from '../db/knex.ts';
import { normaliseReference } from '../domain/reference.ts';

/** One changed field of an amendment; journey fields carry their old and new values. */
export interface AmendmentChange {
  field: string;
  from?: string | number | null;
  to?: string | number | null;
}

/** The booking fields an amendment may change, as they are compared and recorded. */
export interface AmendableFields {
  pickup: string;
  dropoff: string;
  pickupTime: Date;
  passengers: number;
  vehicleType: string;
  farePence: number | null;
  flightNumber: string | null;
  passengerName: string;
  passengerPhone: string | null;
  passengerEmail: string | null;
  notes: string | null;
}

/** Journey fields: recorded with their values (and, changed, told to whoever holds the job). */
export const JOURNEY = [
  'pickup',
  'dropoff',
  'pickupTime',
  'passengers',
  'vehicleType',
  'farePence',
  'flightNumber',
] as const;
/** Passenger contact and notes: recorded by name only (the values are personal data). */
const PERSONAL = ['passengerName', 'passengerPhone', 'passengerEmail', 'notes'] as const;

const value = (v: string | number | Date | null): string | number | null => (v instanceof Date ? v.toISOString() : v);

/** What an amendment changed, journey fields first, in a fixed order; empty when nothing did. */
export function amendmentChanges(before: AmendableFields, after: AmendableFields): AmendmentChange[] {
  const changes: AmendmentChange[] = [];
  for (const field of JOURNEY) {
    const from = value(before[field]);
    const to = value(after[field]);
    if (from !== to) changes.push({ field, from, to });
  }
  for (const field of PERSONAL) if (before[field] !== after[field]) changes.push({ field });
  return changes;
}

/** Record an accepted amendment in the caller's transaction. */
export async function recordAmendment(
  trx: Queryable,
  row: {
    id: string;
    bookingId: string;
    partnerJobId: string | null;
    actor: string;
    farePenceBefore: number;
    farePenceAfter: number;
    changes: AmendmentChange[];
    at: Date;
  },
): Promise<void> {
  await trx('booking_amendments').insert({
    id: row.id,
    booking_id: row.bookingId,
    partner_job_id: row.partnerJobId,
    actor: row.actor,
    fare_pence_before: row.farePenceBefore,
    fare_pence_after: row.farePenceAfter,
    changes: JSON.stringify(row.changes),
    created_at: row.at,
  });
}

export interface BookingHistory {
  reference: string;
  status: string;
  testMode: boolean;
  statuses: { seq: number; status: string; at: string; actor: string }[];
  amendments: {
    at: string;
    actor: string;
    farePenceBefore: number;
    farePenceAfter: number;
    changes: AmendmentChange[];
  }[];
}

/**
 * A booking reference as an operator types it, read as the API reads one (`normaliseReference`:
 * any case, spaces, I and L for 1, O for 0, no hyphen), and also without its prefix (`1gbmwk`,
 * as a passenger reads it out over the phone); null when it cannot be a reference.
 */
export function bookingReferenceFor(raw: string, prefix: string): string | null {
  const ref = normaliseReference(raw, prefix);
  if (ref) return ref;
  const bare = raw.trim().replace(/[\s_]/g, '');
  return /^[0-9A-Za-z]{6}$/.test(bare) ? normaliseReference(`${prefix}-${bare}`, prefix) : null;
}

/**
 * A booking's status history and amendments, oldest first (`admin booking history REF`); null
 * when unknown. `prefix` is the configured reference prefix (`bookingReferenceFor`).
 */
export async function bookingHistory(db: Db, rawReference: string, prefix: string): Promise<BookingHistory | null> {
  const reference = bookingReferenceFor(rawReference, prefix);
  if (!reference) return null;
  const booking = await db('bookings')
    .where({ reference })
    .first<{ id: string; reference: string; status: string; test_mode: boolean } | undefined>(
      'id',
      'reference',
      'status',
      'test_mode',
    );
  if (!booking) return null;
  const [statuses, amendments] = await Promise.all([
    db('booking_status_history')
      .where({ booking_id: booking.id })
      .orderBy('seq')
      .select<{ seq: number; status: string; at: Date; actor: string }[]>('seq', 'status', 'at', 'actor'),
    db('booking_amendments')
      .where({ booking_id: booking.id })
      .orderBy([{ column: 'created_at' }, { column: 'id' }])
      .select<
        {
          created_at: Date;
          actor: string;
          fare_pence_before: number;
          fare_pence_after: number;
          changes: AmendmentChange[];
        }[]
      >('created_at', 'actor', 'fare_pence_before', 'fare_pence_after', 'changes'),
  ]);
  return {
    reference: booking.reference,
    status: booking.status,
    testMode: booking.test_mode,
    statuses: statuses.map((s) => ({ seq: s.seq, status: s.status, at: s.at.toISOString(), actor: s.actor })),
    amendments: amendments.map((a) => ({
      at: a.created_at.toISOString(),
      actor: a.actor,
      farePenceBefore: a.fare_pence_before,
      farePenceAfter: a.fare_pence_after,
      changes: a.changes,
    })),
  };
}
