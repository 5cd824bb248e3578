import { Type } from '@sinclair/typebox';
import { PAYMENT_METHODS } from '../domain/payment-state.ts';
import { StringEnum } from './common.ts';

/**
 * A job as those who fulfil it see it (shared/domain/dispatch/job-view.ts): the driver and
 * operator job feed and an operator's `booking.amended` webhook show the same fields.
 */

const Strict = { additionalProperties: false } as const;

export const JobPlace = Type.Object({ name: Type.String(), lat: Type.Number(), lng: Type.Number() }, Strict);

/** What anyone offered the job sees (`offeredJob`). */
export const OfferedJobFields = {
  pickup: JobPlace,
  dropoff: JobPlace,
  pickupTime: Type.String({ format: 'date-time' }),
  passengers: Type.Integer(),
  vehicleType: Type.String(),
  fareGBP: Type.Union([Type.Number(), Type.Null()]),
  paymentMethod: StringEnum(PAYMENT_METHODS, {
    description:
      "How the passenger pays the driver, as the job card says it: pay_link is the driver's own payment link, account is charged to the booker's account",
  }),
  meetAndGreet: Type.Boolean({
    description:
      'The passenger booked (and paid for) meet and greet: meet them inside the terminal, in arrivals, with a name board',
  }),
};

/** What whoever holds the job sees as well (`heldJob`). */
export const HeldJobFields = {
  passenger: Type.Object({ name: Type.String(), phone: Type.Union([Type.String(), Type.Null()]) }, Strict),
  notes: Type.Union([Type.String(), Type.Null()]),
  flightNumber: Type.Union([Type.String(), Type.Null()]),
};
