import { type Job, type Queue, UnrecoverableError } from 'bullmq';
import { parseWeek, weekBefore } from '../../shared/domain/billing/week.ts';
import { failpoint } from '../../shared/failpoints.ts';
import type { JobPayload } from '../../shared/queues/registry.ts';
import { chargeInvoices, issueInvoices } from '../../shared/services/billing.ts';
import type { WorkerContext } from '../context.ts';

/** The weekly run: Monday 02:00 Europe/London, for the week that ended two hours before. */
export const WEEKLY_BILLING_SCHEDULER = 'weekly-invoice-run';
export const WEEKLY_BILLING_PATTERN = '0 2 * * 1';
export const WEEKLY_BILLING_TZ = 'Europe/London';

const RUN_OPTIONS = {
  attempts: 10,
  backoff: { type: 'exponential', delay: 60_000 },
  removeOnComplete: { count: 60 },
} as const;

/**
 * Register the weekly run's job scheduler; every billing worker calls it at start. A scheduler
 * already registered as it should be is left alone: upserting replaces its pending job with
 * one at the next time after now, so a run that fell due while no billing worker ran (a deploy
 * or restart across Monday 02:00) would be dropped and its week never billed. When the
 * schedule did change and its pending run is overdue, that run is queued on its own first
 * (`weekly-billing-<week>`, billing the week it was due for). A failed run is retried with
 * backoff over about a day (issuing again is a no-op; charging picks up what failed).
 */
export async function registerWeeklyBilling(
  queue: Queue,
  now: number = Date.now(),
): Promise<{ registered: boolean; overdue: string | null }> {
  const existing = await queue.getJobScheduler(WEEKLY_BILLING_SCHEDULER);
  if (existing?.pattern === WEEKLY_BILLING_PATTERN && existing.tz === WEEKLY_BILLING_TZ) {
    return { registered: false, overdue: null };
  }
  let overdue: string | null = null;
  if (typeof existing?.next === 'number' && existing.next <= now) {
    overdue = weekBefore(existing.next);
    await queue.add('run-weekly-billing', { week: overdue }, { ...RUN_OPTIONS, jobId: `weekly-billing-${overdue}` });
  }
  await queue.upsertJobScheduler(
    WEEKLY_BILLING_SCHEDULER,
    { pattern: WEEKLY_BILLING_PATTERN, tz: WEEKLY_BILLING_TZ },
    { name: 'run-weekly-billing', data: {}, opts: RUN_OPTIONS },
  );
  return { registered: true, overdue };
}

class ChargesFailedError extends Error {
  constructor(failed: number) {
    super(`${failed} invoice charge(s) failed; they are charge_failed and will be tried again`);
    this.name = 'ChargesFailedError';
  }
}

/** Charge what is outstanding; throw while charges fail so that BullMQ retries with backoff. */
async function chargeOutstanding(ctx: WorkerContext, week: string | undefined): Promise<{ charged: number }> {
  const summary = await chargeInvoices(ctx.db, ctx.payments, {
    ...(week ? { week } : {}),
    logger: ctx.logger,
    notify: { serviceName: ctx.config.serviceName },
  });
  if (summary.failed > 0) throw new ChargesFailedError(summary.failed);
  return { charged: summary.charged };
}

export async function runWeeklyBilling(
  payload: JobPayload<'run-weekly-billing'>,
  ctx: WorkerContext,
  job: Job,
): Promise<unknown> {
  // The instant the scheduler meant this run for (a late run still bills the same week).
  const dueAt = (job.opts as { prevMillis?: number }).prevMillis ?? job.timestamp;
  const week = parseWeek(payload.week ?? weekBefore(dueAt));
  // Not a week at all (week 53 of a 52-week year): no retry can mend it.
  if (!week) throw new UnrecoverableError(`not a billing week: ${payload.week}`);
  const issued = await ctx.db.transaction(async (trx) => {
    const result = await issueInvoices(trx, week);
    await trx('audit_log').insert({
      actor: 'system:billing',
      action: 'billing.run',
      subject_type: 'billing_week',
      subject_id: week.week,
      details: JSON.stringify(result),
    });
    return result;
  });
  // Crash tests: die after the invoices committed, before charging and before the job is done.
  failpoint('billing-after-issue');
  ctx.logger.info({ week: week.week, ...issued }, 'weekly invoices issued');
  // Every outstanding invoice, not only this week's: a charge that kept failing last week is
  // tried again with this one.
  const charged = await chargeOutstanding(ctx, undefined);
  return { week: week.week, ...issued, ...charged };
}

export async function chargeInvoicesJob(payload: JobPayload<'charge-invoices'>, ctx: WorkerContext): Promise<unknown> {
  return chargeOutstanding(ctx, payload.week);
}
