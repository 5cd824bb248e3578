import { queueStatusFanout } from '../services/webhooks.ts';
import type { Queryable, Tx } from './knex.ts';

export interface BookingRow {
  id: string;
  reference: string;
  origin: string;
  status: string;
  quote_id: string | null;
  api_key_id: string | null;
  partner_id: string | null;
  passenger_name: string;
  passenger_email: string | null;
  passenger_phone: string | null;
  email_verified: boolean;
  passengers: number;
  vehicle_type: string;
  pickup: { query: string; name: string; kind: string; lat: number; lng: number };
  dropoff: { query: string; name: string; kind: string; lat: number; lng: number };
  pickup_time: Date;
  fare_pence: number | null;
  currency: string;
  payment_method: string;
  /** For the driver: the passenger's notes and flight number, as given. */
  notes?: string | null;
  flight_number?: string | null;
  driver_id: string | null;
  vehicle_id: string | null;
  /** A tier-3 operator's driver on a booking it holds (shared/domain/operator-driver.ts). */
  operator_driver: unknown;
  status_seq: number;
  created_at: Date;
  test_mode: boolean;
  /** Test mode only: the sandbox scenario the booking asked for (shared/domain/sandbox.ts). */
  test_scenario?: string | null;
}

export async function findBookingByRef(db: Queryable, reference: string): Promise<BookingRow | undefined> {
  return db<BookingRow>('bookings').where({ reference }).first();
}

export async function findBookingById(db: Queryable, id: string): Promise<BookingRow | undefined> {
  return db<BookingRow>('bookings').where({ id }).first();
}

/**
 * Move a booking to a status and append it to its history with the next sequence number
 * (the order partners and the tracking page see). Call inside the transaction that decided it.
 */
export async function appendStatus(
  trx: Tx,
  bookingId: string,
  status: string,
  actor: string,
  details: Record<string, unknown> = {},
): Promise<number> {
  const [row] = await trx('bookings')
    .where({ id: bookingId })
    .update({ status, status_seq: trx.raw('status_seq + 1'), updated_at: trx.fn.now() })
    .returning<
      {
        status_seq: number;
        partner_id: string | null;
        supplier_id: string | null;
        operator_partner_id: string | null;
      }[]
    >(['status_seq', 'partner_id', 'supplier_id', 'operator_partner_id']);
  if (!row) throw new Error(`booking ${bookingId} not found`);
  await trx('booking_status_history').insert({
    booking_id: bookingId,
    seq: row.status_seq,
    status,
    actor,
    details: JSON.stringify(details),
  });
  // Status fanout to the partner, supplier and operator webhooks, in this transaction (most
  // bookings have none of them: no query at all then).
  if (row.partner_id || row.supplier_id || row.operator_partner_id) {
    await queueStatusFanout(trx, bookingId, status, row.status_seq, {
      partnerId: row.partner_id,
      supplierId: row.supplier_id,
      operatorPartnerId: row.operator_partner_id,
    });
  }
  return row.status_seq;
}
