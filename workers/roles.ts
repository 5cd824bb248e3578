import type { Job } from 'bullmq';
import type { JobPayload, JobsOf, QueueName } from '../shared/queues/registry.ts';
import { chargeInvoicesJob, runWeeklyBilling } from './billing/billing-jobs.ts';
import type { WorkerContext } from './context.ts';
import { bookingCancelled } from './dispatch/booking-cancelled.ts';
import { dispatchBooking, offerExpired } from './dispatch/dispatch-booking.ts';
import { deliverWebhook } from './fanout/deliver-webhook.ts';
import { sendMessage } from './notify/send-message.ts';
import { priceQuote, priceQuotes } from './pricing/price-quote.ts';

export type Handlers<Q extends QueueName> = {
  [N in JobsOf<Q>]: (payload: JobPayload<N>, ctx: WorkerContext, job: Job) => Promise<unknown>;
};

/**
 * Each queue-consuming role and the handler of every job in its queue. The type makes a
 * missing handler a compile error; `assertHandlers` checks it again at start-up.
 * Roles whose jobs arrive with later work (pricing, dispatch, fanout, billing) run their
 * worker on their queue already, so a deploy can scale them before their jobs exist.
 */
export const ROLE_HANDLERS: { [Q in QueueName]: Handlers<Q> } = {
  pricing: { 'price-quote': priceQuote, 'price-quotes': priceQuotes },
  dispatch: {
    'dispatch-booking': dispatchBooking,
    'offer-expired': offerExpired,
    'booking-cancelled': bookingCancelled,
  },
  notify: { 'send-message': sendMessage },
  fanout: { 'deliver-webhook': deliverWebhook },
  billing: { 'run-weekly-billing': runWeeklyBilling, 'charge-invoices': chargeInvoicesJob },
};

/** Concurrency per role, per process. I/O-bound roles run more jobs at once. */
export const ROLE_CONCURRENCY: Record<QueueName, number> = {
  // Price jobs are short (microseconds of CPU) and someone waits for each: take many at once.
  pricing: 64,
  dispatch: 16,
  notify: 16,
  fanout: 32,
  billing: 1,
};
