import { Type } from '@sinclair/typebox';
import { VEHICLE_TYPES } from '../domain/tariffs/types.ts';
import { DateTime, StringEnum } from './common.ts';

const Text = (max: number, description?: string) =>
  Type.String({ minLength: 1, maxLength: max, ...(description ? { description } : {}) });
/** Checked by the e-mail acceptance rules (400 email_not_accepted, CONTRACT.md section 5), not by format. */
const PassengerEmail = Type.String({ minLength: 1, maxLength: 254 });
const Email = Type.String({ format: 'email', maxLength: 254 });
const Phone = Type.String({
  minLength: 5,
  maxLength: 32,
  description: 'Mobile number, international format (+447700900123)',
});
const Passengers = Type.Integer({ minimum: 1, maximum: 8 });
const QuoteRef = Type.String({ minLength: 1, maxLength: 100, description: 'The quote_id from a quote (a UUID)' });

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
const Payment = StringEnum(Object.keys(PAYMENT_SPELLINGS) as (keyof typeof PAYMENT_SPELLINGS)[]);

/** POST /api/public/bookings/create (SPEC.md 2.5), with the spellings its samples use. */
export const CreateBookingRequest = Type.Object({
  quote_id: QuoteRef,
  passenger_name: Text(100),
  passenger_phone_whatsapp: Type.Optional(Phone),
  passenger_phone: Type.Optional({ ...Phone, description: 'Same as passenger_phone_whatsapp' }),
  payment_method: Payment,
  passenger_email: Type.Optional(PassengerEmail),
  flight_number: Type.Optional(Type.String({ maxLength: 10 })),
  notes: Type.Optional(Type.String({ maxLength: 500 })),
});

/** POST /api/public/bookings/instant (SPEC.md 2.6). */
export const InstantBookingRequest = Type.Object({
  pickup_address: Text(300),
  dropoff_address: Text(300),
  passenger_name: Text(100),
  passenger_phone_whatsapp: Type.Optional(Phone),
  passenger_phone: Type.Optional({ ...Phone, description: 'Same as passenger_phone_whatsapp' }),
  passenger_count: Type.Optional(Passengers),
  passenger_email: Type.Optional(PassengerEmail),
  depart_at: Type.Optional(DateTime),
  vehicle_type: Type.Optional(StringEnum(VEHICLE_TYPES)),
  payment_method: Type.Optional(Payment),
  flight_number: Type.Optional(Type.String({ maxLength: 10 })),
  notes: Type.Optional(Type.String({ maxLength: 500 })),
  agent: Type.Optional(Type.String({ maxLength: 80, description: 'Name of the calling assistant' })),
});

/**
 * POST /api/public/v1/booking (SPEC.md 2.7). Also the prose shape: `quote_id` (or `quoteId`)
 * with passenger_name, passenger_email, passenger_phone and payment_method redeems a quote.
 * Which fields are required depends on the shape, so the service checks them.
 */
export const V1BookingRequest = Type.Object({
  pickup: Type.Optional(Text(300)),
  dropoff: Type.Optional(Text(300)),
  departAt: Type.Optional(DateTime),
  passengerName: Type.Optional(Text(100)),
  passengerEmail: Type.Optional(PassengerEmail),
  passengerPhone: Type.Optional(Phone),
  passengers: Type.Optional(Passengers),
  vehicleType: Type.Optional(
    Type.String({
      maxLength: 20,
      description: 'saloon, estate, executive, luxury, 5seater, 6seater, 7seater, mpv or wav',
    }),
  ),
  flightNumber: Type.Optional(Type.String({ maxLength: 10 })),
  notes: Type.Optional(Type.String({ maxLength: 500 })),
  fareGBP: Type.Optional(
    Type.Number({
      minimum: 0,
      maximum: 10_000,
      description: 'Partner-supplied fare; only for partners allowed to set fares',
    }),
  ),
  paymentMethod: Type.Optional(Payment),
  quote_id: Type.Optional(QuoteRef),
  quoteId: Type.Optional(QuoteRef),
  passenger_name: Type.Optional(Text(100)),
  passenger_email: Type.Optional(PassengerEmail),
  passenger_phone: Type.Optional(Phone),
  payment_method: Type.Optional(Payment),
});

export const BookingRefParams = Type.Object({ ref: Type.String({ minLength: 1, maxLength: 20 }) });
export const LookupQuery = Type.Object({ email: Email });
export const CancelRequest = Type.Object({
  action: StringEnum(['cancel'] as const),
  email: Email,
  reason: Type.Optional(Type.String({ maxLength: 500 })),
});
