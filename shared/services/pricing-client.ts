import { setMaxListeners } from 'node:events';
import { type Job, type Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from '../errors.ts';
import { awaitJob, JobWaitTimeout } from '../queues/await-job.ts';
import type { PriceQuoteRequest } from '../queues/registry.ts';
import type { PriceQuoteResult } from './pricer.ts';

export interface PricingClient {
  /** Ask the pricing worker and wait for its answer (request and reply over BullMQ). */
  price(req: PriceQuoteRequest): Promise<PriceQuoteResult>;
  close(): Promise<void>;
}

/** Most requests one pricing job carries. */
export const MAX_BATCH = 100;

interface Waiting {
  req: PriceQuoteRequest;
  resolve(r: PriceQuoteResult): void;
  reject(err: unknown): void;
}

/**
 * Request and reply over the `pricing` queue. Requests that arrive in the same turn of the
 * event loop share one job (`price-quotes`, up to MAX_BATCH), so under load many callers pay
 * for one BullMQ round trip; a lone request is a `price-quote` job and waits for nothing
 * extra. The answer comes through QueueEvents. One attempt (the caller retries), kept a
 * minute. When no worker answers in time the callers get 503, never a hung request.
 */
export function createPricingClient(
  queue: Queue,
  events: () => Redis,
  prefix: string,
  timeoutMs: number,
): PricingClient {
  let queueEvents: QueueEvents | null = null;
  let ready: Promise<void> | null = null;
  let isReady = false;
  // Aborted by close(): every wait still under way answers 503 at once, not after its timeout.
  const closing = new AbortController();
  // Each wait under way listens on it: hundreds at once is normal, not a leak to warn about.
  setMaxListeners(0, closing.signal);
  const unavailable = (message: string) => new AppError('service_unavailable', message, [], { 'Retry-After': '5' });
  const eventsReady = async (): Promise<QueueEvents> => {
    if (!queueEvents) {
      queueEvents = new QueueEvents(queue.name, { connection: events(), prefix });
      queueEvents.on('error', () => {});
      // Every waiting request listens for its job: hundreds at once is normal here.
      queueEvents.setMaxListeners(0);
      queue.setMaxListeners(0);
      ready = queueEvents.waitUntilReady().then(() => {
        isReady = true;
      });
      ready.catch(() => {}); // awaited below; a rejection here is not unhandled
    }
    if (!isReady) {
      // Its connection waits for Redis for ever: a request waits at most its timeout for it.
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(unavailable('Pricing is briefly unavailable; retry in a few seconds.')),
          timeoutMs,
        );
      });
      try {
        await Promise.race([ready, late]);
      } catch (err) {
        if (err instanceof AppError) throw err;
        throw unavailable('Pricing is briefly unavailable; retry in a few seconds.');
      } finally {
        clearTimeout(timer);
      }
    }
    return queueEvents;
  };

  async function send(batch: Waiting[]): Promise<void> {
    try {
      const qe = await eventsReady();
      const opts = { attempts: 1, removeOnComplete: { age: 60 }, removeOnFail: { age: 600 } };
      let job: Job;
      try {
        job =
          batch.length === 1
            ? await queue.add('price-quote', (batch[0] as Waiting).req, opts)
            : await queue.add('price-quotes', { requests: batch.map((w) => w.req) }, opts);
      } catch {
        throw unavailable('Pricing is briefly unavailable; retry in a few seconds.');
      }
      let result: unknown;
      try {
        result = await awaitJob(queue, qe, job, timeoutMs, closing.signal);
      } catch (err) {
        const timedOut = err instanceof JobWaitTimeout;
        throw unavailable(
          timedOut
            ? 'Pricing did not answer in time; retry in a few seconds.'
            : 'Pricing failed; retry in a few seconds.',
        );
      }
      const results = batch.length === 1 ? [result as PriceQuoteResult] : (result as PriceQuoteResult[]);
      batch.forEach((w, i) => {
        const r = results[i];
        if (r) w.resolve(r);
        else w.reject(unavailable('Pricing answered incompletely; retry in a few seconds.'));
      });
    } catch (err) {
      for (const w of batch) w.reject(err);
    }
  }

  let pending: Waiting[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const all = pending;
    pending = [];
    for (let i = 0; i < all.length; i += MAX_BATCH) void send(all.slice(i, i + MAX_BATCH));
  };

  return {
    price(req) {
      return new Promise<PriceQuoteResult>((resolve, reject) => {
        pending.push({ req, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    async close() {
      closing.abort(unavailable('Pricing is shutting down; retry in a few seconds.'));
      await queueEvents?.close();
    },
  };
}
