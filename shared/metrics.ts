import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Db } from './db/knex.ts';
import type { Queues } from './queues/connection.ts';
import { QUEUE_NAMES } from './queues/registry.ts';

/**
 * The Prometheus metrics of one process (`GET /metrics`, prom-client), in a registry of its
 * own so several runtimes in one process (the tests) do not collide.
 *
 * Measured where they happen, in this process: HTTP request durations by route template and
 * status (the API), job durations and failures per queue and job name (the worker roles this
 * process runs; `npm start` runs them all in one process, and a worker process started alone
 * serves its own on `METRICS_PORT`). Read at scrape time from the shared stores, so any API
 * process shows the whole system: queue depth per queue and state (BullMQ's counts in Redis),
 * and dispatch offers per tier and outcome and webhook deliveries per status over the last
 * 24 hours (Postgres, the source of truth), cached for `DB_SNAPSHOT_MS`.
 */
export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  jobDuration: Histogram<'queue' | 'job' | 'outcome'>;
  jobFailures: Counter<'queue' | 'job' | 'final'>;
  /** Add the scrape-time series read from Redis and Postgres (the API does; workers need not). */
  observeStores(deps: { db: Db; queues: Queues }): void;
}

/** How long a scrape's Postgres snapshot is reused (scrapes are usually 15 to 60 s apart). */
const DB_SNAPSHOT_MS = 10_000;

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

export function createMetrics(): Metrics {
  const registry = new Registry();
  const httpDuration = new Histogram({
    name: 'dtn_http_request_duration_seconds',
    help: 'HTTP requests by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const jobDuration = new Histogram({
    name: 'dtn_job_duration_seconds',
    help: 'BullMQ jobs processed in this process, by queue, job name and outcome',
    labelNames: ['queue', 'job', 'outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const jobFailures = new Counter({
    name: 'dtn_job_failures_total',
    help: 'Failed job attempts, by queue and job name; final="true" when no retry is left',
    labelNames: ['queue', 'job', 'final'] as const,
    registers: [registry],
  });
  let observing = false;
  return {
    registry,
    httpDuration,
    jobDuration,
    jobFailures,
    observeStores({ db, queues }) {
      if (observing) return;
      observing = true;
      new Gauge({
        name: 'dtn_queue_jobs',
        help: 'Jobs in each BullMQ queue by state',
        labelNames: ['queue', 'state'] as const,
        registers: [registry],
        async collect() {
          const counts = await Promise.all(QUEUE_NAMES.map((q) => queues[q].getJobCounts(...QUEUE_STATES)));
          QUEUE_NAMES.forEach((q, i) => {
            for (const state of QUEUE_STATES) this.set({ queue: q, state }, counts[i]?.[state] ?? 0);
          });
        },
      });
      const snapshot = dbSnapshot(db);
      new Gauge({
        name: 'dtn_dispatch_offers_24h',
        help: 'Dispatch offers made in the last 24 hours, by tier and outcome (offered, accepted, declined, expired, withdrawn)',
        labelNames: ['tier', 'outcome'] as const,
        registers: [registry],
        async collect() {
          this.reset();
          for (const r of (await snapshot()).offers) this.set({ tier: String(r.tier), outcome: r.state }, r.n);
        },
      });
      new Gauge({
        name: 'dtn_webhook_deliveries_24h',
        help: 'Status webhook deliveries created in the last 24 hours, by status (pending, delivered, dead)',
        labelNames: ['status'] as const,
        registers: [registry],
        async collect() {
          this.reset();
          for (const r of (await snapshot()).webhooks) this.set({ status: r.status }, r.n);
        },
      });
    },
  };
}

interface Snapshot {
  offers: { tier: number; state: string; n: number }[];
  webhooks: { status: string; n: number }[];
}

/** The Postgres series of one scrape, read at most every DB_SNAPSHOT_MS. */
function dbSnapshot(db: Db): () => Promise<Snapshot> {
  let at = 0;
  let value: Promise<Snapshot> | null = null;
  return () => {
    if (!value || Date.now() - at > DB_SNAPSHOT_MS) {
      at = Date.now();
      value = Promise.all([
        db('dispatch_offers')
          .where('offered_at', '>', db.raw(`now() - interval '24 hours'`))
          .groupBy('tier', 'state')
          .select<{ tier: number; state: string; n: number }[]>('tier', 'state', db.raw('count(*)::int as n')),
        db('webhook_deliveries')
          .where('created_at', '>', db.raw(`now() - interval '24 hours'`))
          .groupBy('state')
          .select<{ status: string; n: number }[]>('state as status', db.raw('count(*)::int as n')),
      ]).then(([offers, webhooks]) => ({ offers, webhooks }));
      // A failed read is not kept: the next scrape tries again.
      value.catch(() => {
        value = null;
      });
    }
    return value;
  };
}
