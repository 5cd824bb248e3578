import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
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
  /** `ride`: v1 booking fields sent over the default ride's (pickup, dropoff, meetAndGreet, …). */
  opts: { name?: string; phone?: string; ride?: Record<string, unknown> } = {},
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
      ...opts.ride,
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

/**
 * A dispatching booking (Manchester Piccadilly to the airport, three hours ahead, £42) written
 * straight to the database with one open offer: tier 1 to a driver or tier 3 to a partner
 * operator. For tests of what a held offer allows, without running dispatch.
 */
export async function insertOfferedBooking(
  db: Db,
  reference: string,
  to: { driverId: string } | { partnerId: string },
  offerMinutes = 30,
): Promise<{ id: string; reference: string; offerId: string }> {
  const id = uuidv7();
  await db('bookings').insert({
    id,
    reference,
    origin: 'api',
    status: 'dispatching',
    passenger_name: 'Ada Lovelace',
    passengers: 1,
    vehicle_type: 'saloon',
    pickup: JSON.stringify({ query: 'a', name: 'Manchester Piccadilly', kind: 'station', lat: 53.477, lng: -2.23 }),
    dropoff: JSON.stringify({ query: 'b', name: 'Manchester Airport', kind: 'airport', lat: 53.365, lng: -2.272 }),
    pickup_time: new Date(Date.now() + 3 * 3600_000),
    fare_pence: 4200,
    tracking_token_hash: randomBytes(32),
  });
  const offerId = uuidv7();
  await db('dispatch_offers').insert({
    id: offerId,
    booking_id: id,
    tier: 'driverId' in to ? 1 : 3,
    attempt: 1,
    ...('driverId' in to ? { driver_id: to.driverId } : { partner_id: to.partnerId }),
    state: 'offered',
    expires_at: new Date(Date.now() + offerMinutes * 60_000),
  });
  return { id, reference, offerId };
}

/**
 * A pending booking written straight to the table (no pricing, no dispatch job), London to
 * Heathrow on 5 December 2026, submitted by `partnerId` when given: for tests of what follows
 * a booking (status fanout) that need many quickly.
 */
export async function insertPendingBooking(db: Db, reference: string, partnerId: string | null): Promise<string> {
  const id = uuidv7();
  await db('bookings').insert({
    id,
    reference,
    origin: partnerId ? 'partner' : 'api',
    status: 'pending',
    partner_id: partnerId,
    passenger_name: 'Ada Lovelace',
    passengers: 1,
    vehicle_type: 'saloon',
    pickup: JSON.stringify({ query: 'a', name: 'A', kind: 'poi', lat: 51.5, lng: -0.14 }),
    dropoff: JSON.stringify({ query: 'b', name: 'B', kind: 'poi', lat: 51.47, lng: -0.45 }),
    pickup_time: new Date('2026-12-05T14:30:00Z'),
    fare_pence: 4200,
    tracking_token_hash: randomBytes(32),
  });
  return id;
}
