import { expect } from 'vitest';
import type { Db } from '../../shared/db/knex.ts';

export interface ApiBooking {
  ref: string;
  id: string;
  farePence: number;
  email: string;
  /** The tracking token, and the paths of the tracking and pay-the-driver pages. */
  token: string;
  trackPath: string;
  payPath: string;
}

let seq = 0;

/**
 * A v1 booking made through the public API (priced by the pricing worker), three hours ahead
 * from Manchester Piccadilly to the airport; the tracking token and page paths come from the
 * URLs it answers with.
 */
export async function bookThroughApi(
  baseUrl: string,
  db: Db,
  opts: { name?: string; phone?: string } = {},
): Promise<ApiBooking> {
  seq += 1;
  const email = `passenger${seq}@example.org`;
  const res = await fetch(`${baseUrl}/api/public/v1/booking`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      departAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
      passengerName: opts.name ?? `Test Passenger ${seq}`,
      passengerEmail: email,
      passengerPhone: opts.phone ?? '+447700900456',
      paymentMethod: 'cash',
    }),
  });
  const json = (await res.json()) as { bookingReference: string; trackingUrl: string; payDriverUrl: string };
  expect(res.status, JSON.stringify(json)).toBe(201);
  const row = await db('bookings')
    .where({ reference: json.bookingReference })
    .first<{ id: string; fare_pence: number }>('id', 'fare_pence');
  const trackPath = new URL(json.trackingUrl).pathname;
  return {
    ref: json.bookingReference,
    id: row.id,
    farePence: row.fare_pence,
    email,
    token: trackPath.split('/').pop() as string,
    trackPath,
    payPath: new URL(json.payDriverUrl).pathname,
  };
}
