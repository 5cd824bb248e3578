import { type Job, type Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from '../errors.ts';
import type { PriceQuoteRequest } from '../queues/registry.ts';
import type { PriceQuoteResult } from './pricer.ts';

export interface PricingClient {
  /** Ask the pricing worker and wait for its answer (request and reply over BullMQ). */
  price(req: PriceQuoteRequest): Promise<PriceQuoteResult>;
  close(): Promise<void>;
}

/**
 * Request and reply over the `pricing` queue: add a `price-quote` job, wait for it to finish
 * through QueueEvents. One attempt (the caller retries), kept a minute. When no worker answers
 * in time the caller gets 503, never a hung request.
 */
export function createPricingClient(
  queue: Queue,
  events: () => Redis,
  prefix: string,
  timeoutMs: number,
): PricingClient {
  let queueEvents: QueueEvents | null = null;
  let ready: Promise<void> | null = null;
  const eventsReady = async (): Promise<QueueEvents> => {
    if (!queueEvents) {
      queueEvents = new QueueEvents(queue.name, { connection: events(), prefix });
      queueEvents.on('error', () => {});
      // Every waiting request listens for its job: hundreds at once is normal here.
      queueEvents.setMaxListeners(0);
      queue.setMaxListeners(0);
      ready = queueEvents.waitUntilReady().then(() => undefined);
    }
    await ready;
    return queueEvents;
  };
  return {
    async price(req) {
      const qe = await eventsReady();
      let job: Job;
      try {
        job = await queue.add('price-quote', req, {
          attempts: 1,
          removeOnComplete: { age: 60 },
          removeOnFail: { age: 600 },
        });
      } catch {
        throw new AppError('service_unavailable', 'Pricing is briefly unavailable; retry in a few seconds.', [], {
          'Retry-After': '5',
        });
      }
      try {
        return (await job.waitUntilFinished(qe, timeoutMs)) as PriceQuoteResult;
      } catch (err) {
        const timedOut = /timed out|TTL/i.test((err as Error).message);
        throw new AppError(
          'service_unavailable',
          timedOut
            ? 'Pricing did not answer in time; retry in a few seconds.'
            : 'Pricing failed; retry in a few seconds.',
          [],
          { 'Retry-After': '5' },
        );
      }
    },
    async close() {
      await queueEvents?.close();
    },
  };
}
