import { seal, unseal } from '../crypto.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { createGoogleMapProvider, type MapProvider, type MapProviderOptions } from '../providers/map-provider.ts';

/**
 * A driver's own map-provider API key (SPEC.md 2.10: high-volume drivers bring their own key,
 * billed to them by the provider). Stored only sealed (AES-256-GCM, `seal` in shared/crypto.ts)
 * in `drivers.map_api_key_sealed`; answers show its last 4 characters at most, and nothing
 * here logs it. Quotes made through the driver (a driver token on POST /api/public/v1/quote)
 * are geocoded and routed with it by the pricing worker (shared/services/pricer.ts).
 */

export interface StoredMapKey {
  stored: true;
  last4: string;
}

const last4 = (key: string) => key.slice(-4);

async function audit(db: Queryable, driverId: string, action: string, details: Record<string, unknown>) {
  await db('audit_log').insert({
    actor: `driver:${driverId}`,
    action,
    subject_type: 'driver',
    subject_id: driverId,
    details: JSON.stringify(details),
  });
}

/** Store (or replace) the driver's key, sealed. */
export async function storeMapKey(db: Db, sealKey: Buffer, driverId: string, apiKey: string): Promise<StoredMapKey> {
  const key = apiKey.trim();
  await db.transaction(async (trx) => {
    await trx('drivers')
      .where({ id: driverId })
      .update({ map_api_key_sealed: seal(key, sealKey), updated_at: trx.fn.now() });
    await audit(trx, driverId, 'driver.map_key_set', { last4: last4(key) });
  });
  return { stored: true, last4: last4(key) };
}

/** Remove the driver's key: their quotes go back to the offline estimate. True when there was one. */
export async function removeMapKey(db: Db, driverId: string): Promise<boolean> {
  return db.transaction(async (trx) => {
    const removed = await trx('drivers')
      .where({ id: driverId })
      .whereNotNull('map_api_key_sealed')
      .update({ map_api_key_sealed: null, updated_at: trx.fn.now() });
    if (removed > 0) await audit(trx, driverId, 'driver.map_key_remove', {});
    return removed > 0;
  });
}

/** The driver's key, unsealed, or null when they have none. */
export async function driverMapKey(db: Queryable, sealKey: Buffer, driverId: string): Promise<string | null> {
  const row = await db('drivers')
    .where({ id: driverId })
    .first<{ map_api_key_sealed: string | null } | undefined>('map_api_key_sealed');
  return row?.map_api_key_sealed ? unseal(row.map_api_key_sealed, sealKey) : null;
}

/**
 * The external map adapter bound to the driver's own key (used as its default key), or null
 * when the driver has stored none.
 */
export async function mapProviderForDriver(
  db: Queryable,
  sealKey: Buffer,
  driverId: string,
  opts: Omit<MapProviderOptions, 'defaultApiKey'> = {},
): Promise<MapProvider | null> {
  const key = await driverMapKey(db, sealKey, driverId);
  return key === null ? null : createGoogleMapProvider({ ...opts, defaultApiKey: key });
}
