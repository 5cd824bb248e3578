import { failpoint } from '../../shared/failpoints.ts';
import type { JobPayload } from '../../shared/queues/registry.ts';
import { dispatchStep, expireOffer, type StepOutcome } from '../../shared/services/dispatch.ts';
import type { WorkerContext } from '../context.ts';
import { announceStatus } from './announce.ts';

/**
 * A dispatch step (shared/services/dispatch.ts): the booking's outbox job at pickup minus the
 * lead time, a decline, or a retry when nobody was free. Offers the booking to the next
 * candidate, or marks it `no_driver_available` and schedules another try; a repeated job
 * changes nothing.
 */
export async function dispatchBooking(payload: JobPayload<'dispatch-booking'>, ctx: WorkerContext): Promise<void> {
  const outcome = await ctx.db.transaction((trx) => dispatchStep(trx, ctx, payload.bookingId));
  // Crash tests: die after the offer (and its job cards) committed, before the job is marked done.
  failpoint('dispatch-after-offer');
  await report(ctx, payload.bookingId, outcome);
}

/** An offer's timeout: expire it if nobody answered, and move on. */
export async function offerExpired(payload: JobPayload<'offer-expired'>, ctx: WorkerContext): Promise<void> {
  const expired = await expireOffer(ctx, payload.offerId);
  if (expired) await report(ctx, expired.bookingId, expired.outcome);
}

async function report(ctx: WorkerContext, bookingId: string, outcome: StepOutcome): Promise<void> {
  ctx.logger.info(
    { bookingId, outcome: outcome.kind, ...(outcome.kind === 'offered' ? { tier: outcome.tier } : {}) },
    'dispatch step',
  );
  if (outcome.kind === 'offered' || outcome.kind === 'no_driver') await announceStatus(ctx, bookingId);
}
