import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haversineMeters } from '../shared/geo/route-estimate.ts';
import { createGoogleMapProvider, MapProviderError } from '../shared/providers/map-provider.ts';
import { startMapProviderStub } from './helpers/map-provider-stub.ts';

const DRIVER_KEY = 'AIzaDriverOwnKey000000000000000000000';
const PLATFORM_KEY = 'AIzaPlatformKey0000000000000000000000';

let stub: Awaited<ReturnType<typeof startMapProviderStub>>;

beforeAll(async () => {
  stub = await startMapProviderStub({ keys: [DRIVER_KEY, PLATFORM_KEY] });
  stub.behaviour('busy-key', 'over_query_limit');
  stub.behaviour('unbilled-key', 'over_daily_limit');
  stub.behaviour('flaky-key', 'unknown_error');
  stub.behaviour('broken-key', 'http_500');
  stub.behaviour('restricted-key', 'invalid_request');
  stub.behaviour('slow-key', 'hang');
});

afterAll(async () => {
  await stub.close();
});

const provider = () => createGoogleMapProvider({ baseUrl: `${stub.url}/`, timeoutMs: 2_000 });

async function rejection(p: Promise<unknown>): Promise<MapProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(MapProviderError);
    return err as MapProviderError;
  }
  throw new Error('expected a MapProviderError');
}

describe('Google map provider: geocoding', () => {
  it('sends the caller’s key, the address and region=uk, and maps a street address', async () => {
    const before = stub.requests.length;
    const r = await provider().geocode('10 Downing Street, London', { apiKey: DRIVER_KEY });
    const req = stub.requests[before];
    expect(req?.method).toBe('GET');
    expect(req?.path).toBe('/maps/api/geocode/json');
    expect(req?.params).toEqual({ address: '10 Downing Street, London', key: DRIVER_KEY, region: 'uk' });
    expect(r).toEqual({
      ok: true,
      place: {
        query: '10 Downing Street, London',
        name: '10 Downing St, London SW1A 2AA, UK',
        kind: 'address',
        lat: 51.5033635,
        lng: -0.1276248,
        countryCode: 'GB',
        localAuthorityCode: 'E09000033',
        postcodeDistrict: 'SW1A',
      },
    });
  });

  it('uses the default key when the request brings none, and the per-request key over it', async () => {
    const p = createGoogleMapProvider({ baseUrl: stub.url, defaultApiKey: PLATFORM_KEY });
    const before = stub.requests.length;
    await p.geocode('Leeds');
    await p.geocode('Leeds', { apiKey: DRIVER_KEY });
    expect(stub.requests.slice(before).map((r) => r.params.key)).toEqual([PLATFORM_KEY, DRIVER_KEY]);
  });

  it('maps result types to kinds: airport, station, postcode, place', async () => {
    const p = provider();
    const airport = await p.geocode('Heathrow Airport', { apiKey: DRIVER_KEY });
    const station = await p.geocode('Manchester Piccadilly', { apiKey: DRIVER_KEY });
    const postcode = await p.geocode('M1 1AE', { apiKey: DRIVER_KEY });
    const town = await p.geocode('Leeds', { apiKey: DRIVER_KEY });
    expect(airport.ok && airport.place).toMatchObject({
      kind: 'airport',
      localAuthorityCode: 'E09000017',
      postcodeDistrict: 'TW6',
    });
    expect(station.ok && station.place).toMatchObject({ kind: 'station', localAuthorityCode: 'E08000003' });
    expect(postcode.ok && postcode.place).toMatchObject({
      kind: 'postcode',
      name: 'M1 1AE',
      localAuthorityCode: 'E08000003',
    });
    expect(town.ok && town.place).toMatchObject({ kind: 'place', name: 'Leeds, UK', localAuthorityCode: 'E08000035' });
  });

  it('ZERO_RESULTS is not_found', async () => {
    const r = await provider().geocode('Nowhere in particular', { apiKey: DRIVER_KEY });
    expect(r).toMatchObject({ ok: false, reason: 'not_found' });
    expect(!r.ok && r.message).toContain('Nowhere in particular');
  });

  it('a place abroad is outside_uk unless worldwide', async () => {
    const r = await provider().geocode('Paris', { apiKey: DRIVER_KEY });
    expect(r).toMatchObject({ ok: false, reason: 'outside_uk' });
    const w = await provider().geocode('Paris', { apiKey: DRIVER_KEY, worldwide: true });
    expect(w.ok && w.place).toMatchObject({
      countryCode: 'FR',
      localAuthorityCode: null,
      postcodeDistrict: null,
      kind: 'place',
    });
  });

  it('REQUEST_DENIED (bad key) is a non-retryable error naming the key problem, without the key', async () => {
    const err = await rejection(provider().geocode('Leeds', { apiKey: 'AIzaWrongKey' }));
    expect(err).toMatchObject({ code: 'key_rejected', retryable: false, status: 'REQUEST_DENIED' });
    expect(err.message).toMatch(/API key/);
    expect(err.message).toContain('The provided API key is invalid');
    expect(err.message).not.toContain('AIzaWrongKey');
  });

  it('INVALID_REQUEST and OVER_DAILY_LIMIT are non-retryable key errors', async () => {
    const invalid = await rejection(provider().geocode('Leeds', { apiKey: 'restricted-key' }));
    expect(invalid).toMatchObject({ code: 'key_rejected', retryable: false, status: 'INVALID_REQUEST' });
    expect(invalid.message).toMatch(/API key/);
    const unbilled = await rejection(provider().geocode('Leeds', { apiKey: 'unbilled-key' }));
    expect(unbilled).toMatchObject({ code: 'key_rejected', retryable: false, status: 'OVER_DAILY_LIMIT' });
  });

  it('OVER_QUERY_LIMIT, UNKNOWN_ERROR and HTTP 500 are retryable', async () => {
    expect(await rejection(provider().geocode('Leeds', { apiKey: 'busy-key' }))).toMatchObject({
      code: 'rate_limited',
      retryable: true,
      status: 'OVER_QUERY_LIMIT',
    });
    expect(await rejection(provider().geocode('Leeds', { apiKey: 'flaky-key' }))).toMatchObject({
      code: 'unavailable',
      retryable: true,
    });
    expect(await rejection(provider().geocode('Leeds', { apiKey: 'broken-key' }))).toMatchObject({
      code: 'unavailable',
      retryable: true,
    });
  });

  it('a server that never answers is a retryable timeout', async () => {
    const p = createGoogleMapProvider({ baseUrl: stub.url, timeoutMs: 100 });
    expect(await rejection(p.geocode('Leeds', { apiKey: 'slow-key' }))).toMatchObject({
      code: 'timeout',
      retryable: true,
    });
  });

  it('an empty query is not_found without a request', async () => {
    const before = stub.requests.length;
    expect(await provider().geocode('  ', { apiKey: DRIVER_KEY })).toMatchObject({ ok: false, reason: 'not_found' });
    expect(stub.requests.length).toBe(before);
  });

  it('no key at all fails before any request', async () => {
    const before = stub.requests.length;
    expect(await rejection(provider().geocode('Leeds'))).toMatchObject({ code: 'missing_key', retryable: false });
    expect(stub.requests.length).toBe(before);
  });

  it('an unreachable server is a retryable error', async () => {
    const p = createGoogleMapProvider({ baseUrl: 'http://127.0.0.1:9', timeoutMs: 2_000 });
    expect(await rejection(p.geocode('Leeds', { apiKey: DRIVER_KEY }))).toMatchObject({ retryable: true });
  });
});

describe('Google map provider: routes', () => {
  const piccadilly = { lat: 53.4773702, lng: -2.2309367 };
  const leeds = { lat: 53.795, lng: -1.5475 };

  it('sends origins, destinations, key and units=metric, and returns distance, duration and slow time', async () => {
    const before = stub.requests.length;
    const r = await provider().route(piccadilly, leeds, { apiKey: DRIVER_KEY });
    const req = stub.requests[before];
    expect(req?.path).toBe('/maps/api/distancematrix/json');
    expect(req?.params).toEqual({
      origins: `${piccadilly.lat},${piccadilly.lng}`,
      destinations: `${leeds.lat},${leeds.lng}`,
      key: DRIVER_KEY,
      units: 'metric',
    });
    expect(r.source).toBe('google');
    expect(r.distanceMeters).toBeGreaterThan(haversineMeters(piccadilly, leeds));
    expect(r.durationSeconds).toBeGreaterThan(0);
    expect(r.slowSeconds).toBeGreaterThanOrEqual(0);
    expect(r.slowSeconds).toBeLessThan(r.durationSeconds);
  });

  it('an element without a route is a non-retryable no_route error', async () => {
    const err = await rejection(provider().route(piccadilly, { lat: 40.64, lng: -73.78 }, { apiKey: DRIVER_KEY }));
    expect(err).toMatchObject({ code: 'no_route', retryable: false, status: 'ZERO_RESULTS' });
  });

  it('maps the same statuses as geocoding', async () => {
    expect(await rejection(provider().route(piccadilly, leeds, { apiKey: 'nope' }))).toMatchObject({
      code: 'key_rejected',
      status: 'REQUEST_DENIED',
    });
    expect(await rejection(provider().route(piccadilly, leeds, { apiKey: 'busy-key' }))).toMatchObject({
      code: 'rate_limited',
      retryable: true,
    });
  });
});
