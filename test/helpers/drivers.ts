import type { Redis } from 'ioredis';
import type { Db } from '../../shared/db/knex.ts';
import { applyDriver, approveDriver, type DriverApplication } from '../../shared/services/drivers.ts';

export interface TestDriverOptions {
  name?: string;
  cls?: DriverApplication['vehicle']['class'];
  seats?: number;
  wav?: boolean;
  /** A national network corridor between two places the geocoder knows. */
  corridor?: [string, string];
  /** Home city (default Manchester), 20 miles around it. */
  home?: string;
  paymentLink?: string;
  /** A sandbox driver (as one applying with a test key): offered and making test-mode bookings only. */
  testMode?: boolean;
}

export interface TestDriver {
  id: string;
  token: string;
  phone: string;
  trialEndsAt: string;
}

let seq = 0;

/**
 * A driver who applied through the service and was approved (token issued, trial started), as
 * tests across files need one: unique phone, e-mail, licence and registration per call.
 */
export async function approvedDriver(db: Db, opts: TestDriverOptions = {}): Promise<TestDriver> {
  seq += 1;
  const phone = `+4477009${String(10000 + (seq % 90000)).slice(-5)}`;
  const { driverId } = await applyDriver(
    db,
    {
      name: opts.name ?? `Test Driver ${seq}`,
      phone,
      email: `driver${seq}@example.org`,
      licensingAuthority: 'Manchester City Council',
      licenceNumber: `PH-${seq}-${Date.now()}`,
      licenceExpiry: '2030-01-01',
      vehicle: {
        make: 'Toyota',
        model: 'Prius',
        colour: 'Silver',
        registration: `MA${seq} ABC`,
        class: opts.cls ?? 'saloon',
        seats: opts.seats ?? 4,
        wheelchairAccessible: opts.wav ?? false,
      },
      homeCity: opts.home ?? 'Manchester',
      operatingRadiusMiles: 20,
      ...(opts.corridor
        ? { nationalNetwork: { corridors: [{ from: opts.corridor[0], to: opts.corridor[1], bufferMiles: 15 }] } }
        : {}),
      ...(opts.paymentLink ? { paymentLink: opts.paymentLink } : {}),
    },
    { actor: 'test', ...(opts.testMode ? { testMode: true } : {}) },
  );
  const approved = await approveDriver(db, driverId, 'test');
  if (!approved) throw new Error(`driver ${driverId} could not be approved`);
  return { id: driverId, token: approved.token, phone, trialEndsAt: approved.trialEndsAt };
}

/**
 * Run `fn` while the live presence index cannot be read: its heartbeat set is swapped for a
 * plain string, so every presence read fails (WRONGTYPE) while Redis itself, the pages' rate
 * limits included, keeps working. The set is put back afterwards.
 */
export async function withPresenceUnreadable(
  redis: Redis,
  queuePrefix: string,
  fn: () => Promise<void>,
): Promise<void> {
  const seen = `${queuePrefix}:dispatch:presence:seen`;
  const aside = `${seen}:aside`;
  const had = (await redis.exists(seen)) === 1;
  if (had) await redis.rename(seen, aside);
  await redis.set(seen, 'not a sorted set');
  try {
    await fn();
  } finally {
    await redis.del(seen);
    if (had) await redis.rename(aside, seen);
  }
}
