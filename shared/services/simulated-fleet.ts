import { createHmac } from 'node:crypto';
import type { Config } from '../config.ts';
import { sha256 } from '../crypto.ts';
import type { Db } from '../db/knex.ts';
import type { VehicleType } from '../domain/tariffs/types.ts';
import { applyDriver, DRIVER_TOKEN_PREFIX, DriverLicenceTakenError } from './drivers.ts';

/**
 * The simulator's fleet: real driver rows (applied through `applyDriver`, so validated and
 * geocoded as any application), flagged `simulated` and `test_mode`, approved, each with a real
 * bearer token. Dispatch offers them test-mode bookings only, never live ones.
 *
 * Tokens are derived (HMAC-SHA256 of the driver id with DATA_ENCRYPTION_KEY), so every copy of
 * the simulator, and every restart, drives the fleet with the same tokens while the database
 * still holds only their SHA-256. The fleet is keyed by licence number (`SIM-0001`, …): ensuring
 * it is idempotent, and concurrent simulators starting together make one fleet.
 */

export const SIMULATED_AUTHORITY = 'Sandbox Licensing Authority';

export interface SimulatedDriver {
  id: string;
  name: string;
  token: string;
  city: string;
  home: { lat: number; lng: number };
  vehicleClass: VehicleType;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The bearer token of a simulated driver: `dtn_drv_` and 40 base62 characters derived from its id. */
export function simulatedDriverToken(driverId: string, key: Buffer): string {
  let n = BigInt(`0x${createHmac('sha256', key).update(`simulated-driver-token:${driverId}`).digest('hex')}`);
  let out = '';
  while (out.length < 40) {
    out += BASE62[Number(n % 62n)];
    n /= 62n;
  }
  return `${DRIVER_TOKEN_PREFIX}${out}`;
}

const FIRST = ['Alex', 'Sam', 'Jo', 'Priya', 'Tom', 'Aisha', 'Dev', 'Kate', 'Omar', 'Lucy', 'Ravi', 'Nia'];
const MAKES: Array<[string, string]> = [
  ['Toyota', 'Prius'],
  ['Skoda', 'Octavia'],
  ['Kia', 'Niro'],
  ['Ford', 'Galaxy'],
  ['Mercedes', 'E-Class'],
  ['Volkswagen', 'Caddy'],
];

/** The vehicle of fleet member `i`: mostly saloons, with estates, MPVs, an executive and a WAV in every 12. */
function vehicleOf(i: number): { class: VehicleType; seats: number; wav: boolean; make: [string, string] } {
  const slot = i % 12;
  if (slot === 5) return { class: 'mpv', seats: 8, wav: false, make: MAKES[3] as [string, string] };
  if (slot === 8) return { class: 'executive', seats: 4, wav: false, make: MAKES[4] as [string, string] };
  if (slot === 11) return { class: 'wav', seats: 4, wav: true, make: MAKES[5] as [string, string] };
  if (slot === 2 || slot === 9) return { class: 'estate', seats: 4, wav: false, make: MAKES[1] as [string, string] };
  return { class: 'saloon', seats: 4, wav: false, make: MAKES[i % 2 === 0 ? 0 : 2] as [string, string] };
}

interface FleetRow {
  id: string;
  name: string;
  licence_number: string;
  status: string;
  home_city: string;
  home_lat: number;
  home_lng: number;
  token_hash: Buffer | null;
  vehicle_class: VehicleType | null;
}

/**
 * Make sure the fleet has `size` simulated drivers spread round robin over `cities`, approved
 * with their derived tokens, and return them. Drivers an operator suspended or rejected stay so
 * and are left out. Extra drivers from a larger fleet of an earlier run are left alone (they go
 * offline when nobody reports their presence).
 */
export async function ensureSimulatedFleet(
  db: Db,
  config: Pick<Config, 'dataEncryptionKey'>,
  opts: { size: number; cities: readonly string[] },
): Promise<SimulatedDriver[]> {
  const licences = Array.from({ length: opts.size }, (_, i) => `SIM-${String(i + 1).padStart(4, '0')}`);
  const existing = async () =>
    new Map(
      (
        await db('drivers as d')
          .where({ 'd.simulated': true, 'd.licensing_authority': SIMULATED_AUTHORITY })
          .whereIn('d.licence_number', licences)
          .select<FleetRow[]>(
            'd.id',
            'd.name',
            'd.licence_number',
            'd.status',
            'd.home_city',
            'd.home_lat',
            'd.home_lng',
            'd.token_hash',
            db.raw('(select v.class from vehicles v where v.driver_id = d.id and v.active limit 1) as vehicle_class'),
          )
      ).map((r) => [r.licence_number, r]),
    );
  let rows = await existing();
  const cities = opts.cities.length > 0 ? opts.cities : ['London'];
  for (const [i, licence] of licences.entries()) {
    if (rows.has(licence)) continue;
    const v = vehicleOf(i);
    const n = String(i + 1).padStart(4, '0');
    try {
      const { driverId } = await applyDriver(
        db,
        {
          name: `${FIRST[i % FIRST.length]} Sim ${n}`,
          phone: `+447700${String(900000 + ((i + 1) % 100000)).slice(-6)}`,
          email: `sim-${n}@simulator.dtn.example`,
          licensingAuthority: SIMULATED_AUTHORITY,
          licenceNumber: licence,
          licenceExpiry: '2099-12-31',
          vehicle: {
            make: v.make[0],
            model: v.make[1],
            colour: 'White',
            registration: `SIM ${n}`,
            class: v.class,
            seats: v.seats,
            wheelchairAccessible: v.wav,
          },
          homeCity: cities[i % cities.length] as string,
          operatingRadiusMiles: 25,
        },
        { actor: 'simulator', testMode: true },
      );
      await db('drivers').where({ id: driverId }).update({ simulated: true });
    } catch (err) {
      // Another simulator created it meanwhile.
      if (!(err instanceof DriverLicenceTakenError)) throw err;
    }
  }
  rows = await existing();
  const fleet: SimulatedDriver[] = [];
  for (const licence of licences) {
    const row = rows.get(licence);
    if (!row || row.status === 'suspended' || row.status === 'rejected') continue;
    const token = simulatedDriverToken(row.id, config.dataEncryptionKey);
    const hash = sha256(token);
    if (row.status !== 'approved' || !row.token_hash || !hash.equals(row.token_hash)) {
      await db('drivers')
        .where({ id: row.id, simulated: true })
        .whereIn('status', ['pending_approval', 'approved'])
        .update({
          status: 'approved',
          token_hash: hash,
          token_prefix: token.slice(0, 14),
          approved_at: db.raw('coalesce(approved_at, now())'),
          trial_ends_at: db.raw("coalesce(trial_ends_at, now() + interval '90 days')"),
          updated_at: db.fn.now(),
        });
    }
    fleet.push({
      id: row.id,
      name: row.name,
      token,
      city: row.home_city,
      home: { lat: row.home_lat, lng: row.home_lng },
      vehicleClass: row.vehicle_class ?? 'saloon',
    });
  }
  return fleet;
}
