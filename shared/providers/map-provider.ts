/**
 * Google Maps Platform behind the Geocoder and RouteProvider interfaces, with the API key
 * chosen per request: high-volume drivers bring their own key (stored sealed), others use the
 * platform's default key if one is configured.
 *
 *   Geocoding:       GET {base}/maps/api/geocode/json?address=…&key=…&region=uk
 *   Distance Matrix: GET {base}/maps/api/distancematrix/json?origins=lat,lng&destinations=lat,lng&key=…&units=metric
 *
 * `baseUrl` (default https://maps.googleapis.com) lets tests and demos point it at a local
 * server that answers as Google does. Requests use Node's global fetch with a timeout.
 *
 * Google's `status` values map as follows: OK → a result; ZERO_RESULTS (and a route element
 * NOT_FOUND / ZERO_RESULTS) → not found; REQUEST_DENIED, INVALID_REQUEST and OVER_DAILY_LIMIT →
 * a MapProviderError that names the key problem and is not worth retrying; OVER_QUERY_LIMIT,
 * UNKNOWN_ERROR, HTTP 429/5xx, network failures and timeouts → a retryable MapProviderError.
 * The key never appears in an error message.
 */
import { nearestDistrict as defaultNearestDistrict, type NearestDistrict } from '../geo/gazetteer.ts';
import { slowSecondsFor } from '../geo/route-estimate.ts';
import {
  type GeocodeOptions,
  type GeocodeResult,
  type Geocoder,
  type Place,
  type RouteEstimate,
  type RouteProvider,
  WORLDWIDE_HINT,
} from '../geo/types.ts';

export type MapProviderErrorCode =
  | 'missing_key'
  | 'key_rejected'
  | 'rate_limited'
  | 'unavailable'
  | 'timeout'
  | 'bad_response'
  | 'no_route';

export class MapProviderError extends Error {
  readonly code: MapProviderErrorCode;
  /** True when the same request may succeed later (rate limits, outages, timeouts). */
  readonly retryable: boolean;
  /** Google's `status` when there was one. */
  readonly status: string | undefined;

  constructor(code: MapProviderErrorCode, message: string, opts: { retryable: boolean; status?: string }) {
    super(message);
    this.name = 'MapProviderError';
    this.code = code;
    this.retryable = opts.retryable;
    this.status = opts.status;
  }
}

export interface MapProviderOptions {
  /** Default https://maps.googleapis.com. */
  baseUrl?: string;
  /** Used when a request brings no key of its own. */
  defaultApiKey?: string;
  /** Per request; default 5000 ms. */
  timeoutMs?: number;
  /** Nearest postcode district to a point (default: the gazetteer's, over data/). */
  nearestDistrict?: (lat: number, lng: number) => NearestDistrict | null;
  /** Default the global fetch. */
  fetch?: typeof fetch;
}

export type MapProvider = Geocoder & RouteProvider & { readonly name: 'google' };

// ----- the parts of Google's responses we read -----

interface AddressComponent {
  long_name?: string;
  short_name?: string;
  types?: string[];
}

interface GeocodeApiResult {
  formatted_address?: string;
  types?: string[];
  address_components?: AddressComponent[];
  geometry?: { location?: { lat?: number; lng?: number } };
}

interface GoogleEnvelope {
  status?: string;
  error_message?: string;
}

interface GeocodeApiResponse extends GoogleEnvelope {
  results?: GeocodeApiResult[];
}

interface MatrixElement {
  status?: string;
  distance?: { value?: number };
  duration?: { value?: number };
  duration_in_traffic?: { value?: number };
}

interface MatrixApiResponse extends GoogleEnvelope {
  rows?: Array<{ elements?: MatrixElement[] }>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** Throws the MapProviderError for a non-OK top-level status (ZERO_RESULTS is the caller's). */
function checkStatus(api: string, body: GoogleEnvelope): void {
  const status = body.status ?? '';
  if (status === 'OK' || status === 'ZERO_RESULTS') return;
  const detail = body.error_message ? `: ${body.error_message}` : '';
  switch (status) {
    case 'REQUEST_DENIED':
      throw new MapProviderError(
        'key_rejected',
        `Google ${api} rejected the API key (REQUEST_DENIED)${detail}. Check that the key is valid, has the ${api} API enabled and allows this server`,
        { retryable: false, status },
      );
    case 'INVALID_REQUEST':
      throw new MapProviderError(
        'key_rejected',
        `Google ${api} refused the request (INVALID_REQUEST)${detail}. Check the API key and the request parameters`,
        { retryable: false, status },
      );
    case 'OVER_DAILY_LIMIT':
      throw new MapProviderError(
        'key_rejected',
        `Google ${api} refused the API key (OVER_DAILY_LIMIT)${detail}. The key is invalid, billing is not enabled or its quota cap is spent`,
        { retryable: false, status },
      );
    case 'OVER_QUERY_LIMIT':
      throw new MapProviderError(
        'rate_limited',
        `Google ${api} rate limit reached for this API key (OVER_QUERY_LIMIT)${detail}; retry later`,
        { retryable: true, status },
      );
    case 'UNKNOWN_ERROR':
      throw new MapProviderError('unavailable', `Google ${api} had a server error (UNKNOWN_ERROR)${detail}`, {
        retryable: true,
        status,
      });
    default:
      throw new MapProviderError('bad_response', `Google ${api} answered an unexpected status "${status}"${detail}`, {
        retryable: false,
        status: status || undefined,
      });
  }
}

function placeKind(types: readonly string[]): Place['kind'] {
  if (types.includes('airport')) return 'airport';
  if (types.some((t) => t === 'train_station' || t === 'transit_station' || t === 'subway_station')) return 'station';
  if (types.includes('postal_code')) return 'postcode';
  if (types.some((t) => t === 'locality' || t === 'postal_town')) return 'place';
  return 'address';
}

function component(result: GeocodeApiResult, type: string): AddressComponent | undefined {
  return result.address_components?.find((c) => c.types?.includes(type));
}

export function createGoogleMapProvider(opts: MapProviderOptions = {}): MapProvider {
  const baseUrl = (opts.baseUrl ?? 'https://maps.googleapis.com').replace(/\/+$/, '');
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const doFetch = opts.fetch ?? fetch;
  const nearest = opts.nearestDistrict ?? ((lat: number, lng: number) => defaultNearestDistrict(lat, lng));

  const keyFor = (apiKey: string | undefined, api: string): string => {
    const key = apiKey ?? opts.defaultApiKey;
    if (!key) {
      throw new MapProviderError('missing_key', `No Google Maps API key for ${api}: the request brought none`, {
        retryable: false,
      });
    }
    return key;
  };

  const getJson = async (api: string, path: string, params: Record<string, string>): Promise<unknown> => {
    const url = `${baseUrl}${path}?${new URLSearchParams(params).toString()}`;
    let res: Response;
    try {
      res = await doFetch(url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const name = isObject(err) ? err.name : undefined;
      if (name === 'TimeoutError' || name === 'AbortError') {
        throw new MapProviderError('timeout', `Google ${api} did not answer within ${timeoutMs} ms`, {
          retryable: true,
        });
      }
      throw new MapProviderError('unavailable', `Google ${api} could not be reached: ${(err as Error).message}`, {
        retryable: true,
      });
    }
    if (!res.ok) {
      await res.body?.cancel();
      const retryable = res.status === 429 || res.status >= 500;
      throw new MapProviderError(
        retryable ? (res.status === 429 ? 'rate_limited' : 'unavailable') : 'bad_response',
        `Google ${api} answered HTTP ${res.status}`,
        { retryable },
      );
    }
    try {
      return await res.json();
    } catch {
      throw new MapProviderError('bad_response', `Google ${api} answered something that is not JSON`, {
        retryable: true,
      });
    }
  };

  const geocode = async (query: string, gopts: GeocodeOptions = {}): Promise<GeocodeResult> => {
    const api = 'Geocoding';
    const key = keyFor(gopts.apiKey, api);
    if (query.trim() === '') return { ok: false, reason: 'not_found', message: 'The place to geocode is empty' };
    const body = await getJson(api, '/maps/api/geocode/json', { address: query, key, region: 'uk' });
    if (!isObject(body))
      throw new MapProviderError('bad_response', `Google ${api} answered no object`, { retryable: true });
    const data = body as GeocodeApiResponse;
    checkStatus(api, data);
    const first = data.status === 'OK' ? data.results?.[0] : undefined;
    const lat = first?.geometry?.location?.lat;
    const lng = first?.geometry?.location?.lng;
    if (!first || typeof lat !== 'number' || typeof lng !== 'number') {
      return { ok: false, reason: 'not_found', message: `Google Maps found nothing for "${query}"` };
    }
    const countryCode = (component(first, 'country')?.short_name ?? '').toUpperCase();
    const uk = countryCode === 'GB';
    const name = first.formatted_address ?? query;
    if (!uk && !gopts.worldwide) {
      return {
        ok: false,
        reason: 'outside_uk',
        message: `"${query}" is outside the UK (${name})${WORLDWIDE_HINT}`,
      };
    }
    const kind = placeKind(first.types ?? []);
    const nd = uk ? nearest(lat, lng) : null;
    const place: Place = {
      query,
      name: kind === 'postcode' ? (component(first, 'postal_code')?.long_name ?? name) : name,
      kind,
      lat,
      lng,
      countryCode: countryCode || 'ZZ',
      localAuthorityCode: nd?.district.localAuthorityCode ?? null,
      postcodeDistrict: nd?.district.district ?? null,
    };
    return { ok: true, place };
  };

  const route = async (
    from: Pick<Place, 'lat' | 'lng'>,
    to: Pick<Place, 'lat' | 'lng'>,
    ropts: { apiKey?: string } = {},
  ): Promise<RouteEstimate> => {
    const api = 'Distance Matrix';
    const key = keyFor(ropts.apiKey, api);
    const body = await getJson(api, '/maps/api/distancematrix/json', {
      origins: `${from.lat},${from.lng}`,
      destinations: `${to.lat},${to.lng}`,
      key,
      units: 'metric',
    });
    if (!isObject(body))
      throw new MapProviderError('bad_response', `Google ${api} answered no object`, { retryable: true });
    const data = body as MatrixApiResponse;
    checkStatus(api, data);
    const el = data.rows?.[0]?.elements?.[0];
    if (el?.status !== 'OK') {
      throw new MapProviderError(
        'no_route',
        `Google ${api} found no driving route (${el?.status ?? data.status ?? 'no element'})`,
        {
          retryable: false,
          status: el?.status ?? data.status,
        },
      );
    }
    const distanceMeters = el.distance?.value;
    const durationSeconds = el.duration_in_traffic?.value ?? el.duration?.value;
    if (typeof distanceMeters !== 'number' || typeof durationSeconds !== 'number') {
      throw new MapProviderError('bad_response', `Google ${api} answered a route without distance or duration`, {
        retryable: false,
      });
    }
    // Google gives no time-below-changeover figure; the route estimate's slow share for that
    // distance is applied to Google's duration.
    return {
      distanceMeters,
      durationSeconds,
      slowSeconds: Math.min(durationSeconds, slowSecondsFor(distanceMeters, durationSeconds)),
      source: 'google',
    };
  };

  return { name: 'google', geocode, route };
}
