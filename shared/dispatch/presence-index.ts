import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * The live driver presence index used by dispatch matching.
 *
 * Two Redis keys, both under `opts.prefix`:
 * - `<prefix>:presence:geo`  a geo set (GEOADD) of available drivers' last positions;
 * - `<prefix>:presence:seen` a sorted set, score = last heartbeat (ms since the epoch).
 * A member is in both or in neither: every write touches both keys atomically (MULTI or a
 * Lua script). A driver is live while `nowMs - lastSeenAt <= ttlMs`; older ones are stale,
 * never returned by `nearest`, and removed by `sweep`.
 *
 * `nearest` is an expanding-ring search done server-side in one Lua script (one round trip):
 * GEOSEARCH ... BYRADIUS r ASC COUNT k from a small radius, doubling r until `want` live drivers
 * are found or `maxRadiusKm` is searched. GEOSEARCH's cost grows with the number of members in
 * the geohash cells that cover r (it scores every one of them before sorting), so a 10 km search
 * in central London reads tens of thousands of members, while a 0.25 km ring reads a few hundred.
 * Stale members found on the way are skipped and COUNT grows past them, so a stale driver
 * never hides a live one behind it.
 *
 * Cluster note: the script reads both keys, so under Redis Cluster they must share a slot; give
 * a prefix with a hash tag (`{dispatch}`) there. Needs Redis >= 6.2 (GEOSEARCH, ZMSCORE).
 */

export interface PresenceReport {
  available: boolean;
  lat: number;
  lng: number;
}

export interface NearbyDriverPosition {
  lat: number;
  lng: number;
  lastSeenAt: number;
}

export interface NearbyDriver {
  driverId: string;
  /** Great-circle distance from the search point, as Redis computes it (km). */
  distanceKm: number;
  lat: number;
  lng: number;
  /** Last heartbeat, ms since the epoch. */
  lastSeenAt: number;
}

export interface NearestOptions {
  /** How many live drivers to return at most (1..maxCandidates). */
  want: number;
  /** Never look farther than this. */
  maxRadiusKm: number;
  nowMs: number;
}

export interface PresenceIndexOptions {
  prefix: string;
  /** A driver not heard from for longer than this is no longer available. */
  ttlMs: number;
  /**
   * First ring of the expanding search (km). Default 0.25: at central-London density (a few
   * hundred drivers per km²) 20 drivers are within it, and in the suburbs the extra rings cost
   * little because few members are in them (bench/matching.ts compares 0.1 to 2 km).
   */
  startRadiusKm?: number;
  /**
   * Upper bound on GEOSEARCH COUNT inside one `nearest` call (live + stale candidates looked
   * at). Bounds the script's run time when a whole area has gone stale and `sweep` has not run
   * yet; past it `nearest` returns what it has. Default 1000.
   */
  maxCandidates?: number;
  /** Members removed per atomic `sweep` step. Default 500. */
  sweepBatch?: number;
}

export interface PresenceIndex {
  readonly keys: { readonly geo: string; readonly seen: string };
  /** Live positions of the given drivers (for tier 2, whose drivers can be anywhere): absent when unavailable or stale. */
  positions(driverIds: readonly string[], nowMs: number): Promise<Map<string, NearbyDriverPosition>>;
  /** Record a driver's report: available → indexed at (lat, lng) with heartbeat nowMs; not → removed. */
  report(driverId: string, report: PresenceReport, nowMs: number): Promise<void>;
  /**
   * A heartbeat that never makes a driver available: moves a driver who is live now (seen
   * within the TTL) to (lat, lng) with heartbeat nowMs, atomically; false, changing nothing,
   * for one who is not (removed, or stale).
   */
  refresh(driverId: string, lat: number, lng: number, nowMs: number): Promise<boolean>;
  remove(driverId: string): Promise<void>;
  /** Live drivers nearest to (lat, lng), nearest first, at most `want`, within `maxRadiusKm`. */
  nearest(lat: number, lng: number, opts: NearestOptions): Promise<NearbyDriver[]>;
  /** Remove drivers whose heartbeat is older than the TTL; returns how many were removed. */
  sweep(nowMs: number): Promise<number>;
  /** Members in the index (live or not yet swept); with `nowMs`, only the live ones. */
  count(nowMs?: number): Promise<number>;
}

/** GEOADD's accepted latitude range (Web Mercator). */
export const MAX_LAT = 85.05112878;

/**
 * KEYS: geo, seen. ARGV: lng, lat, want, startKm, maxKm, cutoff (live iff seen >= cutoff), maxCount.
 * Returns a flat array: id, dist, lng, lat, seen, id, ... (all strings: Lua numbers would be
 * truncated to integers on the way out).
 */
const NEAREST_LUA = `
local lng, lat = ARGV[1], ARGV[2]
local want = tonumber(ARGV[3])
local r = tonumber(ARGV[4])
local maxR = tonumber(ARGV[5])
local cutoff = tonumber(ARGV[6])
local maxCount = tonumber(ARGV[7])
local count = want
while true do
  local hits = redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', lng, lat, 'BYRADIUS', r, 'km',
    'ASC', 'COUNT', count, 'WITHDIST', 'WITHCOORD')
  local n = #hits
  local out = {}
  local live = 0
  if n > 0 then
    local ids = {}
    for i = 1, n do ids[i] = hits[i][1] end
    local seen = redis.call('ZMSCORE', KEYS[2], unpack(ids))
    for i = 1, n do
      local s = seen[i]
      if s and tonumber(s) >= cutoff then
        local h = hits[i]
        local j = live * 5
        out[j + 1] = h[1]
        out[j + 2] = h[2]
        out[j + 3] = h[3][1]
        out[j + 4] = h[3][2]
        out[j + 5] = s
        live = live + 1
        if live == want then return out end
      end
    end
  end
  local stale = n - live
  if n == count then
    -- COUNT was the limit: more members inside r; look past the stale ones at the same radius.
    if count >= maxCount then return out end
    count = math.min(maxCount, math.max(count * 2, want + stale))
  elseif r >= maxR then
    return out
  else
    -- Everything inside r was seen; the stale ones will come back first in the wider ring.
    count = math.min(maxCount, want + stale)
    r = math.min(r * 2, maxR)
  end
end
`;

/** KEYS: geo, seen. ARGV: cutoff (stale iff seen < cutoff), batch. Removes one batch atomically. */
const SWEEP_LUA = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
  redis.call('ZREM', KEYS[1], unpack(ids))
  redis.call('ZREM', KEYS[2], unpack(ids))
end
return #ids
`;

/**
 * KEYS: geo, seen. ARGV: id, lng, lat, now, cutoff (live iff seen >= cutoff). Moves a live
 * member and renews its heartbeat; returns 1, or 0 when it is absent or stale.
 */
const REFRESH_LUA = `
local seen = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not seen or tonumber(seen) < tonumber(ARGV[5]) then return 0 end
redis.call('GEOADD', KEYS[1], ARGV[2], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1
`;

interface Script {
  run(redis: Redis, keys: string[], args: (string | number)[]): Promise<unknown>;
}

/** EVALSHA, falling back to EVAL (which also caches the script) when the server lacks it. */
function script(source: string): Script {
  const sha = createHash('sha1').update(source).digest('hex');
  return {
    async run(redis, keys, args) {
      try {
        return await redis.evalsha(sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
          return await redis.eval(source, keys.length, ...keys, ...args);
        }
        throw err;
      }
    },
  };
}

const nearestScript = script(NEAREST_LUA);
const sweepScript = script(SWEEP_LUA);
const refreshScript = script(REFRESH_LUA);

function checkDriverId(driverId: string): void {
  if (typeof driverId !== 'string' || driverId.length === 0) throw new TypeError('driverId must be a non-empty string');
}

function checkPoint(lat: number, lng: number): void {
  if (!Number.isFinite(lat) || Math.abs(lat) > MAX_LAT) throw new RangeError(`latitude out of range: ${lat}`);
  if (!Number.isFinite(lng) || Math.abs(lng) > 180) throw new RangeError(`longitude out of range: ${lng}`);
}

function checkNow(nowMs: number): void {
  if (!Number.isFinite(nowMs)) throw new RangeError(`nowMs must be a finite number: ${nowMs}`);
}

/** ioredis resolves EXEC with [error, result] pairs; surface the first error. */
function checkExec(results: [Error | null, unknown][] | null): void {
  if (!results) throw new Error('presence transaction aborted');
  for (const [err] of results) if (err) throw err;
}

export function createPresenceIndex(redis: Redis, opts: PresenceIndexOptions): PresenceIndex {
  const { prefix, ttlMs } = opts;
  const startRadiusKm = opts.startRadiusKm ?? 0.25;
  const maxCandidates = opts.maxCandidates ?? 1000;
  const sweepBatch = opts.sweepBatch ?? 500;
  if (!prefix) throw new TypeError('prefix is required');
  if (!(ttlMs > 0)) throw new RangeError('ttlMs must be > 0');
  if (!(startRadiusKm > 0)) throw new RangeError('startRadiusKm must be > 0');
  if (!Number.isInteger(maxCandidates) || maxCandidates < 1 || maxCandidates > 5000) {
    // 5000 keeps unpack() in the script well inside Lua's C stack limit.
    throw new RangeError('maxCandidates must be an integer in 1..5000');
  }
  if (!Number.isInteger(sweepBatch) || sweepBatch < 1 || sweepBatch > 5000) {
    throw new RangeError('sweepBatch must be an integer in 1..5000');
  }
  const keys = { geo: `${prefix}:presence:geo`, seen: `${prefix}:presence:seen` } as const;

  return {
    keys,

    async report(driverId, { available, lat, lng }, nowMs) {
      checkDriverId(driverId);
      checkNow(nowMs);
      if (available) {
        checkPoint(lat, lng);
        checkExec(await redis.multi().geoadd(keys.geo, lng, lat, driverId).zadd(keys.seen, nowMs, driverId).exec());
      } else {
        checkExec(await redis.multi().zrem(keys.geo, driverId).zrem(keys.seen, driverId).exec());
      }
    },

    async refresh(driverId, lat, lng, nowMs) {
      checkDriverId(driverId);
      checkPoint(lat, lng);
      checkNow(nowMs);
      const kept = await refreshScript.run(redis, [keys.geo, keys.seen], [driverId, lng, lat, nowMs, nowMs - ttlMs]);
      return Number(kept) === 1;
    },

    async remove(driverId) {
      checkDriverId(driverId);
      checkExec(await redis.multi().zrem(keys.geo, driverId).zrem(keys.seen, driverId).exec());
    },

    async nearest(lat, lng, { want, maxRadiusKm, nowMs }) {
      checkPoint(lat, lng);
      checkNow(nowMs);
      if (!Number.isInteger(want) || want < 1 || want > maxCandidates) {
        throw new RangeError(`want must be an integer in 1..${maxCandidates}`);
      }
      if (!(maxRadiusKm > 0) || !Number.isFinite(maxRadiusKm)) throw new RangeError('maxRadiusKm must be > 0');
      const flat = (await nearestScript.run(
        redis,
        [keys.geo, keys.seen],
        [lng, lat, want, Math.min(startRadiusKm, maxRadiusKm), maxRadiusKm, nowMs - ttlMs, maxCandidates],
      )) as string[];
      const out: NearbyDriver[] = [];
      for (let i = 0; i + 4 < flat.length; i += 5) {
        out.push({
          driverId: flat[i] as string,
          distanceKm: Number(flat[i + 1]),
          lng: Number(flat[i + 2]),
          lat: Number(flat[i + 3]),
          lastSeenAt: Number(flat[i + 4]),
        });
      }
      return out;
    },

    async sweep(nowMs) {
      checkNow(nowMs);
      const cutoff = nowMs - ttlMs;
      let removed = 0;
      // Each step is atomic, so a driver who reports between steps is never removed by mistake.
      for (;;) {
        const n = Number(await sweepScript.run(redis, [keys.geo, keys.seen], [cutoff, sweepBatch]));
        removed += n;
        if (n < sweepBatch) return removed;
      }
    },

    async positions(driverIds, nowMs) {
      const found = new Map<string, NearbyDriverPosition>();
      if (driverIds.length === 0) return found;
      const [pos, seen] = await Promise.all([
        redis.geopos(keys.geo, ...driverIds),
        redis.zmscore(keys.seen, ...driverIds),
      ]);
      driverIds.forEach((id, i) => {
        const p = pos[i];
        const at = seen[i];
        if (!p || at === null || at === undefined) return;
        const lastSeenAt = Number(at);
        if (nowMs - lastSeenAt > ttlMs) return;
        found.set(id, { lng: Number(p[0]), lat: Number(p[1]), lastSeenAt });
      });
      return found;
    },
    async count(nowMs) {
      if (nowMs === undefined) return await redis.zcard(keys.geo);
      checkNow(nowMs);
      return await redis.zcount(keys.seen, nowMs - ttlMs, '+inf');
    },
  };
}
