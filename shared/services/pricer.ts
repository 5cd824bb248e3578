import type { Config } from '../config.ts';
import { unseal } from '../crypto.ts';
import type { Db } from '../db/knex.ts';
import { priceJourney, SeatingError } from '../domain/tariffs/engine.ts';
import type { AppliedRule, RateCard, TariffSource } from '../domain/tariffs/types.ts';
import type { ErrorDetail } from '../errors.ts';
import { slowRunningMeters } from '../geo/route-estimate.ts';
import type { Geocoder, Place, RouteEstimate, RouteProvider } from '../geo/types.ts';
import { MapProviderError } from '../providers/map-provider.ts';
import type { PriceQuoteRequest } from '../queues/registry.ts';
import type { TariffStore } from './tariff-store.ts';

export interface PricedJourney {
  pickup: Place;
  dropoff: Place;
  distanceMeters: number;
  durationSeconds: number;
  routeSource: string;
  farePence: number;
  appliedRules: AppliedRule[];
  tariffSource: TariffSource;
  tariffTableId: number | null;
  warnings: string[];
}

/** What a price request answers: a priced journey, or an error with a stable code for the caller. */
export type PriceQuoteResult =
  | { ok: true; journey: PricedJourney }
  | { ok: false; error: { code: 'address_not_found' | 'invalid_input'; message: string; details: ErrorDetail[] } };

export interface PricerDeps {
  db: Db;
  config: Pick<Config, 'dataEncryptionKey' | 'pricing'>;
  geocoder: Geocoder;
  router: RouteProvider;
  tariffs: TariffStore;
  /** The external map provider, used when a quote is made through a driver who stored a key. */
  mapProvider?: (Geocoder & RouteProvider) | null;
}

type Located = { ok: true; from: Place; to: Place; route: RouteEstimate } | { ok: false; result: PriceQuoteResult };

/** Geocode both ends and estimate the route with one provider (the offline pair or a map API with a key). */
async function locate(
  req: PriceQuoteRequest,
  geocoder: Geocoder,
  router: RouteProvider,
  apiKey: string | null,
): Promise<Located> {
  const opts = { worldwide: req.worldwide, ...(apiKey ? { apiKey } : {}) };
  const [from, to] = await Promise.all([geocoder.geocode(req.pickup, opts), geocoder.geocode(req.dropoff, opts)]);
  if (!from.ok || !to.ok) {
    const missing: ErrorDetail[] = [];
    if (!from.ok) missing.push({ field: '/pickup', problem: from.message });
    if (!to.ok) missing.push({ field: '/dropoff', problem: to.message });
    const which = missing.map((m) => (m.field === '/pickup' ? 'pickup' : 'dropoff')).join(' and ');
    return {
      ok: false,
      result: {
        ok: false,
        error: { code: 'address_not_found', message: `Could not locate the ${which} address.`, details: missing },
      },
    };
  }
  const route = await router.route(from.place, to.place, apiKey ? { apiKey } : {});
  return { ok: true, from: from.place, to: to.place, route };
}

/**
 * Price one journey: geocode both ends, estimate the route, pick the tariff in force and run
 * the pure engine. Used by the pricing worker for quotes and for jobs that arrive without a fare.
 */
export function createPricer(deps: PricerDeps) {
  async function driverMapKey(driverId: string | undefined): Promise<string | null> {
    if (!driverId || !deps.mapProvider) return null;
    const row = await deps
      .db('drivers')
      .where({ id: driverId })
      .first<{ map_api_key_sealed: string | null } | undefined>('map_api_key_sealed');
    return row?.map_api_key_sealed ? unseal(row.map_api_key_sealed, deps.config.dataEncryptionKey) : null;
  }

  async function rateCard(id: string | undefined): Promise<RateCard | null> {
    if (!id) return null;
    const row = await deps
      .db('rate_cards')
      .where({ id })
      .whereNotNull('approved_at')
      .first<{ card: RateCard } | undefined>('card');
    return row?.card ?? null;
  }

  return {
    async price(req: PriceQuoteRequest): Promise<PriceQuoteResult> {
      const apiKey = await driverMapKey(req.driverId);
      const provider = apiKey && deps.mapProvider ? deps.mapProvider : null;
      const notes: string[] = [];
      let located: Located;
      try {
        located = await locate(req, provider ?? deps.geocoder, provider ?? deps.router, apiKey);
      } catch (err) {
        // The driver's own key was refused, or their provider failed: the quote is still made,
        // on the built-in gazetteer and estimate, and says so (never the key itself).
        if (!provider || !(err instanceof MapProviderError)) throw err;
        notes.push(
          `Your map provider could not be used (${err.code.replace(/_/g, ' ')}); this fare uses the built-in place data and route estimate.`,
        );
        located = await locate(req, deps.geocoder, deps.router, null);
      }
      if (!located.ok) return located.result;
      const { from, to, route } = located;
      if (from.lat === to.lat && from.lng === to.lng) {
        // Priced all the same (a driver may be asked to wait and return), but rarely meant.
        notes.push(
          `Pickup and dropoff are the same place (${from.name}): check the addresses; this fare is for a journey of no distance.`,
        );
      }
      const departAt = new Date(req.departAt);
      const [stored, card] = await Promise.all([deps.tariffs.tablesAt(departAt), rateCard(req.rateCardId)]);
      try {
        const fare = priceJourney({
          tables: stored.map((s) => s.table),
          pickup: from,
          dropoff: to,
          departAt,
          distanceMeters: route.distanceMeters,
          durationSeconds: route.durationSeconds,
          slowSeconds: route.slowSeconds,
          slowMeters: slowRunningMeters(route.slowSeconds, route.distanceMeters),
          passengers: req.passengers,
          vehicleType: req.vehicleType,
          meetAndGreet: req.meetAndGreet,
          rateCard: card,
          classMultipliers: deps.config.pricing.classMultipliers,
        });
        const usedTable =
          fare.tariffSource.kind === 'council'
            ? stored.find((s) => s.table.localAuthorityCodes.includes(from.localAuthorityCode ?? ''))
            : undefined;
        return {
          ok: true,
          journey: {
            pickup: from,
            dropoff: to,
            distanceMeters: route.distanceMeters,
            durationSeconds: route.durationSeconds,
            routeSource: route.source,
            farePence: fare.farePence,
            appliedRules: fare.appliedRules,
            tariffSource: fare.tariffSource,
            tariffTableId: usedTable?.id ?? null,
            warnings: [...notes, ...fare.warnings],
          },
        };
      } catch (err) {
        if (err instanceof SeatingError) {
          return {
            ok: false,
            error: {
              code: 'invalid_input',
              message: err.message,
              details: [{ field: '/passengers', problem: err.message }],
            },
          };
        }
        throw err;
      }
    },
  };
}

export type Pricer = ReturnType<typeof createPricer>;
