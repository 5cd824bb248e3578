import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  circuityFactor,
  createRouteEstimator,
  DEFAULT_CIRCUITY,
  estimateRoute,
  haversineMeters,
  roadDistanceMeters,
  slowSecondsFor,
  timeForRoadDistance,
} from '../shared/geo/route-estimate.ts';

const LONDON = { lat: 51.5074, lng: -0.1278 };
const MANCHESTER = { lat: 53.4808, lng: -2.2426 };
const EDINBURGH = { lat: 55.9533, lng: -3.1883 };
const LEEDS = { lat: 53.7997, lng: -1.5492 };

const ukPoint = fc.record({
  lat: fc.double({ min: 49.9, max: 60.9, noNaN: true }),
  lng: fc.double({ min: -8.2, max: 1.8, noNaN: true }),
});

describe('haversine', () => {
  it('gives known great-circle distances', () => {
    expect(Math.abs(haversineMeters(LONDON, MANCHESTER) - 262_000)).toBeLessThan(1_500);
    expect(Math.abs(haversineMeters(LONDON, EDINBURGH) - 534_000)).toBeLessThan(2_000);
    // Along a meridian one degree of latitude is about 111.2 km.
    expect(Math.abs(haversineMeters({ lat: 51, lng: 0 }, { lat: 52, lng: 0 }) - 111_195)).toBeLessThan(10);
    expect(haversineMeters(LEEDS, LEEDS)).toBe(0);
  });

  it('is symmetric, non-negative and obeys the triangle inequality', () => {
    fc.assert(
      fc.property(ukPoint, ukPoint, ukPoint, (a, b, c) => {
        const ab = haversineMeters(a, b);
        expect(ab).toBeGreaterThanOrEqual(0);
        expect(Math.abs(ab - haversineMeters(b, a))).toBeLessThan(1e-6);
        expect(haversineMeters(a, c)).toBeLessThanOrEqual(ab + haversineMeters(b, c) + 1e-6);
      }),
    );
  });
});

describe('circuity', () => {
  it('is highest for short trips and settles at 1.2 for long ones', () => {
    expect(circuityFactor(0)).toBe(1.4);
    expect(circuityFactor(5)).toBeCloseTo(1.35);
    expect(circuityFactor(20)).toBeCloseTo(1.28);
    expect(circuityFactor(80)).toBeCloseTo(1.22);
    expect(circuityFactor(250)).toBeCloseTo(1.2);
    expect(circuityFactor(900)).toBeCloseTo(1.2);
    expect(circuityFactor(12.5)).toBeCloseTo((1.35 + 1.28) / 2);
    expect(DEFAULT_CIRCUITY.every(([, f]) => f > 1)).toBe(true);
  });

  it('never makes a longer straight line a shorter road', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1_000_000, noNaN: true }),
        fc.double({ min: 0, max: 50_000, noNaN: true }),
        (d, extra) => {
          expect(roadDistanceMeters(d + extra)).toBeGreaterThanOrEqual(roadDistanceMeters(d));
          expect(roadDistanceMeters(d)).toBeGreaterThanOrEqual(d);
        },
      ),
    );
  });
});

describe('route estimate', () => {
  it('London–Manchester: 262 km great-circle, about 314 km and under 4 hours by road', () => {
    const r = estimateRoute(LONDON, MANCHESTER);
    expect(r.source).toBe('great-circle');
    expect(r.distanceMeters).toBeGreaterThan(300_000);
    expect(r.distanceMeters).toBeLessThan(335_000);
    expect(r.durationSeconds).toBeGreaterThan(3.5 * 3600);
    expect(r.durationSeconds).toBeLessThan(4.5 * 3600);
    expect(r.slowSeconds).toBeGreaterThan(0);
    expect(r.slowSeconds).toBeLessThan(r.durationSeconds * 0.1);
  });

  it('a short city trip is slow and largely stop-start', () => {
    // Kings Cross to Victoria: about 3.8 km great-circle.
    const r = estimateRoute({ lat: 51.5308, lng: -0.1238 }, { lat: 51.4952, lng: -0.1441 });
    expect(r.distanceMeters).toBeGreaterThan(5_000);
    expect(r.distanceMeters).toBeLessThan(6_000);
    const kmh = r.distanceMeters / 1000 / (r.durationSeconds / 3600);
    expect(kmh).toBeGreaterThan(12);
    expect(kmh).toBeLessThan(25);
    expect(r.slowSeconds / r.durationSeconds).toBeGreaterThan(0.25);
  });

  it('is zero for the same point', () => {
    expect(estimateRoute(LEEDS, LEEDS)).toEqual({
      distanceMeters: 0,
      durationSeconds: 0,
      slowSeconds: 0,
      source: 'great-circle',
    });
  });

  it('is symmetric and deterministic', () => {
    fc.assert(
      fc.property(ukPoint, ukPoint, (a, b) => {
        const ab = estimateRoute(a, b);
        expect(estimateRoute(b, a)).toEqual(ab);
        expect(estimateRoute(a, b)).toEqual(ab);
      }),
    );
  });

  it('distance, duration and slow time never fall as the trip gets longer', () => {
    // Points along one bearing from Leeds, each further than the last.
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 4, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (d, extra) => {
          const near = estimateRoute(LEEDS, { lat: LEEDS.lat + d * 0.6, lng: LEEDS.lng + d * 0.4 });
          const far = estimateRoute(LEEDS, { lat: LEEDS.lat + (d + extra) * 0.6, lng: LEEDS.lng + (d + extra) * 0.4 });
          expect(far.distanceMeters).toBeGreaterThanOrEqual(near.distanceMeters);
          expect(far.durationSeconds).toBeGreaterThanOrEqual(near.durationSeconds);
          expect(far.slowSeconds).toBeGreaterThanOrEqual(near.slowSeconds);
        },
      ),
    );
  });

  it('keeps slow time within the duration and integers everywhere', () => {
    fc.assert(
      fc.property(ukPoint, ukPoint, (a, b) => {
        const r = estimateRoute(a, b);
        for (const v of [r.distanceMeters, r.durationSeconds, r.slowSeconds]) expect(Number.isInteger(v)).toBe(true);
        expect(r.slowSeconds).toBeGreaterThanOrEqual(0);
        expect(r.slowSeconds).toBeLessThanOrEqual(r.durationSeconds);
      }),
    );
  });

  it('charges the bands like brackets: the first 3 km at 18 km/h, 40 % slow', () => {
    const t = timeForRoadDistance(3_000);
    expect(t.durationSeconds).toBeCloseTo((3 / 18) * 3600);
    expect(t.slowSeconds).toBeCloseTo(0.4 * (3 / 18) * 3600);
    const t10 = timeForRoadDistance(10_000);
    expect(t10.durationSeconds).toBeCloseTo((3 / 18) * 3600 + (7 / 30) * 3600);
  });

  it('slowSecondsFor applies the modelled slow share to a provider’s duration', () => {
    const model = timeForRoadDistance(8_000);
    expect(slowSecondsFor(8_000, 1_000)).toBe(Math.round((1_000 * model.slowSeconds) / model.durationSeconds));
    expect(slowSecondsFor(0, 100)).toBe(0);
  });

  it('the provider resolves the same estimate and honours its options', async () => {
    expect(await createRouteEstimator().route(LONDON, MANCHESTER)).toEqual(estimateRoute(LONDON, MANCHESTER));
    const straight = createRouteEstimator({ circuity: [[0, 1]], source: 'straight-line' });
    const r = await straight.route(LONDON, MANCHESTER, { apiKey: 'ignored' });
    expect(r.source).toBe('straight-line');
    expect(r.distanceMeters).toBe(Math.round(haversineMeters(LONDON, MANCHESTER)));
  });
});
