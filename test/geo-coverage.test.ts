import { describe, expect, it } from 'vitest';
import { readCsvRecords } from '../shared/geo/csv.ts';
import { DEFAULT_DATA_DIR, defaultGazetteer } from '../shared/geo/gazetteer.ts';
import { haversineMeters } from '../shared/geo/route-estimate.ts';
import { normalizeName } from '../shared/geo/text.ts';

// Every record of the data files resolves by its own name: a guard against ranking rules that
// hide one kind of place behind another.
const gazetteer = defaultGazetteer();
const read = (file: string) => readCsvRecords(`${DEFAULT_DATA_DIR}/${file}`);
const point = (r: Record<string, string>, lat = 'latitude', lng = 'longitude') => ({
  lat: Number(r[lat]),
  lng: Number(r[lng]),
});

describe('coverage of the data files', () => {
  it('every railway station by "<name> station" and by "<CRS> station"', () => {
    const problems: string[] = [];
    for (const r of read('uk-rail-stations.csv')) {
      const res = gazetteer.geocodeSync(`${r.name} station`);
      if (!res.ok || res.place.kind !== 'station' || haversineMeters(res.place, point(r)) > 2_000) {
        problems.push(`${r.name}: ${res.ok ? `${res.place.kind} ${res.place.name}` : res.message}`);
      }
      // DLR and STN are words that mean "station" themselves.
      if (r.crs === 'DLR' || r.crs === 'STN') continue;
      const byCode = gazetteer.geocodeSync(`${r.crs} station`);
      if (!byCode.ok || haversineMeters(byCode.place, point(r)) > 2_000) problems.push(`${r.crs} station`);
    }
    expect(problems).toEqual([]);
  });

  it('every TfL station by "<name> station" (names shared with a distant rail station aside)', () => {
    const railNames = new Map(read('uk-rail-stations.csv').map((r) => [normalizeName(r.name ?? ''), point(r)]));
    const problems: string[] = [];
    for (const r of read('london-tfl-stations.csv')) {
      const name = ((r.name ?? '').split(' / ')[0] ?? '').replace(/\bStn\b/, '').replace(/\bTn Ctr\b/, 'Town Centre');
      const rail = railNames.get(normalizeName(name.replace(/\s+(?:Underground|DLR|Rail)?\s*Station\s*$/i, '')));
      if (rail && haversineMeters(rail, point(r)) > 2_000) continue;
      const res = gazetteer.geocodeSync(`${name} station`);
      if (!res.ok || res.place.kind !== 'station' || haversineMeters(res.place, point(r)) > 2_000) {
        problems.push(`${r.name}: ${res.ok ? `${res.place.kind} ${res.place.name}` : res.message}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every UK airport by its name and by "<IATA> airport"', () => {
    const problems: string[] = [];
    for (const r of read('airports.csv').filter((a) => a.country_code === 'GB')) {
      for (const q of [r.name ?? '', `${r.iata} airport`]) {
        const res = gazetteer.geocodeSync(q);
        if (!res.ok || res.place.kind !== 'airport' || res.place.iata !== r.iata) problems.push(q);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every town of 20,000 people or more whose name is its own', () => {
    const towns = read('uk-towns.csv');
    const count = new Map<string, number>();
    for (const t of towns) count.set(normalizeName(t.name ?? ''), (count.get(normalizeName(t.name ?? '')) ?? 0) + 1);
    const problems: string[] = [];
    for (const t of towns) {
      if (Number(t.population) < 20_000 || t.feature_code === 'PPLX' || count.get(normalizeName(t.name ?? '')) !== 1)
        continue;
      const res = gazetteer.geocodeSync(t.name ?? '');
      if (!res.ok || haversineMeters(res.place, point(t)) > 5_000) {
        problems.push(`${t.name}: ${res.ok ? `${res.place.kind} ${res.place.name}` : res.message}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every postcode district by its outward code, at its centroid and with its council', () => {
    const problems: string[] = [];
    for (const d of read('uk-postcode-districts.csv')) {
      const res = gazetteer.geocodeSync(d.district ?? '');
      const ok =
        res.ok &&
        res.place.kind === 'postcode' &&
        res.place.postcodeDistrict === d.district &&
        res.place.localAuthorityCode === (d.local_authority_code || null) &&
        haversineMeters(res.place, point(d)) < 1;
      if (!ok) problems.push(d.district ?? '');
    }
    expect(problems).toEqual([]);
  });
});
