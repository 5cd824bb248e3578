import type { Config } from '../config.ts';
import { unseal } from '../crypto.ts';
import type { Db } from '../db/knex.ts';
import { priceJourney, SeatingError } from '../domain/tariffs/engine.ts';
import type { AppliedRule, RateCard, TariffSource } from '../domain/tariffs/types.ts';
import type { ErrorDetail } from '../errors.ts';
import type { Geocoder, Place, RouteProvider } from '../geo/types.ts';
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
      const geocoder = apiKey && deps.mapProvider ? deps.mapProvider : deps.geocoder;
      const router = apiKey && deps.mapProvider ? deps.mapProvider : deps.router;
      const opts = { worldwide: req.worldwide, ...(apiKey ? { apiKey } : {}) };
      const [from, to] = await Promise.all([geocoder.geocode(req.pickup, opts), geocoder.geocode(req.dropoff, opts)]);
      const missing: ErrorDetail[] = [];
      if (!from.ok) missing.push({ field: '/pickup', problem: from.message });
      if (!to.ok) missing.push({ field: '/dropoff', problem: to.message });
      if (!from.ok || !to.ok) {
        const which = missing.map((m) => (m.field === '/pickup' ? 'pickup' : 'dropoff')).join(' and ');
        return {
          ok: false,
          error: { code: 'address_not_found', message: `Could not locate the ${which} address.`, details: missing },
        };
      }
      const departAt = new Date(req.departAt);
      const [route, stored, card] = await Promise.all([
        router.route(from.place, to.place, apiKey ? { apiKey } : {}),
        deps.tariffs.tablesAt(departAt),
        rateCard(req.rateCardId),
      ]);
      try {
        const fare = priceJourney({
          tables: stored.map((s) => s.table),
          pickup: from.place,
          dropoff: to.place,
          departAt,
          distanceMeters: route.distanceMeters,
          durationSeconds: route.durationSeconds,
          slowSeconds: route.slowSeconds,
          passengers: req.passengers,
          vehicleType: req.vehicleType,
          meetAndGreet: req.meetAndGreet,
          rateCard: card,
          classMultipliers: deps.config.pricing.classMultipliers,
        });
        const usedTable =
          fare.tariffSource.kind === 'council'
            ? stored.find((s) => s.table.localAuthorityCodes.includes(from.place.localAuthorityCode ?? ''))
            : undefined;
        return {
          ok: true,
          journey: {
            pickup: from.place,
            dropoff: to.place,
            distanceMeters: route.distanceMeters,
            durationSeconds: route.durationSeconds,
            routeSource: route.source,
            farePence: fare.farePence,
            appliedRules: fare.appliedRules,
            tariffSource: fare.tariffSource,
            tariffTableId: usedTable?.id ?? null,
            warnings: fare.warnings,
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
