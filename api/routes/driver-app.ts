import { type Static, Type } from '@sinclair/typebox';
import { PAYMENT_METHODS } from '../../shared/domain/payment-state.ts';
import { TEST_SCENARIOS } from '../../shared/domain/sandbox.ts';
import { AppError } from '../../shared/errors.ts';
import { DateTime, MAX_FARE_GBP, StringEnum } from '../../shared/schemas/common.ts';
import { HeldJobFields, OfferedJobFields } from '../../shared/schemas/job-view.ts';
import { publishBookingEvent } from '../../shared/services/booking-events.ts';
import { DASHBOARD_WEEKS, type DriverDashboard, driverDashboard } from '../../shared/services/driver-dashboard.ts';
import {
  acceptOffer,
  assertPositionFix,
  declineOffer,
  handBackJob,
  type JobHolder,
  jobFeed,
  type PresenceUpdate,
  reportPresence,
  reportProgress,
} from '../../shared/services/driver-jobs.ts';
import { removeMapKey, storeMapKey } from '../../shared/services/driver-map-key.ts';
import { replaceDriverToken } from '../../shared/services/drivers.ts';
import type { ApiDeps } from '../deps.ts';
import type { Caller } from '../middleware/auth.ts';
import { defineRoute, type RouteDef } from '../route.ts';

const NewToken = Type.Object({
  tokenPrefix: Type.String({ description: "The new token's first characters, as operators see them" }),
  sentTo: Type.Literal('email', {
    description: "Where the new token went: the driver's e-mail address only (the SMS is a notice without it)",
  }),
});

/**
 * The driver app's API (CONTRACT.md section 6): presence, the job feed, accept and decline an
 * offer, progress to completion. A driver token, or for the job paths a tier-3 operator's
 * partner key (the operator's own jobs).
 */
// The live presence index is a Redis geo set, which holds latitudes within ±85.05112878 (Web Mercator).
const Presence = Type.Object(
  {
    available: Type.Boolean({ description: 'true: taking jobs at (lat, lng); false: off duty, off the map at once' }),
    lat: Type.Optional(
      Type.Number({
        minimum: -85.05112878,
        maximum: 85.05112878,
        description: 'Required when available is true (0 with lng 0, a phone without a fix, is refused)',
      }),
    ),
    lng: Type.Optional(Type.Number({ minimum: -180, maximum: 180, description: 'Required when available is true' })),
  },
  {
    // lat and lng are required when taking jobs, optional when going off duty (a driver app
    // switching off may have no fix, or no permission): JSON Schema if/then (OpenAPI 3.1),
    // validated as documented. The body stays one object, so the fuzzer (test/fuzz.int.test.ts)
    // still varies its fields one by one and judges them by this schema.
    if: { properties: { available: { const: true } }, required: ['available'] },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's keyword; an object, never called or awaited
    then: { required: ['lat', 'lng'] },
  },
);

const RefParams = Type.Object({ ref: Type.String({ minLength: 1, maxLength: 20 }) });

const Decline = Type.Object({ reason: Type.Optional(Type.String({ maxLength: 200 })) });

const Progress = Type.Object({
  status: StringEnum(['driver_en_route', 'driver_arrived', 'passenger_on_board', 'completed']),
  payment: Type.Optional(
    Type.Object({
      method: StringEnum(PAYMENT_METHODS, {
        description: 'account: charged to the booker’s account (a booking made on account only)',
      }),
      amountGBP: Type.Number({ minimum: 0, maximum: MAX_FARE_GBP, multipleOf: 0.01 }),
      processorFeeGBP: Type.Optional(Type.Number({ minimum: 0, maximum: 1_000, multipleOf: 0.01 })),
    }),
  ),
});

const FeedJob = Type.Object({
  bookingReference: Type.String(),
  state: Type.String({ description: 'offered, accepted, driver_en_route, driver_arrived, passenger_on_board, …' }),
  offerExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  ...OfferedJobFields,
  passenger: Type.Optional(HeldJobFields.passenger),
  notes: Type.Optional(HeldJobFields.notes),
  flightNumber: Type.Optional(HeldJobFields.flightNumber),
  sandbox: Type.Optional(
    Type.Object(
      {
        scenario: Type.Union([StringEnum(TEST_SCENARIOS), Type.Null()]),
        move: Type.Union([StringEnum(['accept', 'decline', 'hand_back']), Type.Null()]),
      },
      {
        description:
          'Test-mode jobs only: the sandbox scenario the booking asked for and the move it asks of you now (null: your own choice). The simulator follows it.',
      },
    ),
  ),
});
const Feed = Type.Object({ jobs: Type.Array(FeedJob) });
type Feed = Static<typeof Feed>;

const Gbp = Type.Number({ description: 'Pounds, two decimals' });
const DashboardInvoice = Type.Object({
  id: Type.String(),
  state: StringEnum(['issued', 'due', 'paid', 'charge_failed', 'void']),
  totalGBP: Gbp,
  lines: Type.Array(
    Type.Object({
      kind: StringEnum(['subscription_fee', 'sms', 'card_processing', 'external_job_fee']),
      description: Type.String(),
      quantity: Type.Integer(),
      unitGBP: Gbp,
      amountGBP: Gbp,
    }),
  ),
});
const Dashboard = Type.Object({
  weeks: Type.Array(
    Type.Object({
      week: Type.String({ pattern: '^[0-9]{4}-W[0-9]{2}$', description: 'ISO week, Monday to Sunday Europe/London' }),
      earningsGBP: Type.Number({ description: 'Fares of the rides completed in the week' }),
      completedRides: Type.Integer({ minimum: 0 }),
      deadMiles: Type.Number({
        description: 'Miles driven empty to pickups: position at acceptance to pickup, straight line × 1.3',
      }),
      invoice: Type.Union([DashboardInvoice, Type.Null()]),
      paid: Type.Boolean({
        description:
          'The invoice is paid, or there is nothing to pay on it (it totals £0 or is void). false while the week has no invoice yet (this week, and the last until its Monday run): its fee may still be due',
      }),
    }),
    {
      maxItems: DASHBOARD_WEEKS,
      description: `The latest ${DASHBOARD_WEEKS} weeks with rides or an invoice, newest first`,
    },
  ),
  totals: Type.Object(
    {
      paidWeeks: Type.Integer({ minimum: 0 }),
      earningsGBP: Gbp,
      completedRides: Type.Integer({ minimum: 0 }),
      deadMiles: Type.Number(),
    },
    { description: 'Over every week, not only those listed' },
  ),
  trialEndsAt: Type.Union([DateTime, Type.Null()]),
});

const MapKey = Type.Object({
  apiKey: Type.String({
    minLength: 10,
    maxLength: 200,
    pattern: '^[\\x21-\\x7E]+$',
    description: 'Your own Google Maps Platform API key (Geocoding and Distance Matrix enabled)',
  }),
});
const MapKeyStored = Type.Object({
  stored: Type.Literal(true),
  last4: Type.String({ description: 'The last 4 characters of the key: the key itself is never shown again' }),
});

function holderOf(caller: Caller): JobHolder {
  if (caller.kind === 'driver') return { kind: 'driver', id: caller.driver.id };
  if (caller.kind === 'api_key' && caller.key.partnerId)
    return { kind: 'partner', id: caller.key.partnerId, testMode: caller.key.mode === 'test' };
  throw new AppError('forbidden', 'Jobs belong to drivers (driver token) and partner operators (partner key).');
}

const announce = (deps: ApiDeps, bookingId: string) =>
  publishBookingEvent(deps.redis, deps.config.queuePrefix, bookingId);

/** What accepting an offer answers. */
const AcceptedJob = Type.Object({
  bookingReference: Type.String(),
  state: Type.Literal('accepted'),
  deadMiles: Type.Union([Type.Number(), Type.Null()], {
    description: 'Road miles from where the driver was to the pickup (null for an operator, or no position)',
  }),
});

/** What declining or handing back answers. */
const JobState = <S extends string>(state: S) =>
  Type.Object({ bookingReference: Type.String(), state: Type.Literal(state) });

export function driverAppRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/public/v1/driver/presence',
      operationId: 'driverPresence',
      summary: 'Set availability and location (the driver app reports every few seconds)',
      description:
        'A driver who stops reporting for the presence time-out (120 s by default) is no longer offered jobs. `available: true` needs `lat` and `lng`; 0,0 (what a phone without a location fix reports) is 400 invalid_input. `available: false` takes the driver off the map at once and needs no position (a phone switching off may have none): one sent with it is kept as the last known location.',
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
        let report: PresenceUpdate;
        if (body.available) {
          // The schema requires both when available (if/then); checked again for the type.
          if (body.lat === undefined || body.lng === undefined) {
            throw new AppError('invalid_input', 'Taking jobs needs your position: lat and lng.', [
              ...(body.lat === undefined ? [{ field: '/lat', problem: 'is required when available is true' }] : []),
              ...(body.lng === undefined ? [{ field: '/lng', problem: 'is required when available is true' }] : []),
            ]);
          }
          assertPositionFix(body.lat, body.lng);
          report = { available: true, lat: body.lat, lng: body.lng };
        } else {
          report = { available: false, lat: body.lat, lng: body.lng };
        }
        await reportPresence(deps, caller.driver.id, report, now, caller.driver.testMode === true);
        return { status: 200, body: { available: body.available, at: now.toISOString() } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/public/v1/jobs',
      operationId: 'jobFeed',
      summary: 'The job feed: open offers and jobs in hand',
      description:
        'With a driver token: the offers open to this driver and the jobs assigned to them until completed. With a partner key: the offers to the partner as an operator, the jobs it holds (listed first), then the open jobs it submitted with a pickup from a day ago on; at most 200 jobs besides the offers. Passenger name and phone appear only on accepted jobs.',
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
        'Of two accepts, exactly one wins. An offer that expired, went to someone else or was withdrawn (the passenger cancelled) is 409 offer_unavailable. Accepting again answers the same. A booking the caller neither holds nor was offered is 404 job_not_found; a suspended partner’s accept is 403 forbidden (it may still finish, hand back or decline what it has).',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      errors: ['forbidden', 'job_not_found', 'offer_unavailable'],
      responses: { 200: { description: 'The job is yours (accepting again answers the same)', schema: AcceptedJob } },
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
      description:
        'For an open offer: it is closed and the next candidate is asked at once. Declining again answers the same. An offer that expired, was withdrawn or was accepted is 409 offer_unavailable; a job never offered to you is 404 job_not_found.',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      body: Decline,
      errors: ['forbidden', 'job_not_found', 'offer_unavailable'],
      responses: { 200: { description: 'Declined', schema: JobState('declined') } },
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
      path: '/api/public/v1/jobs/:ref/hand-back',
      operationId: 'handBackJob',
      summary: 'Hand a job back before the passenger is on board (it is dispatched to another driver)',
      description:
        'For a job you hold that is assigned, en route or arrived: you no longer hold it, you are not offered it again, and the booking goes back to dispatching at once (its history shows it dispatching again). Handing back a job you handed back answers the same again (a retry after a lost answer). After passenger_on_board it is 409 conflict, and so is an offer not accepted (decline it instead); a job never offered to you is 404 job_not_found.',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      body: Decline,
      errors: ['forbidden', 'job_not_found', 'conflict'],
      responses: { 200: { description: 'Handed back', schema: JobState('handed_back') } },
      handler: async ({ deps, caller, params, body }) => {
        const back = await handBackJob(
          deps,
          holderOf(caller),
          params.ref,
          body.reason ?? null,
          deps.config.bookings.referencePrefix,
        );
        await announce(deps, back.bookingId);
        return { status: 200, body: { bookingReference: back.reference, state: 'handed_back' } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/v1/jobs/:ref/status',
      operationId: 'reportJobStatus',
      summary: 'Report progress: en route, arrived, on board, completed (with how the fare was paid)',
      description:
        'Steps go forward only (one may be skipped). `completed` needs `payment` {method: cash | card | pay_link | bank_transfer | account (a booking made on account), amountGBP, processorFeeGBP (card only: with another method a fee is 400)} and appends the settlement record. Reporting the current status again answers the same and records nothing: `completed` again with no payment, or the payment recorded, is 200; with another payment it is 409 conflict naming what was recorded (a settlement record is never changed: operators append a correction). Progress on an offer not yet accepted is 409 conflict (accept it first); on a job never offered to you, 404 job_not_found.',
      tags: ['drivers'],
      auth: 'driver_or_key',
      params: RefParams,
      body: Progress,
      errors: ['forbidden', 'job_not_found', 'conflict'],
      responses: {
        200: {
          description: 'Recorded (reporting the current status again answers the same)',
          schema: Type.Object({ bookingReference: Type.String(), status: Type.String() }),
        },
      },
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
    defineRoute({
      method: 'get',
      path: '/api/public/v1/driver/dashboard',
      operationId: 'driverDashboard',
      summary: 'Earnings, completed rides, dead mileage and invoices per billing week',
      description:
        `The latest ${DASHBOARD_WEEKS} billing weeks (Monday 00:00 to Sunday 24:00 Europe/London, ISO week keys) with rides or an invoice, newest first: ` +
        'earnings (fares of the rides completed in the week), completed rides, dead miles, the weekly invoice with its lines and whether the week is paid; totals over every week; the end of the free trial.',
      tags: ['drivers'],
      auth: 'driver',
      errors: ['forbidden'],
      responses: { 200: { description: 'The dashboard', schema: Dashboard } },
      handler: async ({ deps, caller }) => {
        if (caller.kind !== 'driver') throw new AppError('forbidden', 'Drivers only.');
        return {
          status: 200,
          body: (await driverDashboard(deps.db, caller.driver.id)) satisfies DriverDashboard,
          headers: { 'Cache-Control': 'no-store' },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/public/v1/driver/token',
      operationId: 'replaceDriverToken',
      summary: 'Replace your driver token, signing out every device',
      description:
        'For a lost, stolen or shared phone: a new token is issued, the one this request was sent with stops working at once, and so does every driver web session signed in with it, on every device. ' +
        'The new token is sent to your e-mail address only: not in the answer, and not by SMS (the SMS is a notice), because whoever sends this may be the one holding the lost phone. ' +
        'A request sent with a token already replaced answers 401 and replaces nothing. At most 5 replacements an hour (429 with Retry-After).',
      tags: ['drivers'],
      auth: 'driver',
      errors: ['forbidden', 'unauthorized', 'rate_limited'],
      responses: { 200: { description: 'Replaced: the new token is on its way by e-mail', schema: NewToken } },
      handler: async ({ deps, caller }) => {
        if (caller.kind !== 'driver' || !caller.driver.tokenHash) throw new AppError('forbidden', 'Drivers only.');
        const replaced = await replaceDriverToken(
          deps.db,
          caller.driver.id,
          `driver:${caller.driver.id}`,
          caller.driver.tokenHash,
        );
        if (!replaced) {
          throw new AppError(
            'unauthorized',
            'This token was replaced already (or the driver is no longer approved): sign in with the newest token, sent to your e-mail.',
          );
        }
        return {
          status: 200,
          body: { tokenPrefix: replaced.tokenPrefix, sentTo: 'email' } satisfies Static<typeof NewToken>,
          headers: { 'Cache-Control': 'no-store' },
        };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/public/v1/driver/map-key',
      operationId: 'setDriverMapKey',
      summary: 'Store your own map-provider API key (quotes made through you use it)',
      description:
        'High-volume drivers may bring their own Google Maps Platform key, billed to them by Google. It is stored encrypted and never shown again: the answer carries its last 4 characters. ' +
        'Quotes you request with your driver token (POST /api/public/v1/quote) are then geocoded and routed with it. Sending a key again replaces it.',
      tags: ['drivers'],
      auth: 'driver',
      body: MapKey,
      errors: ['forbidden'],
      responses: { 200: { description: 'Stored', schema: MapKeyStored } },
      handler: async ({ deps, caller, body }) => {
        if (caller.kind !== 'driver') throw new AppError('forbidden', 'Drivers only.');
        const stored = await storeMapKey(deps.db, deps.config.dataEncryptionKey, caller.driver.id, body.apiKey);
        return { status: 200, body: stored satisfies Static<typeof MapKeyStored> };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/public/v1/driver/map-key',
      operationId: 'removeDriverMapKey',
      summary: 'Remove your map-provider API key (quotes go back to the built-in estimate)',
      description:
        'Deletes the sealed key: {stored: false, removed: true}. With none stored it answers 200 too, removed: false.',
      tags: ['drivers'],
      auth: 'driver',
      errors: ['forbidden'],
      responses: {
        200: {
          description: 'Removed (also when there was none)',
          schema: Type.Object({ stored: Type.Literal(false), removed: Type.Boolean() }),
        },
      },
      handler: async ({ deps, caller }) => {
        if (caller.kind !== 'driver') throw new AppError('forbidden', 'Drivers only.');
        const removed = await removeMapKey(deps.db, caller.driver.id);
        return { status: 200, body: { stored: false, removed } };
      },
    }),
  ];
}
