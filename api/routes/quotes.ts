import { AppError } from '../../shared/errors.ts';
import {
  EstimateDocumented,
  EstimateRequest,
  EstimateResponse,
  V1QuoteRequest,
  V1QuoteResponse,
} from '../../shared/schemas/quotes.ts';
import {
  createQuote,
  gbp,
  miles,
  minutes,
  placeOut,
  type Quote,
  type QuoteCaller,
} from '../../shared/services/quotes.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { type Caller, callerTestMode } from '../middleware/auth.ts';
import { defineRoute, type RouteDef } from '../route.ts';
import { missingOf, pointersAsSent, requireFields, screen } from './bookings.ts';
import { assertSpellingsAgree, SPELLINGS, snakeFilled } from './spellings.ts';

/** Pricing names fields as the v1 quote does; the snake_case alias routes' own names for them. */
const ALIAS_FIELDS: Readonly<Record<string, string>> = {
  '/pickup': '/pickup_address',
  '/dropoff': '/dropoff_address',
  '/departAt': '/depart_at',
  '/passengers': '/passenger_count',
  '/vehicleType': '/vehicle_type',
};

/**
 * Pricing's refusal with its fields named as the snake_case alias routes (quotes/estimate,
 * bookings/instant) take them, so the error points at a field the caller sent.
 */
export async function inAliasFields<T>(pricing: Promise<T>): Promise<T> {
  try {
    return await pricing;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const details = err.details.map((d) => ({ ...d, field: ALIAS_FIELDS[d.field] ?? d.field }));
    throw new AppError(err.code, err.message, details, err.headers);
  }
}

/**
 * Who a quote is made for: the key, its partner and its mode (anonymous callers are live, no
 * partner); a driver (driver token) for quotes made through them, priced with their own map key.
 */
export function quoteCaller(caller: Caller): QuoteCaller {
  return caller.kind === 'api_key'
    ? { apiKeyId: caller.key.id, partnerId: caller.key.partnerId, testMode: caller.key.mode === 'test' }
    : caller.kind === 'driver'
      ? { apiKeyId: null, partnerId: null, testMode: callerTestMode(caller), driverId: caller.driver.id }
      : { apiKeyId: null, partnerId: null, testMode: false };
}

/** The v1 quote's answer (CONTRACT.md section 3); the MCP `estimate_fare` tool answers the same. */
export function v1Body(q: Quote) {
  return {
    quoteId: q.id,
    quote_id: q.id,
    fareGBP: gbp(q.farePence),
    currency: 'GBP' as const,
    distanceMiles: miles(q.distanceMeters),
    durationMinutes: minutes(q.durationSeconds),
    vehicleType: q.vehicleType,
    passengers: q.passengers,
    departAt: q.departAt.toISOString(),
    pickup: placeOut(q.pickup),
    dropoff: placeOut(q.dropoff),
    appliedRules: q.appliedRules.map((r) => ({
      code: r.code,
      description: r.description,
      amountGBP: gbp(r.amountPence),
    })),
    tariffSource: q.tariffSource,
    bookingUrl: q.bookingUrl,
    expiresAt: q.expiresAt.toISOString(),
    warnings: q.warnings,
  };
}

function estimateBody(q: Quote) {
  return {
    quote_id: q.id,
    fare: gbp(q.farePence),
    currency: 'GBP' as const,
    expires_at: q.expiresAt.toISOString(),
    distance_miles: miles(q.distanceMeters),
    duration_minutes: minutes(q.durationSeconds),
    vehicle_type: q.vehicleType,
    passenger_count: q.passengers,
    applied_rules: q.appliedRules.map((r) => ({
      code: r.code,
      description: r.description,
      amount_gbp: gbp(r.amountPence),
    })),
    tariff_source: {
      kind: q.tariffSource.kind,
      authority: q.tariffSource.authority,
      tariff: q.tariffSource.tariff,
      as_of: q.tariffSource.asOf,
    },
    booking_url: q.bookingUrl,
    warnings: q.warnings,
  };
}

const QUOTE_ERRORS = ['content_rejected', 'pickup_in_past', 'address_not_found'] as const;

/** The two quote endpoints: same pricing, v1 in camelCase, the agent alias in snake_case. */
export function quoteRoutes(config: ApiDeps['config']): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/public/v1/quote',
      idempotent: true,
      operationId: 'createQuoteV1',
      summary: 'Price a journey: a fixed fare on the regulated tariff, valid 24 hours',
      description:
        'Prices pickup to dropoff on the council tariff of the pickup (or an approved driver or partner rate), with night and holiday rates from departAt. The quote is stored: redeem quoteId once within 24 hours, or send the passenger to bookingUrl. Limited to ' +
        `${config.pricing.quoteLimitPerHour} requests per hour per caller (API key, else IP).` +
        " A driver's token is accepted too: a driver who stored their own map-provider key (PUT /api/public/v1/driver/map-key) gets quotes geocoded and routed with it.",
      tags: ['quotes'],
      auth: 'public',
      rateLimit: [{ name: 'quotes', points: config.pricing.quoteLimitPerHour, durationSeconds: 3600 }],
      body: V1QuoteRequest,
      errors: [...QUOTE_ERRORS],
      responses: { 200: { description: 'The quote', schema: V1QuoteResponse } },
      handler: async ({ body, deps, caller, req }) =>
        // An error names the field as the caller spelt it (`depart_at`, `passenger_count`).
        pointersAsSent(body, null, async () => {
          assertSpellingsAgree(body, [
            SPELLINGS.vehicleType,
            SPELLINGS.meetAndGreet,
            SPELLINGS.departAt,
            SPELLINGS.passengers,
          ]);
          // The addresses are stored with the quote, copied into the booking that redeems it and
          // shown back: screened as a booking's are, before any pricing.
          screen(req, [
            { pointer: '/pickup', kind: 'address', value: body.pickup },
            { pointer: '/dropoff', kind: 'address', value: body.dropoff },
          ]);
          const quote = await createQuote(
            deps,
            {
              pickup: body.pickup,
              dropoff: body.dropoff,
              departAt: body.departAt ?? body.depart_at,
              passengers: body.passengers ?? body.passenger_count ?? 1,
              vehicleType: body.vehicleType ?? body.vehicle_type,
              meetAndGreet: body.meetAndGreet ?? body.meet_and_greet ?? false,
              worldwide: body.worldwide ?? false,
            },
            quoteCaller(caller),
            baseUrlFor(req, deps.config),
          );
          return { status: 200, body: v1Body(quote) };
        }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/quotes/estimate',
      idempotent: true,
      operationId: 'estimateFare',
      summary: 'Price a journey (agent alias, snake_case): fare, quote_id and currency',
      description:
        'Same pricing as POST /api/public/v1/quote. The quote_id is redeemable with POST /api/public/bookings/create within 24 hours.',
      tags: ['quotes'],
      auth: 'public',
      body: EstimateRequest,
      documentedBody: EstimateDocumented,
      alsoRequired: (b) => missingOf(b, [['passenger_count', 'passengers']]),
      errors: [...QUOTE_ERRORS],
      responses: { 200: { description: 'The estimate', schema: EstimateResponse } },
      handler: async ({ body: sent, deps, caller, req }) =>
        // An error names the field as the caller spelt it (`departAt` for a v1 spelling).
        pointersAsSent(sent, EstimateRequest, async () => {
          const spellings = [SPELLINGS.vehicleType, SPELLINGS.meetAndGreet, SPELLINGS.departAt, SPELLINGS.passengers];
          assertSpellingsAgree(sent, spellings);
          const body = snakeFilled(sent, spellings);
          requireFields({ passenger_count: body.passenger_count });
          screen(req, [
            { pointer: '/pickup_address', kind: 'address', value: body.pickup_address },
            { pointer: '/dropoff_address', kind: 'address', value: body.dropoff_address },
          ]);
          const quote = await inAliasFields(
            createQuote(
              deps,
              {
                pickup: body.pickup_address,
                dropoff: body.dropoff_address,
                departAt: body.depart_at,
                passengers: body.passenger_count as number,
                vehicleType: body.vehicle_type,
                meetAndGreet: body.meet_and_greet ?? false,
                worldwide: body.worldwide ?? false,
              },
              quoteCaller(caller),
              baseUrlFor(req, deps.config),
            ),
          );
          return { status: 200, body: estimateBody(quote) };
        }),
    }),
  ];
}
