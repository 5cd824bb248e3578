import { appendStatus } from '../db/bookings.ts';
import type { Db, Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { heldJob, type JobPaymentMethod, offeredJob } from '../domain/dispatch/job-view.ts';
import { type OperatorDriver, operatorDriverOf } from '../domain/operator-driver.ts';
import type { PaymentMethod } from '../domain/payment-state.ts';
import { normaliseReference, referenceForMessage } from '../domain/reference.ts';
import { isTestScenario, type SandboxMove, sandboxMove, type TestScenario } from '../domain/sandbox.ts';
import { AppError } from '../errors.ts';
import {
  ACTIVE_JOB_STATUSES,
  type DispatchBooking,
  type DispatchDeps,
  type OfferRow,
  presenceIndex,
  roadMiles,
} from './dispatch.ts';

/**
 * What drivers (and tier-3 operators, with their key) do with jobs: the feed of offered and
 * accepted jobs, accept and decline, progress to completion with how the fare was paid.
 */
export type JobHolder =
  | { kind: 'driver'; id: string }
  /** A tier-3 operator with its key: `testMode` (the key's mode) limits it to that mode's bookings. */
  | { kind: 'partner'; id: string; testMode?: boolean };

const holderColumn = (h: JobHolder) => (h.kind === 'driver' ? 'driver_id' : 'partner_id');
const actorOf = (h: JobHolder) => `${h.kind}:${h.id}`;

function jobNotFound(ref: string): AppError {
  return new AppError('job_not_found', `No job ${referenceForMessage(ref)} for you.`, [
    { field: '/ref', problem: 'no offer or job for you' },
  ]);
}

async function lockBooking(trx: Tx, rawRef: string, prefix: string, holder: JobHolder): Promise<DispatchBooking> {
  const ref = normaliseReference(rawRef, prefix);
  // Locked only when the caller has something to do with it (it holds the job, or was offered
  // it): a driver token or partner key cannot hold row locks on other people's bookings by
  // sending their references. What the lock then reads is checked again by each caller.
  const held = holder.kind === 'driver' ? 'b.driver_id' : 'b.operator_partner_id';
  const booking = ref
    ? await trx<DispatchBooking>('bookings as b')
        .where('b.reference', ref)
        .where((q) =>
          q.where(held, holder.id).orWhereExists((o) =>
            o
              .select(trx.raw('1'))
              .from('dispatch_offers as o')
              .whereRaw('o.booking_id = b.id')
              .where(`o.${holderColumn(holder)}`, holder.id),
          ),
        )
        .forUpdate()
        .first('b.*')
    : undefined;
  if (!booking) throw jobNotFound(rawRef);
  // A partner's key sees only its own mode's jobs (test and live are kept apart).
  if (holder.kind === 'partner' && holder.testMode !== undefined && booking.test_mode !== holder.testMode)
    throw jobNotFound(rawRef);
  return booking;
}

/**
 * The answer for a booking the caller reached (it holds it, or was offered it: `lockBooking`)
 * but does not hold: when an offer to them is still open (the job is in their feed, as an
 * offer), 409 conflict with `openOffer`, which says what to do with an offer; anything else
 * (an offer that expired, was declined, withdrawn or handed back) is 404 job_not_found as
 * before. A booking never offered to them never gets here (`lockBooking` answers 404 first),
 * so this tells nobody of a job they were not already shown.
 */
async function notHeld(
  trx: Tx,
  booking: DispatchBooking,
  holder: JobHolder,
  rawRef: string,
  now: Date,
  openOffer: string,
): Promise<AppError> {
  const offer = await trx<OfferRow>('dispatch_offers')
    .where({ booking_id: booking.id, [holderColumn(holder)]: holder.id })
    .orderBy('attempt', 'desc')
    .first();
  const open =
    offer?.state === 'offered' && offer.expires_at.getTime() > now.getTime() && booking.status === 'dispatching';
  if (!open) return jobNotFound(rawRef);
  return new AppError('conflict', openOffer, [{ field: '/ref', problem: 'the offer has not been accepted' }]);
}

/**
 * The booking `holder` holds, locked (`lockBooking`): else 409 with `openOffer`'s words when an
 * offer to them is still open, or 404 (`notHeld`).
 */
async function heldBooking(
  trx: Tx,
  rawRef: string,
  prefix: string,
  holder: JobHolder,
  now: Date,
  openOffer: (reference: string) => string,
): Promise<DispatchBooking> {
  const booking = await lockBooking(trx, rawRef, prefix, holder);
  const holds = holder.kind === 'driver' ? booking.driver_id === holder.id : booking.operator_partner_id === holder.id;
  if (!holds) throw await notHeld(trx, booking, holder, rawRef, now, openOffer(booking.reference));
  return booking;
}

/** The driver API's path for `action` on a job (what a 409 tells the caller to do instead). */
const jobPath = (reference: string, action: 'accept' | 'decline') => `POST /api/public/v1/jobs/${reference}/${action}`;

/** The holder's latest offer for the booking; 404 job_not_found when it was never offered to them. */
async function latestOffer(trx: Tx, bookingId: string, holder: JobHolder, rawRef: string): Promise<OfferRow> {
  const offer = await trx<OfferRow>('dispatch_offers')
    .where({ booking_id: bookingId, [holderColumn(holder)]: holder.id })
    .orderBy('attempt', 'desc')
    .first();
  if (!offer) throw jobNotFound(rawRef);
  return offer;
}

export interface Accepted {
  bookingId: string;
  reference: string;
  status: 'driver_assigned';
  deadMiles: number | null;
}

/**
 * Accept an offer. The booking row is locked first, so of two accepts exactly one finds its
 * offer open and the booking still dispatching; the unique index on accepted offers backs it
 * up. An offer that expired, was withdrawn or was declined is 409 offer_unavailable.
 * `operatorDriver` (a partner operator's own driver, from its status hook) is written with the
 * assignment, so the `booking.status` event queued with it names the driver.
 */
export async function acceptOffer(
  deps: DispatchDeps,
  holder: JobHolder,
  rawRef: string,
  prefix: string,
  now = new Date(),
  operatorDriver?: OperatorDriver,
): Promise<Accepted> {
  const named = holder.kind === 'partner' && operatorDriver ? operatorDriverOf(operatorDriver) : null;
  const accepted = await deps.db.transaction(async (trx) => {
    const booking = await lockBooking(trx, rawRef, prefix, holder);
    const offer = await latestOffer(trx, booking.id, holder, rawRef);
    // Accepted already (a retried accept), while the booking is still this holder's: the same answer again.
    if (offer.state === 'accepted' && !['cancelled', 'completed'].includes(booking.status)) {
      return {
        bookingId: booking.id,
        reference: booking.reference,
        status: 'driver_assigned' as const,
        // As the first accept answered (recorded on the booking then).
        deadMiles: (booking as { dead_miles?: number | null }).dead_miles ?? null,
        again: true,
      };
    }
    if (offer.state !== 'offered' || offer.expires_at.getTime() <= now.getTime() || booking.status !== 'dispatching') {
      throw new AppError(
        'offer_unavailable',
        booking.status === 'cancelled'
          ? 'This job was cancelled by the passenger.'
          : offer.state === 'offered' || offer.state === 'expired'
            ? // Said only when it is so: the job may instead have found no driver, or been taken back.
              booking.status === 'dispatching' || booking.driver_id !== null || booking.operator_partner_id !== null
              ? 'This offer has expired and gone to another driver.'
              : 'This offer has expired.'
            : `This offer is no longer open (${offer.state}).`,
        // The detail says what the message says: a job the passenger cancelled is not "expired".
        [
          {
            field: '/ref',
            problem:
              booking.status === 'cancelled'
                ? 'job cancelled'
                : `offer ${offer.state === 'offered' ? 'expired' : offer.state}`,
          },
        ],
      );
    }
    if (holder.kind === 'partner') {
      // A suspended partner takes no new job, by key or by its status hook; it may still
      // finish, hand back or decline what it already has. Read under the booking's lock, so a
      // suspension committed before this accept is seen.
      const partner = await trx('partners').where({ id: holder.id }).first<{ status: string } | undefined>('status');
      if (partner?.status !== 'active') {
        throw new AppError('forbidden', 'This partner account is suspended: it cannot take new jobs.');
      }
    }
    let deadMiles: number | null = null;
    let vehicleId: string | null = null;
    if (holder.kind === 'driver') {
      const live = await presenceIndex(deps.redis, deps.config, booking.test_mode).positions(
        [holder.id],
        now.getTime(),
      );
      const at =
        live.get(holder.id) ??
        (offer.driver_lat !== null && offer.driver_lng !== null
          ? { lat: offer.driver_lat, lng: offer.driver_lng }
          : null);
      deadMiles = at ? Math.round(roadMiles(at, booking.pickup) * 10) / 10 : null;
      const vehicle = await trx('vehicles').where({ driver_id: holder.id, active: true }).first<{ id: string }>('id');
      vehicleId = vehicle?.id ?? null;
    }
    await trx('dispatch_offers').where({ id: offer.id }).update({ state: 'accepted', responded_at: now });
    await trx('bookings')
      .where({ id: booking.id })
      .update({
        driver_id: holder.kind === 'driver' ? holder.id : null,
        vehicle_id: vehicleId,
        operator_partner_id: holder.kind === 'partner' ? holder.id : null,
        operator_driver: named ? JSON.stringify(named) : null,
        dispatch_tier: offer.tier,
        dead_miles: deadMiles,
      });
    await appendStatus(trx, booking.id, 'driver_assigned', actorOf(holder), {
      tier: offer.tier,
      attempt: offer.attempt,
      ...(named ? { driver: named } : {}),
    });
    return {
      bookingId: booking.id,
      reference: booking.reference,
      status: 'driver_assigned' as const,
      deadMiles,
      again: false,
    };
  });
  return {
    bookingId: accepted.bookingId,
    reference: accepted.reference,
    status: accepted.status,
    deadMiles: accepted.deadMiles,
  };
}

/** Decline an open offer: it goes to the next candidate at once. Declining twice answers the same. */
export async function declineOffer(
  deps: DispatchDeps,
  holder: JobHolder,
  rawRef: string,
  reason: string | null,
  prefix: string,
  now = new Date(),
): Promise<{ bookingId: string; reference: string }> {
  return deps.db.transaction(async (trx) => {
    const booking = await lockBooking(trx, rawRef, prefix, holder);
    const offer = await latestOffer(trx, booking.id, holder, rawRef);
    if (offer.state === 'declined') return { bookingId: booking.id, reference: booking.reference };
    if (offer.state !== 'offered' || offer.expires_at.getTime() <= now.getTime()) {
      throw new AppError(
        'offer_unavailable',
        `This offer is no longer open (${offer.state === 'offered' ? 'expired' : offer.state}).`,
        [{ field: '/ref', problem: 'offer not open' }],
      );
    }
    await trx('dispatch_offers')
      .where({ id: offer.id })
      .update({ state: 'declined', responded_at: now, decline_reason: reason });
    await enqueueJob(
      trx,
      'dispatch-booking',
      { bookingId: booking.id },
      { jobId: `dispatch-${booking.id}-after-${offer.id}` },
    );
    return { bookingId: booking.id, reference: booking.reference };
  });
}

/** Statuses from which a driver may hand a job back (before the passenger is on board). */
const HAND_BACK_FROM = new Set(['driver_assigned', 'driver_en_route', 'driver_arrived']);

/**
 * The driver (or operator) gives a job in hand back before the passenger is on board (a
 * breakdown, running late): they no longer hold it, their accepted offer is closed as declined
 * ("handed back", so dispatch never asks them again), the booking is `dispatching` again and a
 * dispatch step is queued in the same transaction. Handing back a job already handed back answers
 * the same again, so a driver app retrying after a lost answer is not told there is no job.
 */
export async function handBackJob(
  deps: DispatchDeps,
  holder: JobHolder,
  rawRef: string,
  reason: string | null,
  prefix: string,
  now = new Date(),
): Promise<{ bookingId: string; reference: string }> {
  return deps.db.transaction(async (trx) => {
    const booking = await lockBooking(trx, rawRef, prefix, holder);
    const holds =
      holder.kind === 'driver' ? booking.driver_id === holder.id : booking.operator_partner_id === holder.id;
    if (!holds) {
      // Handed back already (a retry after a lost answer): answered as the hand-back was, as
      // accepting or declining again is. Known by the booking's history, which records their
      // hand-back (not by a decline's reason, which is the driver's own text). Dispatch never
      // offers them the job again.
      const handedBack = await trx('booking_status_history')
        .where({ booking_id: booking.id, status: 'dispatching', actor: actorOf(holder) })
        .whereRaw(`details->>'handedBack' = 'true'`)
        .first('seq');
      if (handedBack) return { bookingId: booking.id, reference: booking.reference };
      throw await notHeld(
        trx,
        booking,
        holder,
        rawRef,
        now,
        `${booking.reference} is offered to you, not accepted: there is nothing to hand back. Decline the offer instead (${jobPath(booking.reference, 'decline')}).`,
      );
    }
    if (!HAND_BACK_FROM.has(booking.status)) {
      throw new AppError('conflict', `A job that is ${booking.status.replace(/_/g, ' ')} cannot be handed back.`, [
        { field: '/ref', problem: `not allowed after ${booking.status}` },
      ]);
    }
    const offer = await trx<OfferRow>('dispatch_offers')
      .where({ booking_id: booking.id, [holderColumn(holder)]: holder.id, state: 'accepted' })
      .first();
    const why = `handed back${reason ? `: ${reason.slice(0, 180)}` : ''}`;
    if (offer) {
      await trx('dispatch_offers')
        .where({ id: offer.id })
        .update({ state: 'declined', responded_at: now, decline_reason: why });
    }
    await trx('bookings').where({ id: booking.id }).update({
      driver_id: null,
      vehicle_id: null,
      operator_partner_id: null,
      operator_driver: null,
      dead_miles: null,
    });
    await appendStatus(trx, booking.id, 'dispatching', actorOf(holder), {
      handedBack: true,
      ...(reason ? { reason: reason.slice(0, 180) } : {}),
    });
    await enqueueJob(
      trx,
      'dispatch-booking',
      { bookingId: booking.id },
      { jobId: `dispatch-${booking.id}-handback-${offer?.id ?? now.getTime()}` },
    );
    return { bookingId: booking.id, reference: booking.reference };
  });
}

/** The order a job moves in once assigned; a step may be skipped, never undone. */
export const PROGRESS = [
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'passenger_on_board',
  'completed',
] as const;
export type Progress = (typeof PROGRESS)[number];

export interface Payment {
  /** `account`: charged to the booker's account (only for a booking made on account). */
  method: PaymentMethod;
  amountGBP: number;
  processorFeeGBP?: number;
}

const SETTLEMENT_KIND: Record<Payment['method'], string> = {
  cash: 'cash_received',
  card: 'card_paid',
  pay_link: 'pay_link_paid',
  bank_transfer: 'bank_transfer_received',
  account: 'account_charged',
};

/** How a payment reads in a message: "£30.00 in cash", "£28.40 by card (fee £0.45)". */
function paymentText(method: string, amountPence: number, feePence: number): string {
  const how: Record<Payment['method'], string> = {
    cash: 'in cash',
    card: 'by card',
    pay_link: 'by payment link',
    bank_transfer: 'by bank transfer',
    account: 'on account',
  };
  const pounds = (p: number) => `£${(p / 100).toFixed(2)}`;
  return `${pounds(amountPence)} ${how[method as Payment['method']] ?? `by ${method.replace(/_/g, ' ')}`}${feePence > 0 ? ` (fee ${pounds(feePence)})` : ''}`;
}

/**
 * A payment reported with `completed`, checked against the booking before anything is recorded
 * (or compared with what was): 400 invalid_input for what could never be recorded.
 */
function checkPayment(booking: DispatchBooking, payment: Payment): void {
  // Only a booking made on account is charged to one: the passenger of any other pays.
  if (payment.method === 'account' && booking.payment_method !== 'account') {
    throw new AppError(
      'invalid_input',
      `This booking was not made on account: the passenger pays by ${booking.payment_method.replace('_', ' ')}.`,
      [{ field: '/payment/method', problem: 'account only for a booking made on account' }],
    );
  }
  // A card processing fee belongs to a card payment: sent with another method it is refused,
  // not dropped, as the driver page refuses it (the driver meant something by it).
  if (payment.method !== 'card' && payment.processorFeeGBP !== undefined && payment.processorFeeGBP > 0) {
    throw new AppError(
      'invalid_input',
      `A card processing fee goes with a card payment; this one was paid by ${payment.method.replace('_', ' ')}.`,
      [{ field: '/payment/processorFeeGBP', problem: 'only for method card' }],
    );
  }
  // A card fee is passed through to the driver's week as entered, and a settlement record
  // cannot be changed afterwards: a fee over the amount paid (45 typed for 0.45) is refused.
  if (payment.method === 'card' && (payment.processorFeeGBP ?? 0) > payment.amountGBP) {
    throw new AppError(
      'invalid_input',
      `The card processing fee (£${(payment.processorFeeGBP ?? 0).toFixed(2)}) cannot be more than the amount paid (£${payment.amountGBP.toFixed(2)}).`,
      [{ field: '/payment/processorFeeGBP', problem: 'must not exceed amountGBP' }],
    );
  }
}

/** A payment as its settlement record stores it (pence; a fee only with a card). */
function paymentRecord(payment: Payment): { method: Payment['method']; amountPence: number; feePence: number } {
  return {
    method: payment.method,
    amountPence: Math.round(payment.amountGBP * 100),
    feePence: payment.method === 'card' ? Math.round((payment.processorFeeGBP ?? 0) * 100) : 0,
  };
}

/**
 * `completed` reported again with a payment: answered as the first time only when it is the
 * payment recorded then (the caller's settlement record written with the completion). Any
 * other is 409 conflict saying what was recorded: a settlement record is append-only, so a
 * second report never replaces it, and a correction is an operator's (the admin CLI's
 * `settlement record --kind correction --corrects ID`, shared/services/settlement.ts).
 */
async function assertSamePayment(trx: Tx, booking: DispatchBooking, holder: JobHolder, payment: Payment) {
  const recorded = await trx('settlement_records')
    .where({ booking_id: booking.id, recorded_by: actorOf(holder) })
    .whereIn('kind', Object.values(SETTLEMENT_KIND))
    .whereNull('corrects_id')
    .orderBy('id')
    .first<{ id: string | number; method: string; amount_pence: number; processor_fee_pence: number } | undefined>(
      'id',
      'method',
      'amount_pence',
      'processor_fee_pence',
    );
  const sent = paymentRecord(payment);
  if (
    recorded &&
    recorded.method === sent.method &&
    recorded.amount_pence === sent.amountPence &&
    recorded.processor_fee_pence === sent.feePence
  ) {
    return;
  }
  const said = paymentText(sent.method, sent.amountPence, sent.feePence);
  if (!recorded) {
    throw new AppError(
      'conflict',
      `${booking.reference} was completed with no payment recorded by you, and reporting completed again adds none (this one: ${said}). Ask the operators to record it (admin CLI: settlement record --booking ${booking.reference}).`,
      [{ field: '/payment', problem: 'the job is completed; no payment was recorded with it' }],
    );
  }
  const was = paymentText(recorded.method, recorded.amount_pence, recorded.processor_fee_pence);
  throw new AppError(
    'conflict',
    `${booking.reference} was completed with ${was} recorded (settlement record ${recorded.id}), not ${said}. A recorded payment is never changed or replaced: to correct it, ask the operators to append a correction to record ${recorded.id} (admin CLI: settlement record --booking ${booking.reference} --kind correction --corrects ${recorded.id}).`,
    [{ field: '/payment', problem: `differs from the payment recorded: ${was}` }],
  );
}

/**
 * Report progress on a job the caller holds. `completed` needs how the fare was paid and
 * appends the settlement record (append-only). Reporting the current status again answers the
 * same and writes nothing: `completed` again with a payment only when it is the one recorded
 * (or with none), else 409 conflict (`assertSamePayment`). Going back is 409; progress on an
 * offer still open to the caller is 409 too (accept it first), and on anything else not
 * theirs 404.
 */
export async function reportProgress(
  deps: DispatchDeps,
  holder: JobHolder,
  rawRef: string,
  status: Exclude<Progress, 'driver_assigned'>,
  payment: Payment | undefined,
  prefix: string,
  now = new Date(),
): Promise<{ bookingId: string; reference: string; status: Progress; changed: boolean }> {
  // A payment belongs to the completion only: with another step it would be neither checked nor
  // recorded, so it is refused, not dropped (the driver meant to say something).
  if (payment && status !== 'completed') {
    throw new AppError('invalid_input', `A payment is reported with status completed, not ${status}.`, [
      { field: '/payment', problem: 'only allowed when status is completed' },
    ]);
  }
  return deps.db.transaction(async (trx) => {
    const booking = await heldBooking(
      trx,
      rawRef,
      prefix,
      holder,
      now,
      (ref) =>
        `${ref} is offered to you, not accepted yet: accept the offer first (${jobPath(ref, 'accept')}), then report progress.`,
    );
    const from = PROGRESS.indexOf(booking.status as Progress);
    const to = PROGRESS.indexOf(status);
    if (booking.status === status) {
      if (status === 'completed' && payment) {
        checkPayment(booking, payment);
        await assertSamePayment(trx, booking, holder, payment);
      }
      return { bookingId: booking.id, reference: booking.reference, status, changed: false };
    }
    if (from < 0 || to < from) {
      throw new AppError(
        'conflict',
        `A job that is ${booking.status.replace(/_/g, ' ')} cannot become ${status.replace(/_/g, ' ')}.`,
        [{ field: '/status', problem: `not allowed after ${booking.status}` }],
      );
    }
    if (status === 'completed') {
      if (!payment) {
        throw new AppError('invalid_input', 'Completing a job needs how the fare was paid.', [
          { field: '/payment', problem: 'required when status is completed' },
        ]);
      }
      checkPayment(booking, payment);
      const paid = paymentRecord(payment);
      await trx('settlement_records').insert({
        booking_id: booking.id,
        driver_id: holder.kind === 'driver' ? holder.id : null,
        partner_id: holder.kind === 'partner' ? holder.id : null,
        kind: SETTLEMENT_KIND[payment.method],
        method: paid.method,
        amount_pence: paid.amountPence,
        processor_fee_pence: paid.feePence,
        recorded_by: actorOf(holder),
      });
    }
    await appendStatus(trx, booking.id, status, actorOf(holder), payment ? { payment: payment.method } : {});
    return { bookingId: booking.id, reference: booking.reference, status, changed: true };
  });
}

export interface FeedJob {
  bookingReference: string;
  state: string;
  offerExpiresAt: string | null;
  pickup: { name: string; lat: number; lng: number };
  dropoff: { name: string; lat: number; lng: number };
  pickupTime: string;
  passengers: number;
  vehicleType: string;
  fareGBP: number | null;
  /** How the passenger pays the driver: cash, card, pay_link (the driver's payment link), bank_transfer, account. */
  paymentMethod: JobPaymentMethod;
  /** The passenger booked meet and greet: meet them inside the terminal with a name board. */
  meetAndGreet: boolean;
  /** Once accepted: who to pick up. */
  passenger?: { name: string; phone: string | null };
  notes?: string | null;
  flightNumber?: string | null;
  /**
   * Test-mode jobs only: the sandbox scenario the booking asked for and the move it asks of the
   * driver who sees it now (accept, decline, hand_back, or null: the driver's own choice).
   */
  sandbox?: { scenario: TestScenario | null; move: SandboxMove };
}

/** Declined offers and hand-backs so far, per test-mode booking (what scenarios depend on). */
async function sandboxHistory(
  db: Db,
  bookingIds: string[],
): Promise<Map<string, { declined: number; handedBack: number }>> {
  const out = new Map<string, { declined: number; handedBack: number }>();
  if (bookingIds.length === 0) return out;
  const rows = await db('dispatch_offers')
    .whereIn('booking_id', bookingIds)
    .where('state', 'declined')
    .groupBy('booking_id')
    .select<Array<{ booking_id: string; declined: number; handed_back: number }>>(
      'booking_id',
      db.raw(`count(*) filter (where coalesce(decline_reason, '') not like 'handed back%')::int as declined`),
      db.raw(`count(*) filter (where decline_reason like 'handed back%')::int as handed_back`),
    );
  for (const r of rows) out.set(r.booking_id, { declined: r.declined, handedBack: r.handed_back });
  return out;
}

/** How far back a partner's feed lists the open jobs it submitted, by pickup time: a day. */
const SUBMITTED_JOBS_SHOWN_MS = 24 * 3600_000;

/**
 * The job feed: open offers (not expired) and jobs in hand (assigned to completion) for a
 * driver or an operator; a partner's feed also has the open jobs it submitted (picked up from
 * a day ago on), after the jobs it holds.
 */
export async function jobFeed(db: Db, holder: JobHolder, now = new Date()): Promise<FeedJob[]> {
  const offers = await db('dispatch_offers as o')
    .join('bookings as b', 'b.id', 'o.booking_id')
    .where({ [`o.${holderColumn(holder)}`]: holder.id, 'o.state': 'offered' })
    .where('o.expires_at', '>', now)
    .where('b.status', 'dispatching')
    .modify((q) => {
      if (holder.kind === 'partner' && holder.testMode !== undefined) q.where('b.test_mode', holder.testMode);
    })
    .orderBy('o.expires_at')
    .select<Array<DispatchBooking & { expires_at: Date }>>('b.*', 'o.expires_at');
  const heldColumn = holder.kind === 'driver' ? 'driver_id' : 'operator_partner_id';
  // A partner's feed also lists the jobs it submitted that are still open, those picked up
  // from a day ago on: one left `no_driver_available` or `pending` long past its pickup is
  // not a job any more. The jobs it holds come first, so however many it submitted, the page
  // of 200 never drops one its fleet is doing.
  const held: DispatchBooking[] = await db<DispatchBooking>('bookings')
    .where((q) => {
      q.where(heldColumn, holder.id).whereIn('status', ACTIVE_JOB_STATUSES);
      if (holder.kind === 'partner')
        q.orWhere((p) =>
          p
            .where('partner_id', holder.id)
            .whereNotIn('status', ['completed', 'cancelled'])
            .where('pickup_time', '>=', new Date(now.getTime() - SUBMITTED_JOBS_SHOWN_MS)),
        );
    })
    .modify((q) => {
      if (holder.kind === 'partner' && holder.testMode !== undefined) q.where('test_mode', holder.testMode);
      if (holder.kind === 'partner') {
        q.orderByRaw('coalesce(operator_partner_id = ? and status = any(?::text[]), false) desc', [
          holder.id,
          ACTIVE_JOB_STATUSES,
        ]);
      }
    })
    .orderBy('pickup_time')
    .limit(200);
  const history = await sandboxHistory(
    db,
    [...offers, ...held].filter((b) => b.test_mode).map((b) => b.id),
  );
  const sandbox = (b: DispatchBooking, state: 'offered' | 'held') => {
    if (!b.test_mode) return {};
    const scenario = isTestScenario(b.test_scenario) ? b.test_scenario : null;
    return {
      sandbox: { scenario, move: sandboxMove(scenario, state, history.get(b.id) ?? { declined: 0, handedBack: 0 }) },
    };
  };
  // An offer shows no passenger until accepted (shared/domain/dispatch/job-view.ts).
  return [
    ...offers.map((b) => ({
      bookingReference: b.reference,
      state: 'offered',
      offerExpiresAt: b.expires_at.toISOString(),
      ...offeredJob(b),
      ...sandbox(b, 'offered'),
    })),
    ...held.map((b) => ({
      bookingReference: b.reference,
      state: b.status === 'driver_assigned' ? 'accepted' : b.status,
      offerExpiresAt: null,
      ...heldJob(b),
      ...sandbox(b, 'held'),
    })),
  ];
}

/**
 * What a presence report carries: a position when taking jobs; going off duty needs none (a
 * driver app switching off may have no fix, or no permission to read one).
 */
export type PresenceUpdate =
  | { available: true; lat: number; lng: number }
  | { available: false; lat?: number | undefined; lng?: number | undefined };

/**
 * 0,0 (in the Gulf of Guinea) is what a phone without a position fix reports, never where a
 * driver of ours is: refused as a position to take jobs at (400 invalid_input, the driver API's
 * presence report), and never kept as the last known location.
 */
export const isNoFix = (lat: number, lng: number) => lat === 0 && lng === 0;

export function assertPositionFix(lat: number, lng: number): void {
  if (isNoFix(lat, lng)) {
    throw new AppError(
      'invalid_input',
      'Latitude 0, longitude 0 is what a phone without a location fix reports: send your position once the phone has one (going off duty, available false, needs no position).',
      [
        { field: '/lat', problem: 'must not be 0 with lng 0 (no location fix)' },
        { field: '/lng', problem: 'must not be 0 with lat 0 (no location fix)' },
      ],
    );
  }
}

/**
 * A driver's presence report: the live index (for matching) at once; the last known state in
 * Postgres when availability changes or at most every 30 seconds, so heartbeats cost no write.
 * Going off duty takes the driver off the index at once with or without a position; without
 * one (or with 0,0) the last known location and its time are left as they were, as the driver
 * pages' Stop leaves them.
 */
export async function reportPresence(
  deps: DispatchDeps,
  driverId: string,
  report: PresenceUpdate,
  now = new Date(),
  testMode = false,
  /** A heartbeat that never makes the driver available: false, changing nothing, unless they are live. */
  opts: { onlyIfLive?: boolean } = {},
): Promise<boolean> {
  const index = presenceIndex(deps.redis, deps.config, testMode);
  // The row is written when availability changes, or when it was last written 30 s ago or more.
  const record = (available: boolean, fields: Record<string, unknown>) =>
    deps
      .db('drivers')
      .where({ id: driverId })
      .where((q) =>
        q
          .where('available', !available)
          .orWhereNull('last_seen_at')
          .orWhere('last_seen_at', '<', new Date(now.getTime() - 30_000)),
      )
      .update({ available, ...fields });
  if (!report.available) {
    await index.remove(driverId);
    await record(
      false,
      report.lat !== undefined && report.lng !== undefined && !isNoFix(report.lat, report.lng)
        ? { last_lat: report.lat, last_lng: report.lng, last_seen_at: now }
        : {},
    );
    return true;
  }
  if (opts.onlyIfLive) {
    if (!(await index.refresh(driverId, report.lat, report.lng, now.getTime()))) return false;
  } else {
    await index.report(driverId, report, now.getTime());
  }
  await record(true, { last_lat: report.lat, last_lng: report.lng, last_seen_at: now });
  return true;
}
