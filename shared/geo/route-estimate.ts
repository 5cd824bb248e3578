/**
 * The offline route estimate: great-circle (haversine) distance times a circuity factor, a
 * duration from average speeds by distance band, and the share of that time spent below a
 * taxi meter's changeover speed. Pure and deterministic: no I/O, no clock, no randomness.
 *
 * Circuity (road distance / great-circle distance), interpolated linearly by great-circle km:
 *
 *   0 km 1.40 · 5 km 1.35 · 20 km 1.28 · 80 km 1.22 · 250 km and beyond 1.20
 *
 *   Why: short urban trips are the most roundabout (one-way systems, rivers with few bridges,
 *   no straight arterial road between two given doors); long trips run mostly on motorways and
 *   trunk roads, whose circuity settles near 1.2. Newell (1980) put urban network distance at
 *   about 1.2 × straight line for random points, O'Sullivan (1996) found 1.21–1.23 around
 *   stations, Ballou, Rahardja & Sakai (2002, Transportation Research A 36) report national
 *   road circuity near 1.2 for developed countries, and Dan Olner's "How wiggly is Britain?"
 *   (2015, Google routes between random GB points) shows the factor falling as trips get
 *   longer. Taxi trips start and end at doors, not network nodes, so the short end is set
 *   higher than the urban network averages. Checks against road atlases: London–Manchester is
 *   262 km great-circle → 314 km here (about 320–335 km by the M40/M6 or M1/M6);
 *   Leeds–Manchester 58 km → 72 km (about 70–75 km by the M62). Every segment keeps
 *   d·c(d) strictly increasing, so a longer straight line never gives a shorter road.
 *
 * Duration: the road distance is charged band by band, like tax brackets, at an average
 * door-to-door speed per band (so duration is continuous and never falls as distance grows):
 *
 *   first 3 km 18 km/h · 3–10 km 30 km/h · 10–30 km 55 km/h · 30–80 km 85 km/h · beyond 95 km/h
 *
 *   Why: every trip starts and ends in streets; city-centre traffic in London and the big
 *   cities averages roughly 10–20 km/h (TfL reports central-London traffic speeds of about
 *   7–10 mph); suburban A-roads run at 25–35 km/h; longer trips reach dual carriageways and then
 *   motorways, whose averages are pulled down by junctions and traffic. London–Manchester comes
 *   out at about 3 h 50 min and Leeds–Manchester at about 1 h 15 min, close to route planners
 *   outside the rush hour (a little slow for short inter-city hops between two centres).
 *
 * Slow time (`slowSeconds`): UK meters charge by time instead of distance below a changeover
 * speed (about 10–17 km/h depending on the tariff). The estimate counts this share of each
 * band's time as slow: first 3 km 40 %, 3–10 km 25 %, 10–30 km 10 %, 30–80 km 4 %, beyond
 * 2 %. These shares are assumptions (stop-start at junctions and lights in towns, almost none
 * on motorways) to be calibrated against real trip logs; they are not taken from a source.
 *
 * Slow distance (`slowRunningMeters`): a meter charges that time *instead of* distance, so the
 * distance covered while running slow is not charged by distance as well. It is taken as the
 * slow time at 6 km/h (`SLOW_RUNNING_KMH`): standing at lights and crawling in queues, below
 * every changeover speed. Also an assumption, to be calibrated with the shares.
 */
import type { Place, RouteEstimate, RouteProvider } from './types.ts';

type LatLng = Pick<Place, 'lat' | 'lng'>;

/** Mean Earth radius (IUGG), metres. */
export const EARTH_RADIUS_M = 6_371_008.8;

/** Great-circle distance in metres between two WGS84 points (haversine formula). */
export function haversineMeters(a: LatLng, b: LatLng): number {
  const toRad = Math.PI / 180;
  const dLat = (b.lat - a.lat) * toRad;
  const dLng = (b.lng - a.lng) * toRad;
  const s = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * toRad) * Math.cos(b.lat * toRad) * Math.sin(dLng / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(s)));
}

export interface SpeedBand {
  /** Upper end of the band in road km (Infinity for the last band). */
  upToKm: number;
  speedKmh: number;
  /** Share (0..1) of the band's time expected below the meter's changeover speed. */
  slowShare: number;
}

export interface RouteEstimatorOptions {
  /** [great-circle km, factor] anchors, ascending by km; linear between, flat after the last. */
  circuity: ReadonlyArray<readonly [number, number]>;
  /** Bands in ascending order; the last must reach Infinity. */
  bands: ReadonlyArray<SpeedBand>;
  /** `source` of the estimates (default "great-circle"). */
  source: string;
}

export const DEFAULT_CIRCUITY: ReadonlyArray<readonly [number, number]> = [
  [0, 1.4],
  [5, 1.35],
  [20, 1.28],
  [80, 1.22],
  [250, 1.2],
];

export const DEFAULT_BANDS: ReadonlyArray<SpeedBand> = [
  { upToKm: 3, speedKmh: 18, slowShare: 0.4 },
  { upToKm: 10, speedKmh: 30, slowShare: 0.25 },
  { upToKm: 30, speedKmh: 55, slowShare: 0.1 },
  { upToKm: 80, speedKmh: 85, slowShare: 0.04 },
  { upToKm: Number.POSITIVE_INFINITY, speedKmh: 95, slowShare: 0.02 },
];

const DEFAULTS: RouteEstimatorOptions = { circuity: DEFAULT_CIRCUITY, bands: DEFAULT_BANDS, source: 'great-circle' };

/** The circuity factor for a great-circle distance in km. */
export function circuityFactor(greatCircleKm: number, anchors = DEFAULT_CIRCUITY): number {
  const first = anchors[0];
  if (!first) return 1;
  if (greatCircleKm <= first[0]) return first[1];
  for (let i = 1; i < anchors.length; i++) {
    const lo = anchors[i - 1];
    const hi = anchors[i];
    if (!lo || !hi) break;
    if (greatCircleKm <= hi[0]) {
      const t = (greatCircleKm - lo[0]) / (hi[0] - lo[0]);
      return lo[1] + t * (hi[1] - lo[1]);
    }
  }
  const last = anchors[anchors.length - 1];
  return last ? last[1] : 1;
}

/** Estimated road distance (metres, unrounded) for a great-circle distance in metres. */
export function roadDistanceMeters(greatCircleMeters: number, anchors = DEFAULT_CIRCUITY): number {
  return greatCircleMeters * circuityFactor(greatCircleMeters / 1000, anchors);
}

/** Total and slow seconds (unrounded) for a road distance in metres, band by band. */
export function timeForRoadDistance(
  roadMeters: number,
  bands: ReadonlyArray<SpeedBand> = DEFAULT_BANDS,
): { durationSeconds: number; slowSeconds: number } {
  let remainingKm = Math.max(0, roadMeters) / 1000;
  let lowerKm = 0;
  let durationSeconds = 0;
  let slowSeconds = 0;
  for (const band of bands) {
    if (remainingKm <= 0) break;
    const km = Math.min(remainingKm, band.upToKm - lowerKm);
    if (km > 0) {
      const seconds = (km / band.speedKmh) * 3600;
      durationSeconds += seconds;
      slowSeconds += seconds * band.slowShare;
      remainingKm -= km;
    }
    lowerKm = band.upToKm;
  }
  return { durationSeconds, slowSeconds };
}

/**
 * Slow seconds for a route whose distance and duration came from elsewhere (a map provider):
 * the modelled slow share at that road distance applied to the given duration.
 */
export function slowSecondsFor(
  roadMeters: number,
  durationSeconds: number,
  bands: ReadonlyArray<SpeedBand> = DEFAULT_BANDS,
): number {
  const model = timeForRoadDistance(roadMeters, bands);
  if (model.durationSeconds <= 0) return 0;
  return Math.round(durationSeconds * (model.slowSeconds / model.durationSeconds));
}

/** Average speed while running slow (below the meter's changeover speed), km/h: an assumption (see above). */
export const SLOW_RUNNING_KMH = 6;

/** Of a route's distance, the metres covered during its slow seconds (charged by time, not distance). */
export function slowRunningMeters(slowSeconds: number, distanceMeters: number): number {
  return Math.min(Math.max(0, distanceMeters), (Math.max(0, slowSeconds) * SLOW_RUNNING_KMH) / 3.6);
}

/** The estimate between two points, synchronously. */
export function estimateRoute(from: LatLng, to: LatLng, opts: Partial<RouteEstimatorOptions> = {}): RouteEstimate {
  const o = { ...DEFAULTS, ...opts };
  const road = roadDistanceMeters(haversineMeters(from, to), o.circuity);
  const t = timeForRoadDistance(road, o.bands);
  const durationSeconds = Math.round(t.durationSeconds);
  return {
    distanceMeters: Math.round(road),
    durationSeconds,
    slowSeconds: Math.min(durationSeconds, Math.round(t.slowSeconds)),
    source: o.source,
  };
}

/** A RouteProvider over `estimateRoute`; the `apiKey` option is ignored (nothing is called). */
export function createRouteEstimator(opts: Partial<RouteEstimatorOptions> = {}): RouteProvider {
  const o = { ...DEFAULTS, ...opts };
  return {
    route: async (from, to) => estimateRoute(from, to, o),
  };
}
