import { randomBytes } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { PAYMENT_METHODS } from '../../shared/domain/payment-state.ts';
import { AppError, errorBody } from '../../shared/errors.ts';
import { MAX_FARE_GBP, ScreenedText, StringEnum } from '../../shared/schemas/common.ts';
import { publishBookingEvent } from '../../shared/services/booking-events.ts';
import { beginIdempotent, replayedResult, WEBHOOK_ID } from '../../shared/services/idempotency.ts';
import {
  applyOperatorUpdate,
  OPERATOR_STATUSES,
  type OperatorUpdate,
  partnerHookSecrets,
} from '../../shared/services/operator-status.ts';
import { verifyWebhook } from '../../shared/services/webhooks.ts';
import { defineRoute, type RouteDef } from '../route.ts';
import { screen } from './bookings.ts';

/** The route's path; also where its idempotency claims are remembered, however the URL was spelt. */
const HOOK_PATH = '/api/public/hooks/booking-status';

/**
 * Status updates from partner operators who fulfil a booking (CONTRACT.md section 6), signed
 * with Standard Webhooks like our own status fanout.
 */
const Vehicle = Type.Object({
  make: ScreenedText('name', { required: true, max: 60 }),
  model: ScreenedText('name', { required: true, max: 60 }),
  colour: ScreenedText('name', { required: true, max: 40 }),
  registration: ScreenedText('reference', { required: true, max: 16 }),
});

const StatusUpdate = Type.Object({
  bookingReference: Type.String({ minLength: 1, maxLength: 20 }),
  status: StringEnum([...OPERATOR_STATUSES]),
  driver: Type.Optional(
    Type.Object({
      name: ScreenedText('name', { required: true }),
      phone: Type.Optional(ScreenedText('name', { required: true, max: 32 })),
      licensingAuthority: Type.Optional(ScreenedText('name', { required: true })),
      vehicle: Type.Optional(Vehicle),
    }),
  ),
  payment: Type.Optional(
    Type.Object({
      method: StringEnum(PAYMENT_METHODS),
      amountGBP: Type.Number({ minimum: 0, maximum: MAX_FARE_GBP, multipleOf: 0.01 }),
      processorFeeGBP: Type.Optional(Type.Number({ minimum: 0, maximum: 1_000, multipleOf: 0.01 })),
    }),
  ),
  reason: Type.Optional(Type.String({ maxLength: 500 })),
});

const Answer = Type.Object({ bookingReference: Type.String(), status: Type.String() });

const TOLERANCE_SECONDS = 300;

/** Checked against when a partner has no hook secret: random per process, never sent to anyone. */
export const UNKNOWN_PARTNER_HOOK_SECRET = `whsec_${randomBytes(32).toString('base64')}`;

/** The 401's challenge (RFC 9110 section 11.6.1): a Standard Webhooks signature, named by x-partner. */
export const HOOK_CHALLENGE =
  'StandardWebhooks realm="partner-hooks", headers="x-partner webhook-id webhook-timestamp webhook-signature"';

function unauthorized(): AppError {
  return new AppError(
    'unauthorized',
    'Sign the request with Standard Webhooks (webhook-id, webhook-timestamp within 5 minutes, webhook-signature) using your webhook secret, and name yourself in x-partner.',
    [],
    { 'WWW-Authenticate': HOOK_CHALLENGE },
  );
}

export function bookingStatusHookRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: HOOK_PATH,
      operationId: 'bookingStatusHook',
      summary: 'Status updates from a partner operator fulfilling a booking',
      description: [
        'Signed with Standard Webhooks, as our status fanout is: `webhook-id`, `webhook-timestamp` (Unix seconds, within 5 minutes of our clock), `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{raw body}">` with your `whsec_` webhook secret), plus `x-partner: <your partner id>` naming whose secrets to check.',
        'While a secret rotation overlaps, the previous secret is accepted too. A missing, wrong or stale signature is 401 unauthorized.',
        'The same `webhook-id` delivered again answers the first result without applying the update again (remembered 24 h; the same id with a different body is 422 idempotency_key_reused).',
        '`driver_assigned` accepts our open offer to you (include `driver` {name, phone?, licensingAuthority?, vehicle?}: the passenger’s lookup, tracking and pay pages and the booker’s webhooks show the name and vehicle, and the lookup the licensing authority; the phone goes only to the booker’s webhooks). Sent again for a booking you hold with a driver (another one, or the first after accepting without one), it is a new assignment until the passenger is on board: the booking is `driver_assigned` again and the new driver’s progress follows; after that it only corrects the details shown. `driver_en_route`, `driver_arrived`, `passenger_on_board` and `completed` (with `payment` {method: cash | card | pay_link | bank_transfer | account (a booking made on account), amountGBP, processorFeeGBP? (card only)}) report progress on a booking you hold; `handed_back` {reason?} gives the booking (or the open offer) back and we dispatch it elsewhere.',
        'A booking you neither hold nor have an open offer for is 404 booking_not_found.',
      ].join('\n\n'),
      tags: ['partners'],
      auth: 'none',
      body: StatusUpdate,
      errors: [
        'unauthorized',
        'forbidden',
        'content_rejected',
        'booking_not_found',
        'conflict',
        'offer_unavailable',
        'idempotency_in_progress',
        'idempotency_key_reused',
      ],
      responses: { 200: { description: 'Applied (or already applied)', schema: Answer } },
      // The signature is checked before the body is validated: unsigned is 401, not 400.
      verify: async ({ req, deps }) => {
        // A UUID in any case names the same partner: the one spelling keys the replay guard,
        // the holder check and the history, so a replay in another case is still a replay.
        const partnerId = req.get('x-partner')?.trim().toLowerCase() ?? '';
        const messageId = req.get('webhook-id') ?? '';
        if (!partnerId || !messageId) throw unauthorized();
        const secrets = await partnerHookSecrets(deps.db, deps.config, partnerId);
        // No secrets (no such partner, or no active endpoint): the signature is still checked,
        // against a secret nobody holds, so the answer's timing does not tell which ids have one.
        const checked = verifyWebhook(
          req.headers,
          req.rawBody ?? Buffer.alloc(0),
          secrets.length > 0 ? secrets : [UNKNOWN_PARTNER_HOOK_SECRET],
          TOLERANCE_SECONDS,
        );
        if (!checked || secrets.length === 0) throw unauthorized();
        return { partnerId, messageId };
      },
      handler: async ({ req, deps, body, requestId, verified }) => {
        const { partnerId, messageId } = verified;
        const rawBody = req.rawBody ?? Buffer.alloc(0);

        // A redelivered webhook-id replays the first answer (the idempotency_keys table, scope per partner).
        const idem = await beginIdempotent(
          deps.db,
          `hook:${partnerId}`,
          messageId,
          req.method,
          HOOK_PATH,
          rawBody,
          deps.config.dataEncryptionKey,
          WEBHOOK_ID,
        );
        if (idem.kind === 'replay') return replayedResult(idem.response);
        try {
          // The driver's details are shown to passengers and sent on to bookers (and their agents).
          const d = (body as OperatorUpdate).driver;
          if (d) {
            screen(req, [
              { pointer: '/driver/name', kind: 'name', value: d.name },
              { pointer: '/driver/phone', kind: 'name', value: d.phone },
              { pointer: '/driver/licensingAuthority', kind: 'name', value: d.licensingAuthority },
              { pointer: '/driver/vehicle/make', kind: 'name', value: d.vehicle?.make },
              { pointer: '/driver/vehicle/model', kind: 'name', value: d.vehicle?.model },
              { pointer: '/driver/vehicle/colour', kind: 'name', value: d.vehicle?.colour },
              { pointer: '/driver/vehicle/registration', kind: 'reference', value: d.vehicle?.registration },
            ]);
          }
          const applied = await applyOperatorUpdate(
            deps,
            partnerId,
            body as OperatorUpdate,
            deps.config.bookings.referencePrefix,
            messageId,
          );
          const answer = { bookingReference: applied.reference, status: applied.status };
          await idem.complete({ status: 200, headers: {}, body: Buffer.from(JSON.stringify(answer)) });
          if (applied.changed) await publishBookingEvent(deps.redis, deps.config.queuePrefix, applied.bookingId);
          return { status: 200, body: answer };
        } catch (err) {
          // A refusal is this delivery's answer; a failure on our side lets the partner retry.
          if (err instanceof AppError && err.status < 500) {
            await idem.complete({
              status: err.status,
              headers: err.headers,
              body: Buffer.from(JSON.stringify(errorBody(err.code, err.message, err.details, requestId))),
            });
          } else {
            await idem.abandon();
          }
          throw err;
        }
      },
    }),
  ];
}
