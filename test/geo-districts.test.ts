import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createDistrictLocator, loadDistricts } from '../shared/geo/districts.ts';
import { DEFAULT_DATA_DIR, nearestDistrict } from '../shared/geo/gazetteer.ts';
import { haversineMeters } from '../shared/geo/route-estimate.ts';

const districts = loadDistricts(DEFAULT_DATA_DIR);
const locator = createDistrictLocator(districts);
const geographic = districts.filter((d) => d.geographic);

describe('postcode districts', () => {
  it('loads every district with a centroid, with its council and post town', () => {
    expect(districts.length).toBe(2945);
    expect(locator.get('M1')).toMatchObject({
      area: 'M',
      country: 'England',
      localAuthorityCode: 'E08000003',
      localAuthorityName: 'Manchester',
      postTowns: ['Manchester'],
    });
    expect(locator.get('TF10')).toMatchObject({ county: 'Shropshire', localAuthorityCode: 'E06000020' });
    expect(locator.get('BT7')).toMatchObject({ country: 'Northern Ireland', localAuthorityCode: null });
  });

  it('marks large-user districts (all units at one point) as non-geographic', () => {
    for (const code of ['NW1W', 'EC1P', 'SE1P', 'RH77', 'WV99']) expect(locator.get(code)?.geographic).toBe(false);
    for (const code of ['M1', 'SW1A', 'TW6', 'TR22', 'PH42']) expect(locator.get(code)?.geographic).toBe(true);
  });

  it('finds the nearest geographic centroid, as a brute-force scan does', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 49.9, max: 60.9, noNaN: true }),
        fc.double({ min: -8.2, max: 1.8, noNaN: true }),
        (lat, lng) => {
          let best = Number.POSITIVE_INFINITY;
          for (const d of geographic) best = Math.min(best, haversineMeters({ lat, lng }, d));
          const got = locator.nearest(lat, lng, 10_000_000);
          expect(got).not.toBeNull();
          expect(got?.distanceMeters).toBeCloseTo(best, 6);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('gives nothing further than the limit', () => {
    expect(locator.nearest(40.64, -73.78)).toBeNull();
    expect(locator.nearest(Number.NaN, 0)).toBeNull();
    expect(locator.nearest(53.42, -6.27, 200_000)?.district.area).toBe('BT');
  });

  it('is exported from the gazetteer for other adapters', () => {
    expect(nearestDistrict(53.4774, -2.2309)?.district).toMatchObject({
      district: 'M1',
      localAuthorityCode: 'E08000003',
    });
    expect(nearestDistrict(51.47, -0.4543)?.district.localAuthorityCode).toBe('E09000017');
    expect(nearestDistrict(55.859, -4.258)?.district.localAuthorityCode).toBe('S12000049');
    expect(nearestDistrict(51.476, -3.179)?.district.localAuthorityCode).toBe('W06000015');
  });
});
