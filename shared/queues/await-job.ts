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
 * Listeners go on before the check, so a job that finishes in between is seen either way.
 */
export function awaitJob(queue: Queue, events: QueueEvents, job: Job, timeoutMs: number): Promise<unknown> {
  const jobId = job.id as string;
  // Per-job event names (`completed:<id>`) and 'closing' are outside BullMQ's typed listeners.
  const ee = events as unknown as EventEmitter;
  const q = queue as unknown as EventEmitter;
  return new Promise<unknown>((resolve, reject) => {
    let settled = false;
    const completedEvent = `completed:${jobId}`;
    const failedEvent = `failed:${jobId}`;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ee.removeListener(completedEvent, onCompleted);
      ee.removeListener(failedEvent, onFailed);
      q.removeListener('closing', onClosing);
      fn();
    };
    const onCompleted = (args: { returnvalue: unknown }) => finish(() => resolve(args.returnvalue));
    const onFailed = (args: { failedReason: string }) => finish(() => reject(new Error(args.failedReason)));
    const onClosing = () => finish(() => reject(new Error('queue closing')));
    const timer = setTimeout(() => finish(() => reject(new JobWaitTimeout(jobId, timeoutMs))), timeoutMs);
    ee.on(completedEvent, onCompleted);
    ee.on(failedEvent, onFailed);
    q.on('closing', onClosing);
    Job.fromId(queue, jobId)
      .then(async (stored) => {
        if (!stored) return finish(() => reject(new Error(`job ${jobId} is gone`)));
        if (!stored.finishedOn) return; // waiting or active: the events will tell
        // A job that completed after a failed attempt keeps its failedReason: ask its state then.
        const failed = Boolean(stored.failedReason) && (await stored.getState()) === 'failed';
        finish(() => (failed ? reject(new Error(stored.failedReason)) : resolve(stored.returnvalue)));
      })
      .catch((err: unknown) => finish(() => reject(err)));
  });
}
