import { Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config.ts';
import { QUEUE_NAMES, type QueueName } from './registry.ts';

/**
 * Two kinds of Redis connection, as BullMQ's production guide asks:
 * - `producer` (API, outbox relay, rate limits): fails fast. No offline queue, one retry,
 *   so a request answers 503 at once while Redis is away instead of hanging; and a command
 *   with no reply within `redisCommandTimeoutMs` fails (a stalled Redis, or a network that
 *   drops packets without a reset), so a request is not held until the client gives up.
 * - `worker` (BullMQ workers): waits. `maxRetriesPerRequest: null`, reconnects for ever.
 * A database index in REDIS_URL (`redis://host:6379/2`) is honoured by ioredis.
 */
export function createRedis(
  config: Pick<Config, 'redisUrl'> & Partial<Pick<Config, 'redisCommandTimeoutMs'>>,
  kind: 'producer' | 'worker',
  name: string,
): Redis {
  const common: RedisOptions = {
    connectionName: `dtn-${name}`,
    retryStrategy: (times) => Math.min(times * 200, 5_000),
    lazyConnect: false,
  };
  const opts: RedisOptions =
    kind === 'producer'
      ? {
          ...common,
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          commandTimeout: config.redisCommandTimeoutMs ?? 5_000,
        }
      : { ...common, maxRetriesPerRequest: null, enableReadyCheck: true };
  const redis = new Redis(config.redisUrl, opts);
  // Connection errors are reported through readiness and job failures; an unhandled 'error'
  // event would otherwise crash the process.
  redis.on('error', () => {});
  return redis;
}

/** Wait until a fail-fast connection is ready (start-up only). */
export async function waitForRedis(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    redis.on('ready', onReady);
  });
}

export const DEFAULT_JOB_OPTIONS = {
  attempts: 8,
  backoff: { type: 'exponential', delay: 1_000 },
  // Completed jobs are kept for a day so that a re-added job id (a relay retry) is a no-op
  // rather than a second run; failed ones for a week, for inspection.
  removeOnComplete: { age: 24 * 3600 },
  removeOnFail: { age: 7 * 24 * 3600 },
} as const;

export type Queues = Record<QueueName, Queue>;

export function createQueues(connection: Redis, prefix: string): Queues {
  const entries = QUEUE_NAMES.map((name) => {
    const queue = new Queue(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS });
    // The connection's errors are already reported (readiness, the failing calls); without a
    // listener BullMQ prints each one, stack and all, to stderr while Redis is away.
    queue.on('error', () => {});
    return [name, queue] as const;
  });
  return Object.fromEntries(entries) as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}
