import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { estimateRoute } from '../../shared/geo/route-estimate.ts';

export interface MapStubRequest {
  method: string;
  path: string;
  params: Record<string, string>;
}

type Behaviour = 'over_query_limit' | 'over_daily_limit' | 'invalid_request' | 'unknown_error' | 'http_500' | 'hang';

interface StubPlace {
  formatted_address: string;
  types: string[];
  lat: number;
  lng: number;
  country: string;
  postcode?: string;
}

/** Known answers, as Google's Geocoding API gives them (trimmed to the fields the adapter reads). */
const PLACES: Record<string, StubPlace> = {
  '10 downing street, london': {
    formatted_address: '10 Downing St, London SW1A 2AA, UK',
    types: ['street_address'],
    lat: 51.5033635,
    lng: -0.1276248,
    country: 'GB',
    postcode: 'SW1A 2AA',
  },
  'heathrow airport': {
    formatted_address: 'Heathrow Airport (LHR), Hounslow TW6, UK',
    types: ['airport', 'establishment', 'point_of_interest'],
    lat: 51.4679914,
    lng: -0.455051,
    country: 'GB',
  },
  'manchester piccadilly': {
    formatted_address: 'Manchester Piccadilly, Manchester M60 7RA, UK',
    types: ['train_station', 'transit_station', 'establishment', 'point_of_interest'],
    lat: 53.4773702,
    lng: -2.2309367,
    country: 'GB',
  },
  'm1 1ae': {
    formatted_address: 'Manchester M1 1AE, UK',
    types: ['postal_code'],
    lat: 53.4813,
    lng: -2.2379,
    country: 'GB',
    postcode: 'M1 1AE',
  },
  leeds: {
    formatted_address: 'Leeds, UK',
    types: ['locality', 'political'],
    lat: 53.8007554,
    lng: -1.5490774,
    country: 'GB',
  },
  paris: {
    formatted_address: 'Paris, France',
    types: ['locality', 'political'],
    lat: 48.856614,
    lng: 2.3522219,
    country: 'FR',
  },
};

function geocodeResult(p: StubPlace) {
  const components = [
    ...(p.postcode ? [{ long_name: p.postcode, short_name: p.postcode, types: ['postal_code'] }] : []),
    {
      long_name: p.country === 'GB' ? 'United Kingdom' : 'France',
      short_name: p.country,
      types: ['country', 'political'],
    },
  ];
  return {
    address_components: components,
    formatted_address: p.formatted_address,
    geometry: { location: { lat: p.lat, lng: p.lng }, location_type: 'ROOFTOP' },
    place_id: `stub-${p.lat}-${p.lng}`,
    types: p.types,
  };
}

/**
 * A local server that answers as Google's Geocoding and Distance Matrix APIs do
 * (`GET /maps/api/geocode/json`, `GET /maps/api/distancematrix/json`, always HTTP 200 with a
 * `status` in the body). It checks the `key` query parameter: missing or unknown keys get
 * REQUEST_DENIED with Google's messages; `behaviour(key, …)` makes a key answer
 * OVER_QUERY_LIMIT, OVER_DAILY_LIMIT, INVALID_REQUEST, UNKNOWN_ERROR, HTTP 500 or never answer.
 * A geocode request without an address is INVALID_REQUEST, as Google answers it. Distances are the
 * offline estimate between the given points, so answers are deterministic.
 */
export async function startMapProviderStub(opts: { keys: string[] }) {
  const requests: MapStubRequest[] = [];
  const validKeys = new Set(opts.keys);
  const behaviours = new Map<string, Behaviour>();
  const hanging: http.ServerResponse[] = [];

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stub');
    const params = Object.fromEntries(url.searchParams);
    requests.push({ method: req.method ?? '', path: url.pathname, params });
    const send = (body: unknown, status = 200) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify(body));
    };
    const isGeocode = url.pathname === '/maps/api/geocode/json';
    const isMatrix = url.pathname === '/maps/api/distancematrix/json';
    if (req.method !== 'GET' || (!isGeocode && !isMatrix)) {
      send({ error: 'not found' }, 404);
      return;
    }
    const empty = isGeocode ? { results: [] } : { destination_addresses: [], origin_addresses: [], rows: [] };
    const key = params.key;
    if (!key) {
      send({
        ...empty,
        error_message: 'You must use an API key to authenticate each request to Google Maps Platform APIs.',
        status: 'REQUEST_DENIED',
      });
      return;
    }
    if (!validKeys.has(key)) {
      send({ ...empty, error_message: 'The provided API key is invalid. ', status: 'REQUEST_DENIED' });
      return;
    }
    switch (behaviours.get(key)) {
      case 'over_query_limit':
        send({
          ...empty,
          error_message: 'You have exceeded your rate-limit for this API.',
          status: 'OVER_QUERY_LIMIT',
        });
        return;
      case 'over_daily_limit':
        send({ ...empty, error_message: 'Billing has not been enabled on this project.', status: 'OVER_DAILY_LIMIT' });
        return;
      case 'invalid_request':
        send({
          ...empty,
          error_message: 'Invalid request. Invalid key parameter for this API.',
          status: 'INVALID_REQUEST',
        });
        return;
      case 'unknown_error':
        send({ ...empty, status: 'UNKNOWN_ERROR' });
        return;
      case 'http_500':
        send({ error: 'backend error' }, 500);
        return;
      case 'hang':
        hanging.push(res);
        return;
      default:
        break;
    }
    if (isGeocode) {
      const address = params.address;
      if (!address) {
        send({
          ...empty,
          error_message: "Invalid request. Missing the 'address', 'components', 'latlng' or 'place_id' parameter.",
          status: 'INVALID_REQUEST',
        });
        return;
      }
      const place = PLACES[address.trim().toLowerCase()];
      if (!place) {
        send({ results: [], status: 'ZERO_RESULTS' });
        return;
      }
      send({ results: [geocodeResult(place)], status: 'OK' });
      return;
    }
    const parse = (s: string | undefined) => {
      const m = /^(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)$/.exec(s ?? '');
      return m ? { lat: Number(m[1]), lng: Number(m[2]) } : null;
    };
    const from = parse(params.origins);
    const to = parse(params.destinations);
    if (!from || !to) {
      send({
        ...empty,
        error_message: 'Invalid request. Missing the origins or destinations parameter.',
        status: 'INVALID_REQUEST',
      });
      return;
    }
    // Across the sea: Google answers the element with ZERO_RESULTS.
    const element =
      Math.abs(from.lng - to.lng) > 20
        ? { status: 'ZERO_RESULTS' }
        : (() => {
            const e = estimateRoute(from, to);
            return {
              distance: { text: `${(e.distanceMeters / 1000).toFixed(1)} km`, value: e.distanceMeters },
              duration: { text: `${Math.round(e.durationSeconds / 60)} mins`, value: e.durationSeconds },
              status: 'OK',
            };
          })();
    send({
      destination_addresses: [params.destinations],
      origin_addresses: [params.origins],
      rows: [{ elements: [element] }],
      status: 'OK',
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    behaviour(key: string, b: Behaviour) {
      validKeys.add(key);
      behaviours.set(key, b);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
