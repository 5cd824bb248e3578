/**
 * UK postcode districts (outward codes) with their centroids and local authorities, and a
 * grid index that finds the nearest district centroid to a point in microseconds.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readCsvRecords } from './csv.ts';
import { haversineMeters } from './route-estimate.ts';

export interface District {
  /** Outward code, e.g. "SW1A", "M1", "BT7". */
  district: string;
  area: string;
  lat: number;
  lng: number;
  /** England, Scotland, Wales or Northern Ireland. */
  country: string;
  /** GSS code of the authority holding most of the district; null for Northern Ireland rows. */
  localAuthorityCode: string | null;
  localAuthorityName: string | null;
  postcodeCount: number;
  /** Post towns (Wikipedia list, CC BY-SA; empty when that file is absent). */
  postTowns: string[];
  /** Former postal county (same source), e.g. "Hertfordshire". */
  county: string | null;
  /**
   * False for non-geographic (large-user, PO box) districts such as NW1W, EC1P or RH77: all
   * their units sit at one delivery point (90 % radius of 10 m or less, with 3 units or more).
   * They resolve when asked for by code but are never the "nearest district" of a point.
   */
  geographic: boolean;
}

export interface NearestDistrict {
  district: District;
  distanceMeters: number;
}

const num = (s: string | undefined): number => (s === undefined || s === '' ? Number.NaN : Number(s));

/** Reads uk-postcode-districts.csv, and the post-town file when it is there. */
export function loadDistricts(dataDir: string): District[] {
  const towns = new Map<string, { postTowns: string[]; county: string | null }>();
  const townFile = join(dataDir, 'uk-postcode-district-post-towns.csv');
  if (existsSync(townFile)) {
    for (const r of readCsvRecords(townFile)) {
      const d = r.district ?? '';
      towns.set(d, {
        postTowns: (r.post_town ?? '')
          .split(';')
          .map((s) => s.trim())
          .filter(Boolean),
        county: r.former_postal_county || null,
      });
    }
  }
  const out: District[] = [];
  for (const r of readCsvRecords(join(dataDir, 'uk-postcode-districts.csv'))) {
    const lat = num(r.latitude);
    const lng = num(r.longitude);
    const code = r.district ?? '';
    if (!code || !Number.isFinite(lat) || !Number.isFinite(lng)) continue;
    const extra = towns.get(code);
    out.push({
      district: code,
      area: r.area ?? '',
      lat,
      lng,
      country: r.country ?? '',
      localAuthorityCode: r.local_authority_code || null,
      localAuthorityName: r.local_authority_name || null,
      postcodeCount: Number(r.postcode_count) || 0,
      postTowns: extra?.postTowns ?? [],
      county: extra?.county ?? null,
      geographic: !(Number(r.radius_p90_m) <= 10 && Number(r.postcode_count) >= 3),
    });
  }
  return out;
}

/** Grid cell size in degrees (about 11 km north–south, 5–8 km east–west in the UK). */
const CELL_DEG = 0.1;
const METERS_PER_DEG_LAT = 111_195;

/**
 * A bucket grid over district centroids. `nearest` searches rings of cells outwards from the
 * point's cell and stops once no unvisited cell can hold anything closer than the best so far.
 */
export function createDistrictLocator(districts: readonly District[]) {
  const cells = new Map<number, District[]>();
  const cellKey = (iy: number, ix: number) => iy * 100_000 + ix;
  const toCell = (lat: number, lng: number) => ({
    iy: Math.floor(lat / CELL_DEG),
    ix: Math.floor(lng / CELL_DEG),
  });
  for (const d of districts) {
    if (!d.geographic) continue;
    const { iy, ix } = toCell(d.lat, d.lng);
    const key = cellKey(iy, ix);
    const list = cells.get(key);
    if (list) list.push(d);
    else cells.set(key, [d]);
  }
  const byCode = new Map(districts.map((d) => [d.district, d]));

  return {
    byCode,
    /** The district with exactly this outward code (upper case), if any. */
    get(code: string): District | undefined {
      return byCode.get(code);
    },
    /** The nearest district centroid within `maxMeters` (default 60 km), or null. */
    nearest(lat: number, lng: number, maxMeters = 60_000): NearestDistrict | null {
      if (!Number.isFinite(lat) || !Number.isFinite(lng)) return null;
      const { iy, ix } = toCell(lat, lng);
      // The narrowest a cell can be near this latitude (east–west shrinks with cos(lat)).
      const cosLat = Math.max(0.05, Math.cos(((Math.abs(lat) + CELL_DEG) * Math.PI) / 180));
      const minCell = CELL_DEG * METERS_PER_DEG_LAT * Math.min(1, cosLat);
      const maxRing = Math.ceil(maxMeters / minCell) + 1;
      let best: District | null = null;
      let bestM = Number.POSITIVE_INFINITY;
      for (let r = 0; r <= maxRing; r++) {
        // Anything in ring r is at least (r - 1) full cells away from the point.
        if (best && (r - 1) * minCell > bestM) break;
        for (let dy = -r; dy <= r; dy++) {
          for (let dx = -r; dx <= r; dx++) {
            if (Math.max(Math.abs(dy), Math.abs(dx)) !== r) continue;
            const list = cells.get(cellKey(iy + dy, ix + dx));
            if (!list) continue;
            for (const d of list) {
              const m = haversineMeters({ lat, lng }, d);
              if (m < bestM || (m === bestM && best && d.district < best.district)) {
                best = d;
                bestM = m;
              }
            }
          }
        }
      }
      if (!best || bestM > maxMeters) return null;
      return { district: best, distanceMeters: bestM };
    },
  };
}

export type DistrictLocator = ReturnType<typeof createDistrictLocator>;
