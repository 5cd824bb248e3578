import { type Static, Type } from '@sinclair/typebox';
import { AppError } from '../../shared/errors.ts';
import { StringEnum } from '../../shared/schemas/common.ts';
import { publishBookingEvent } from '../../shared/services/booking-events.ts';
import {
  acceptOffer,
  declineOffer,
  type JobHolder,
  jobFeed,
  reportPresence,
  reportProgress,
} from '../../shared/services/driver-jobs.ts';
import type { ApiDeps } from '../deps.ts';
import type { Caller } from '../middleware/auth.ts';
import { defineRoute, type RouteDef } from '../route.ts';

/**
 * The driver app's API (CONTRACT.md section 6): presence, the job feed, accept and decline an
 * offer, progress to completion. A driver token, or for the job paths a tier-3 operator's
 * partner key (the operator's own jobs).
 */
const Presence = Type.Object({
  available: Type.Boolean(),
  lat: Type.Number({ minimum: -90, maximum: 90 }),
  lng: Type.Number({ minimum: -180, maximum: 180 }),
});

const RefParams = Type.Object({ ref: Type.String({ minLength: 1, maxLength: 20 }) });

const Decline = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 200 })) });

const Progress = Type.Object({
  status: StringEnum(['driver_en_route', 'driver_arrived', 'passenger_on_board', 'completed']),
  payment: Type.Optional(
    Type.Object({
      method: StringEnum(['cash', 'card', 'pay_link']),
      amountGBP: Type.Number({ minimum: 0, maximum: 10_000, multipleOf: 0.01 }),
      processorFeeGBP: Type.Optional(Type.Number({ minimum: 0, maximum: 1_000, multipleOf: 0.01 })),
    }),
  ),
});

const Place = Type.Object({ name: Type.String(), lat: Type.Number(), lng: Type.Number() });
const FeedJob = Type.Object({
  bookingReference: Type.String(),
  state: Type.String({ description: 'offered, accepted, driver_en_route, driver_arrived, passenger_on_board, …' }),
  offerExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  pickup: Place,
  dropoff: Place,
  pickupTime: Type.String({ format: 'date-time' }),
  passengers: Type.Integer(),
  vehicleType: Type.String(),
  fareGBP: Type.Union([Type.Number(), Type.Null()]),
  passenger: Type.Optional(Type.Object({ name: Type.String(), phone: Type.Union([Type.String(), Type.Null()]) })),
  notes: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  flightNumber: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
const Feed = Type.Object({ jobs: Type.Array(FeedJob) });
type Feed = Static<typeof Feed>;

function holderOf(caller: Caller): JobHolder {
  if (caller.kind === 'driver') return { kind: 'driver', id: caller.driver.id };
  if (caller.kind === 'api_key' && caller.key.partnerId) return { kind: 'partner', id: caller.key.partnerId };
  throw new AppError('forbidden', 'Jobs belong to drivers (driver token) and partner operators (partner key).');
}

const announce = (deps: ApiDeps, bookingId: string) =>
  publishBookingEvent(deps.redis, deps.config.queuePrefix, bookingId);

export function driverAppRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/public/v1/driver/presence',
      operationId: 'driverPresence',
      summary: 'Set availability and location (the driver app reports every few seconds)',
      description:
        'A driver who stops reporting for the presence time-out (120 s by default) is no longer offered jobs. `available: false` takes the driver off the map at once.',
      tags: ['drivers'],
      auth: 'driver',
      body: Presence,
      errors: ['forbidden'],
      responses: {
        200: { description: 'Recorded', schema: Type.Object({ available: Type.Boolean(), at: Type.String() }) },
      },
      handler: async ({ deps, caller, body }) => {
        if (caller.kind !== 'driver') throw new AppError('forbidden', 'Drivers only.');
        const now = new Date();
        await reportPresence(deps, caller.driver.id, body, now);
        return { status: 200, body: { available: body.available, at: now.toISOString() } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/public/v1/jobs',
      operationId: 'jobFeed',
      summary: 'The job feed: open offers and jobs in hand',
      description:
        'With a driver token: the offers open to this driver and the jobs assigned to them until completed. With a partner key: the offers to the partner as an operator, the jobs it holds and the jobs it submitted. Passenger name and phone appear only on accepted jobs.',
      tags: ['drivers'],
      auth: 'driver_or_key',
      errors: ['forbidden'],
      responses: { 200: { description: 'The feed', schema: Feed } },
      handler: async ({ deps, caller }) => ({
        status: 200,
        body: { jobs: await jobFeed(deps.db, holderOf(caller)) } satisfies Feed,
      }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/v1/jobs/:ref/accept',
      operationId: 'acceptJob',
      summary: 'Accept an offer',
      description:
        'Of two accepts, exactly one wins. An offer that expired, went to someone else or was withdrawn (the passenger cancelled) is 409 offer_unavailable. Accepting again answers the same.',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      errors: ['forbidden', 'job_not_found', 'offer_unavailable'],
      responses: { 200: { description: 'The job is yours' } },
      handler: async ({ deps, caller, params }) => {
        const accepted = await acceptOffer(deps, holderOf(caller), params.ref, deps.config.bookings.referencePrefix);
        await announce(deps, accepted.bookingId);
        return {
          status: 200,
          body: { bookingReference: accepted.reference, state: 'accepted', deadMiles: accepted.deadMiles },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/v1/jobs/:ref/decline',
      operationId: 'declineJob',
      summary: 'Decline an offer (it goes to the next driver at once)',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      body: Decline,
      errors: ['forbidden', 'job_not_found', 'offer_unavailable'],
      responses: { 200: { description: 'Declined' } },
      handler: async ({ deps, caller, params, body }) => {
        const declined = await declineOffer(
          deps,
          holderOf(caller),
          params.ref,
          body.reason ?? null,
          deps.config.bookings.referencePrefix,
        );
        return { status: 200, body: { bookingReference: declined.reference, state: 'declined' } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/v1/jobs/:ref/status',
      operationId: 'reportJobStatus',
      summary: 'Report progress: en route, arrived, on board, completed (with how the fare was paid)',
      description:
        'Steps go forward only (one may be skipped). `completed` needs `payment` {method: cash | card | pay_link, amountGBP, processorFeeGBP (card)} and appends the settlement record. Reporting the current status again answers the same.',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      body: Progress,
      errors: ['forbidden', 'job_not_found', 'conflict'],
      responses: { 200: { description: 'Recorded' } },
      handler: async ({ deps, caller, params, body }) => {
        const done = await reportProgress(
          deps,
          holderOf(caller),
          params.ref,
          body.status,
          body.payment,
          deps.config.bookings.referencePrefix,
        );
        if (done.changed) await announce(deps, done.bookingId);
        return { status: 200, body: { bookingReference: done.reference, status: done.status } };
      },
    }),
  ];
}
