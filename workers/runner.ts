import { UnrecoverableError, Worker } from 'bullmq';
import {
  assertHandlers,
  assertPayload,
  InvalidPayloadError,
  isJobName,
  type JobName,
  QUEUE_NAMES,
  type QueueName,
  queueOf,
  type WorkerRole,
} from '../shared/queues/registry.ts';
import type { Runtime } from '../shared/runtime.ts';
import { presenceIndex, rescueStrandedBookings, STRANDED_CHECK_MS } from '../shared/services/dispatch.ts';
import { untracedData, withTrace } from '../shared/trace.ts';
import { registerWeeklyBilling } from './billing/billing-jobs.ts';
import type { WorkerContext } from './context.ts';
import { startOutboxRelay } from './outbox-relay/relay.ts';
import { ROLE_CONCURRENCY, ROLE_HANDLERS } from './roles.ts';
import { startSimulator } from './simulator/simulator.ts';

export interface RunningRoles {
  roles: WorkerRole[];
  /** Stop taking jobs and wait for those in progress (BullMQ's worker.close()). */
  close(): Promise<void>;
}

type AnyHandler = (payload: unknown, ctx: WorkerContext, job: import('bullmq').Job) => Promise<unknown>;

/** Start the chosen roles in this process on the runtime's connections. */
export function startRoles(roles: WorkerRole[], rt: Runtime): RunningRoles {
  const ctx: WorkerContext = {
    config: rt.config,
    db: rt.db,
    redis: rt.redis,
    logger: rt.logger,
    queues: rt.queues,
    mailer: rt.mailer,
    sms: rt.sms,
    payments: rt.payments,
    pricer: () => rt.pricer(),
  };
  for (const role of roles) {
    if ((QUEUE_NAMES as readonly string[]).includes(role))
      assertHandlers(role as QueueName, ROLE_HANDLERS[role as QueueName]);
  }
  const closers: Array<() => Promise<void>> = [];
  for (const role of roles) {
    const log = rt.logger.child({ workerRole: role });
    if (role === 'outbox-relay') {
      const relay = startOutboxRelay({ db: rt.db, queues: rt.queues, config: rt.config, logger: rt.logger });
      closers.push(() => relay.stop());
      log.info('outbox relay started');
      continue;
    }
    if (role === 'simulator') {
      const simulator = startSimulator({ db: rt.db, config: rt.config, logger: log });
      closers.push(() => simulator.stop());
      continue;
    }
    // The pricing engine loads its data (gazetteer, tariffs) now, not on the first job, so the
    // first callers do not wait for it.
    if (role === 'pricing') ctx.pricer();
    // Dispatch keeps the live presence index tidy: drivers silent for longer than the presence
    // time-out are removed (searches already ignore them; this bounds the index's size).
    if (role === 'dispatch') {
      const indexes = [presenceIndex(rt.redis, rt.config), presenceIndex(rt.redis, rt.config, true)];
      const timer = setInterval(() => {
        for (const presence of indexes) {
          presence
            .sweep(Date.now())
            .then((n) => n > 0 && log.info({ removed: n }, 'swept stale drivers from the presence index'))
            .catch((err: unknown) => log.warn({ err }, 'presence sweep failed'));
        }
      }, rt.config.dispatch.presenceTtlSeconds * 1000);
      timer.unref();
      closers.push(async () => clearInterval(timer));
      // And finds bookings whose dispatch job went missing from Redis (rescueStrandedBookings):
      // at start (a Redis that lost its data is often restarted with the workers), then every minute.
      // Not while the outbox relay is behind: each minute it is, a warning naming its oldest row
      // (a relay stopped, or held up by a row BullMQ refuses, needs someone).
      let rescuing: Promise<void> | null = null;
      const check = () => {
        rescuing ??= rescueStrandedBookings(rt)
          .then(({ requeued, errors, relayBehind }) => {
            if (relayBehind)
              log.warn(
                {
                  outboxId: relayBehind.outboxId,
                  queue: relayBehind.queue,
                  job: relayBehind.jobName,
                  waitingSeconds: Math.round((Date.now() - relayBehind.since.getTime()) / 1000),
                },
                'outbox relay is behind (an unrelayed row is older than the stranded-booking threshold); lost dispatch jobs are not looked for until it catches up',
              );
            if (requeued.length > 0) log.warn({ requeued }, 'dispatch jobs were missing from the queue; queued again');
            for (const { jobId, error } of errors)
              log.warn({ jobId, err: error }, 'could not check or queue a dispatch job');
          })
          .catch((err: unknown) => log.warn({ err }, 'stranded-booking check failed'))
          .finally(() => {
            rescuing = null;
          });
      };
      check();
      const rescue = setInterval(check, STRANDED_CHECK_MS);
      rescue.unref();
      closers.push(async () => {
        clearInterval(rescue);
        await rescuing;
      });
    }
    // Billing registers its weekly job scheduler (kept as it is when already registered, so a
    // run that fell due while no billing worker ran is not dropped).
    if (role === 'billing') {
      registerWeeklyBilling(rt.queues.billing)
        .then((r) => log.info(r, 'weekly billing scheduled'))
        .catch((err: unknown) => log.error({ err }, 'could not register the weekly billing scheduler'));
    }
    const handlers = ROLE_HANDLERS[role] as Record<string, AnyHandler>;
    const worker = new Worker(
      role,
      async (job) => {
        if (!isJobName(job.name) || queueOf(job.name) !== role) {
          throw new UnrecoverableError(`queue ${role} has no job named ${job.name}`);
        }
        // The request this job comes from, if any, rides beside the payload (shared/trace.ts).
        const { payload: data, requestId } = untracedData(job.data);
        let payload: unknown;
        try {
          payload = assertPayload(job.name as JobName, data);
        } catch (err) {
          if (err instanceof InvalidPayloadError) throw new UnrecoverableError(err.message);
          throw err;
        }
        const handler = handlers[job.name];
        if (!handler) throw new UnrecoverableError(`no handler for ${job.name}`);
        const end = rt.metrics.jobDuration.startTimer({ queue: role, job: job.name });
        try {
          const logger = log.child({ job: job.name, jobId: job.id, ...(requestId ? { requestId } : {}) });
          // Jobs this one enqueues carry the same request id on.
          const result = await withTrace({ requestId: requestId ?? `job:${job.id}` }, () =>
            handler(payload, { ...ctx, logger }, job),
          );
          end({ outcome: 'completed' });
          return result;
        } catch (err) {
          end({ outcome: 'failed' });
          throw err;
        }
      },
      {
        connection: rt.workerRedis(),
        prefix: rt.config.queuePrefix,
        concurrency: ROLE_CONCURRENCY[role],
        // A job whose worker was killed is found stalled and run again after about this long.
        lockDuration: rt.config.workerLockMs,
        stalledInterval: rt.config.workerLockMs,
      },
    );
    worker.on('failed', (job, err) => {
      const final = !job || err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
      rt.metrics.jobFailures.inc({ queue: role, job: job?.name ?? 'unknown', final: String(final) });
      const fields = { job: job?.name, jobId: job?.id, attempts: job?.attemptsMade, err };
      if (final) log.error(fields, 'job failed for good');
      else log.warn(fields, 'job failed; will retry');
    });
    worker.on('error', (err) => log.error({ err }, 'worker error'));
    closers.push(() => worker.close());
    log.info({ concurrency: ROLE_CONCURRENCY[role] }, 'worker started');
  }
  return {
    roles,
    async close() {
      await Promise.all(closers.map((c) => c()));
    },
  };
}
