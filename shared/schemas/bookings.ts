import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { VEHICLE_TYPES } from '../domain/tariffs/types.ts';
import { DateTime, MAX_FARE_GBP, ScreenedText, StringEnum } from './common.ts';

/** Free text the content screen reads: over its kind's length is 400 content_rejected (common.ts). */
const Address = ScreenedText('address', { required: true });
const Name = ScreenedText('name', { required: true });
const FlightNumber = ScreenedText('flightNumber');
const Notes = ScreenedText('notes');
/** Checked by the e-mail acceptance rules (400 email_not_accepted, CONTRACT.md section 5), not by format. */
const PassengerEmail = Type.String({ minLength: 1, maxLength: 254 });
/**
 * The passenger's e-mail on lookup and cancel: any address the booking routes accept, so a
 * bounded string here (ajv's `email` format is ASCII-only and would refuse `anna@münchen.de`);
 * the handler checks it is well-formed by the bookings' own rules (`bookingForPassenger`).
 */
const Email = Type.String({
  minLength: 1,
  maxLength: 254,
  description: 'The e-mail address the booking was made with',
});
const Phone = Type.String({
  minLength: 5,
  maxLength: 32,
  description: 'Mobile number, international format (+447700900123)',
});
const Passengers = Type.Integer({ minimum: 1, maximum: 8 });
// No maxLength: a quote_id that is not a UUID is 404 quote_not_found, not 400, however long
// (CONTRACT.md section 0); the body limit bounds it, and it is compared, never stored.
const QuoteRef = Type.String({ minLength: 1, description: 'The quote_id from a quote (a UUID)' });

/** Payment methods as callers spell them (CONTRACT.md section 0), mapped to one internal set. */
export const PAYMENT_SPELLINGS = {
  cash: 'cash',
  cash_to_driver: 'cash',
  card: 'card',
  card_to_driver: 'card',
  pay_driver: 'pay_link',
  direct_to_driver: 'pay_link',
  bank_transfer: 'bank_transfer',
  account: 'account',
} as const;
const Payment = StringEnum(Object.keys(PAYMENT_SPELLINGS) as (keyof typeof PAYMENT_SPELLINGS)[], {
  anyCase: true,
  description: 'In any case, with spaces for underscores ("Cash to driver")',
});

/** An alias booking's vehicle: one of the listed types, in any case. */
const AliasVehicle = StringEnum(VEHICLE_TYPES, {
  anyCase: true,
  description: 'saloon, estate, executive, luxury, 5seater, 6seater, 7seater, mpv or wav, in any case ("MPV")',
});

const MUST_AGREE = 'Optional: the quote fixes the ride, and sent, it must agree with the quote (else 400)';
/**
 * The ride fields bookings/create takes beside its quote_id, as instant does with one: not
 * needed (the quote fixes the ride), but sent, they must agree with the quote, or the request
 * is refused (an assistant that changed the time since would otherwise be told its ride was
 * booked, and the alias answer carries no pickup time to show otherwise).
 */
const QuotedRideFields = {
  pickup_address: Type.Optional({ ...Address, description: MUST_AGREE }),
  dropoff_address: Type.Optional({ ...Address, description: MUST_AGREE }),
  depart_at: Type.Optional({ ...DateTime, description: MUST_AGREE }),
  vehicle_type: Type.Optional({ ...AliasVehicle, description: MUST_AGREE }),
  passenger_count: Type.Optional({ ...Passengers, description: MUST_AGREE }),
  meet_and_greet: Type.Optional(Type.Boolean({ description: MUST_AGREE })),
};

/** The alias bookings' ride fields in their v1 (camelCase) spelling, read as the snake_case ones (`snakeFilled`). */
const RideV1Spellings = {
  departAt: Type.Optional({ ...DateTime, description: 'Same as depart_at (the v1 spelling)' }),
  vehicleType: Type.Optional({ ...AliasVehicle, description: 'Same as vehicle_type (the v1 spelling)' }),
  passengers: Type.Optional({ ...Passengers, description: 'Same as passenger_count (the v1 spelling)' }),
  meetAndGreet: Type.Optional(Type.Boolean({ description: 'Same as meet_and_greet (the v1 spelling)' })),
};

/** POST /api/public/bookings/create (SPEC.md 2.5), with the spellings its samples use. */
export const CreateBookingRequest = Type.Object({
  quote_id: QuoteRef,
  passenger_name: Name,
  passenger_phone_whatsapp: Type.Optional(Phone),
  passenger_phone: Type.Optional({ ...Phone, description: 'Same as passenger_phone_whatsapp' }),
  payment_method: Payment,
  passenger_email: Type.Optional(PassengerEmail),
  flight_number: Type.Optional(FlightNumber),
  notes: Type.Optional(Notes),
  agent: Type.Optional(ScreenedText('agent', { description: 'Name of the calling assistant' })),
  passengerEmail: Type.Optional({ ...PassengerEmail, description: 'Same as passenger_email (the v1 spelling)' }),
  flightNumber: Type.Optional({ ...FlightNumber, description: 'Same as flight_number (the v1 spelling)' }),
  quoteId: Type.Optional({ ...QuoteRef, description: 'Same as quote_id (the v1 spelling)' }),
  ...QuotedRideFields,
  ...RideV1Spellings,
});

/**
 * POST /api/public/bookings/instant (SPEC.md 2.6). The optional fields are read in their v1
 * (camelCase) spelling too: ignored, `departAt` would book a ride for now, `quoteId` price
 * anew beside the quote, and the answer (which has no pickup time) would not show it.
 */
export const InstantBookingRequest = Type.Object({
  pickup_address: Type.Optional({ ...Address, description: 'Required unless quote_id is given' }),
  dropoff_address: Type.Optional({ ...Address, description: 'Required unless quote_id is given' }),
  quote_id: Type.Optional({
    ...QuoteRef,
    description:
      "A quote to book instead of pricing anew, as bookings/create books it: the ride (addresses, time, vehicle, passengers) and fare are the quote's, and a ride field sent with it must agree with the quote",
  }),
  passenger_name: Name,
  passenger_phone_whatsapp: Type.Optional(Phone),
  passenger_phone: Type.Optional({ ...Phone, description: 'Same as passenger_phone_whatsapp' }),
  passenger_count: Type.Optional(Passengers),
  passenger_email: Type.Optional(PassengerEmail),
  depart_at: Type.Optional(DateTime),
  vehicle_type: Type.Optional(AliasVehicle),
  payment_method: Type.Optional(Payment),
  flight_number: Type.Optional(FlightNumber),
  notes: Type.Optional(Notes),
  agent: Type.Optional(ScreenedText('agent', { description: 'Name of the calling assistant' })),
  worldwide: Type.Optional(Type.Boolean({ description: 'true for journeys outside the UK' })),
  meet_and_greet: Type.Optional(
    Type.Boolean({ description: 'Airport meet and greet: £25 at an airport pickup, as quotes/estimate prices it' }),
  ),
  quoteId: Type.Optional({ ...QuoteRef, description: 'Same as quote_id (the v1 spelling)' }),
  passengerEmail: Type.Optional({ ...PassengerEmail, description: 'Same as passenger_email (the v1 spelling)' }),
  paymentMethod: Type.Optional({ ...Payment, description: 'Same as payment_method (the v1 spelling)' }),
  flightNumber: Type.Optional({ ...FlightNumber, description: 'Same as flight_number (the v1 spelling)' }),
  ...RideV1Spellings,
});

/** Free text here (SPEC.md 2.7), read by `parseVehicleType`: any case, spaces and hyphens. */
const V1Vehicle = Type.String({
  maxLength: 20,
  description:
    'saloon, estate, executive, luxury, 5seater, 6seater, 7seater, mpv or wav; in any case, and the seaters also written "6 seater" or "6-seater". Anything else is 400 invalid_input naming the field.',
});

/**
 * POST /api/public/v1/booking (SPEC.md 2.7). Also the prose shape: `quote_id` (or `quoteId`)
 * with passenger_name, passenger_email, passenger_phone and payment_method redeems a quote; a
 * ride field sent with it (pickup, dropoff, departAt, vehicleType, passengers, meetAndGreet)
 * must agree with the quote.
 * Which fields are required depends on the shape, so the service checks them.
 */
export const V1BookingRequest = Type.Object({
  pickup: Type.Optional(Address),
  dropoff: Type.Optional(Address),
  departAt: Type.Optional(DateTime),
  passengerName: Type.Optional(Name),
  passengerEmail: Type.Optional(PassengerEmail),
  passengerPhone: Type.Optional(Phone),
  passengers: Type.Optional(Passengers),
  vehicleType: Type.Optional(V1Vehicle),
  vehicle_type: Type.Optional({ ...V1Vehicle, description: 'Same as vehicleType (the spelling v1 quote also takes)' }),
  flightNumber: Type.Optional(FlightNumber),
  notes: Type.Optional(Notes),
  worldwide: Type.Optional(
    Type.Boolean({ description: 'true for journeys outside the UK, priced in one step (a quote_id keeps its own)' }),
  ),
  meetAndGreet: Type.Optional(
    Type.Boolean({
      description:
        'Airport meet and greet, priced in one step as v1 quote prices it: £25 at an airport pickup (the driver meets the passenger in arrivals), otherwise not charged, with a warning (with a quote_id, it must agree with the quote)',
    }),
  ),
  meet_and_greet: Type.Optional(Type.Boolean({ description: 'Same as meetAndGreet' })),
  fareGBP: Type.Optional(
    Type.Number({
      exclusiveMinimum: 0,
      maximum: MAX_FARE_GBP,
      multipleOf: 0.01,
      description: 'Partner-supplied fare in pounds, at most two decimals; only for partners allowed to set fares',
    }),
  ),
  paymentMethod: Type.Optional(Payment),
  quote_id: Type.Optional(QuoteRef),
  quoteId: Type.Optional(QuoteRef),
  passenger_name: Type.Optional(Name),
  passenger_email: Type.Optional(PassengerEmail),
  passenger_phone: Type.Optional(Phone),
  passenger_phone_whatsapp: Type.Optional({
    ...Phone,
    description: 'Same as passengerPhone (the spelling bookings/create and instant use)',
  }),
  payment_method: Type.Optional(Payment),
  depart_at: Type.Optional({ ...DateTime, description: 'Same as departAt (the spelling the alias endpoints use)' }),
  passenger_count: Type.Optional({
    ...Passengers,
    description: 'Same as passengers (the spelling the alias endpoints use)',
  }),
  flight_number: Type.Optional({
    ...FlightNumber,
    description: 'Same as flightNumber (the spelling the alias endpoints use)',
  }),
});

/** Present in one of its spellings (JSON Schema: any of them required). */
const eitherOf = (...names: string[]) => ({ anyOf: names.map((n) => ({ required: [n] })) });

/**
 * The booking bodies as the OpenAPI document shows them: which fields are required depends on
 * the spelling sent and, for instant and v1, on the shape (a quote id, or the ride), which one
 * schema's `required` list cannot say, so the service checks them itself (400 naming each
 * missing field) and the document says them as `allOf`/`anyOf` of `required` lists. Not
 * compiled by the validator: its refusals would name every alternative at once.
 */
export const CreateBookingDocumented = {
  ...CreateBookingRequest,
  allOf: [eitherOf('passenger_phone_whatsapp', 'passenger_phone')],
};
export const InstantBookingDocumented = {
  ...InstantBookingRequest,
  allOf: [
    eitherOf('passenger_phone_whatsapp', 'passenger_phone'),
    {
      anyOf: [
        { required: ['pickup_address', 'dropoff_address'] },
        { required: ['quote_id'] },
        { required: ['quoteId'] },
      ],
    },
  ],
};
export const V1BookingDocumented = {
  ...V1BookingRequest,
  allOf: [
    eitherOf('passengerName', 'passenger_name'),
    eitherOf('passengerEmail', 'passenger_email'),
    eitherOf('passengerPhone', 'passenger_phone', 'passenger_phone_whatsapp'),
    {
      anyOf: [
        { required: ['quoteId'] },
        { required: ['quote_id'] },
        { required: ['pickup', 'dropoff'], ...eitherOf('departAt', 'depart_at') },
      ],
    },
  ],
};

export const BookingRefParams = Type.Object({ ref: Type.String({ minLength: 1, maxLength: 20 }) });
/** The tracking token of the booking's tracking link (`/track/{t}`), for a booking made without an e-mail. */
const TrackingTokenParam = Type.String({
  minLength: 16,
  maxLength: 128,
  pattern: '^[A-Za-z0-9_-]{16,128}$',
  description:
    "The tracking token from the booking's tracking link or status_url: instead of email, for a booking made without one",
});
export const LookupQuery = Type.Object({ email: Type.Optional(Email), t: Type.Optional(TrackingTokenParam) });
export const CancelRequest = Type.Object({
  action: StringEnum(['cancel'] as const),
  email: Type.Optional(Email),
  t: Type.Optional(TrackingTokenParam),
  reason: Type.Optional(Notes),
});

// Responses: the document shows them, and the handlers check their bodies against the types.
const Url = Type.String({ format: 'uri' });
/** Where the booking is looked up (GET): with the passenger's e-mail, or its own `t` token. */
const StatusUrl = Type.String({
  format: 'uri',
  description:
    "The API lookup (GET): add ?email= with the passenger's e-mail (a booking made without one carries its tracking token t). A test-mode booking is looked up with a test key: test data never shows without one.",
});
const Gbp = Type.Number({ description: 'Pounds, two decimals' });

/** The quote's warnings, repeated on the booking's answer (an assistant booking in one step sees them too). */
const BookingWarnings = Type.Array(Type.String(), {
  description:
    "What the booking's quote warned of, in words to pass on: meet and greet asked for away from an airport (not charged, not arranged), a vehicle chosen for the party, a tariff fallback. Empty when none.",
});

export const V1BookingResponse = Type.Object({
  bookingReference: Type.String({ description: 'DTN-XXXXXX' }),
  status: Type.String(),
  fareGBP: Gbp,
  currency: Type.String({ description: 'GBP' }),
  pickupTime: DateTime,
  statusUrl: StatusUrl,
  trackingUrl: Type.String({ format: 'uri', description: 'The tracking page; its token opens the event stream' }),
  payDriverUrl: Type.String({ format: 'uri', description: 'Pay the driver directly (no commission)' }),
  emailVerified: Type.Boolean(),
  warnings: BookingWarnings,
});
export type V1BookingResponse = Static<typeof V1BookingResponse>;

export const AliasBookingResponse = Type.Object({
  booking_reference: Type.String({ description: 'DTN-XXXXXX' }),
  status: Type.String(),
  fare: Gbp,
  currency: Type.String({ description: 'GBP' }),
  status_url: StatusUrl,
  tracking_url: Url,
  warnings: BookingWarnings,
});
export type AliasBookingResponse = Static<typeof AliasBookingResponse>;

const PlaceOut = Type.Object({
  query: Type.String(),
  name: Type.String(),
  kind: Type.String(),
  lat: Type.Number(),
  lng: Type.Number(),
});
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const BookingLookupResponse = Type.Object({
  bookingReference: Type.String(),
  status: Type.String(),
  pickupTime: DateTime,
  pickup: PlaceOut,
  dropoff: PlaceOut,
  passengers: Type.Integer(),
  vehicleType: Type.String(),
  fareGBP: Gbp,
  driver: Nullable(
    Type.Object({
      name: Type.String(),
      vehicle: Type.Object({
        make: Nullable(Type.String()),
        model: Nullable(Type.String()),
        colour: Nullable(Type.String()),
        registration: Nullable(Type.String()),
      }),
      licensingAuthority: Nullable(
        Type.String({
          description:
            'The council that licensed the driver; null for a partner operator’s driver whose operator did not say',
        }),
      ),
    }),
  ),
  payment: Type.Object({
    state: StringEnum(['due', 'paid', 'void']),
    method: Type.String(),
    records: Type.Array(
      Type.Object({
        kind: Type.String(),
        method: Nullable(Type.String()),
        amountGBP: Gbp,
        processorFeeGBP: Gbp,
        at: DateTime,
      }),
    ),
  }),
  history: Type.Array(Type.Object({ status: Type.String(), at: DateTime })),
  trackingUrl: Url,
});
export type BookingLookupResponse = Static<typeof BookingLookupResponse>;

export const CancelResponse = Type.Object({
  bookingReference: Type.String(),
  status: Type.Literal('cancelled'),
  cancelled: Type.Literal(true),
});
export type CancelResponse = Static<typeof CancelResponse>;
