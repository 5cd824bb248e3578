import type { Config } from '../config.ts';
import { sha256, unseal } from '../crypto.ts';
import { appendStatus } from '../db/bookings.ts';
import type { Db } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { type OperatorDriver, operatorDriverOf } from '../domain/operator-driver.ts';
import { normaliseReference, referenceForMessage } from '../domain/reference.ts';
import { AppError } from '../errors.ts';
import type { DispatchBooking, DispatchDeps, OfferRow } from './dispatch.ts';
import { acceptOffer, type JobHolder, type Payment, reportProgress } from './driver-jobs.ts';

/**
 * Status updates from tier-3 partner operators (CONTRACT.md section 6,
 * `POST /api/public/hooks/booking-status`): the same moves the driver app makes, on behalf of
 * the operator that holds the booking or has an open offer for it, plus `handed_back` (the
 * operator gives the job back and dispatch moves on).
 */

export const OPERATOR_STATUSES = [
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'passenger_on_board',
  'completed',
  'handed_back',
] as const;
export type OperatorStatus = (typeof OPERATOR_STATUSES)[number];

export type { OperatorDriver };

export interface OperatorUpdate {
  bookingReference: string;
  status: OperatorStatus;
  driver?: OperatorDriver;
  payment?: Payment;
  reason?: string;
}

export interface AppliedUpdate {
  bookingId: string;
  reference: string;
  /**
   * The status the update applied; for a driver named once the passenger is on board (a
   * correction of the details shown, not an assignment), the booking's own status.
   */
  status: string;
  /** false when the update repeated the booking's current state (nothing written). */
  changed: boolean;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Statuses an operator may hand a job back from (not once the passenger is on board). */
const HANDBACK_FROM = new Set(['driver_assigned', 'driver_en_route', 'driver_arrived']);

/**
 * The secrets a partner's status hooks may be signed with: the current secret of each active
 * webhook endpoint, and its previous secret while the rotation overlap lasts. Empty for an
 * unknown partner or one without an active endpoint (so every request from it is refused).
 */
export async function partnerHookSecrets(
  db: Db,
  config: Pick<Config, 'dataEncryptionKey'>,
  partnerId: string,
  now = new Date(),
): Promise<string[]> {
  if (!UUID.test(partnerId)) return [];
  const rows = await db('webhook_endpoints')
    .where({ partner_id: partnerId, active: true })
    .select<
      { secret_sealed: string; previous_secret_sealed: string | null; previous_secret_expires_at: Date | null }[]
    >('secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at');
  const secrets: string[] = [];
  for (const r of rows) {
    secrets.push(unseal(r.secret_sealed, config.dataEncryptionKey));
    if (r.previous_secret_sealed && r.previous_secret_expires_at && r.previous_secret_expires_at > now) {
      secrets.push(unseal(r.previous_secret_sealed, config.dataEncryptionKey));
    }
  }
  return secrets;
}

function bookingNotFound(ref: string): AppError {
  return new AppError('booking_not_found', `No booking ${referenceForMessage(ref)} held by or offered to you.`, [
    { field: '/bookingReference', problem: 'not held by or offered to this partner' },
  ]);
}

/** The partner's latest offer for a booking, if it is still open. */
async function openOffer(db: Db, bookingId: string, partnerId: string, now: Date): Promise<OfferRow | undefined> {
  const offer = await db<OfferRow>('dispatch_offers')
    .where({ booking_id: bookingId, partner_id: partnerId })
    .orderBy('attempt', 'desc')
    .first();
  return offer && offer.state === 'offered' && offer.expires_at.getTime() > now.getTime() ? offer : undefined;
}

/**
 * Apply one verified update from partner `partnerId`. A booking the partner neither holds nor
 * has an open offer for is 404 booking_not_found (the same answer whether or not it exists).
 * `messageKey` (the webhook id) names the dispatch job a hand-back queues.
 */
export async function applyOperatorUpdate(
  deps: DispatchDeps,
  partnerId: string,
  update: OperatorUpdate,
  prefix: string,
  messageKey: string,
  now = new Date(),
): Promise<AppliedUpdate> {
  // A payment belongs to completed (as on the driver API): with an assignment or a hand-back it
  // would be neither checked nor recorded, so it is refused, not dropped.
  if (update.payment && update.status !== 'completed') {
    throw new AppError('invalid_input', `A payment is reported with status completed, not ${update.status}.`, [
      { field: '/payment', problem: 'only allowed when status is completed' },
    ]);
  }
  const ref = normaliseReference(update.bookingReference, prefix);
  const booking = ref ? await deps.db<DispatchBooking>('bookings').where({ reference: ref }).first() : undefined;
  if (!booking) throw bookingNotFound(update.bookingReference);
  const holds = booking.operator_partner_id === partnerId;
  const offer = holds ? undefined : await openOffer(deps.db, booking.id, partnerId, now);
  if (!holds && !offer) throw bookingNotFound(update.bookingReference);
  const holder: JobHolder = { kind: 'partner', id: partnerId };

  try {
    if (update.status === 'driver_assigned') {
      if (holds && booking.status !== 'dispatching') {
        // Already ours: a repeat changes nothing; another driver replaces the one shown.
        const replaced = update.driver ? await changeDriver(deps.db, booking.id, partnerId, update.driver) : false;
        // Past pickup (or cancelled) it assigns nothing: the answer says the status the booking has.
        const status = REASSIGNABLE.has(booking.status) ? 'driver_assigned' : booking.status;
        return { bookingId: booking.id, reference: booking.reference, status, changed: replaced };
      }
      const accepted = await acceptOffer(deps, holder, booking.reference, prefix, now, update.driver);
      // Accepted at the same moment by another update of ours (one without the driver, say):
      // this one's driver is named as on a booking already held (nothing when it is the same).
      if (update.driver) await changeDriver(deps.db, accepted.bookingId, partnerId, update.driver);
      return { bookingId: accepted.bookingId, reference: accepted.reference, status: 'driver_assigned', changed: true };
    }
    if (update.status === 'handed_back') return await handBack(deps, booking.id, partnerId, update, messageKey, now);
    if (!holds) {
      // An open offer only: progress needs the job accepted first.
      throw new AppError('conflict', 'Assign a driver (status driver_assigned) before reporting progress.', [
        { field: '/status', problem: 'the offer has not been accepted' },
      ]);
    }
    const done = await reportProgress(deps, holder, booking.reference, update.status, update.payment, prefix);
    return { bookingId: done.bookingId, reference: done.reference, status: update.status, changed: done.changed };
  } catch (err) {
    // The driver-jobs services speak of "jobs"; this endpoint speaks of bookings.
    if (err instanceof AppError && err.code === 'job_not_found') throw bookingNotFound(update.bookingReference);
    throw err;
  }
}

/** Statuses where another driver is on the way: naming one is a new assignment. */
const REASSIGNABLE = new Set(['driver_assigned', 'driver_en_route', 'driver_arrived']);

/**
 * The holding operator names a driver for a booking it already holds: the first one after
 * accepting without a name, or another one. Before the passenger is picked up this is a new
 * assignment: the booking is `driver_assigned` again, with a history entry naming the driver
 * (`replaced` when it replaces one), so the booker's webhooks, the tracking page and the
 * lookup all hear of it; the new driver's progress follows. Once the passenger is on board (or
 * the ride is over) it can only correct the details shown: the booking shows them and the
 * latest `driver_assigned` entry records them, marked `updated`, with no new event. Nothing
 * once the booking is cancelled or no longer this operator's, or for the same driver again.
 * True when something changed.
 */
async function changeDriver(db: Db, bookingId: string, partnerId: string, sent: OperatorDriver): Promise<boolean> {
  const driver = operatorDriverOf(sent);
  if (!driver) return false;
  const actor = `partner:${partnerId}`;
  return db.transaction(async (trx) => {
    const booking = await trx('bookings')
      .where({ id: bookingId })
      .forUpdate()
      .first<{ status: string; operator_partner_id: string | null; operator_driver: unknown } | undefined>(
        'status',
        'operator_partner_id',
        'operator_driver',
      );
    if (!booking || booking.operator_partner_id !== partnerId || booking.status === 'cancelled') return false;
    const before = operatorDriverOf(booking.operator_driver);
    if (JSON.stringify(before) === JSON.stringify(driver)) return false;
    await trx('bookings')
      .where({ id: bookingId })
      .update({ operator_driver: JSON.stringify(driver), updated_at: trx.fn.now() });
    if (REASSIGNABLE.has(booking.status)) {
      await appendStatus(trx, bookingId, 'driver_assigned', actor, { driver, ...(before ? { replaced: true } : {}) });
      return true;
    }
    const latest = await trx('booking_status_history')
      .where({ booking_id: bookingId, status: 'driver_assigned', actor })
      .orderBy('seq', 'desc')
      .first<{ seq: number } | undefined>('seq');
    if (latest) {
      await trx('booking_status_history')
        .where({ booking_id: bookingId, seq: latest.seq })
        .update({ details: trx.raw('details || ?::jsonb', [JSON.stringify({ driver, updated: true })]) });
    }
    return true;
  });
}

/**
 * The operator gives the job back: it no longer holds it, its offer is closed (declined, so
 * dispatch never asks it again), the booking is `dispatching` again and a dispatch step is
 * queued in the same transaction.
 */
async function handBack(
  deps: DispatchDeps,
  bookingId: string,
  partnerId: string,
  update: OperatorUpdate,
  messageKey: string,
  now: Date,
): Promise<AppliedUpdate> {
  return deps.db.transaction(async (trx) => {
    const booking = await trx<DispatchBooking>('bookings').where({ id: bookingId }).forUpdate().first();
    if (!booking) throw bookingNotFound(update.bookingReference);
    const holds = booking.operator_partner_id === partnerId;
    const offer = await trx<OfferRow>('dispatch_offers')
      .where({ booking_id: bookingId, partner_id: partnerId })
      .whereIn('state', holds ? ['accepted', 'offered'] : ['offered'])
      .orderBy('attempt', 'desc')
      .first();
    if (!holds && !offer) throw bookingNotFound(update.bookingReference);
    if (holds && !HANDBACK_FROM.has(booking.status)) {
      throw new AppError('conflict', `A booking that is ${booking.status.replace(/_/g, ' ')} cannot be handed back.`, [
        { field: '/status', problem: `not allowed after ${booking.status}` },
      ]);
    }
    const reason = `handed back${update.reason ? `: ${update.reason.slice(0, 180)}` : ''}`;
    if (offer) {
      // The accepted offer too: only one accepted offer per booking, and the next one must fit.
      await trx('dispatch_offers')
        .where({ id: offer.id })
        .update({ state: 'declined', responded_at: now, decline_reason: reason });
    }
    if (holds) {
      await trx('bookings').where({ id: bookingId }).update({
        operator_partner_id: null,
        operator_driver: null,
        driver_id: null,
        vehicle_id: null,
        dead_miles: null,
      });
      await appendStatus(trx, bookingId, 'dispatching', `partner:${partnerId}`, {
        handedBack: true,
        ...(update.reason ? { reason: update.reason } : {}),
      });
    }
    const hash = sha256(messageKey).toString('hex').slice(0, 16);
    await enqueueJob(trx, 'dispatch-booking', { bookingId }, { jobId: `dispatch-${bookingId}-handback-${hash}` });
    return { bookingId, reference: booking.reference, status: 'handed_back' as const, changed: true };
  });
}
