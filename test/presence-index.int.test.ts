import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPresenceIndex, type PresenceIndex } from '../shared/dispatch/presence-index.ts';
import { deleteKeys } from './helpers/env.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const PREFIX = `test-${randomBytes(6).toString('hex')}`;
const TTL = 120_000;
const NOW = 1_800_000_000_000;

// Real London places, [lat, lng].
const CHARING_CROSS = [51.5074, -0.1278] as const;
const TRAFALGAR_SQUARE = [51.508, -0.1281] as const;
const COVENT_GARDEN = [51.5117, -0.124] as const;
const BRITISH_MUSEUM = [51.5194, -0.127] as const;
const TOWER_OF_LONDON = [51.5081, -0.0759] as const;
const GREENWICH = [51.4826, -0.0077] as const;
const HEATHROW = [51.47, -0.4543] as const;

let redis: Redis;
let seq = 0;

/** Each test gets its own index under the file's prefix, so tests cannot see each other's drivers. */
function freshIndex(ttlMs = TTL): PresenceIndex {
  seq += 1;
  return createPresenceIndex(redis, { prefix: `${PREFIX}:${seq}`, ttlMs });
}

function haversineKm(a: readonly [number, number], b: readonly [number, number]): number {
  const rad = Math.PI / 180;
  const dLat = (b[0] - a[0]) * rad;
  const dLng = (b[1] - a[1]) * rad;
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(a[0] * rad) * Math.cos(b[0] * rad) * Math.sin(dLng / 2) ** 2;
  return 2 * 6372.7976 * Math.asin(Math.sqrt(h));
}

async function put(index: PresenceIndex, id: string, at: readonly [number, number], nowMs = NOW): Promise<void> {
  await index.report(id, { available: true, lat: at[0], lng: at[1] }, nowMs);
}

beforeAll(() => {
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
  redis?.disconnect();
  await deleteKeys(REDIS_URL, `${PREFIX}*`);
});

describe('presence index', () => {
  it('returns live drivers nearest first, with distance, position and heartbeat', async () => {
    const index = freshIndex();
    const places = { GREENWICH, TOWER_OF_LONDON, BRITISH_MUSEUM, TRAFALGAR_SQUARE, COVENT_GARDEN };
    const ids = new Map<string, string>();
    for (const [name, at] of Object.entries(places)) {
      const id = randomUUID();
      ids.set(id, name);
      await put(index, id, at, NOW - 1000);
    }
    const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 10, maxRadiusKm: 30, nowMs: NOW });
    expect(found.map((d) => ids.get(d.driverId))).toEqual([
      'TRAFALGAR_SQUARE',
      'COVENT_GARDEN',
      'BRITISH_MUSEUM',
      'TOWER_OF_LONDON',
      'GREENWICH',
    ]);
    for (const d of found) {
      const at = places[ids.get(d.driverId) as keyof typeof places];
      expect(d.distanceKm).toBeCloseTo(haversineKm(CHARING_CROSS, at), 2);
      // Geohash storage keeps about 0.6 m of precision.
      expect(d.lat).toBeCloseTo(at[0], 4);
      expect(d.lng).toBeCloseTo(at[1], 4);
      expect(d.lastSeenAt).toBe(NOW - 1000);
    }
    expect(found.map((d) => d.distanceKm)).toEqual([...found.map((d) => d.distanceKm)].sort((a, b) => a - b));
    expect(await index.count()).toBe(5);
  });

  it('removes a driver who reports unavailable, and on remove()', async () => {
    const index = freshIndex();
    const a = randomUUID();
    const b = randomUUID();
    await put(index, a, TRAFALGAR_SQUARE);
    await put(index, b, COVENT_GARDEN);
    await index.report(a, { available: false, lat: TRAFALGAR_SQUARE[0], lng: TRAFALGAR_SQUARE[1] }, NOW + 1000);
    let found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 5, maxRadiusKm: 5, nowMs: NOW + 1000 });
    expect(found.map((d) => d.driverId)).toEqual([b]);
    expect(await redis.zscore(index.keys.seen, a)).toBeNull();
    await index.remove(b);
    found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 5, maxRadiusKm: 5, nowMs: NOW + 1000 });
    expect(found).toEqual([]);
    expect(await index.count()).toBe(0);
    expect(await redis.exists(index.keys.geo, index.keys.seen)).toBe(0);
  });

  it('does not return stale drivers, and sweep removes exactly those', async () => {
    const index = freshIndex();
    const stale = randomUUID();
    const edge = randomUUID();
    const live = randomUUID();
    await put(index, stale, TRAFALGAR_SQUARE, NOW - TTL - 1);
    await put(index, edge, COVENT_GARDEN, NOW - TTL); // exactly the TTL old: still live
    await put(index, live, TOWER_OF_LONDON, NOW - 5000);
    const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 5, maxRadiusKm: 10, nowMs: NOW });
    expect(found.map((d) => d.driverId)).toEqual([edge, live]);
    expect(await index.count()).toBe(3);
    expect(await index.count(NOW)).toBe(2);

    expect(await index.sweep(NOW)).toBe(1);
    expect(await index.count()).toBe(2);
    expect(await redis.zscore(index.keys.seen, stale)).toBeNull();
    expect(await redis.geopos(index.keys.geo, stale)).toEqual([null]);
    expect(await index.sweep(NOW)).toBe(0);
    // A minute later the edge driver has gone stale too.
    expect(await index.sweep(NOW + 1)).toBe(1);
    expect(await index.count()).toBe(1);
  });

  it('sweeps in batches and leaves a driver who re-reported', async () => {
    const index = createPresenceIndex(redis, { prefix: `${PREFIX}:batch`, ttlMs: TTL, sweepBatch: 7 });
    const ids = Array.from({ length: 30 }, () => randomUUID());
    for (const [i, id] of ids.entries()) await put(index, id, [51.5 + i * 0.001, -0.12], NOW - TTL - 10_000);
    await put(index, ids[3] as string, BRITISH_MUSEUM, NOW); // came back
    expect(await index.sweep(NOW)).toBe(29);
    const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 50, maxRadiusKm: 50, nowMs: NOW });
    expect(found.map((d) => d.driverId)).toEqual([ids[3]]);
  });

  it('looks past stale drivers crowding the first ring', async () => {
    const index = freshIndex();
    // 40 stale drivers within ~100 m of the pickup, a live one 200 m away (inside the same first ring,
    // behind all of them), another 1.3 km away.
    for (let i = 0; i < 40; i++) {
      await put(index, randomUUID(), [CHARING_CROSS[0] + (i % 10) * 0.0001, CHARING_CROSS[1] + 0.0002], NOW - TTL - 1);
    }
    const near = randomUUID();
    const far = randomUUID();
    await put(index, near, [CHARING_CROSS[0] + 0.0018, CHARING_CROSS[1]]);
    await put(index, far, BRITISH_MUSEUM);
    await put(index, randomUUID(), TOWER_OF_LONDON, NOW - TTL - 1);
    const one = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 1, maxRadiusKm: 10, nowMs: NOW });
    expect(one.map((d) => d.driverId)).toEqual([near]);
    const two = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 5, maxRadiusKm: 10, nowMs: NOW });
    expect(two.map((d) => d.driverId)).toEqual([near, far]);
  });

  it('expands the ring to find a far driver, and stops at maxRadiusKm', async () => {
    const index = freshIndex();
    const id = randomUUID();
    await put(index, id, HEATHROW);
    const km = haversineKm(CHARING_CROSS, HEATHROW); // about 23 km
    expect(km).toBeGreaterThan(20);
    expect(km).toBeLessThan(25);
    const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 3, maxRadiusKm: 50, nowMs: NOW });
    expect(found).toHaveLength(1);
    expect(found[0]?.driverId).toBe(id);
    expect(found[0]?.distanceKm).toBeCloseTo(km, 2);
    // Ring radii 0.25, 0.5, ... 16 then clamped to 20: Heathrow is beyond every one of them.
    expect(await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 3, maxRadiusKm: 20, nowMs: NOW })).toEqual(
      [],
    );
    // A maximum that is not a ring radius (0.25 · 2^k) is still searched in full.
    expect(
      await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 3, maxRadiusKm: km + 0.1, nowMs: NOW }),
    ).toHaveLength(1);
    expect(
      await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 3, maxRadiusKm: km - 0.1, nowMs: NOW }),
    ).toEqual([]);
  });

  it('returns at most want drivers, the nearest ones', async () => {
    const index = freshIndex();
    const byDistance: string[] = [];
    // 30 drivers due north of Charing Cross, 50 m apart.
    for (let i = 1; i <= 30; i++) {
      const id = randomUUID();
      byDistance.push(id);
      await put(index, id, [CHARING_CROSS[0] + i * 0.00045, CHARING_CROSS[1]]);
    }
    for (const want of [1, 5, 20, 30]) {
      const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want, maxRadiusKm: 50, nowMs: NOW });
      expect(found.map((d) => d.driverId)).toEqual(byDistance.slice(0, want));
    }
    const all = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 100, maxRadiusKm: 50, nowMs: NOW });
    expect(all).toHaveLength(30);
  });

  it('moves a driver who reports again from somewhere else', async () => {
    const index = freshIndex();
    const id = randomUUID();
    await put(index, id, HEATHROW, NOW - 60_000);
    expect(await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 1, maxRadiusKm: 2, nowMs: NOW })).toEqual(
      [],
    );
    await put(index, id, TRAFALGAR_SQUARE, NOW);
    const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 5, maxRadiusKm: 2, nowMs: NOW });
    expect(found.map((d) => d.driverId)).toEqual([id]);
    expect(found[0]?.lastSeenAt).toBe(NOW);
    expect(found[0]?.lat).toBeCloseTo(TRAFALGAR_SQUARE[0], 4);
    expect(await index.nearest(HEATHROW[0], HEATHROW[1], { want: 1, maxRadiusKm: 2, nowMs: NOW })).toEqual([]);
    expect(await index.count()).toBe(1);
  });

  it('refresh moves a live driver and renews the heartbeat, and never adds a removed or stale one', async () => {
    const index = freshIndex();
    const live = randomUUID();
    await put(index, live, CHARING_CROSS);
    expect(await index.refresh(live, TRAFALGAR_SQUARE[0], TRAFALGAR_SQUARE[1], NOW + 1000)).toBe(true);
    const moved = (await index.positions([live], NOW + 1000)).get(live);
    expect(moved?.lat).toBeCloseTo(TRAFALGAR_SQUARE[0], 4);
    expect(moved?.lastSeenAt).toBe(NOW + 1000);

    const removed = randomUUID();
    await put(index, removed, CHARING_CROSS);
    await index.remove(removed);
    expect(await index.refresh(removed, CHARING_CROSS[0], CHARING_CROSS[1], NOW)).toBe(false);
    const never = randomUUID();
    expect(await index.refresh(never, CHARING_CROSS[0], CHARING_CROSS[1], NOW)).toBe(false);
    const stale = randomUUID();
    await put(index, stale, CHARING_CROSS, NOW - TTL - 1);
    expect(await index.refresh(stale, CHARING_CROSS[0], CHARING_CROSS[1], NOW)).toBe(false);
    const found = await index.nearest(CHARING_CROSS[0], CHARING_CROSS[1], { want: 5, maxRadiusKm: 2, nowMs: NOW });
    expect(found.map((d) => d.driverId)).toEqual([live]);
  });

  it('rejects bad input before touching Redis', async () => {
    const index = freshIndex();
    await expect(index.report(randomUUID(), { available: true, lat: 91, lng: 0 }, NOW)).rejects.toThrow(RangeError);
    await expect(index.report(randomUUID(), { available: true, lat: 51.5, lng: Number.NaN }, NOW)).rejects.toThrow(
      RangeError,
    );
    await expect(index.report('', { available: true, lat: 51.5, lng: 0 }, NOW)).rejects.toThrow(TypeError);
    await expect(index.nearest(51.5, -0.12, { want: 0, maxRadiusKm: 5, nowMs: NOW })).rejects.toThrow(RangeError);
    await expect(index.nearest(51.5, -0.12, { want: 5, maxRadiusKm: 0, nowMs: NOW })).rejects.toThrow(RangeError);
    expect(await index.count()).toBe(0);
  });
});
