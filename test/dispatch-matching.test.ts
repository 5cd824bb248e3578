import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Corridor,
  corridorCovers,
  EARTH_RADIUS_MILES,
  haversineMiles,
  type LatLng,
  pointToSegmentMiles,
} from '../shared/domain/dispatch/geometry.ts';
import {
  DEAD_RUN_CIRCUITY,
  DEFAULT_DISTANCE_HIRE_MILES,
  type DriverCandidate,
  type DriverOffer,
  defaultEtaSeconds,
  type MatchJob,
  type MatchOptions,
  type MatchResult,
  matchCandidates,
  type PartnerCandidate,
  SERVES,
  type SkipReason,
  URBAN_SPEED_MPH,
} from '../shared/domain/dispatch/matching.ts';
import { VEHICLE_SEATS, VEHICLE_TYPES, type VehicleType } from '../shared/domain/tariffs/types.ts';

const LONDON = { lat: 51.5074, lng: -0.1278 };
const MANCHESTER = { lat: 53.4808, lng: -2.2426 };
const HEATHROW = { lat: 51.47, lng: -0.4543 };
const MANCHESTER_AIRPORT = { lat: 53.3588, lng: -2.2727 };
const BRISTOL = { lat: 51.4545, lng: -2.5879 };
const LEEDS = { lat: 53.8008, lng: -1.5491 };
const EDINBURGH = { lat: 55.9533, lng: -3.1883 };

const LONDON_MANCHESTER: Corridor = {
  from: { name: 'London', ...LONDON },
  to: { name: 'Manchester', ...MANCHESTER },
  bufferMiles: 15,
};
const LONDON_BRISTOL: Corridor = {
  from: { name: 'London', ...LONDON },
  to: { name: 'Bristol', ...BRISTOL },
  bufferMiles: 15,
};

const NOW = Date.UTC(2026, 0, 15, 9, 0, 0);
const TTL = 60_000;
const OPTS: MatchOptions = { now: NOW, presenceTtlMs: TTL, distanceHireMiles: DEFAULT_DISTANCE_HIRE_MILES };

/** The point `miles` due north of `p` (along a meridian, so exactly `miles` away). */
function north(p: LatLng, miles: number): LatLng {
  return { lat: p.lat + (miles / EARTH_RADIUS_MILES) * (180 / Math.PI), lng: p.lng };
}

/** A live, free, local London saloon driver 1 mile from central London; override what a test needs. */
function driver(id: string, over: Partial<DriverCandidate> = {}): DriverCandidate {
  return {
    id,
    position: north(LONDON, 1),
    lastSeenAt: NOW - 5_000,
    available: true,
    home: LONDON,
    operatingRadiusMiles: 10,
    activeJobs: 0,
    maxConcurrentJobs: 1,
    vehicle: { id: `v-${id}`, class: 'saloon', seats: 4, wheelchairAccessible: false },
    nationalNetwork: false,
    corridors: [],
    ...over,
  };
}

function vehicle(cls: VehicleType, seats: number, wheelchairAccessible = false): DriverCandidate['vehicle'] {
  return { id: `v-${cls}`, class: cls, seats, wheelchairAccessible };
}

function partner(id: string, over: Partial<PartnerCandidate> = {}): PartnerCandidate {
  return {
    id,
    classes: ['saloon', 'estate', 'mpv'],
    maxPassengers: 8,
    wheelchairAccessible: false,
    capacity: 5,
    activeJobs: 0,
    ...over,
  };
}

const LOCAL_JOB: MatchJob = {
  pickup: LONDON,
  dropoff: HEATHROW,
  distanceMiles: 17,
  passengers: 2,
  vehicleType: 'saloon',
};

const AIRPORT_RUN: MatchJob = {
  pickup: HEATHROW,
  dropoff: MANCHESTER_AIRPORT,
  distanceMiles: 190,
  passengers: 2,
  vehicleType: 'saloon',
};

const ids = (r: MatchResult) => r.ordered.map((o) => (o.kind === 'driver' ? o.driverId : o.partnerId));
const reasonOf = (r: MatchResult, id: string) => r.skipped.find((s) => s.id === id)?.reason;

describe('geometry', () => {
  it('haversine distances between UK cities', () => {
    expect(haversineMiles(LONDON, MANCHESTER)).toBeCloseTo(162.8, 1);
    expect(haversineMiles(LONDON, BRISTOL)).toBeCloseTo(105.9, 1);
    expect(haversineMiles(LONDON, LONDON)).toBe(0);
    expect(haversineMiles(LONDON, north(LONDON, 7))).toBeCloseTo(7, 9);
  });

  it('distance to a segment: on it, beside it, and beyond its ends', () => {
    expect(pointToSegmentMiles(LONDON, LONDON, MANCHESTER)).toBeCloseTo(0, 9);
    expect(pointToSegmentMiles(MANCHESTER, LONDON, MANCHESTER)).toBeCloseTo(0, 9);
    expect(pointToSegmentMiles(HEATHROW, LONDON, MANCHESTER)).toBeCloseTo(13.24, 2);
    expect(pointToSegmentMiles(MANCHESTER_AIRPORT, LONDON, MANCHESTER)).toBeCloseTo(5.74, 2);
    // Past the Manchester end (the segment runs north-west): the distance is to the end point.
    expect(pointToSegmentMiles(north(MANCHESTER, 20), LONDON, MANCHESTER)).toBeCloseTo(20, 9);
    // A degenerate segment is a point.
    expect(pointToSegmentMiles(BRISTOL, LONDON, LONDON)).toBe(haversineMiles(BRISTOL, LONDON));
  });

  it('corridor covers Heathrow → Manchester Airport (either way), not London → Bristol', () => {
    expect(corridorCovers(LONDON_MANCHESTER, HEATHROW, MANCHESTER_AIRPORT)).toBe(true);
    expect(corridorCovers(LONDON_MANCHESTER, MANCHESTER_AIRPORT, HEATHROW)).toBe(true);
    const reversed = { ...LONDON_MANCHESTER, from: LONDON_MANCHESTER.to, to: LONDON_MANCHESTER.from };
    expect(corridorCovers(reversed, HEATHROW, MANCHESTER_AIRPORT)).toBe(true);
    expect(corridorCovers(LONDON_MANCHESTER, LONDON, BRISTOL)).toBe(false);
    // The buffer is inclusive and matters: Heathrow is 13.24 miles off the line.
    expect(corridorCovers({ ...LONDON_MANCHESTER, bufferMiles: 13 }, HEATHROW, MANCHESTER_AIRPORT)).toBe(false);
  });

  const gb = fc.record({
    lat: fc.double({ min: 49.9, max: 58.7, noNaN: true }),
    lng: fc.double({ min: -6, max: 1.8, noNaN: true }),
  });

  it('property: matches a brute-force walk along the great-circle arc', () => {
    // Oracle: sample the arc by spherical interpolation and take the nearest sample. The true
    // nearest point is at most half a step from a sample, so the oracle overshoots by < step/2.
    const STEPS = 2000;
    const toVec = (p: LatLng) => {
      const la = (p.lat * Math.PI) / 180;
      const lo = (p.lng * Math.PI) / 180;
      return [Math.cos(la) * Math.cos(lo), Math.cos(la) * Math.sin(lo), Math.sin(la)] as const;
    };
    fc.assert(
      fc.property(gb, gb, gb, (p, a, b) => {
        const va = toVec(a);
        const vb = toVec(b);
        const omega = haversineMiles(a, b) / EARTH_RADIUS_MILES;
        let best = Math.min(haversineMiles(p, a), haversineMiles(p, b));
        if (omega > 1e-9) {
          for (let i = 1; i < STEPS; i++) {
            const t = i / STEPS;
            const wa = Math.sin((1 - t) * omega) / Math.sin(omega);
            const wb = Math.sin(t * omega) / Math.sin(omega);
            const x = wa * va[0] + wb * vb[0];
            const y = wa * va[1] + wb * vb[1];
            const z = wa * va[2] + wb * vb[2];
            const q = { lat: (Math.asin(z) * 180) / Math.PI, lng: (Math.atan2(y, x) * 180) / Math.PI };
            best = Math.min(best, haversineMiles(p, q));
          }
        }
        const d = pointToSegmentMiles(p, a, b);
        const halfStep = (omega * EARTH_RADIUS_MILES) / STEPS / 2;
        expect(d).toBeLessThanOrEqual(best + 1e-6);
        expect(d).toBeGreaterThanOrEqual(best - halfStep - 1e-6);
        // Symmetric in the ends.
        expect(pointToSegmentMiles(p, b, a)).toBeCloseTo(d, 6);
      }),
      { seed: 20260115, numRuns: 300 },
    );
  });
});

describe('vehicle class compatibility', () => {
  it('is the documented table', () => {
    expect(SERVES).toEqual({
      saloon: ['saloon', 'estate', 'executive', '5seater', '6seater', '7seater', 'mpv'],
      estate: ['estate', '6seater', '7seater', 'mpv'],
      executive: ['executive', 'luxury'],
      luxury: ['luxury'],
      '5seater': ['5seater', '6seater', '7seater', 'mpv'],
      '6seater': ['6seater', '7seater', 'mpv'],
      '7seater': ['7seater', 'mpv'],
      mpv: ['mpv'],
      wav: ['wav'],
    });
  });

  it('every class serves itself, upgrades never run in reverse, and only a WAV serves a WAV job', () => {
    for (const requested of VEHICLE_TYPES) {
      expect(SERVES[requested]).toContain(requested);
      for (const other of SERVES[requested]) {
        if (other !== requested) expect(SERVES[other]).not.toContain(requested);
      }
    }
    expect(SERVES.wav).toEqual(['wav']);
    for (const requested of VEHICLE_TYPES) if (requested !== 'wav') expect(SERVES[requested]).not.toContain('wav');
  });

  it('a saloon job may go to an MPV; an MPV job never to a saloon', () => {
    const mpvDriver = driver('mpv-driver', { vehicle: vehicle('mpv', 8) });
    const saloonDriver = driver('saloon-driver', { vehicle: vehicle('saloon', 4) });
    const saloonJob = matchCandidates(LOCAL_JOB, [mpvDriver, saloonDriver], [], OPTS);
    expect(ids(saloonJob).sort()).toEqual(['mpv-driver', 'saloon-driver']);
    const mpvJob = matchCandidates({ ...LOCAL_JOB, vehicleType: 'mpv' }, [mpvDriver, saloonDriver], [], OPTS);
    expect(ids(mpvJob)).toEqual(['mpv-driver']);
    expect(reasonOf(mpvJob, 'saloon-driver')).toBe('wrong_class');
  });
});

describe('matchCandidates: tier 1 (local drivers)', () => {
  it('offers the nearest eligible local driver first, with ETA and dead miles from its position', () => {
    const r = matchCandidates(
      LOCAL_JOB,
      [
        driver('far', { position: north(LONDON, 3) }),
        driver('near', { position: north(LONDON, 1) }),
        driver('mid', { position: north(LONDON, 2) }),
      ],
      [],
      OPTS,
    );
    expect(ids(r)).toEqual(['near', 'mid', 'far']);
    expect(r.skipped).toEqual([]);
    const first = r.ordered[0] as DriverOffer;
    expect(first).toMatchObject({ tier: 1, kind: 'driver', driverId: 'near', vehicleId: 'v-near' });
    expect(first.deadMiles).toBeCloseTo(DEAD_RUN_CIRCUITY, 9);
    // 1.3 road miles at 20 mph = 234 seconds.
    expect(first.etaSeconds).toBeCloseTo((DEAD_RUN_CIRCUITY / URBAN_SPEED_MPH) * 3600, 6);
    expect(first.etaSeconds).toBeCloseTo(234, 6);
    expect(defaultEtaSeconds(north(LONDON, 1), LONDON)).toBeCloseTo(234, 6);
  });

  const filterCases: Array<[string, Partial<DriverCandidate>, Partial<MatchJob>, SkipReason]> = [
    ['offline', { available: false }, {}, 'offline'],
    ['stale presence', { lastSeenAt: NOW - TTL - 1 }, {}, 'stale_presence'],
    ['never reported presence', { lastSeenAt: null }, {}, 'stale_presence'],
    ['no position', { position: null }, {}, 'no_position'],
    ['full (at max concurrent jobs)', { activeJobs: 2, maxConcurrentJobs: 2 }, {}, 'at_capacity'],
    ['too few seats', { vehicle: vehicle('7seater', 6) }, { vehicleType: '6seater', passengers: 7 }, 'too_few_seats'],
    ['wrong class', { vehicle: vehicle('saloon', 4) }, { vehicleType: 'executive' }, 'wrong_class'],
    [
      'WAV job, non-accessible WAV',
      { vehicle: vehicle('wav', 4, false) },
      { vehicleType: 'wav' },
      'no_wheelchair_access',
    ],
    [
      'wheelchair flag, non-accessible',
      { vehicle: vehicle('mpv', 8, false) },
      { wheelchair: true },
      'no_wheelchair_access',
    ],
    ['WAV job, saloon', { vehicle: vehicle('saloon', 4, true) }, { vehicleType: 'wav' }, 'wrong_class'],
    ['outside operating radius', { home: MANCHESTER, operatingRadiusMiles: 25 }, {}, 'outside_area'],
    ['no vehicle', { vehicle: null }, {}, 'no_vehicle'],
  ];

  it.each(filterCases)(
    'skips a driver who is %s, with that reason, and still offers the others',
    (_, over, job, reason) => {
      const r = matchCandidates(
        { ...LOCAL_JOB, ...job },
        [driver('bad', over), driver('good', { vehicle: vehicle(job.vehicleType ?? 'saloon', 8, true) })],
        [],
        OPTS,
      );
      expect(ids(r)).toEqual(['good']);
      expect(r.skipped).toEqual([{ kind: 'driver', id: 'bad', reason }]);
    },
  );

  it('skips drivers who already declined or let the offer expire', () => {
    const r = matchCandidates(LOCAL_JOB, [driver('declined'), driver('fresh')], [], {
      ...OPTS,
      excludeDrivers: new Set(['declined']),
    });
    expect(ids(r)).toEqual(['fresh']);
    expect(reasonOf(r, 'declined')).toBe('excluded');
  });

  it('presence exactly TTL old is still live; accessible vehicles take wheelchair jobs', () => {
    const r = matchCandidates(
      { ...LOCAL_JOB, wheelchair: true },
      [driver('edge', { lastSeenAt: NOW - TTL, vehicle: vehicle('mpv', 8, true) })],
      [],
      OPTS,
    );
    expect(ids(r)).toEqual(['edge']);
  });

  it('a pickup exactly on the edge of the operating area is inside it', () => {
    const home = north(LONDON, -10);
    const radius = haversineMiles(home, LONDON);
    expect(radius).toBeCloseTo(10, 9);
    expect(ids(matchCandidates(LOCAL_JOB, [driver('edge', { home, operatingRadiusMiles: radius })], [], OPTS))).toEqual(
      ['edge'],
    );
    const justShort = driver('short', { home, operatingRadiusMiles: radius - 1e-6 });
    expect(reasonOf(matchCandidates(LOCAL_JOB, [justShort], [], OPTS), 'short')).toBe('outside_area');
  });

  it('breaks ETA ties by driver id, whatever the input order', () => {
    const same = north(LONDON, 2);
    const pool = ['d-3', 'd-1', 'd-2'].map((id) => driver(id, { position: same }));
    expect(ids(matchCandidates(LOCAL_JOB, pool, [], OPTS))).toEqual(['d-1', 'd-2', 'd-3']);
    expect(ids(matchCandidates(LOCAL_JOB, pool.toReversed(), [], OPTS))).toEqual(['d-1', 'd-2', 'd-3']);
  });

  it('ranks by a supplied ETA estimator and skips drivers it cannot route', () => {
    const eta = (from: LatLng) => (from.lat > LONDON.lat + 0.02 ? 60 : from.lat > LONDON.lat ? 600 : Number.NaN);
    const r = matchCandidates(
      LOCAL_JOB,
      [
        driver('near-but-slow', { position: north(LONDON, 1) }),
        driver('far-but-fast', { position: north(LONDON, 3) }),
        driver('no-route', { position: north(LONDON, -1) }),
      ],
      [],
      { ...OPTS, etaSeconds: eta },
    );
    expect(ids(r)).toEqual(['far-but-fast', 'near-but-slow']);
    expect(r.ordered[0]?.etaSeconds).toBe(60);
    expect(reasonOf(r, 'no-route')).toBe('unreachable');
  });

  it('offers a driver listed twice only once', () => {
    const r = matchCandidates(LOCAL_JOB, [driver('twice'), driver('twice')], [], OPTS);
    expect(ids(r)).toEqual(['twice']);
    expect(r.skipped).toEqual([{ kind: 'driver', id: 'twice', reason: 'duplicate' }]);
  });
});

describe('matchCandidates: tier 2 (national network)', () => {
  /** A national-network driver based in Manchester, just dropped off near Heathrow. */
  const national = (id: string, corridors: Corridor[], over: Partial<DriverCandidate> = {}) =>
    driver(id, {
      nationalNetwork: true,
      home: MANCHESTER,
      operatingRadiusMiles: 10,
      position: north(HEATHROW, 1),
      corridors,
      ...over,
    });

  it('offers a national driver whose corridor covers the journey, after the local drivers', () => {
    const r = matchCandidates(
      AIRPORT_RUN,
      [
        national('national', [LONDON_BRISTOL, LONDON_MANCHESTER]),
        driver('local', { home: HEATHROW, position: north(HEATHROW, 4) }),
        national('wrong-corridor', [LONDON_BRISTOL]),
        driver('manchester-local', { home: MANCHESTER, position: north(HEATHROW, 1) }),
      ],
      [],
      OPTS,
    );
    // The national driver is nearer, but tier 1 comes first.
    expect(r.ordered.map((o) => [o.tier, o.kind === 'driver' ? o.driverId : o.partnerId])).toEqual([
      [1, 'local'],
      [2, 'national'],
    ]);
    expect(reasonOf(r, 'wrong-corridor')).toBe('corridor_not_covered');
    expect(reasonOf(r, 'manchester-local')).toBe('outside_area');
  });

  it('only when the corridor covers both ends: London–Manchester does not cover London → Bristol', () => {
    const job: MatchJob = { ...AIRPORT_RUN, pickup: LONDON, dropoff: BRISTOL, distanceMiles: 120 };
    const r = matchCandidates(
      job,
      [
        national('lm', [LONDON_MANCHESTER], { position: north(LONDON, 2) }),
        national('lb', [LONDON_BRISTOL], { position: north(LONDON, 2) }),
      ],
      [],
      OPTS,
    );
    expect(ids(r)).toEqual(['lb']);
    expect(reasonOf(r, 'lm')).toBe('corridor_not_covered');
  });

  it('only for distance hires (inclusive threshold, default 30 miles, configurable)', () => {
    const pool = [national('national', [LONDON_MANCHESTER])];
    const shortHop: MatchJob = { ...AIRPORT_RUN, dropoff: LONDON, distanceMiles: 17 };
    expect(reasonOf(matchCandidates(shortHop, pool, [], OPTS), 'national')).toBe('not_distance_hire');
    const noOverride = { now: NOW, presenceTtlMs: TTL };
    expect(reasonOf(matchCandidates({ ...shortHop, distanceMiles: 29.9 }, pool, [], noOverride), 'national')).toBe(
      'not_distance_hire',
    );
    expect(ids(matchCandidates({ ...shortHop, distanceMiles: 30 }, pool, [], noOverride))).toEqual(['national']);
    expect(ids(matchCandidates(shortHop, pool, [], { ...OPTS, distanceHireMiles: 15 }))).toEqual(['national']);
  });

  it('a driver in both tiers is offered once, in tier 1', () => {
    const both = national('both', [LONDON_MANCHESTER], { home: HEATHROW });
    const r = matchCandidates(AIRPORT_RUN, [both], [], OPTS);
    expect(r.ordered).toHaveLength(1);
    expect(r.ordered[0]).toMatchObject({ tier: 1, driverId: 'both' });
  });

  it('national drivers still pass every live filter', () => {
    const r = matchCandidates(
      AIRPORT_RUN,
      [
        national('stale', [LONDON_MANCHESTER], { lastSeenAt: NOW - 10 * TTL }),
        national('busy', [LONDON_MANCHESTER], { activeJobs: 1 }),
      ],
      [],
      OPTS,
    );
    expect(r.ordered).toEqual([]);
    expect(r.skipped.map((s) => s.reason)).toEqual(['stale_presence', 'at_capacity']);
  });
});

describe('matchCandidates: tier 3 (partner operators)', () => {
  it('offers partners after every driver, most free capacity first, ties by id', () => {
    const r = matchCandidates(
      AIRPORT_RUN,
      [
        driver('local', { home: HEATHROW, position: north(HEATHROW, 4) }),
        driver('national', {
          nationalNetwork: true,
          home: MANCHESTER,
          position: north(HEATHROW, 1),
          corridors: [LONDON_MANCHESTER],
        }),
      ],
      [
        partner('fleet-a', { capacity: 3 }),
        partner('fleet-c', { capacity: 4 }),
        partner('fleet-b', { capacity: 5, activeJobs: 1 }),
      ],
      OPTS,
    );
    expect(r.ordered.map((o) => o.tier)).toEqual([1, 2, 3, 3, 3]);
    expect(ids(r)).toEqual(['local', 'national', 'fleet-b', 'fleet-c', 'fleet-a']);
    expect(r.ordered[2]).toEqual({
      tier: 3,
      kind: 'partner',
      partnerId: 'fleet-b',
      etaSeconds: null,
      deadMiles: null,
      freeCapacity: 4,
    });
  });

  it('filters partners by class (with upgrades), wheelchair access, party size, capacity and exclusion', () => {
    const job: MatchJob = { ...LOCAL_JOB, vehicleType: '6seater', passengers: 6, wheelchair: true };
    const r = matchCandidates(
      job,
      [],
      [
        partner('ok', { classes: ['mpv'], wheelchairAccessible: true }),
        partner('saloons-only', { classes: ['saloon', 'estate'], wheelchairAccessible: true }),
        partner('no-wav', { classes: ['7seater'] }),
        partner('small', { classes: ['6seater'], wheelchairAccessible: true, maxPassengers: 5 }),
        partner('full', { classes: ['6seater'], wheelchairAccessible: true, capacity: 2, activeJobs: 2 }),
        partner('declined', { classes: ['6seater'], wheelchairAccessible: true }),
      ],
      { ...OPTS, excludePartners: new Set(['declined']) },
    );
    expect(ids(r)).toEqual(['ok']);
    expect(r.skipped).toEqual([
      { kind: 'partner', id: 'saloons-only', reason: 'wrong_class' },
      { kind: 'partner', id: 'no-wav', reason: 'no_wheelchair_access' },
      { kind: 'partner', id: 'small', reason: 'too_few_seats' },
      { kind: 'partner', id: 'full', reason: 'at_capacity' },
      { kind: 'partner', id: 'declined', reason: 'excluded' },
    ]);
  });
});

describe('matchCandidates: properties', () => {
  const RUNS = { seed: Number(process.env.DISPATCH_PROPERTY_SEED ?? 20260115), numRuns: 400 };
  const PLACES = [LONDON, MANCHESTER, HEATHROW, MANCHESTER_AIRPORT, BRISTOL, LEEDS, EDINBURGH];

  const jitter = (p: LatLng, deg: number): fc.Arbitrary<LatLng> =>
    fc
      .tuple(fc.double({ min: -deg, max: deg, noNaN: true }), fc.double({ min: -deg, max: deg, noNaN: true }))
      .map(([dLat, dLng]) => ({ lat: p.lat + dLat, lng: p.lng + dLng }));
  /** Named places, points jittered around them, or anywhere in GB. */
  const point: fc.Arbitrary<LatLng> = fc.oneof(
    fc.constantFrom(...PLACES),
    fc.constantFrom(...PLACES).chain((p) => jitter(p, 0.4)),
    fc.record({
      lat: fc.double({ min: 50, max: 58, noNaN: true }),
      lng: fc.double({ min: -5, max: 1.5, noNaN: true }),
    }),
  );
  /** Mostly true: random candidates should pass most filters, or the properties test little. */
  const mostly = fc.constantFrom(true, true, true, false);
  const vehicleType = fc.constantFrom(...VEHICLE_TYPES);

  const jobArb: fc.Arbitrary<MatchJob> = fc.record(
    {
      pickup: point,
      dropoff: point,
      distanceMiles: fc.oneof(fc.double({ min: 0, max: 400, noNaN: true }), fc.constantFrom(10, 30, 60)),
      passengers: fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 8 })),
      vehicleType: fc.oneof(fc.constant<VehicleType>('saloon'), vehicleType),
      wheelchair: fc.constantFrom(false, false, false, true),
    },
    { requiredKeys: ['pickup', 'dropoff', 'distanceMiles', 'passengers', 'vehicleType'] },
  );

  /** Corridors anywhere, or around this job's ends (either direction), so coverage is often decided near the buffer. */
  const corridorFor = (job: MatchJob): fc.Arbitrary<Corridor> =>
    fc.oneof(
      fc.record({
        from: point.map((p) => ({ name: 'a', ...p })),
        to: point.map((p) => ({ name: 'b', ...p })),
        bufferMiles: fc.integer({ min: 0, max: 40 }),
      }),
      {
        weight: 3,
        arbitrary: fc
          .record({
            a: jitter(job.pickup, 0.1),
            b: jitter(job.dropoff, 0.1),
            reversed: fc.boolean(),
            bufferMiles: fc.integer({ min: 0, max: 20 }),
          })
          .map(({ a, b, reversed, bufferMiles }) => ({
            from: { name: 'a', ...(reversed ? b : a) },
            to: { name: 'b', ...(reversed ? a : b) },
            bufferMiles,
          })),
      },
    );
  const driverFor = (job: MatchJob): fc.Arbitrary<DriverCandidate> =>
    fc.record({
      // Short ids from a small alphabet (with a non-ASCII letter), so ETA ties meet id ordering.
      id: fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'A', '1', 'é'), minLength: 1, maxLength: 4 }),
      // A few shared spots near the pickup make exact ETA ties.
      position: fc.option(
        fc.oneof(
          fc.constantFrom(job.pickup, north(job.pickup, 2), north(job.pickup, 5)),
          jitter(job.pickup, 0.3),
          point,
        ),
        { nil: null, freq: 8 },
      ),
      lastSeenAt: fc.option(
        fc.oneof(
          { arbitrary: fc.integer({ min: NOW - TTL, max: NOW + 1000 }), weight: 4 },
          fc.constantFrom(NOW - TTL, NOW - TTL - 1),
          fc.integer({ min: NOW - 3 * TTL, max: NOW }),
        ),
        { nil: null, freq: 8 },
      ),
      available: mostly,
      home: fc.oneof(jitter(job.pickup, 0.3), { arbitrary: point, weight: 2 }),
      operatingRadiusMiles: fc.integer({ min: 0, max: 40 }),
      activeJobs: fc.oneof({ arbitrary: fc.constant(0), weight: 2 }, fc.integer({ min: 0, max: 2 })),
      maxConcurrentJobs: fc.integer({ min: 1, max: 3 }),
      vehicle: fc.option(
        fc.oneof(fc.constant(job.vehicleType), vehicleType).chain((cls) =>
          fc.record({
            id: fc.constant(`v-${cls}`),
            class: fc.constant(cls),
            seats: fc.oneof({ arbitrary: fc.constant(VEHICLE_SEATS[cls]), weight: 2 }, fc.integer({ min: 1, max: 8 })),
            wheelchairAccessible: cls === 'wav' ? mostly : fc.boolean(),
          }),
        ),
        { nil: null, freq: 10 },
      ),
      nationalNetwork: fc.boolean(),
      corridors: fc.array(corridorFor(job), { maxLength: 3 }),
    });
  const partnerArb: fc.Arbitrary<PartnerCandidate> = fc.record({
    id: fc.string({ unit: fc.constantFrom('p', 'q', 'r'), minLength: 1, maxLength: 3 }),
    classes: fc.uniqueArray(vehicleType, { minLength: 1, maxLength: 4 }),
    maxPassengers: fc.integer({ min: 1, max: 8 }),
    wheelchairAccessible: fc.boolean(),
    capacity: fc.integer({ min: 0, max: 4 }),
    activeJobs: fc.integer({ min: 0, max: 4 }),
  });
  const scenario = jobArb
    .chain((job) =>
      fc.record({
        job: fc.constant(job),
        drivers: fc.uniqueArray(driverFor(job), { selector: (d) => d.id, minLength: 5, maxLength: 40 }),
        partners: fc.uniqueArray(partnerArb, { selector: (p) => p.id, maxLength: 6 }),
        threshold: fc.constantFrom(10, 30, 60),
        excludeDrivers: fc.array(fc.string({ unit: fc.constantFrom('a', 'b', 'c'), maxLength: 2 }), { maxLength: 4 }),
        excludePartners: fc.array(fc.string({ unit: fc.constantFrom('p', 'q'), maxLength: 2 }), { maxLength: 2 }),
      }),
    )
    .map((s) => ({
      ...s,
      opts: {
        now: NOW,
        presenceTtlMs: TTL,
        distanceHireMiles: s.threshold,
        excludeDrivers: new Set(s.excludeDrivers),
        excludePartners: new Set(s.excludePartners),
      } satisfies MatchOptions,
    }));

  it('the generators reach every tier, every skip reason and ETA ties (guards the properties below)', () => {
    const tiers = new Map<number, number>();
    const reasons = new Map<SkipReason, number>();
    let ties = 0;
    for (const s of fc.sample(scenario, { seed: RUNS.seed, numRuns: RUNS.numRuns })) {
      const r = matchCandidates(s.job, s.drivers, s.partners, s.opts);
      for (const o of r.ordered) tiers.set(o.tier, (tiers.get(o.tier) ?? 0) + 1);
      for (const k of r.skipped) reasons.set(k.reason, (reasons.get(k.reason) ?? 0) + 1);
      for (let i = 1; i < r.ordered.length; i++) {
        const a = r.ordered[i - 1];
        const b = r.ordered[i];
        if (a?.kind === 'driver' && b?.kind === 'driver' && a.tier === b.tier && a.etaSeconds === b.etaSeconds) ties++;
      }
    }
    if (process.env.DISPATCH_PROPERTY_STATS) console.log({ tiers, reasons, ties });
    for (const tier of [1, 2, 3]) expect(tiers.get(tier) ?? 0, `tier ${tier}`).toBeGreaterThanOrEqual(25);
    const expected: SkipReason[] = [
      'excluded',
      'no_vehicle',
      'offline',
      'stale_presence',
      'no_position',
      'at_capacity',
      'wrong_class',
      'no_wheelchair_access',
      'too_few_seats',
      'outside_area',
      'not_distance_hire',
      'corridor_not_covered',
    ];
    for (const reason of expected) expect(reasons.get(reason) ?? 0, reason).toBeGreaterThanOrEqual(10);
    expect(ties).toBeGreaterThanOrEqual(10);
  });

  /** Independent statement of the SPEC: the tier a driver should be offered in, or null. */
  function expectedTier(d: DriverCandidate, job: MatchJob, opts: MatchOptions): 1 | 2 | null {
    const v = d.vehicle;
    const needsWheelchair = job.vehicleType === 'wav' || job.wheelchair === true;
    const live =
      d.available && d.position !== null && d.lastSeenAt !== null && NOW - d.lastSeenAt <= opts.presenceTtlMs;
    const fits =
      v !== null &&
      SERVES[job.vehicleType].includes(v.class) &&
      v.seats >= job.passengers &&
      (!needsWheelchair || v.wheelchairAccessible);
    if (opts.excludeDrivers?.has(d.id) || !live || !fits || d.activeJobs >= d.maxConcurrentJobs) return null;
    if (haversineMiles(d.home, job.pickup) <= d.operatingRadiusMiles) return 1;
    const distanceHire = job.distanceMiles >= (opts.distanceHireMiles ?? 30);
    const covered = d.corridors.some(
      (c) =>
        pointToSegmentMiles(job.pickup, c.from, c.to) <= c.bufferMiles &&
        pointToSegmentMiles(job.dropoff, c.from, c.to) <= c.bufferMiles,
    );
    return d.nationalNetwork && distanceHire && covered ? 2 : null;
  }

  function partnerEligible(p: PartnerCandidate, job: MatchJob, opts: MatchOptions): boolean {
    const needsWheelchair = job.vehicleType === 'wav' || job.wheelchair === true;
    return (
      !opts.excludePartners?.has(p.id) &&
      p.classes.some((c) => SERVES[job.vehicleType].includes(c)) &&
      (!needsWheelchair || p.wheelchairAccessible) &&
      p.maxPassengers >= job.passengers &&
      p.activeJobs < p.capacity
    );
  }

  it('every offered driver satisfies every filter, and every eligible driver is offered in the right tier', () => {
    fc.assert(
      fc.property(scenario, ({ job, drivers, partners, opts }) => {
        const r = matchCandidates(job, drivers, partners, opts);
        const offered = new Map(r.ordered.flatMap((o) => (o.kind === 'driver' ? [[o.driverId, o] as const] : [])));
        for (const d of drivers) {
          expect(offered.get(d.id)?.tier ?? null).toBe(expectedTier(d, job, opts));
        }
        for (const o of offered.values()) {
          const d = drivers.find((x) => x.id === o.driverId) as DriverCandidate;
          expect(o.vehicleId).toBe(d.vehicle?.id);
          expect(o.deadMiles).toBeCloseTo(haversineMiles(d.position as LatLng, job.pickup) * DEAD_RUN_CIRCUITY, 9);
          expect(o.etaSeconds).toBeCloseTo(defaultEtaSeconds(d.position as LatLng, job.pickup), 6);
        }
        const offeredPartners = new Set(r.ordered.flatMap((o) => (o.kind === 'partner' ? [o.partnerId] : [])));
        for (const p of partners) expect(offeredPartners.has(p.id)).toBe(partnerEligible(p, job, opts));
      }),
      RUNS,
    );
  });

  it('each candidate is either offered or skipped, exactly once; no id appears twice', () => {
    fc.assert(
      fc.property(scenario, ({ job, drivers, partners, opts }) => {
        const r = matchCandidates(job, drivers, partners, opts);
        const driverIds = [
          ...r.ordered.flatMap((o) => (o.kind === 'driver' ? [o.driverId] : [])),
          ...r.skipped.filter((s) => s.kind === 'driver').map((s) => s.id),
        ];
        const partnerIds = [
          ...r.ordered.flatMap((o) => (o.kind === 'partner' ? [o.partnerId] : [])),
          ...r.skipped.filter((s) => s.kind === 'partner').map((s) => s.id),
        ];
        expect(driverIds.toSorted()).toEqual(drivers.map((d) => d.id).toSorted());
        expect(partnerIds.toSorted()).toEqual(partners.map((p) => p.id).toSorted());
        expect(new Set(ids(r)).size).toBe(r.ordered.length);
      }),
      RUNS,
    );
  });

  it('tiers come in order 1, 2, 3; ETA never decreases within a tier (ties by id); partners by free capacity', () => {
    fc.assert(
      fc.property(scenario, ({ job, drivers, partners, opts }) => {
        const { ordered } = matchCandidates(job, drivers, partners, opts);
        for (let i = 1; i < ordered.length; i++) {
          const a = ordered[i - 1];
          const b = ordered[i];
          if (a === undefined || b === undefined) throw new Error('unreachable');
          expect(a.tier).toBeLessThanOrEqual(b.tier);
          if (a.tier !== b.tier) continue;
          if (a.kind === 'driver' && b.kind === 'driver') {
            expect(a.etaSeconds).toBeLessThanOrEqual(b.etaSeconds);
            if (a.etaSeconds === b.etaSeconds) expect(a.driverId < b.driverId).toBe(true);
          } else if (a.kind === 'partner' && b.kind === 'partner') {
            expect(a.freeCapacity).toBeGreaterThanOrEqual(b.freeCapacity);
            if (a.freeCapacity === b.freeCapacity) expect(a.partnerId < b.partnerId).toBe(true);
          }
        }
      }),
      RUNS,
    );
  });

  it('is deterministic: the input order does not change the offers', () => {
    const shuffled = scenario.chain((s) =>
      fc
        .tuple(
          fc.shuffledSubarray(s.drivers, { minLength: s.drivers.length }),
          fc.shuffledSubarray(s.partners, { minLength: s.partners.length }),
        )
        .map(([drivers, partners]) => ({ s, drivers, partners })),
    );
    fc.assert(
      fc.property(shuffled, ({ s, drivers, partners }) => {
        const a = matchCandidates(s.job, s.drivers, s.partners, s.opts);
        const b = matchCandidates(s.job, drivers, partners, s.opts);
        expect(b.ordered).toEqual(a.ordered);
        const key = (x: { kind: string; id: string }) => `${x.kind}:${x.id}`;
        expect(b.skipped.toSorted((x, y) => (key(x) < key(y) ? -1 : 1))).toEqual(
          a.skipped.toSorted((x, y) => (key(x) < key(y) ? -1 : 1)),
        );
      }),
      RUNS,
    );
  });
});
