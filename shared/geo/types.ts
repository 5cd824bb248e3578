/**
 * The geocoding and routing interfaces. The offline gazetteer (shared/geo/gazetteer.ts) and
 * the route estimate (shared/geo/route-estimate.ts) implement them; an external map provider
 * adapter (shared/providers/map-provider.ts) implements the same, with an API key per request.
 */

export type PlaceKind = 'address' | 'postcode' | 'station' | 'airport' | 'place';

export interface Place {
  /** The text the caller sent, unchanged. */
  query: string;
  /** A display name: "London Heathrow Airport", "Manchester Piccadilly", "SW1A 2AA", "Leeds". */
  name: string;
  kind: PlaceKind;
  lat: number;
  lng: number;
  /** ISO 3166-1 alpha-2; 'GB' for the UK (Northern Ireland included). */
  countryCode: string;
  /** GSS code of the local authority holding the point (nearest postcode district), null outside GB data. */
  localAuthorityCode: string | null;
  /** Postcode district holding or nearest the point (e.g. "TW6"), null outside the UK. */
  postcodeDistrict: string | null;
  /** IATA code when kind is airport (e.g. "LHR"). */
  iata?: string;
  /** Terminal hint parsed from the query ("T5"), when kind is airport. */
  terminal?: string;
  /** National Rail CRS code when kind is station (e.g. "MAN"). */
  crs?: string;
}

/**
 * How a refusal of a place abroad ends (`reason: 'outside_uk'`), for callers that can send
 * `worldwide` (quotes, bookings, MCP); callers that cannot (partner jobs, supplier hooks)
 * replace it (`withoutWorldwideHint`).
 */
export const WORLDWIDE_HINT = '; send worldwide: true to use places abroad';

/** `text` with the worldwide hint replaced by `instead`; unchanged when it has none. */
export function withoutWorldwideHint(text: string, instead: string): string {
  return text.split(WORLDWIDE_HINT).join(instead);
}

export interface GeocodeOptions {
  /** Places outside the UK resolve only when true. */
  worldwide?: boolean;
  /** A caller's own map-provider key, for providers that take one. */
  apiKey?: string;
}

export type GeocodeResult =
  | { ok: true; place: Place }
  | { ok: false; reason: 'not_found' | 'outside_uk' | 'ambiguous'; message: string };

export interface Geocoder {
  geocode(query: string, opts?: GeocodeOptions): Promise<GeocodeResult>;
}

export interface RouteEstimate {
  distanceMeters: number;
  durationSeconds: number;
  /** Seconds expected below the meter's changeover speed (traffic, junctions): charged by time. */
  slowSeconds: number;
  /** Which estimator produced it: "great-circle" or a provider name. */
  source: string;
}

export interface RouteProvider {
  route(
    from: Pick<Place, 'lat' | 'lng'>,
    to: Pick<Place, 'lat' | 'lng'>,
    opts?: { apiKey?: string },
  ): Promise<RouteEstimate>;
}
