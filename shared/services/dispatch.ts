import type { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import { appendStatus, type BookingRow } from '../db/bookings.ts';
import type { Db, Tx } from '../db/knex.ts';
import { enqueueJob, OUTBOX_MAX_ATTEMPTS } from '../db/outbox.ts';
import { createPresenceIndex, type PresenceIndex } from '../dispatch/presence-index.ts';
import { dispatchTimeMs, leadTimesOf } from '../domain/dispatch/dispatch-time.ts';
import { type Corridor, EARTH_RADIUS_MILES, type LatLng } from '../domain/dispatch/geometry.ts';
import { hasMeetAndGreet, jobCardText, offerCode, offerLink, pickupArea } from '../domain/dispatch/job-card.ts';
import {
  DEAD_RUN_CIRCUITY,
  type DriverCandidate,
  matchCandidates,
  needsWheelchair,
  type Offerable,
  type PartnerCandidate,
  roadMiles,
  SERVES,
  vehicleMismatch,
} from '../domain/dispatch/matching.ts';
import { repeatedHourZone } from '../domain/london-zone.ts';
import { placeLabel } from '../domain/place-label.ts';
import type { VehicleType } from '../domain/tariffs/types.ts';
import { AppError } from '../errors.ts';
import { postDistrictAt } from '../geo/gazetteer.ts';
import { uuidv7 } from '../ids.ts';
import type { Queues } from '../queues/connection.ts';
import { QUEUE_NAMES } from '../queues/registry.ts';
import { JOURNEY } from './booking-history.ts';
import { viewOf } from './bookings.ts';
import { DRIVER_JOB_CHANNELS, queueDriverText, queueMessage } from './messages.ts';
import { queueAmendedFanout } from './webhooks.ts';

/**
 * Dispatch: offers go to one candidate at a time, in the order the pure matcher gives (tier 1
 * local drivers by ETA, tier 2 national network drivers, tier 3 partner operators). Each step
 * runs in one transaction holding the booking's row lock, so concurrent steps (a timeout, a
 * decline, a retried job) serialise and never make two live offers. Everything that must
 * happen later (the offer's timeout, the next step, a retry when nobody is free, job cards)
 * is an outbox job with a deterministic id, so a worker killed mid-step resumes without
 * duplicates.
 */

/** Statuses in which a driver is busy with a booking. */
export const ACTIVE_JOB_STATUSES = ['driver_assigned', 'driver_en_route', 'driver_arrived', 'passenger_on_board'];
/** Statuses dispatch still works on. */
const DISPATCHABLE = new Set(['pending', 'dispatching', 'no_driver_available']);
/** Local candidates asked of the presence index per step. */
const LOCAL_CANDIDATES = 50;
/** National network drivers looked at per step (tier 2 is checked against each one's corridors). */
const NETWORK_CANDIDATES = 1000;

export interface DispatchDeps {
  db: Db;
  redis: Redis;
  config: Pick<
    Config,
    'dispatch' | 'queuePrefix' | 'dataEncryptionKey' | 'publicBaseUrls' | 'bookings' | 'serviceName'
  >;
}

const LONDON_WHEN = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  dateStyle: 'full',
  timeStyle: 'short',
});

/** How early a booking's first dispatch step may run before its dispatch time (clock skew between hosts). */
const EARLY_STEP_TOLERANCE_MS = 60_000;

const presenceIndexes = new WeakMap<Redis, { live?: PresenceIndex; test?: PresenceIndex }>();

/**
 * The presence index for this deployment (one per Redis connection). Test-mode drivers (the
 * simulator's fleet, sandbox drivers) report into an index of their own, so they never crowd
 * the nearest-driver search of live bookings, and test bookings search only them.
 */
export function presenceIndex(
  redis: Redis,
  config: Pick<Config, 'dispatch' | 'queuePrefix'>,
  testMode = false,
): PresenceIndex {
  let indexes = presenceIndexes.get(redis);
  if (!indexes) {
    indexes = {};
    presenceIndexes.set(redis, indexes);
  }
  const mode = testMode ? 'test' : 'live';
  let index = indexes[mode];
  if (!index) {
    index = createPresenceIndex(redis, {
      prefix: `${config.queuePrefix}:dispatch${testMode ? '-test' : ''}`,
      ttlMs: config.dispatch.presenceTtlSeconds * 1000,
    });
    indexes[mode] = index;
  }
  return index;
}

interface Place extends LatLng {
  name: string;
  kind?: string;
  postcodeDistrict?: string | null;
}

export interface DispatchBooking extends BookingRow {
  pickup: BookingRow['pickup'] & Place;
  dropoff: BookingRow['dropoff'] & Place;
  operator_partner_id: string | null;
  dispatch_tier: number | null;
  /** The next try after every tier found nobody (`noDriver`); null before any. */
  dispatch_retry_at: Date | null;
  /** The fare's rules (jsonb); a charged `meet_and_greet` one is told to the driver (`hasMeetAndGreet`). */
  applied_rules?: unknown;
}

export interface OfferRow {
  id: string;
  booking_id: string;
  tier: number;
  attempt: number;
  driver_id: string | null;
  partner_id: string | null;
  state: 'offered' | 'accepted' | 'declined' | 'expired' | 'withdrawn';
  offered_at: Date;
  expires_at: Date;
  responded_at: Date | null;
  /** Why it was declined: the driver's reason, or "handed back[: reason]" for a job given back. */
  decline_reason: string | null;
  driver_lat: number | null;
  driver_lng: number | null;
}

export { roadMiles } from '../domain/dispatch/matching.ts';

interface DriverRow {
  id: string;
  home_lat: number;
  home_lng: number;
  operating_radius_miles: number;
  max_concurrent_jobs: number;
  national_network: boolean;
  corridors: Corridor[];
  vehicle_id: string | null;
  vehicle_class: VehicleType | null;
  seats: number | null;
  wheelchair_accessible: boolean | null;
}

/** Candidates for one booking: live local drivers near the pickup, network drivers for distance hires, operators. */
async function candidates(
  trx: Tx,
  deps: DispatchDeps,
  booking: DispatchBooking,
  nowMs: number,
): Promise<{ drivers: DriverCandidate[]; partners: PartnerCandidate[]; distanceMiles: number }> {
  const presence = presenceIndex(deps.redis, deps.config, booking.test_mode);
  const distanceMiles = roadMiles(booking.pickup, booking.dropoff);
  const near = await presence.nearest(booking.pickup.lat, booking.pickup.lng, {
    want: LOCAL_CANDIDATES,
    maxRadiusKm: deps.config.dispatch.localSearchKm,
    nowMs,
  });
  const positions = new Map<string, { lat: number; lng: number; lastSeenAt: number }>(
    near.map((n) => [n.driverId, { lat: n.lat, lng: n.lng, lastSeenAt: n.lastSeenAt }]),
  );
  if (distanceMiles >= deps.config.dispatch.distanceHireMiles) {
    const network = await trx('drivers')
      .where({ status: 'approved', national_network: true, test_mode: booking.test_mode })
      .limit(NETWORK_CANDIDATES)
      .pluck<string[]>('id');
    const missing = network.filter((id) => !positions.has(id));
    for (const [id, p] of await presence.positions(missing, nowMs)) positions.set(id, p);
  }
  const ids = [...positions.keys()];
  const rows: DriverRow[] = ids.length
    ? await trx('drivers as d')
        .leftJoin('vehicles as v', function () {
          this.on('v.driver_id', 'd.id').andOn('v.active', trx.raw('true'));
        })
        .whereIn('d.id', ids)
        .where({ 'd.status': 'approved', 'd.test_mode': booking.test_mode })
        .select(
          'd.id',
          'd.home_lat',
          'd.home_lng',
          'd.operating_radius_miles',
          'd.max_concurrent_jobs',
          'd.national_network',
          'd.corridors',
          'v.id as vehicle_id',
          'v.class as vehicle_class',
          'v.seats',
          'v.wheelchair_accessible',
        )
    : [];
  const load = await jobLoad(
    trx,
    'driver',
    rows.map((r) => r.id),
  );
  const drivers: DriverCandidate[] = rows.map((r) => {
    const p = positions.get(r.id);
    return {
      id: r.id,
      position: p ? { lat: p.lat, lng: p.lng } : null,
      lastSeenAt: p?.lastSeenAt ?? null,
      available: p !== undefined,
      home: { lat: r.home_lat, lng: r.home_lng },
      operatingRadiusMiles: r.operating_radius_miles,
      activeJobs: load.get(r.id) ?? 0,
      maxConcurrentJobs: r.max_concurrent_jobs,
      vehicle:
        r.vehicle_id && r.vehicle_class
          ? {
              id: r.vehicle_id,
              class: r.vehicle_class,
              seats: r.seats ?? 0,
              wheelchairAccessible: r.wheelchair_accessible === true,
            }
          : null,
      nationalNetwork: r.national_network,
      corridors: r.corridors,
    };
  });
  // Tier 3 operators are real fleets: a test-mode booking is never offered to them.
  const operators = await trx('partners')
    .where({ is_operator: true, status: 'active' })
    .whereRaw('not ?', [booking.test_mode])
    .where('fleet_capacity', '>', 0)
    .select<{ id: string; fleet_classes: VehicleType[]; fleet_capacity: number }[]>(
      'id',
      'fleet_classes',
      'fleet_capacity',
    );
  const partnerLoad = await jobLoad(
    trx,
    'partner',
    operators.map((p) => p.id),
  );
  const partners: PartnerCandidate[] = operators.map((p) => ({
    id: p.id,
    classes: p.fleet_classes,
    maxPassengers: 8,
    wheelchairAccessible: p.fleet_classes.includes('wav'),
    capacity: p.fleet_capacity,
    activeJobs: partnerLoad.get(p.id) ?? 0,
  }));
  return { drivers, partners, distanceMiles };
}

/**
 * Jobs in hand (active bookings) plus live offers, per driver or operator: an offer past its
 * time counts for nothing, even before its time-out job marks it expired (a time-out that was
 * lost with Redis would otherwise hold the driver at capacity). Exported for its plan
 * test (test/hot-path-plans.int.test.ts).
 */
export async function jobLoad(trx: Tx, kind: 'driver' | 'partner', ids: string[]): Promise<Map<string, number>> {
  const load = new Map<string, number>();
  if (ids.length === 0) return load;
  const holder = kind === 'driver' ? 'driver_id' : 'operator_partner_id';
  const offerHolder = kind === 'driver' ? 'driver_id' : 'partner_id';
  const { rows } = await trx.raw<{ rows: { id: string; n: number }[] }>(
    `select id, sum(n)::int as n from (
       select ${holder} as id, count(*) as n from bookings where ${holder} = any(?::uuid[]) and status = any(?::text[]) group by 1
       union all
       select ${offerHolder} as id, count(*) as n from dispatch_offers
        where ${offerHolder} = any(?::uuid[]) and state = 'offered' and expires_at > now() group by 1
     ) x group by id`,
    [ids, ACTIVE_JOB_STATUSES, ids],
  );
  for (const r of rows) load.set(r.id, r.n);
  return load;
}

export type StepOutcome =
  | { kind: 'offered'; offerId: string; tier: 1 | 2 | 3; driverId: string | null; partnerId: string | null }
  | { kind: 'waiting' }
  | { kind: 'no_driver'; retryAt: Date | null }
  | { kind: 'deferred'; until: Date }
  | { kind: 'settled' };

/**
 * One dispatch step for a booking, inside the caller's transaction: offer it to the best
 * candidate not yet asked, or, when every tier is exhausted, mark it `no_driver_available`,
 * e-mail operators (once) and schedule another try until pickup time. A booking with a live
 * offer, or no longer being dispatched, is left alone, so repeated jobs change nothing; a
 * pending one whose dispatch time is still ahead gets a job for that time instead.
 */
export async function dispatchStep(
  trx: Tx,
  deps: DispatchDeps,
  bookingId: string,
  now = new Date(),
): Promise<StepOutcome> {
  const booking = await trx<DispatchBooking>('bookings').where({ id: bookingId }).forUpdate().first();
  if (!booking || !DISPATCHABLE.has(booking.status)) return { kind: 'settled' };
  const offers = await trx<OfferRow>('dispatch_offers').where({ booking_id: bookingId }).orderBy('attempt');
  if (offers.some((o) => o.state === 'offered' && o.expires_at.getTime() > now.getTime())) return { kind: 'waiting' };

  if (booking.status === 'pending') {
    // Too early: the pickup moved later after this job was scheduled (a partner's amendment
    // leaves the job of the old time), or the lead time was shortened since. Dispatch at the
    // time the booking says now, not hours before it.
    const dispatchAt = dispatchTimeMs(
      { pickupTime: booking.pickup_time, pickup: booking.pickup, dropoff: booking.dropoff },
      leadTimesOf(deps.config),
    );
    if (dispatchAt > now.getTime() + EARLY_STEP_TOLERANCE_MS) {
      await enqueueJob(
        trx,
        'dispatch-booking',
        { bookingId },
        { jobId: `dispatch-${bookingId}-at-${dispatchAt}`, runAt: new Date(dispatchAt) },
      );
      return { kind: 'deferred', until: new Date(dispatchAt) };
    }
    // The passenger's tracking page shows the search starting, whatever it finds.
    await appendStatus(trx, booking.id, 'dispatching', 'dispatch');
    booking.status = 'dispatching';
  }
  const { drivers, partners, distanceMiles } = await candidates(trx, deps, booking, now.getTime());
  // A driver or operator who was offered this booking is not asked again, but for one thing: in
  // a retry round (every tier found nobody, DISPATCH_RETRY_MINUTES ago), when nobody who was
  // never asked can take it, those whose one offer lapsed unanswered in an earlier round are
  // asked once more (`askedOnceMore`): they may be free now, and with few drivers the round
  // would otherwise find nobody. Never a second time, never one who declined, and never before
  // anyone not yet asked, in any tier. An offer withdrawn because the booking changed
  // (`amendmentReachesHolders`) asked about another job: its driver or operator may be asked
  // again about this one.
  const asked = offers.filter((o) => o.state !== 'withdrawn');
  const matchExcept = (again: ReturnType<typeof askedOnceMore>) =>
    matchCandidates(
      {
        pickup: booking.pickup,
        dropoff: booking.dropoff,
        distanceMiles,
        passengers: booking.passengers,
        vehicleType: booking.vehicle_type as VehicleType,
      },
      drivers,
      partners,
      {
        now: now.getTime(),
        presenceTtlMs: deps.config.dispatch.presenceTtlSeconds * 1000,
        distanceHireMiles: deps.config.dispatch.distanceHireMiles,
        excludeDrivers: new Set(asked.flatMap((o) => (o.driver_id && !again.has(o.driver_id) ? [o.driver_id] : []))),
        excludePartners: new Set(
          asked.flatMap((o) => (o.partner_id && !again.has(o.partner_id) ? [o.partner_id] : [])),
        ),
      },
    );
  const offerToFirst = async (ordered: Offerable[]): Promise<StepOutcome | null> => {
    for (const best of ordered) {
      // Each choice is checked in a savepoint, and one passed over is rolled back to it, which
      // lets go of their row: a step holds at most one driver's or operator's row, so it can
      // wait for each choice (another step offering them a job) without two steps ever waiting
      // for each other's, and a holder with room for more is not passed over while another
      // step offers them one.
      await trx.raw('savepoint dispatch_choice');
      if (!(await stillOfferable(trx, best))) {
        await trx.raw('rollback to savepoint dispatch_choice');
        continue;
      }
      await trx.raw('release savepoint dispatch_choice');
      return makeOffer(trx, deps, booking, best, offers.length + 1, drivers, now);
    }
    return null;
  };
  const offered = await offerToFirst(matchExcept(new Set()).ordered);
  if (offered) return offered;
  // Nobody not yet asked could take it (none matched, or those who did were taken meanwhile):
  // in a retry round, those asked once and silent since an earlier round.
  const round = retryRoundStart(booking, now);
  const again = round ? askedOnceMore(asked, round) : new Set<string>();
  if (again.size > 0) {
    const holderOf = (c: Offerable) => (c.kind === 'driver' ? c.driverId : c.partnerId);
    const offeredAgain = await offerToFirst(matchExcept(again).ordered.filter((c) => again.has(holderOf(c))));
    if (offeredAgain) return offeredAgain;
  }
  return noDriver(trx, deps, booking, now);
}

/**
 * When the retry round this step belongs to began: the booking's `dispatch_retry_at`, which the
 * step that found nobody set to its next try (and which stays until an amendment clears it), once
 * that time has come. Null in the first round, and for a step before its retry's time (a
 * duplicate job), which may not ask anyone again early.
 */
function retryRoundStart(booking: DispatchBooking, now: Date): Date | null {
  const at = booking.dispatch_retry_at;
  return at && at.getTime() <= now.getTime() + EARLY_STEP_TOLERANCE_MS ? at : null;
}

/**
 * The drivers and operators (by id) a retry round may ask once more: their only offer of this
 * booking lapsed unanswered (expired, or still `offered` past its time while its time-out is on
 * its way) before `round` began, in an earlier round of tries.
 */
function askedOnceMore(asked: OfferRow[], round: Date): Set<string> {
  const offersOf = new Map<string, OfferRow[]>();
  for (const o of asked) {
    const holder = o.driver_id ?? o.partner_id;
    if (holder) offersOf.set(holder, [...(offersOf.get(holder) ?? []), o]);
  }
  const again = new Set<string>();
  for (const [holder, theirs] of offersOf) {
    const [only] = theirs;
    if (
      theirs.length === 1 &&
      only &&
      (only.state === 'expired' || only.state === 'offered') &&
      only.expires_at.getTime() <= round.getTime()
    ) {
      again.add(holder);
    }
  }
  return again;
}

/**
 * Whether the driver or operator chosen from the candidates read earlier in this step may
 * still be offered the job, holding their row (FOR NO KEY UPDATE) until the offer commits:
 *
 * - Still approved (a driver) or active and an operator (a partner). A suspension or rejection
 *   takes the driver's row FOR NO KEY UPDATE before it withdraws their offers (`releaseJobs`
 *   in drivers.ts), so the two are ordered: either it commits first and this sees the new
 *   status (READ COMMITTED reads the latest version of a row it locks), or it waits for this
 *   step's offer and withdraws it. Without the lock, a suspension committing between the
 *   candidates' read and the offer left a live offer (and a job card) with a driver who could
 *   no longer answer it, and the passenger waited out its time-out.
 * - Still below their capacity (`max_concurrent_jobs`, `fleet_capacity`), counted again
 *   under the lock: steps for other bookings run at the same time (the dispatch role takes
 *   16 jobs at once), and each read the same load before either offered, so a driver taking
 *   one job, or an operator with room for one more, could be offered two. The second step
 *   now waits for the first's offer and counts it.
 *
 * Lock order: the booking first, as everywhere, then at most one driver's or operator's row
 * (the caller rolls a passed-over choice back to a savepoint), so two steps never wait for
 * each other. A suspension takes the driver's row and then the bookings the driver holds or
 * has an open offer on, which the booking being dispatched is not (should one be, Postgres
 * ends the deadlock and the step's job is retried). A foreign key's key-share lock (an accept
 * elsewhere setting `driver_id`) does not conflict with this one.
 */
async function stillOfferable(trx: Tx, best: Offerable): Promise<boolean> {
  if (best.kind === 'driver') {
    const row = await trx('drivers')
      .where({ id: best.driverId })
      .forNoKeyUpdate()
      .first<{ status: string; max_concurrent_jobs: number } | undefined>('status', 'max_concurrent_jobs');
    if (row?.status !== 'approved') return false;
    const load = await jobLoad(trx, 'driver', [best.driverId]);
    return (load.get(best.driverId) ?? 0) < row.max_concurrent_jobs;
  }
  const row = await trx('partners')
    .where({ id: best.partnerId })
    .forNoKeyUpdate()
    .first<{ status: string; is_operator: boolean; fleet_capacity: number } | undefined>(
      'status',
      'is_operator',
      'fleet_capacity',
    );
  if (row?.status !== 'active' || !row.is_operator) return false;
  const load = await jobLoad(trx, 'partner', [best.partnerId]);
  return (load.get(best.partnerId) ?? 0) < row.fleet_capacity;
}

async function makeOffer(
  trx: Tx,
  deps: DispatchDeps,
  booking: DispatchBooking,
  best: Offerable,
  attempt: number,
  drivers: DriverCandidate[],
  now: Date,
): Promise<StepOutcome> {
  const id = uuidv7();
  const expiresAt = new Date(now.getTime() + deps.config.dispatch.offerTimeoutSeconds * 1000);
  const position = best.kind === 'driver' ? drivers.find((d) => d.id === best.driverId)?.position : null;
  await trx('dispatch_offers').insert({
    id,
    booking_id: booking.id,
    tier: best.tier,
    attempt,
    driver_id: best.kind === 'driver' ? best.driverId : null,
    partner_id: best.kind === 'partner' ? best.partnerId : null,
    state: 'offered',
    offered_at: now,
    expires_at: expiresAt,
    driver_lat: position?.lat ?? null,
    driver_lng: position?.lng ?? null,
  });
  if (booking.status !== 'dispatching') {
    await appendStatus(trx, booking.id, 'dispatching', 'dispatch', { attempt, tier: best.tier });
  }
  if (best.kind === 'driver') {
    const driver = await trx('drivers').where({ id: best.driverId }).first<{ phone: string }>('phone');
    if (driver) {
      const baseUrl = deps.config.publicBaseUrls[0] ?? '';
      const text = jobCardText({
        reference: booking.reference,
        // Named as the offer's link names them: a place stored without its district gets the
        // one found at its point, so the text and the page agree ("Manchester M1").
        pickupArea: pickupArea(booking.pickup, { lookupDistrict: postDistrictAt }),
        dropoffArea: pickupArea(booking.dropoff, { lookupDistrict: postDistrictAt }),
        pickupTime: booking.pickup_time,
        farePence: booking.fare_pence,
        paymentMethod: booking.payment_method,
        passengers: booking.passengers,
        vehicleType: booking.vehicle_type,
        meetAndGreet: hasMeetAndGreet(booking.applied_rules),
        expiresAt,
        link: offerLink(baseUrl, offerCode(id, deps.config.dataEncryptionKey)),
        tier: best.tier,
      });
      // The job card goes by SMS and WhatsApp; each is its own message, sent once.
      for (const channel of DRIVER_JOB_CHANNELS) {
        await queueMessage(trx, {
          channel,
          recipient: driver.phone,
          body: text,
          purpose: 'job_card',
          bookingId: booking.id,
          driverId: best.driverId,
          testMode: booking.test_mode,
        });
      }
    }
  }
  // Tier-3 operators see the offer in their job feed (GET /api/public/v1/jobs with their key).
  await enqueueJob(trx, 'offer-expired', { offerId: id }, { jobId: `offer-expired-${id}`, runAt: expiresAt });
  return {
    kind: 'offered',
    offerId: id,
    tier: best.tier,
    driverId: best.kind === 'driver' ? best.driverId : null,
    partnerId: best.kind === 'partner' ? best.partnerId : null,
  };
}

/**
 * The passenger, once, when every tier is exhausted: what is happening, whether we try again,
 * and that they may cancel free of charge (the tracking link, which also cancels). Only a
 * passenger we e-mailed the booking's confirmation (website, v1 API, MCP): a partner's or
 * supplier's customer hears from that platform, and an address an agent typed for the alias
 * endpoints was never confirmed to us.
 */
async function tellPassengerNoDriverYet(
  trx: Tx,
  deps: DispatchDeps,
  booking: DispatchBooking,
  retryAt: Date | null,
  /** `no_driver_final`: the retries promised in the first e-mail have run out, nobody found. */
  purpose: 'no_driver_yet' | 'no_driver_final' = 'no_driver_yet',
): Promise<void> {
  if (!booking.passenger_email) return;
  const confirmed = await trx('outbound_messages')
    .where({ booking_id: booking.id, purpose: 'confirmation', channel: 'email' })
    .first('id');
  if (!confirmed) return;
  const view = viewOf(booking, deps.config.publicBaseUrls[0] ?? '', deps.config.dataEncryptionKey, false);
  await queueMessage(trx, {
    channel: 'email',
    recipient: booking.passenger_email,
    subject: `Your taxi ${booking.reference}: ${retryAt ? 'still looking for a driver' : 'no driver found'}`,
    body: [
      `Hello ${booking.passenger_name},`,
      '',
      `We have not found a driver for your booking ${booking.reference}: ${placeLabel(booking.pickup)} to ${placeLabel(booking.dropoff)}, ${LONDON_WHEN.format(booking.pickup_time)}${repeatedHourZone(booking.pickup_time)} (UK time).`,
      retryAt
        ? `We keep asking drivers every ${deps.config.dispatch.retryMinutes} minutes until your pickup time; the tracking page shows when one accepts.`
        : purpose === 'no_driver_final'
          ? 'We asked drivers again until shortly before your pickup, and none could take it: please make other plans. We are sorry.'
          : 'Your pickup is too soon for us to ask again: please make other plans. We are sorry.',
      '',
      `Track your ride: ${view.trackingUrl}`,
      `${retryAt ? 'If you would rather make other plans, cancel' : 'Cancel'} free of charge: ${view.trackingUrl}`,
      '',
      deps.config.serviceName,
    ].join('\n'),
    purpose,
    bookingId: booking.id,
    testMode: booking.test_mode,
  });
}

async function noDriver(trx: Tx, deps: DispatchDeps, booking: DispatchBooking, now: Date): Promise<StepOutcome> {
  if (booking.status !== 'no_driver_available') {
    await appendStatus(trx, booking.id, 'no_driver_available', 'dispatch');
  }
  // Operators are e-mailed once a booking: not again each time a retry finds a driver who then
  // lets the offer lapse and the booking comes back here.
  const alerted =
    booking.status === 'no_driver_available' ||
    (await trx('outbound_messages')
      .where({ booking_id: booking.id, purpose: 'operator_alert', channel: 'email' })
      .first('id')) !== undefined;
  const next = new Date(now.getTime() + deps.config.dispatch.retryMinutes * 60_000);
  const retryAt = next.getTime() < booking.pickup_time.getTime() ? next : null;
  if (!alerted) {
    await queueMessage(trx, {
      channel: 'email',
      recipient: deps.config.dispatch.operatorEmail,
      subject: `No driver for ${booking.reference}`,
      body: [
        `Booking ${booking.reference} found no driver in any tier.`,
        `Pickup: ${placeLabel(booking.pickup)}, ${booking.pickup_time.toISOString()} (UTC).`,
        `Dropoff: ${placeLabel(booking.dropoff)}. Passengers: ${booking.passengers}, ${booking.vehicle_type}.`,
        retryAt
          ? `Dispatch tries again every ${deps.config.dispatch.retryMinutes} minutes until pickup time.`
          : 'Pickup is too soon to try again: dispatch has stopped.',
      ].join('\n'),
      purpose: 'operator_alert',
      bookingId: booking.id,
      testMode: booking.test_mode,
    });
  }
  if (!alerted) await tellPassengerNoDriverYet(trx, deps, booking, retryAt);
  // The last try before pickup found nobody either: the passenger, told we would keep asking,
  // is told we have stopped, so nobody waits at the kerb for a taxi no driver was offered.
  // Whether that try found nobody free or offered it to one who let the offer lapse (the
  // booking then comes back from dispatching). Once: the row's retry time is cleared below,
  // and a repeated job sees it cleared.
  else if (!retryAt && booking.dispatch_retry_at !== null) {
    await tellPassengerNoDriverYet(trx, deps, booking, null, 'no_driver_final');
  }
  // The row says when the next try is due (or that none is), so the check for lost dispatch
  // jobs can queue a try Redis lost under the id it had, and not start a second chain of tries.
  await trx('bookings').where({ id: booking.id }).update({ dispatch_retry_at: retryAt });
  if (!retryAt) return { kind: 'no_driver', retryAt: null };
  await enqueueJob(
    trx,
    'dispatch-booking',
    { bookingId: booking.id },
    { jobId: retryJobId(booking.id, retryAt), runAt: retryAt },
  );
  return { kind: 'no_driver', retryAt };
}

/** The job of a booking's next dispatch try after nobody was free: one id per booking and minute. */
function retryJobId(bookingId: string, retryAt: Date): string {
  return `dispatch-${bookingId}-retry-${Math.floor(retryAt.getTime() / 60_000)}`;
}

/**
 * The fields a job card shows (the journey but the flight number): an open offer made with the
 * old ones is withdrawn and made again.
 */
const JOB_CARD_FIELDS: ReadonlySet<string> = new Set(JOURNEY.filter((f) => f !== 'flightNumber'));
const JOURNEY_FIELDS: ReadonlySet<string> = new Set(JOURNEY);
const ASSIGNED_STATUSES: ReadonlySet<string> = new Set(['driver_assigned', 'driver_en_route', 'driver_arrived']);

/**
 * An amended booking reaches whoever holds it, in the amendment's transaction (the booking row
 * already locked and updated), before it commits:
 * - an assigned driver whose vehicle cannot take the amended job (too few seats, another
 *   class, no wheelchair access) refuses the amendment: 409 `conflict` (cancel and book anew);
 * - otherwise an assigned driver is texted that the job changed (their job list shows it);
 * - open offers made with the old details are withdrawn, each offered driver is texted, and the
 *   next dispatch step runs at once, so the job is offered again as it now is (the withdrawn
 *   driver or operator may be asked again);
 * - a booking being dispatched (or that found no driver) whose dispatch time moved well ahead
 *   goes back to `pending` and waits for it (`dispatch-<id>-at-<time>`), its offers withdrawn.
 * - a partner operator holding the job (tier 3) gets a `booking.amended` webhook with the job
 *   as it now is (`queueAmendedFanout`), for any change its job feed shows.
 * Changes to the passenger's own details (name, phone, e-mail, notes) reach no driver: their
 * job list shows them.
 */
export async function amendmentReachesHolders(
  trx: Tx,
  booking: Pick<
    DispatchBooking,
    'id' | 'reference' | 'status' | 'driver_id' | 'test_mode' | 'partner_id' | 'operator_partner_id'
  > & {
    vehicle_id: string | null;
  },
  /** `changed`: the fields the amendment changed, as `amendmentChanges` names them. */
  amended: {
    passengers: number;
    vehicleType: VehicleType;
    changed: readonly string[];
    /** The amended booking's dispatch time (`dispatchTimeMs`). */
    dispatchAt: number;
  },
  now: Date,
): Promise<{ withdrawn: number; driverTold: boolean; operatorTold: boolean }> {
  // A partner operator holding the job (not the booker itself) gets the job as it now is.
  const operatorTold =
    !!booking.operator_partner_id &&
    booking.operator_partner_id !== booking.partner_id &&
    ASSIGNED_STATUSES.has(booking.status) &&
    (await queueAmendedFanout(trx, booking.id, booking.operator_partner_id, amended.changed)).length > 0;
  const told = (r: { withdrawn: number; driverTold: boolean }) => ({ ...r, operatorTold });
  if (!amended.changed.some((f) => JOURNEY_FIELDS.has(f))) return told({ withdrawn: 0, driverTold: false });
  if (
    booking.operator_partner_id &&
    ASSIGNED_STATUSES.has(booking.status) &&
    amended.changed.some((f) => f === 'vehicleType' || f === 'passengers')
  ) {
    // The operator's fleet, as dispatch matched it (its classes, wheelchair access when it
    // has `wav`, up to 8 seats), must still take the job as amended; if it cannot, the
    // amendment is refused as a driver's vehicle's mismatch is, and changes nothing.
    const fleet = await trx('partners')
      .where({ id: booking.operator_partner_id })
      .first<{ fleet_classes: VehicleType[] } | undefined>('fleet_classes');
    const classes = fleet?.fleet_classes ?? [];
    const misfit = !classes.some((c) => SERVES[amended.vehicleType].includes(c))
      ? 'wrong class'
      : needsWheelchair({ vehicleType: amended.vehicleType }) && !classes.includes('wav')
        ? 'no wheelchair access'
        : amended.passengers > 8
          ? 'too few seats'
          : null;
    if (misfit) {
      throw new AppError(
        'conflict',
        `The operator holding ${booking.reference} has no vehicle for the amended job (${misfit}): cancel it and send it again as a new job.`,
        [{ field: misfit === 'too few seats' ? '/passengers' : '/vehicleType', problem: misfit }],
      );
    }
  }
  let driverTold = false;
  if (booking.driver_id && ASSIGNED_STATUSES.has(booking.status)) {
    const vehicle = booking.vehicle_id
      ? await trx('vehicles')
          .where({ id: booking.vehicle_id })
          .first<{ class: VehicleType; seats: number; wheelchair_accessible: boolean } | undefined>(
            'class',
            'seats',
            'wheelchair_accessible',
          )
      : undefined;
    const mismatch = vehicle
      ? vehicleMismatch(
          { vehicleType: amended.vehicleType, passengers: amended.passengers },
          { class: vehicle.class, seats: vehicle.seats, wheelchairAccessible: vehicle.wheelchair_accessible },
        )
      : null;
    if (mismatch) {
      throw new AppError(
        'conflict',
        `The driver assigned to ${booking.reference} cannot take the amended job (${mismatch.replace(/_/g, ' ')}): cancel it and send it again as a new job.`,
        [
          {
            field: mismatch === 'too_few_seats' ? '/passengers' : '/vehicleType',
            problem: mismatch.replace(/_/g, ' '),
          },
        ],
      );
    }
    const driver = await trx('drivers').where({ id: booking.driver_id }).first<{ phone: string } | undefined>('phone');
    if (driver) {
      await queueDriverText(trx, {
        recipient: driver.phone,
        body: `Direct Taxi Network: job ${booking.reference} was changed by the booker. Open your job list for the new pickup, time, passengers and fare.`,
        purpose: 'job_changed',
        bookingId: booking.id,
        driverId: booking.driver_id,
        testMode: booking.test_mode,
      });
      driverTold = true;
    }
  }
  if (!['dispatching', 'no_driver_available'].includes(booking.status)) return told({ withdrawn: 0, driverTold });
  // Its dispatch time moved well ahead (the pickup moved later): it waits, `pending`, for the
  // new time, with any open offer withdrawn, rather than being offered hours or days early.
  const waits = amended.dispatchAt > now.getTime() + EARLY_STEP_TOLERANCE_MS;
  if (!waits && (!amended.changed.some((f) => JOB_CARD_FIELDS.has(f)) || booking.status !== 'dispatching')) {
    return told({ withdrawn: 0, driverTold });
  }
  const withdrawn = await trx('dispatch_offers')
    .where({ booking_id: booking.id, state: 'offered' })
    .update({ state: 'withdrawn', responded_at: now })
    .returning<{ driver_id: string | null }[]>('driver_id');
  if (withdrawn.length === 0 && !waits) return told({ withdrawn: 0, driverTold });
  const offeredIds = withdrawn.flatMap((o) => (o.driver_id ? [o.driver_id] : []));
  const offered =
    offeredIds.length > 0
      ? await trx('drivers').whereIn('id', offeredIds).select<{ id: string; phone: string }[]>('id', 'phone')
      : [];
  for (const d of offered) {
    await queueDriverText(trx, {
      recipient: d.phone,
      body: `Direct Taxi Network: the offer of job ${booking.reference} is withdrawn (the booker changed it). No action needed.`,
      purpose: 'job_changed',
      bookingId: booking.id,
      driverId: d.id,
      testMode: booking.test_mode,
    });
  }
  if (waits) {
    await appendStatus(trx, booking.id, 'pending', 'amendment');
    await trx('bookings').where({ id: booking.id }).update({ dispatch_retry_at: null });
    await enqueueJob(
      trx,
      'dispatch-booking',
      { bookingId: booking.id },
      { jobId: `dispatch-${booking.id}-at-${amended.dispatchAt}`, runAt: new Date(amended.dispatchAt) },
    );
  } else {
    await enqueueJob(
      trx,
      'dispatch-booking',
      { bookingId: booking.id },
      { jobId: `dispatch-${booking.id}-amended-${now.getTime()}` },
    );
  }
  return told({ withdrawn: withdrawn.length, driverTold });
}

/**
 * An offer's time ran out: if it is still open, it expires and dispatch moves on (next
 * candidate, next tier). An offer answered in the meantime is left alone.
 */
export async function expireOffer(
  deps: DispatchDeps,
  offerId: string,
  now = new Date(),
): Promise<{ bookingId: string; outcome: StepOutcome } | null> {
  return deps.db.transaction(async (trx) => {
    const offer = await trx<OfferRow>('dispatch_offers').where({ id: offerId }).first();
    if (!offer) return null;
    // Lock order everywhere: booking first, then its offers.
    await trx('bookings').where({ id: offer.booking_id }).forUpdate().first('id');
    const updated = await trx('dispatch_offers')
      .where({ id: offerId, state: 'offered' })
      .where('expires_at', '<=', new Date(now.getTime() + 1000))
      .update({ state: 'expired', responded_at: now });
    if (updated === 0) return null;
    return { bookingId: offer.booking_id, outcome: await dispatchStep(trx, deps, offer.booking_id, now) };
  });
}

/** How long past its due time a dispatch job may be missing before it is looked for. */
export const STRANDED_AFTER_MS = 2 * 60_000;
/** A booking whose pickup passed longer ago than this is not dispatched any more. */
export const STRANDED_PICKUP_PAST_MS = 60 * 60_000;
/** How often the dispatch role looks for them. */
export const STRANDED_CHECK_MS = 60_000;
/** Most bookings, and most offers, one rescue pass looks at (the oldest first). */
const STRANDED_BATCH = 500;

/**
 * A booking's journey in miles as matching measures it (`roadMiles`: haversine between its
 * pickup and dropoff × DEAD_RUN_CIRCUITY), in SQL over the row's `pickup` and `dropoff`.
 */
const JOURNEY_MILES_SQL = `(2 * ${EARTH_RADIUS_MILES} * asin(least(1, sqrt(
    power(sin(radians(((dropoff->>'lat')::float8 - (pickup->>'lat')::float8) / 2)), 2)
    + cos(radians((pickup->>'lat')::float8)) * cos(radians((dropoff->>'lat')::float8))
      * power(sin(radians(((dropoff->>'lng')::float8 - (pickup->>'lng')::float8) / 2)), 2)))) * ${DEAD_RUN_CIRCUITY})`;

/**
 * The oldest outbox row the relay has yet to move, when it has waited longer than
 * STRANDED_AFTER_MS: the relay is stopped or far behind, and the rescue waits for it. What an
 * operator needs to find the row (ids and names, never its payload).
 */
export interface RelayBehind {
  outboxId: number;
  queue: string;
  jobName: string;
  /** When the row was written. */
  since: Date;
}

/** A dispatch job the rescue looks for: its id, name and payload. */
interface ExpectedJob {
  jobId: string;
  name: 'dispatch-booking' | 'offer-expired' | 'booking-cancelled';
  data: { bookingId: string } | { offerId: string };
}

/**
 * Dispatch jobs that went missing. Dispatch runs on jobs in Redis: a booking's first step
 * (`dispatch-<id>`, relayed from the outbox, delayed to pickup minus the lead time, which moves
 * it from `pending` to `dispatching`), each offer's time-out (`offer-expired-<offer id>`, due
 * when the offer expires) and the next step after a decline or a hand-back. A Redis that lost
 * its data (a restart without persistence, a failover to an empty replica) would leave those
 * bookings where they are for ever, with no error anywhere. So this looks, among bookings whose
 * pickup is less than STRANDED_PICKUP_PAST_MS ago or later, for
 * - bookings still `pending` STRANDED_AFTER_MS after their dispatch time (and after they were
 *   made: a booking made inside the lead time is due at once);
 * - offers still `offered` STRANDED_AFTER_MS after they expired;
 * - bookings `dispatching` with no live offer and nothing changed for STRANDED_AFTER_MS (the
 *   step after a decline or a hand-back never ran); their job is a new one,
 *   `dispatch-<id>-rescue-<status seq>-<offers made>`, one per state the booking is stuck in.
 * - bookings `cancelled` STRANDED_AFTER_MS ago whose drivers were not told: a live offer still
 *   open, or an assigned driver without the cancellation's SMS (`cancelled-<id>`);
 * - bookings `no_driver_available` whose next try (`dispatch_retry_at`, written by the step that
 *   found nobody) is STRANDED_AFTER_MS overdue; their job is that try's,
 *   `dispatch-<id>-retry-<minute>`, so the tries stay one chain.
 * For each, its job in the dispatch queue: none under its id, and one is added now; one
 * waiting, delayed or running is left alone (a busy worker is not a lost job); one that ended
 * (failed for good, or completed while the row still waits, as a time-out that fired early
 * does) gets one more under `<id>-rescue`, once. Adding twice is harmless: an id is added once,
 * and a repeated step or time-out changes nothing under the booking's row lock. Each item is tried on its own: one that fails (logged by the caller) does not stop the
 * others. Nothing at all while the outbox relay is behind (`relayBehind`, warned of by the
 * caller): see below. Run by the dispatch role at start and every STRANDED_CHECK_MS.
 */
export async function rescueStrandedBookings(
  deps: { db: Db; queues: Pick<Queues, 'dispatch'>; config: Pick<Config, 'bookings' | 'dispatch'> },
  now = new Date(),
): Promise<{ requeued: string[]; errors: { jobId: string; error: unknown }[]; relayBehind: RelayBehind | null }> {
  const pickupFrom = new Date(now.getTime() - STRANDED_PICKUP_PAST_MS);
  const dueBefore = new Date(now.getTime() - STRANDED_AFTER_MS);
  // The relay first. A job missing from Redis may only be waiting in the outbox: with the relay
  // stopped or far behind, a `dispatch-<id>` row not yet moved looks like a lost job. Rescuing
  // it then does harm: the offer's job cards and its time-out are outbox rows too, so they would
  // wait as well, and the booking would walk through every candidate driver (each marked as
  // asked) with none ever told, and end `no_driver_available`. So while a row the relay takes
  // has waited longer than the jobs looked for, nothing is rescued: what waits in the outbox
  // comes when the relay catches up, and anything truly lost is found on the first pass after.
  // Only the queues the relay takes (QUEUE_NAMES, as its `lockUnrelayed`): a row naming a queue
  // this build does not know (written by a release since rolled back) waits for ever without
  // holding the relay up, and must not switch the rescue off for good. Nor a row the relay has
  // set aside (OUTBOX_MAX_ATTEMPTS, as its `lockUnrelayed`): one BullMQ refuses every time (a
  // job id all digits or with a `:`, which `outboxRow` never writes) fails alone while the rows
  // behind it move, and once set aside (logged by the relay) no longer counts. Until then it
  // does, for about as many passes of the relay. The oldest by id: a probe of the partial
  // index outbox_unrelayed, which holds only the rows still to move (and the few set aside).
  const oldest = await deps
    .db('outbox')
    .whereNull('relayed_at')
    .whereIn('queue', QUEUE_NAMES)
    .where('attempts', '<', OUTBOX_MAX_ATTEMPTS)
    .where('created_at', '<', dueBefore)
    .orderBy('id')
    .first<{ id: number; queue: string; job_name: string; created_at: Date } | undefined>(
      'id',
      'queue',
      'job_name',
      'created_at',
    );
  if (oldest) {
    return {
      requeued: [],
      errors: [],
      relayBehind: { outboxId: oldest.id, queue: oldest.queue, jobName: oldest.job_name, since: oldest.created_at },
    };
  }
  // Due before dueBefore: dispatchTimeMs(booking) < dueBefore, as ranges of pickup_time. Every
  // booking picked up within the ordinary lead of dueBefore is due; beyond it, up to the longer
  // lead of a distance hire, only distance hires are (told apart here, by their places).
  const lead = leadTimesOf(deps.config);
  const shortBy = new Date(dueBefore.getTime() + lead.dispatchLeadMinutes * 60_000);
  const longBy = new Date(dueBefore.getTime() + Math.max(lead.dispatchLeadMinutes, lead.distanceLeadMinutes) * 60_000);
  const pendingIn = (from: Date, to: Date, distanceHiresOnly: boolean) =>
    deps
      .db('bookings')
      .where('status', 'pending')
      .where('pickup_time', '<', to)
      .where('pickup_time', distanceHiresOnly ? '>=' : '>', from)
      .where('created_at', '<', dueBefore)
      .modify((q) => {
        // Told apart in SQL too, before the limit: local rides picked up in the same band would
        // otherwise fill the batch. A little under the threshold (floating point); the exact
        // test is dispatchTimeMs below.
        if (distanceHiresOnly) q.whereRaw(`${JOURNEY_MILES_SQL} >= ?`, [lead.distanceHireMiles * 0.999]);
      })
      .orderBy('pickup_time')
      .limit(STRANDED_BATCH)
      .select<{ id: string; pickup_time: Date; pickup: LatLng; dropoff: LatLng }[]>(
        'id',
        'pickup_time',
        'pickup',
        'dropoff',
      );
  const pending = [
    ...(await pendingIn(pickupFrom, shortBy, false)),
    ...(longBy > shortBy && shortBy > pickupFrom
      ? (await pendingIn(shortBy, longBy, true)).filter(
          (b) =>
            dispatchTimeMs({ pickupTime: b.pickup_time, pickup: b.pickup, dropoff: b.dropoff }, lead) <
            dueBefore.getTime(),
        )
      : []),
  ];
  const overdue = await deps
    .db('dispatch_offers as o')
    .join('bookings as b', 'b.id', 'o.booking_id')
    .where('o.state', 'offered')
    .where('o.expires_at', '<', dueBefore)
    .where('b.status', 'dispatching')
    .where('b.pickup_time', '>', pickupFrom)
    .orderBy('o.expires_at')
    .limit(STRANDED_BATCH)
    .select<{ id: string }[]>('o.id');
  const idle = await deps.db.raw<{ rows: { id: string; status_seq: number; offers: number }[] }>(
    `select b.id, b.status_seq, (select count(*) from dispatch_offers c where c.booking_id = b.id)::int as offers
       from bookings b
      where b.status = 'dispatching' and b.updated_at < ? and b.pickup_time > ?
        and not exists (select 1 from dispatch_offers o
                         where o.booking_id = b.id and (o.state = 'offered' or o.responded_at >= ?))
      order by b.pickup_time
      limit ?`,
    [dueBefore, pickupFrom, dueBefore, STRANDED_BATCH],
  );
  // A booking nobody was free for whose next try is overdue: the try's job is the one the
  // step that found nobody queued (its id from the row's dispatch_retry_at), so a try found
  // again continues the one chain of tries rather than starting a second.
  const retries = await deps
    .db('bookings')
    .where('status', 'no_driver_available')
    .where('pickup_time', '>', pickupFrom)
    .where('dispatch_retry_at', '<', dueBefore)
    .orderBy('pickup_time')
    .limit(STRANDED_BATCH)
    .select<{ id: string; dispatch_retry_at: Date }[]>('id', 'dispatch_retry_at');
  // A cancelled booking whose drivers were not told: a live offer still open (the cancellation's
  // job withdraws them), or an assigned driver without the cancellation's SMS. Its job,
  // `cancelled-<id>`, only does what is still undone, so running it again is safe. Scalar
  // subqueries with `limit 1`, not `exists`: under the `or`, Postgres ran `not exists` as a
  // hashed subplan over every job-cancelled message ever sent.
  const untold = await deps.db.raw<{ rows: { id: string }[] }>(
    `select b.id from bookings b
      where b.status = 'cancelled' and b.updated_at < ? and b.pickup_time > ?
        and ((select 1 from dispatch_offers o where o.booking_id = b.id and o.state = 'offered' limit 1) is not null
             or (b.driver_id is not null
                 and (select 1 from outbound_messages m
                       where m.booking_id = b.id and m.purpose = 'job_cancelled' and m.driver_id = b.driver_id
                       limit 1) is null))
      order by b.pickup_time
      limit ?`,
    [dueBefore, pickupFrom, STRANDED_BATCH],
  );
  const jobs: ExpectedJob[] = [
    ...pending.map(({ id }) => ({
      jobId: `dispatch-${id}`,
      name: 'dispatch-booking' as const,
      data: { bookingId: id },
    })),
    ...overdue.map(({ id }) => ({
      jobId: `offer-expired-${id}`,
      name: 'offer-expired' as const,
      data: { offerId: id },
    })),
    ...idle.rows.map((b) => ({
      jobId: `dispatch-${b.id}-rescue-${b.status_seq}-${b.offers}`,
      name: 'dispatch-booking' as const,
      data: { bookingId: b.id },
    })),
    ...untold.rows.map(({ id }) => ({
      jobId: `cancelled-${id}`,
      name: 'booking-cancelled' as const,
      data: { bookingId: id },
    })),
    ...retries.map((b) => ({
      jobId: retryJobId(b.id, b.dispatch_retry_at),
      name: 'dispatch-booking' as const,
      data: { bookingId: b.id },
    })),
  ];
  const requeued: string[] = [];
  const errors: { jobId: string; error: unknown }[] = [];
  const queue = deps.queues.dispatch;
  for (const { jobId, name, data } of jobs) {
    try {
      const job = await queue.getJob(jobId);
      let addAs: string | null = null;
      if (!job) addAs = jobId;
      else if (!['waiting', 'delayed', 'active', 'prioritized', 'waiting-children'].includes(await job.getState())) {
        // It ran or failed, and the row still waits: one more, once.
        const again = `${jobId}-rescue`;
        if (!(await queue.getJob(again))) addAs = again;
      }
      if (addAs) {
        await queue.add(name, data, { jobId: addAs });
        requeued.push(addAs);
      }
    } catch (error) {
      errors.push({ jobId, error });
    }
  }
  return { requeued, errors, relayBehind: null };
}
