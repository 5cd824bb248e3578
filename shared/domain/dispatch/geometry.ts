/**
 * Dispatch geometry: great-circle distances in miles, distance from a point to a great-circle
 * segment, and national-network corridor coverage. Pure: no I/O, no clock, no allocation beyond
 * a few numbers per call.
 *
 * Model and error bound. Everything is computed on a sphere of the mean Earth radius (IUGG,
 * 6,371,008.8 m, the same constant as shared/geo/route-estimate.ts). Against the WGS84
 * ellipsoid a spherical distance is short by 0.07 % (north–south) to 0.32 % (east–west) at
 * 52°N, and by at most about 0.5 % anywhere: under 0.05 mile on a 15-mile corridor buffer and
 * under 0.6 mile on the 163 miles from London to Manchester. Floating-point error is below a
 * metre. The point-to-segment distance is exact on that sphere (n-vector cross-track distance),
 * not a projection.
 *
 * Why not an equirectangular projection around the segment: it is a little faster, but it
 * replaces the great circle by a straight line in longitude/latitude, which east–west
 * corridors bow away from (the great circle bulges towards the pole). Measured against the
 * exact distance for random segments within Great Britain and points within 30 miles of them,
 * the projection was off by up to about 2 miles for 200-mile segments and 7.5 miles for 400-mile
 * segments, too much next to a 15-mile buffer. The exact form costs about ten trigonometric
 * calls per point, which is nothing at dispatch sizes (a few hundred candidates).
 */

export interface LatLng {
  lat: number;
  lng: number;
}

/** A national-network route: the capsule of points within `bufferMiles` of the segment from → to. */
export interface Corridor {
  from: LatLng & { name: string };
  to: LatLng & { name: string };
  bufferMiles: number;
}

/** Mean Earth radius (IUGG, 6,371,008.8 m) in statute miles (1 mile = 1,609.344 m). */
export const EARTH_RADIUS_MILES = 6_371_008.8 / 1_609.344;

const RAD = Math.PI / 180;

/** Great-circle distance in miles between two WGS84 points (haversine formula). */
export function haversineMiles(a: LatLng, b: LatLng): number {
  const dLat = (b.lat - a.lat) * RAD;
  const dLng = (b.lng - a.lng) * RAD;
  const s = Math.sin(dLat / 2) ** 2 + Math.cos(a.lat * RAD) * Math.cos(b.lat * RAD) * Math.sin(dLng / 2) ** 2;
  return 2 * EARTH_RADIUS_MILES * Math.asin(Math.min(1, Math.sqrt(s)));
}

/**
 * Distance in miles from `p` to the shorter great-circle arc from `a` to `b` (inclusive of its
 * ends): the cross-track distance when the foot of the perpendicular lies on the arc, otherwise
 * the distance to the nearer end. `a === b` (or coincident points) gives the distance to `a`.
 * Exact on the sphere; see the module comment for the bound against the ellipsoid. Meant for
 * segments shorter than half the globe (anything in one country).
 */
export function pointToSegmentMiles(p: LatLng, a: LatLng, b: LatLng): number {
  // Unit vectors (n-vectors) of the three points.
  const aLat = a.lat * RAD;
  const aLng = a.lng * RAD;
  const bLat = b.lat * RAD;
  const bLng = b.lng * RAD;
  const pLat = p.lat * RAD;
  const pLng = p.lng * RAD;
  const ax = Math.cos(aLat) * Math.cos(aLng);
  const ay = Math.cos(aLat) * Math.sin(aLng);
  const az = Math.sin(aLat);
  const bx = Math.cos(bLat) * Math.cos(bLng);
  const by = Math.cos(bLat) * Math.sin(bLng);
  const bz = Math.sin(bLat);
  const px = Math.cos(pLat) * Math.cos(pLng);
  const py = Math.cos(pLat) * Math.sin(pLng);
  const pz = Math.sin(pLat);

  // Normal of the great circle through a and b.
  let nx = ay * bz - az * by;
  let ny = az * bx - ax * bz;
  let nz = ax * by - ay * bx;
  const len = Math.hypot(nx, ny, nz);
  // Coincident (or antipodal) ends: no unique great circle; treat as a point. 1e-12 rad is 6 µm.
  if (len < 1e-12) return haversineMiles(p, a);
  nx /= len;
  ny /= len;
  nz /= len;

  // The foot of the perpendicular lies on the arc iff p is on the inner side of both the plane
  // through a and the normal and the plane through b and the normal: (a × p)·n >= 0 and (p × b)·n >= 0.
  const afterA = (ay * pz - az * py) * nx + (az * px - ax * pz) * ny + (ax * py - ay * px) * nz;
  const beforeB = (py * bz - pz * by) * nx + (pz * bx - px * bz) * ny + (px * by - py * bx) * nz;
  if (afterA >= 0 && beforeB >= 0) {
    const sinXt = px * nx + py * ny + pz * nz;
    return EARTH_RADIUS_MILES * Math.abs(Math.asin(Math.max(-1, Math.min(1, sinXt))));
  }
  return Math.min(haversineMiles(p, a), haversineMiles(p, b));
}

/**
 * True when both pickup and dropoff lie within `corridor.bufferMiles` (inclusive) of the segment
 * from → to. The capsule is symmetric, so either direction of travel is covered.
 */
export function corridorCovers(corridor: Corridor, pickup: LatLng, dropoff: LatLng): boolean {
  const { from, to, bufferMiles } = corridor;
  return pointToSegmentMiles(pickup, from, to) <= bufferMiles && pointToSegmentMiles(dropoff, from, to) <= bufferMiles;
}
