import type { EventEmitter } from 'node:events';
import { Job, type Queue, type QueueEvents } from 'bullmq';

/** The job did not finish within the wait (`awaitJob`). */
export class JobWaitTimeout extends Error {
  constructor(jobId: string, ms: number) {
    super(`job ${jobId} did not finish within ${ms} ms`);
    this.name = 'JobWaitTimeout';
  }
}

/**
 * Wait for a job's return value: request and reply over BullMQ.
 *
 * BullMQ's own `job.waitUntilFinished` runs its "already finished?" check inside an async
 * Promise executor, so when Redis drops the connection during that check the rejection escapes
 * as an unhandled rejection (a process running with Node's defaults exits on it) and the caller
 * waits out the whole timeout instead. Here every failure rejects the returned promise: the job
 * failed (its failed reason), Redis failed (its error), or nothing arrived in `timeoutMs`
 * (`JobWaitTimeout`).
 *
 * The answer normally comes as the QueueEvents event. The stored job is read only when no
 * event came within `CHECK_AFTER_MS` (and every `CHECK_EVERY_MS` after), so the common case
 * costs no extra Redis round trip, and a job whose event was missed (it finished before the
 * listeners were on, or while the QueueEvents connection was reconnecting) is still answered.
 */
/** First look at the stored job when no event came (ms after the wait began). */
export const CHECK_AFTER_MS = 200;
/** Later looks at the stored job, while no event comes. */
export const CHECK_EVERY_MS = 1_000;

export function awaitJob(
  queue: Queue,
  events: QueueEvents,
  job: Job,
  timeoutMs: number,
  /** Aborted (the caller is shutting down): the wait rejects at once with the signal's reason. */
  signal?: AbortSignal,
): Promise<unknown> {
  const jobId = job.id as string;
  // Per-job event names (`completed:<id>`) are outside BullMQ's typed listeners.
  const ee = events as unknown as EventEmitter;
  return new Promise<unknown>((resolve, reject) => {
    let settled = false;
    const completedEvent = `completed:${jobId}`;
    const failedEvent = `failed:${jobId}`;
    let check: NodeJS.Timeout | undefined;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(check);
      ee.removeListener(completedEvent, onCompleted);
      ee.removeListener(failedEvent, onFailed);
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const onCompleted = (args: { returnvalue: unknown }) => finish(() => resolve(args.returnvalue));
    const onFailed = (args: { failedReason: string }) => finish(() => reject(new Error(args.failedReason)));
    const onAbort = () => finish(() => reject(signal?.reason ?? new Error('aborted')));
    const timer = setTimeout(() => finish(() => reject(new JobWaitTimeout(jobId, timeoutMs))), timeoutMs);
    const lookAtStoredJob = () => {
      Job.fromId(queue, jobId)
        .then(async (stored) => {
          if (settled) return;
          if (!stored) return finish(() => reject(new Error(`job ${jobId} is gone`)));
          if (!stored.finishedOn) {
            // Waiting or active: the event will tell, or the next look.
            check = setTimeout(lookAtStoredJob, CHECK_EVERY_MS);
            return;
          }
          // A job that completed after a failed attempt keeps its failedReason: ask its state then.
          const failed = Boolean(stored.failedReason) && (await stored.getState()) === 'failed';
          finish(() => (failed ? reject(new Error(stored.failedReason)) : resolve(stored.returnvalue)));
        })
        .catch((err: unknown) => finish(() => reject(err)));
    };
    ee.on(completedEvent, onCompleted);
    ee.on(failedEvent, onFailed);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    check = setTimeout(lookAtStoredJob, Math.min(CHECK_AFTER_MS, timeoutMs));
  });
}
