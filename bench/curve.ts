import type { ChildProcess } from 'node:child_process';
import { Queue, Worker } from 'bullmq';
import { createRedis } from '../shared/queues/connection.ts';
import { config, type HttpResult, id, load, start, stop, systemProcesses, watchProcesses } from './harness.ts';

/** Concurrent clients at each step of the latency curve. */
export const CURVE_STEPS = (process.env.BENCH_CURVE_STEPS ?? '10,50,100,250,500,1000').split(',').map(Number);
const CURVE_SECONDS = Number(process.env.BENCH_CURVE_SECONDS ?? 5);

export interface CurvePoint {
  clients: number;
  quote: HttpResult;
  bare: HttpResult;
}

/**
 * How latency grows with concurrent clients: the quote endpoint (the API and the pricing worker
 * running, as `procs`) and bare Express beside it, at each step of CURVE_STEPS clients, with the
 * CPU and memory of the API, the pricing worker, Postgres and Redis during the quote runs.
 */
export async function latencyCurve(
  quoteUrl: string,
  body: unknown,
  procs: Record<string, ChildProcess | undefined>,
): Promise<CurvePoint[]> {
  const bare = await start(['bench/server.ts', 'bare']);
  try {
    const points: CurvePoint[] = [];
    for (const clients of CURVE_STEPS) {
      const { result: quote, processes } = await watchProcesses({ ...procs, ...systemProcesses() }, () =>
        load(`quote, ${clients} clients`, quoteUrl, body, clients, CURVE_SECONDS),
      );
      const bareR = await load(
        `bare express, ${clients} clients`,
        `http://127.0.0.1:${bare.port}/bare`,
        { a: 1 },
        clients,
        CURVE_SECONDS,
      );
      points.push({ clients, quote: { ...quote, processes }, bare: bareR });
    }
    return points;
  } finally {
    await stop(bare.child);
  }
}

export interface QueueBaseline {
  jobs: number;
  seconds: number;
  jobsPerSecond: number;
}

/**
 * Raw BullMQ: no-op jobs added in bulk (chunks of 500) and taken by one worker (concurrency
 * 100), both in this process: the most jobs a second the queue itself moves on this machine,
 * the ceiling of any stage that goes through it.
 */
export async function rawQueueBaseline(
  jobs = Math.max(1, Number(process.env.BENCH_QUEUE_JOBS ?? 20_000)),
): Promise<QueueBaseline> {
  const prefix = `bench-queue-${id}`;
  const producer = createRedis(config, 'producer', 'bench-raw');
  const consumer = createRedis(config, 'worker', 'bench-raw-worker');
  const queue = new Queue('bench-raw', { connection: producer, prefix });
  let done = 0;
  let finished: () => void = () => {};
  const allDone = new Promise<void>((r) => {
    finished = r;
  });
  const worker = new Worker('bench-raw', async () => null, {
    connection: consumer,
    prefix,
    concurrency: 100,
  });
  // Every job settles once, completed or failed (a no-op should not fail, but a hang would hide it).
  let failed = 0;
  const settle = () => {
    done += 1;
    if (done === jobs) finished();
  };
  worker.on('completed', settle);
  worker.on('failed', () => {
    failed += 1;
    settle();
  });
  await worker.waitUntilReady();
  const t0 = performance.now();
  try {
    for (let i = 0; i < jobs; i += 500) {
      await queue.addBulk(
        Array.from({ length: Math.min(500, jobs - i) }, (_, k) => ({
          name: 'noop',
          data: { n: i + k },
          opts: { removeOnComplete: true, removeOnFail: true },
        })),
      );
    }
    let timeout: NodeJS.Timeout | undefined;
    await Promise.race([
      allDone,
      new Promise((_, reject) => {
        timeout = setTimeout(() => reject(new Error(`raw BullMQ: ${done} of ${jobs} jobs settled in 120 s`)), 120_000);
      }),
    ]).finally(() => clearTimeout(timeout));
    if (failed > 0) throw new Error(`raw BullMQ: ${failed} no-op jobs failed`);
    const seconds = (performance.now() - t0) / 1000;
    return { jobs, seconds: Math.round(seconds * 100) / 100, jobsPerSecond: Math.round(jobs / seconds) };
  } finally {
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    // Connections passed in are the caller's to close.
    await Promise.all([producer.quit(), consumer.quit()]);
  }
}
