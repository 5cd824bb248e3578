import { type Static, Type } from '@sinclair/typebox';
import { VEHICLE_TYPES } from '../domain/tariffs/types.ts';
import { DateTime, ScreenedText, StringEnum, Uuid } from './common.ts';

/** Free text the content screen reads: over 300 characters is 400 content_rejected (common.ts); blank is 400 invalid_input, as on bookings. */
const Address = (description: string) => ScreenedText('address', { required: true, description });
const Passengers = Type.Integer({ minimum: 1, maximum: 8, description: 'Passengers, 1 to 8' });
const Vehicle = StringEnum(VEHICLE_TYPES, {
  anyCase: true,
  description:
    'saloon, estate, executive, luxury, 5seater, 6seater, 7seater, mpv or wav, in any case ("MPV"). Groups over 4 need 6seater, 7seater or mpv; wav for wheelchair access.',
});

/** POST /api/public/v1/quote (SPEC.md 2.1). `vehicle_type`, `meet_and_greet`, `depart_at` and `passenger_count` are accepted too. */
export const V1QuoteRequest = Type.Object({
  pickup: Address('Address, station, postcode, airport or town'),
  dropoff: Address('Same kinds as pickup'),
  departAt: Type.Optional({
    ...DateTime,
    description: 'Planned departure, UTC; default now. Night and holiday rates apply automatically',
  }),
  vehicleType: Type.Optional(Vehicle),
  vehicle_type: Type.Optional({ ...Vehicle, description: 'Same as vehicleType' }),
  passengers: Type.Optional(Passengers),
  meetAndGreet: Type.Optional(
    Type.Boolean({ description: 'Airport meet and greet, £25, charged only for an airport pickup' }),
  ),
  meet_and_greet: Type.Optional(Type.Boolean({ description: 'Same as meetAndGreet' })),
  depart_at: Type.Optional({ ...DateTime, description: 'Same as departAt (the spelling quotes/estimate uses)' }),
  passenger_count: Type.Optional({
    ...Passengers,
    description: 'Same as passengers (the spelling quotes/estimate uses)',
  }),
  worldwide: Type.Optional(Type.Boolean({ description: 'true for journeys outside the UK' })),
});
export type V1QuoteRequest = Static<typeof V1QuoteRequest>;

/**
 * POST /api/public/quotes/estimate (SPEC.md 2.3). The optional ride fields are read in their
 * v1 (camelCase) spelling too: ignored, `departAt` would price a ride for now and
 * `vehicleType` a saloon, and the quote booked would be another ride than the one asked for.
 */
export const EstimateRequest = Type.Object({
  pickup_address: Address('Address, station, postcode, airport or town'),
  dropoff_address: Address('Same kinds as pickup'),
  passenger_count: Type.Optional({
    ...Passengers,
    description: 'Passengers, 1 to 8 (required, in this or the v1 spelling)',
  }),
  depart_at: Type.Optional({ ...DateTime, description: 'Planned departure, UTC; default now' }),
  vehicle_type: Type.Optional(Vehicle),
  meet_and_greet: Type.Optional(Type.Boolean()),
  worldwide: Type.Optional(Type.Boolean()),
  departAt: Type.Optional({ ...DateTime, description: 'Same as depart_at (the v1 spelling)' }),
  vehicleType: Type.Optional({ ...Vehicle, description: 'Same as vehicle_type (the v1 spelling)' }),
  meetAndGreet: Type.Optional(Type.Boolean({ description: 'Same as meet_and_greet (the v1 spelling)' })),
  passengers: Type.Optional({ ...Passengers, description: 'Same as passenger_count (the v1 spelling)' }),
});
/** As the OpenAPI document shows it: the passenger count is required, in either spelling. */
export const EstimateDocumented = {
  ...EstimateRequest,
  anyOf: [{ required: ['passenger_count'] }, { required: ['passengers'] }],
};
export type EstimateRequest = Static<typeof EstimateRequest>;

export const QuotePlace = Type.Object({
  query: Type.String(),
  name: Type.String(),
  kind: StringEnum(['address', 'postcode', 'station', 'airport', 'place'] as const),
  lat: Type.Number(),
  lng: Type.Number(),
});

const Money = Type.Number({ description: 'GBP, pounds with two decimals' });

export const V1QuoteResponse = Type.Object({
  quoteId: Uuid,
  quote_id: { ...Uuid, description: 'Same as quoteId' },
  fareGBP: Money,
  currency: Type.Literal('GBP'),
  distanceMiles: Type.Number(),
  durationMinutes: Type.Integer(),
  vehicleType: Vehicle,
  passengers: Passengers,
  departAt: DateTime,
  pickup: QuotePlace,
  dropoff: QuotePlace,
  appliedRules: Type.Array(Type.Object({ code: Type.String(), description: Type.String(), amountGBP: Money }), {
    description: 'Itemised; sums exactly to fareGBP',
  }),
  tariffSource: Type.Object({
    kind: StringEnum(['council', 'driver_override', 'partner_rate', 'default'] as const),
    authority: Type.String(),
    tariff: Type.String(),
    asOf: Type.String(),
  }),
  bookingUrl: Type.String({
    format: 'uri',
    description: 'Website page that opens the quote for the passenger to confirm',
  }),
  expiresAt: DateTime,
  warnings: Type.Array(Type.String()),
});

export const EstimateResponse = Type.Object({
  quote_id: Uuid,
  fare: Money,
  currency: Type.Literal('GBP'),
  expires_at: DateTime,
  distance_miles: Type.Number(),
  duration_minutes: Type.Integer(),
  vehicle_type: Vehicle,
  passenger_count: Passengers,
  applied_rules: Type.Array(Type.Object({ code: Type.String(), description: Type.String(), amount_gbp: Money })),
  tariff_source: Type.Object({
    kind: Type.String(),
    authority: Type.String(),
    tariff: Type.String(),
    as_of: Type.String(),
  }),
  booking_url: Type.String({ format: 'uri' }),
  warnings: Type.Array(Type.String()),
});
