import { Type } from '@sinclair/typebox';
import { HeldJobFields, OfferedJobFields } from './job-view.ts';

/**
 * The events the `fanout` worker delivers to a partner's, supplier's or operator's webhook
 * endpoint (shared/services/webhooks.ts), as the OpenAPI document's `webhooks` shows them.
 * Strict (`additionalProperties: false`), so a field added to an event without its schema fails
 * the test that checks delivered events against these.
 */

const Strict = { additionalProperties: false } as const;

const Vehicle = Type.Object(
  { make: Type.String(), model: Type.String(), colour: Type.String(), registration: Type.String() },
  Strict,
);

/** An event's `timestamp`. */
const QueuedAt = Type.String({
  format: 'date-time',
  description:
    "When the event was queued: the same on every retry of its delivery (webhook-timestamp is the attempt's)",
});

const common = {
  bookingReference: Type.String({ description: 'Our booking reference, DTN-XXXXXX' }),
  jobRef: Type.Union([Type.String(), Type.Null()], {
    description:
      "The jobRef the booking was submitted with, to the partner or supplier that submitted it; null for a booking not submitted as a job, and to an operator holding another's job (it knows it by bookingReference)",
  }),
  status: Type.String({ description: "The booking's status (CONTRACT.md section 4)" }),
  sequence: Type.Integer({
    minimum: 1,
    description:
      "The booking's status sequence: keep the highest seen per booking and ignore a lower one arriving late (deliveries are not ordered)",
  }),
};

export const BookingStatusWebhook = Type.Object(
  {
    type: Type.Literal('booking.status'),
    timestamp: QueuedAt,
    data: Type.Object(
      {
        ...common,
        at: Type.String({ format: 'date-time', description: 'When the status changed' }),
        driver: Type.Optional(
          Type.Object(
            {
              name: Type.String(),
              phone: Type.Optional(Type.String()),
              vehicle: Type.Optional(Vehicle),
            },
            { ...Strict, description: 'While a driver is on the job' },
          ),
        ),
      },
      Strict,
    ),
  },
  { ...Strict, description: 'A status change of a booking the receiver submitted or holds' },
);

export const BookingAmendedWebhook = Type.Object(
  {
    type: Type.Literal('booking.amended'),
    timestamp: QueuedAt,
    data: Type.Object(
      {
        ...common,
        sequence: Type.Integer({ minimum: 1, description: "The booking's current status sequence (unchanged by it)" }),
        changed: Type.Array(Type.String(), { description: "What changed, by the job feed's names" }),
        job: Type.Object(
          { ...OfferedJobFields, ...HeldJobFields },
          { ...Strict, description: 'The job as it now is, as the job feed shows a held job' },
        ),
      },
      Strict,
    ),
  },
  { ...Strict, description: 'To a partner operator holding a booking: the booker amended it' },
);
