import { randomBytes } from 'node:crypto';
import { Queue, QueueEvents, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { awaitJob, JobWaitTimeout } from '../shared/queues/await-job.ts';
import { createRedis } from '../shared/queues/connection.ts';
import type { PriceQuoteRequest } from '../shared/queues/registry.ts';
import { createPricingClient } from '../shared/services/pricing-client.ts';
import { deleteKeys } from './helpers/env.ts';
import { testRedisUrl } from './helpers/urls.ts';

/**
 * Request and reply over BullMQ (`awaitJob`, used by the pricing client): the answer, the
 * failure, a job that finished before the wait began, the timeout, and Redis failing during
 * the wait, which must reject the caller's promise (BullMQ's waitUntilFinished lets that error
 * escape as an unhandled rejection and leaves the caller waiting out the timeout).
 */
const redisUrl = testRedisUrl();
const prefix = `test-awaitjob-${randomBytes(5).toString('hex')}`;
const opened: Redis[] = [];
const closers: Array<() => Promise<unknown>> = [];
let events: QueueEvents;

function connection(kind: 'producer' | 'worker'): Redis {
  const r = createRedis({ redisUrl }, kind, 'await-job-test');
  opened.push(r);
  return r;
}

function queue(name: string): Queue {
  const q = new Queue(name, { connection: connection('producer'), prefix });
  q.on('error', () => {});
  closers.push(() => q.close());
  return q;
}

function worker(name: string, fn: (data: { n: number }) => Promise<unknown>): Worker {
  const w = new Worker(name, async (job) => fn(job.data as { n: number }), {
    connection: connection('worker'),
    prefix,
  });
  w.on('error', () => {});
  closers.push(() => w.close());
  return w;
}

function eventsFor(name: string): Promise<QueueEvents> {
  const e = new QueueEvents(name, { connection: connection('worker'), prefix });
  e.on('error', () => {});
  closers.push(() => e.close());
  return e.waitUntilReady().then(() => e);
}

const opts = { attempts: 1, removeOnComplete: { age: 60 }, removeOnFail: { age: 60 } };

beforeAll(async () => {
  events = await eventsFor('answers');
  worker('answers', async ({ n }) => {
    if (n < 0) throw new Error(`negative: ${n}`);
    return { doubled: n * 2 };
  });
});

afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  for (const r of opened) r.disconnect();
  await deleteKeys(redisUrl, `${prefix}:*`);
});

describe('awaitJob', () => {
  it("resolves with the worker's return value", async () => {
    const q = queue('answers');
    const job = await q.add('x', { n: 21 }, opts);
    await expect(awaitJob(q, events, job, 10_000)).resolves.toEqual({ doubled: 42 });
  });

  it("rejects with the worker's failure", async () => {
    const q = queue('answers');
    const job = await q.add('x', { n: -1 }, opts);
    await expect(awaitJob(q, events, job, 10_000)).rejects.toThrow('negative: -1');
  });

  it('answers a job that finished before the wait began, from the stored job', async () => {
    const q = queue('answers');
    const job = await q.add('x', { n: 5 }, opts);
    await awaitJob(q, events, job, 10_000);
    // Its completed event is long gone: only the stored return value can answer now.
    await expect(awaitJob(q, events, job, 10_000)).resolves.toEqual({ doubled: 10 });
    const failed = await q.add('x', { n: -2 }, opts);
    await awaitJob(q, events, failed, 10_000).catch(() => {});
    await expect(awaitJob(q, events, failed, 10_000)).rejects.toThrow('negative: -2');
  });

  it('rejects with JobWaitTimeout when no worker answers in time', async () => {
    const q = queue('nobody-listens');
    const quiet = await eventsFor('nobody-listens');
    const job = await q.add('x', { n: 1 }, opts);
    await expect(awaitJob(q, quiet, job, 300)).rejects.toBeInstanceOf(JobWaitTimeout);
  });

  it('rejects at once with the reason when its signal is aborted (the caller shutting down)', async () => {
    const q = queue('nobody-listens');
    const quiet = await eventsFor('nobody-listens');
    const job = await q.add('x', { n: 1 }, opts);
    const controller = new AbortController();
    const waiting = awaitJob(q, quiet, job, 60_000, controller.signal);
    controller.abort(new Error('shutting down'));
    await expect(waiting).rejects.toThrow('shutting down');
    await expect(awaitJob(q, quiet, job, 60_000, controller.signal)).rejects.toThrow('shutting down');
  });

  it('rejects with the Redis error, not after the timeout, when the connection fails during the wait', async () => {
    const conn = connection('producer');
    const q = new Queue('nobody-listens', { connection: conn, prefix });
    q.on('error', () => {});
    closers.push(() => q.close());
    const quiet = await eventsFor('nobody-listens');
    const job = await q.add('x', { n: 1 }, opts);
    conn.disconnect(); // the queue's connection drops after the add, before the wait's check
    const started = Date.now();
    const outcome = await awaitJob(q, quiet, job, 60_000).then(
      () => 'resolved',
      (err: unknown) => err,
    );
    expect(outcome).toBeInstanceOf(Error);
    expect(outcome).not.toBeInstanceOf(JobWaitTimeout);
    // Well inside the 60 s timeout: the failure itself rejected the wait.
    expect(Date.now() - started).toBeLessThan(30_000);
  });
});

describe('pricing client', () => {
  it('keeps many requests waiting at once without a listener-leak warning, and close() answers them all', async () => {
    const q = queue('pricing-held');
    const client = createPricingClient(q, () => connection('worker'), prefix, 60_000);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      // No worker takes them: each request, sent in its own turn, is its own job still waiting.
      const waits: Promise<unknown>[] = [];
      for (let i = 0; i < 15; i++) {
        waits.push(client.price({ pickup: `p${i}` } as unknown as PriceQuoteRequest).catch((err: unknown) => err));
        await new Promise((r) => setTimeout(r, 20));
      }
      await expect.poll(async () => q.count(), { timeout: 10_000 }).toBe(15);
      await client.close();
      const outcomes = await Promise.all(waits);
      for (const o of outcomes) expect(o).toMatchObject({ code: 'service_unavailable' });
      // Node reports a listener leak on the next turn.
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
