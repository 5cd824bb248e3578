import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Redis } from 'ioredis';
import { createPresenceIndex, type PresenceIndex } from '../shared/dispatch/presence-index.ts';
import { isMain } from '../shared/lifecycle.ts';

/**
 * Dispatch matching's Redis side: the nearest live drivers to a pickup, over a fleet of
 * 100,000 online drivers at London density.
 *
 *   baseline  GEOSEARCH ... BYRADIUS 10 km ASC WITHDIST (no COUNT), as a naive matcher would;
 *   nearest   presence index `nearest(want 20, maxRadiusKm 50)`: expanding ring, one Lua call;
 *   client ring  the same expanding ring done from Node (GEOSEARCH + ZMSCORE per ring), to
 *             show what the single round trip buys.
 * Latencies are client-observed, one request at a time, after a warm-up. Server-side time per
 * call comes from INFO commandstats deltas (approximate if something else uses this Redis).
 *
 * `npx tsx bench/matching.ts` prints JSON; BENCH_DRIVERS, BENCH_SEARCHES and BENCH_BASELINE_SEARCHES
 * override the sizes.
 */

const LONDON = { lat: 51.5074, lng: -0.1278 };
const LONDON_RADIUS_KM = 25;
const KM_PER_DEG_LAT = 111.32;
const TTL_MS = 120_000;
const WANT = 20;
const MAX_RADIUS_KM = 50;

export interface BenchMatchingOptions {
  redisUrl: string;
  prefix: string;
  drivers?: number;
  /** Pickups for the presence index's searches. Default 2000. */
  searches?: number;
  /** Pickups for the naive baseline (each tens of ms here). Default min(searches, 300). */
  baselineSearches?: number;
}

/** Small seeded PRNG (mulberry32), so every run places the same fleet and pickups. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A point in Greater London: 60 % from a normal distribution around Charing Cross (σ 5 km, the
 * busy centre), 40 % uniform over a 25 km disc (the suburbs), all clipped to the disc.
 * That puts about 400 drivers per km² in the West End and about 20 per km² at the edge, and on
 * average some 30,000 within 10 km of a pickup.
 */
function londonPoint(rand: () => number): { lat: number; lng: number } {
  let dx: number;
  let dy: number;
  do {
    if (rand() < 0.6) {
      const r = 5 * Math.sqrt(-2 * Math.log(1 - rand()));
      const th = 2 * Math.PI * rand();
      dx = r * Math.cos(th);
      dy = r * Math.sin(th);
    } else {
      const r = LONDON_RADIUS_KM * Math.sqrt(rand());
      const th = 2 * Math.PI * rand();
      dx = r * Math.cos(th);
      dy = r * Math.sin(th);
    }
  } while (dx * dx + dy * dy > LONDON_RADIUS_KM * LONDON_RADIUS_KM);
  return {
    lat: LONDON.lat + dy / KM_PER_DEG_LAT,
    lng: LONDON.lng + dx / (KM_PER_DEG_LAT * Math.cos((LONDON.lat * Math.PI) / 180)),
  };
}

/** A UUID-shaped member id from the seeded PRNG (members are UUIDs in production). */
function fakeUuid(rand: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(rand() * 16).toString(16)).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20)}`;
}

interface Stats {
  n: number;
  p50ms: number;
  p95ms: number;
  p99ms: number;
  maxms: number;
  meanms: number;
}

function stats(samplesMs: number[]): Stats {
  const s = [...samplesMs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))] ?? Number.NaN;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    n: s.length,
    p50ms: round(at(0.5)),
    p95ms: round(at(0.95)),
    p99ms: round(at(0.99)),
    maxms: round(s[s.length - 1] ?? Number.NaN),
    meanms: round(s.reduce((a, b) => a + b, 0) / Math.max(1, s.length)),
  };
}

async function timeEach<T>(
  points: { lat: number; lng: number }[],
  fn: (p: { lat: number; lng: number }) => Promise<T>,
  onResult?: (r: T) => void,
): Promise<number[]> {
  const out: number[] = [];
  for (const p of points) {
    const t0 = process.hrtime.bigint();
    const r = await fn(p);
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
    onResult?.(r);
  }
  return out;
}

/** INFO commandstats → { command: { calls, usec } }. */
async function commandStats(redis: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const text = await redis.info('commandstats');
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    out.set(m[1] as string, { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

function serverUsecPerCall(
  before: Map<string, { calls: number; usec: number }>,
  after: Map<string, { calls: number; usec: number }>,
  command: string,
): number | null {
  const a = after.get(command);
  if (!a) return null;
  const b = before.get(command) ?? { calls: 0, usec: 0 };
  const calls = a.calls - b.calls;
  return calls > 0 ? Math.round(((a.usec - b.usec) / calls) * 10) / 10 : null;
}

/** The naive matcher: every driver within 10 km, sorted, no COUNT. Returns [id, dist] pairs. */
async function naive(redis: Redis, geoKey: string, p: { lat: number; lng: number }): Promise<[string, string][]> {
  return (await redis.call(
    'GEOSEARCH',
    geoKey,
    'FROMLONLAT',
    p.lng,
    p.lat,
    'BYRADIUS',
    10,
    'km',
    'ASC',
    'WITHDIST',
  )) as [string, string][];
}

/** The same expanding ring as `nearest`, driven from Node: two round trips per ring. */
async function clientRing(
  redis: Redis,
  keys: { geo: string; seen: string },
  p: { lat: number; lng: number },
  nowMs: number,
): Promise<{ driverId: string; distanceKm: number }[]> {
  const cutoff = nowMs - TTL_MS;
  let r = 0.25;
  let count = WANT;
  for (;;) {
    const hits = (await redis.call(
      'GEOSEARCH',
      keys.geo,
      'FROMLONLAT',
      p.lng,
      p.lat,
      'BYRADIUS',
      r,
      'km',
      'ASC',
      'COUNT',
      count,
      'WITHDIST',
      'WITHCOORD',
    )) as [string, string, [string, string]][];
    const live: { driverId: string; distanceKm: number }[] = [];
    if (hits.length) {
      const seen = await redis.zmscore(keys.seen, ...hits.map((h) => h[0]));
      for (const [i, h] of hits.entries()) {
        const s = seen[i];
        if (s != null && Number(s) >= cutoff) live.push({ driverId: h[0], distanceKm: Number(h[1]) });
        if (live.length === WANT) return live;
      }
    }
    const stale = hits.length - live.length;
    if (hits.length === count) {
      if (count >= 1000) return live;
      count = Math.min(1000, Math.max(count * 2, WANT + stale));
    } else if (r >= MAX_RADIUS_KM) {
      return live;
    } else {
      count = Math.min(1000, WANT + stale);
      r = Math.min(r * 2, MAX_RADIUS_KM);
    }
  }
}

async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
}

async function usedMemory(redis: Redis): Promise<number> {
  const m = /^used_memory:(\d+)/m.exec(await redis.info('memory'));
  return Number(m?.[1] ?? 0);
}

export async function benchMatching(opts: BenchMatchingOptions): Promise<Record<string, unknown>> {
  const drivers = opts.drivers ?? 100_000;
  const searches = opts.searches ?? 2000;
  const baselineSearches = Math.min(searches, opts.baselineSearches ?? 300);
  const redis = new Redis(opts.redisUrl, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  const index = createPresenceIndex(redis, { prefix: opts.prefix, ttlMs: TTL_MS });
  const { keys } = index;
  const now = Date.now();
  try {
    const info = await redis.info('server');
    const redisVersion = /^redis_version:(.+)$/m.exec(info)?.[1]?.trim() ?? 'unknown';

    // Fleet: pipelined GEOADD/ZADD, 1,000 members per command.
    const fleetRand = rng(0x10d0);
    const ids: string[] = [];
    const mem0 = await usedMemory(redis);
    const load0 = process.hrtime.bigint();
    const BATCH = 1000;
    for (let i = 0; i < drivers; i += BATCH) {
      const geoArgs: (string | number)[] = [];
      const seenArgs: (string | number)[] = [];
      for (let j = i; j < Math.min(drivers, i + BATCH); j++) {
        const id = fakeUuid(fleetRand);
        const p = londonPoint(fleetRand);
        ids.push(id);
        geoArgs.push(p.lng, p.lat, id);
        // Heartbeats spread over the last 100 s, as phones report at different moments.
        seenArgs.push(now - Math.floor(fleetRand() * 100_000), id);
      }
      const res = await redis
        .pipeline()
        .geoadd(keys.geo, ...geoArgs)
        .zadd(keys.seen, ...seenArgs)
        .exec();
      for (const [err] of res ?? []) if (err) throw err;
    }
    const loadMs = Number(process.hrtime.bigint() - load0) / 1e6;
    const indexed = await index.count();
    const memoryBytesPerDriver = Math.round(((await usedMemory(redis)) - mem0) / Math.max(1, indexed));

    // report(): one MULTI per call, 50 in flight (as from concurrent API requests).
    const reportRand = rng(0xbeef);
    const reports = Math.min(10_000, drivers);
    const rep0 = process.hrtime.bigint();
    for (let i = 0; i < reports; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, reports - i) }, (_, k) =>
          index.report(ids[i + k] as string, { available: true, ...londonPoint(reportRand) }, now),
        ),
      );
    }
    const reportsPerSecond = Math.round(reports / (Number(process.hrtime.bigint() - rep0) / 1e9));

    // Pickups: from the same distribution (demand follows supply in a city).
    const pickRand = rng(0x5eed);
    const pickups = Array.from({ length: searches }, () => londonPoint(pickRand));
    const warm = pickups.slice(0, Math.min(200, searches));
    const nearestOf = (p: { lat: number; lng: number }) =>
      index.nearest(p.lat, p.lng, { want: WANT, maxRadiusKm: MAX_RADIUS_KM, nowMs: now });

    // Index-side phases first: the baseline's 30,000-member replies leave the Node heap full of
    // garbage, whose collection would otherwise land in these (sub-millisecond) timings.

    // (b) nearest(): expanding ring, one Lua call.
    for (const p of warm) await nearestOf(p);
    let nearestFound = 0;
    let farthestKm = 0;
    const cs0 = await commandStats(redis);
    const nearestMs = await timeEach(pickups, nearestOf, (r) => {
      nearestFound += r.length;
      farthestKm = Math.max(farthestKm, r[r.length - 1]?.distanceKm ?? 0);
    });
    const cs1 = await commandStats(redis);

    // (c) the same ring, from Node.
    for (const p of warm) await clientRing(redis, keys, p, now);
    const clientMs = await timeEach(pickups, (p) => clientRing(redis, keys, p, now));

    // Correctness: nearest() returns exactly the 20 nearest (every driver is live here).
    let mismatches = 0;
    const checked = pickups.slice(0, 500);
    for (const p of checked) {
      const exact = (await redis.call(
        'GEOSEARCH',
        keys.geo,
        'FROMLONLAT',
        p.lng,
        p.lat,
        'BYRADIUS',
        MAX_RADIUS_KM,
        'km',
        'ASC',
        'COUNT',
        WANT,
        'WITHDIST',
      )) as [string, string][];
      const a = exact.map((h) => Number(h[1]).toFixed(4));
      const b = (await nearestOf(p)).map((d) => d.distanceKm.toFixed(4));
      if (a.join() !== b.join()) mismatches++;
    }

    // First-ring radius: why 0.25 km.
    const startRadius: Record<string, Stats> = {};
    for (const startRadiusKm of [0.1, 0.25, 0.5, 1, 2]) {
      const idx: PresenceIndex = createPresenceIndex(redis, { prefix: opts.prefix, ttlMs: TTL_MS, startRadiusKm });
      const pts = pickups.slice(0, Math.min(1000, searches));
      for (const p of warm) await idx.nearest(p.lat, p.lng, { want: WANT, maxRadiusKm: MAX_RADIUS_KM, nowMs: now });
      startRadius[`${startRadiusKm}km`] = stats(
        await timeEach(pts, (p) => idx.nearest(p.lat, p.lng, { want: WANT, maxRadiusKm: MAX_RADIUS_KM, nowMs: now })),
      );
    }

    // 10 % of the fleet goes stale (stopped reporting, not yet swept): nearest() must skip them.
    const staleRand = rng(0x57a1e);
    let staled = 0;
    for (let i = 0; i < drivers; i += BATCH) {
      const args: (string | number)[] = [];
      for (let j = i; j < Math.min(drivers, i + BATCH); j++) {
        if (staleRand() < 0.1) {
          args.push(now - TTL_MS - 1 - Math.floor(staleRand() * 60_000), ids[j] as string);
          staled++;
        }
      }
      if (args.length) await redis.zadd(keys.seen, 'XX', ...args);
    }
    for (const p of warm) await nearestOf(p);
    let staleShort = 0;
    const withStaleMs = await timeEach(pickups, nearestOf, (r) => {
      if (r.length < WANT) staleShort++;
    });
    const sw0 = process.hrtime.bigint();
    const swept = await index.sweep(now);
    const sweepMs = Number(process.hrtime.bigint() - sw0) / 1e6;

    // (a) the naive 10 km search, last. Its replies average ~30,000 members (tens of ms each), so
    // it runs on the first `baselineSearches` pickups only, to keep a run well under a minute.
    const naivePickups = pickups.slice(0, baselineSearches);
    for (const p of warm.slice(0, 50)) await naive(redis, keys.geo, p);
    let naiveMembers = 0;
    const cs2 = await commandStats(redis);
    const naiveMs = await timeEach(
      naivePickups,
      (p) => naive(redis, keys.geo, p),
      (r) => {
        naiveMembers += r.length;
      },
    );
    const cs3 = await commandStats(redis);

    const ringCalls = (cs1.get('geosearch')?.calls ?? 0) - (cs0.get('geosearch')?.calls ?? 0);
    const a = stats(naiveMs);
    const b = stats(nearestMs);
    return {
      machine: { cpus: os.cpus().length, node: process.version, redis: redisVersion },
      drivers: indexed,
      searches,
      baselineSearches: naivePickups.length,
      fleet: `60 % N(Charing Cross, σ 5 km) + 40 % uniform over a ${LONDON_RADIUS_KM} km disc; pickups alike`,
      loadMs: Math.round(loadMs),
      memoryBytesPerDriver,
      reportsPerSecond,
      baselineNaive10km: {
        ...a,
        meanMembersReturned: Math.round(naiveMembers / Math.max(1, naivePickups.length)),
        serverUsecPerCall: serverUsecPerCall(cs2, cs3, 'geosearch'),
      },
      nearest: {
        ...b,
        want: WANT,
        maxRadiusKm: MAX_RADIUS_KM,
        meanFound: Math.round((nearestFound / searches) * 10) / 10,
        farthestKm: Math.round(farthestKm * 1000) / 1000,
        serverUsecPerCall: serverUsecPerCall(cs0, cs1, 'evalsha'),
        ringsPerNearest: Math.round((ringCalls / searches) * 100) / 100,
      },
      clientSideRing: stats(clientMs),
      nearestVsBaseline: {
        p50Speedup: Math.round((a.p50ms / b.p50ms) * 10) / 10,
        p99Speedup: Math.round((a.p99ms / b.p99ms) * 10) / 10,
        p99Ratio: Math.round((b.p99ms / a.p99ms) * 1000) / 1000,
      },
      p99TargetMs: 5,
      p99TargetMet: b.p99ms < 5,
      correctness: { checked: checked.length, mismatchesAgainstExact20Nearest: mismatches },
      startRadius,
      tenPercentStale: {
        staleDrivers: staled,
        ...stats(withStaleMs),
        searchesWithFewerThanWant: staleShort,
        sweptDrivers: swept,
        sweepMs: Math.round(sweepMs),
      },
    };
  } finally {
    await deleteByPrefix(redis, opts.prefix);
    redis.disconnect();
  }
}

if (isMain(import.meta.url)) {
  const result = await benchMatching({
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0',
    prefix: `bench-matching-${randomBytes(4).toString('hex')}`,
    drivers: process.env.BENCH_DRIVERS ? Number(process.env.BENCH_DRIVERS) : undefined,
    searches: process.env.BENCH_SEARCHES ? Number(process.env.BENCH_SEARCHES) : undefined,
    baselineSearches: process.env.BENCH_BASELINE_SEARCHES ? Number(process.env.BENCH_BASELINE_SEARCHES) : undefined,
  });
  console.log(JSON.stringify(result, null, 2));
}
