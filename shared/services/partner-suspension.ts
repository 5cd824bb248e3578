import { appendStatus } from '../db/bookings.ts';
import type { Db, Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { withdrawOpenOffers } from './withdraw-offers.ts';

/**
 * Suspending and reinstating a partner (`admin partner suspend ID [--release-jobs]`,
 * `admin partner reinstate ID`).
 *
 * A suspended partner submits no jobs and makes no bookings with its key (intake and the
 * booking routes answer 403: `assertMayBook`), is offered none and accepts none (dispatch
 * passes it over; an accept is 403). Its keys still work for what it already has:
 * looking up, finishing, handing back or declining its jobs. Suspension also:
 *
 * - withdraws its open offers, and dispatch asks the next operator or driver at once, instead
 *   of when the offer would have run out;
 * - with `releaseJobs`, takes back the jobs it holds and has not yet picked up (for when its
 *   drivers cannot be relied on to come): each booking is `dispatching` again, its history
 *   says why, its `booking.status` event (status `dispatching`, no driver) goes to the booker
 *   and to the operator, so the operator knows the job is no longer its, and a dispatch step
 *   is queued. Without it those jobs stay with the operator, listed as `jobsKept`;
 * - never touches a ride with the passenger on board (`ridesInProgress`).
 *
 * Bookings the partner made as a booker are not touched, even those it fulfils itself (kept
 * with it, `jobsKept`): their passengers keep their rides, and it may still cancel them (a
 * job intake request of cancellations only, or the passenger's lookup and cancel).
 */

export interface SuspendedPartner {
  id: string;
  status: 'suspended';
  /** Bookings whose open offer to the partner was withdrawn (offered elsewhere now). */
  offersWithdrawn: string[];
  /** Held jobs taken back and dispatched again (`releaseJobs`). */
  jobsHandedBack: string[];
  /** Held jobs not yet picked up, left with the partner (without `releaseJobs`). */
  jobsKept: string[];
  /** Held jobs with the passenger on board: left with the partner. */
  ridesInProgress: string[];
}

const NOT_PICKED_UP: readonly string[] = ['driver_assigned', 'driver_en_route', 'driver_arrived'];

async function audit(trx: Tx, actor: string, action: string, id: string, details: Record<string, unknown>) {
  await trx('audit_log').insert({
    actor,
    action,
    subject_type: 'partner',
    subject_id: id,
    details: JSON.stringify(details),
  });
}

/** Suspend a partner (see above). Null for an unknown partner; suspending again answers the same. */
export async function suspendPartner(
  db: Db,
  id: string,
  actor: string,
  opts: { releaseJobs: boolean; reason?: string },
): Promise<SuspendedPartner | null> {
  const why = `partner suspended by an operator${opts.reason ? `: ${opts.reason.slice(0, 180)}` : ''}`;
  return db.transaction(async (trx) => {
    // The partner's row first, then its bookings in id order, then their offers: the order a
    // driver's suspension takes (`disable` in drivers.ts). The row lock holds off a dispatch
    // step's check of the partner (`stillOfferable`), so no new offer slips in meanwhile.
    const before = await trx('partners').where({ id }).forNoKeyUpdate().first<{ status: string } | undefined>('status');
    if (!before) return null;
    const now = new Date();
    const locked = await trx('bookings as b')
      .where((q) =>
        q
          .where('b.operator_partner_id', id)
          .whereIn('b.status', [...NOT_PICKED_UP, 'passenger_on_board'])
          .orWhereExists((o) =>
            o
              .select(trx.raw('1'))
              .from('dispatch_offers as o')
              .whereRaw('o.booking_id = b.id')
              .where({ 'o.partner_id': id, 'o.state': 'offered' }),
          ),
      )
      .orderBy('b.id')
      .forUpdate()
      .select<
        {
          id: string;
          reference: string;
          status: string;
          operator_partner_id: string | null;
          partner_id: string | null;
        }[]
      >('b.id', 'b.reference', 'b.status', 'b.operator_partner_id', 'b.partner_id');

    const offered = await withdrawOpenOffers(trx, { column: 'partner_id', id }, locked, now, 'partner-suspended');

    const held = locked.filter((b) => b.operator_partner_id === id);
    const notPickedUp = held.filter((b) => NOT_PICKED_UP.includes(b.status));
    // Its own customers' rides, which it booked and fulfils itself, stay with it either way: they
    // are its business, at its fares, not ours to hand to another driver.
    const handedBack = opts.releaseJobs ? notPickedUp.filter((b) => b.partner_id !== id) : [];
    const handedBackIds = new Set(handedBack.map((b) => b.id));
    for (const b of handedBack) {
      await trx('dispatch_offers')
        .where({ booking_id: b.id, partner_id: id, state: 'accepted' })
        .update({ state: 'declined', responded_at: now, decline_reason: `handed back: ${why}` });
      // The driver goes first and the operator after the status: the `dispatching` event is
      // queued while the operator still holds the booking, so it reaches the operator too.
      await trx('bookings').where({ id: b.id }).update({ operator_driver: null, dead_miles: null, updated_at: now });
      await appendStatus(trx, b.id, 'dispatching', 'operator', { handedBack: true, reason: why });
      await trx('bookings')
        .where({ id: b.id })
        .update({ operator_partner_id: null, driver_id: null, vehicle_id: null });
      await enqueueJob(
        trx,
        'dispatch-booking',
        { bookingId: b.id },
        { jobId: `dispatch-${b.id}-partner-suspended-${now.getTime()}` },
      );
    }

    await trx('partners').where({ id }).update({ status: 'suspended', updated_at: now });
    const result: SuspendedPartner = {
      id,
      status: 'suspended',
      offersWithdrawn: offered.map((b) => b.reference),
      jobsHandedBack: handedBack.map((b) => b.reference),
      jobsKept: notPickedUp.filter((b) => !handedBackIds.has(b.id)).map((b) => b.reference),
      ridesInProgress: held.filter((b) => b.status === 'passenger_on_board').map((b) => b.reference),
    };
    const { id: _id, status: _status, ...jobs } = result;
    await audit(trx, actor, 'partner.suspend', id, {
      from: before.status,
      releaseJobs: opts.releaseJobs,
      ...(opts.reason ? { reason: opts.reason.slice(0, 180) } : {}),
      ...jobs,
    });
    return result;
  });
}

/** Reinstate a suspended partner: it submits, is offered and accepts jobs again. Null if unknown. */
export async function reinstatePartner(
  db: Db,
  id: string,
  actor: string,
): Promise<{ id: string; status: 'active' } | null> {
  return db.transaction(async (trx) => {
    const before = await trx('partners').where({ id }).forNoKeyUpdate().first<{ status: string } | undefined>('status');
    if (!before) return null;
    if (before.status !== 'active') {
      await trx('partners').where({ id }).update({ status: 'active', updated_at: trx.fn.now() });
      await audit(trx, actor, 'partner.reinstate', id, { from: before.status });
    }
    return { id, status: 'active' as const };
  });
}
