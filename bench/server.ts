import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Queue, QueueEvents, Worker } from 'bullmq';
import express from 'express';
import { buildApp } from '../api/app.ts';
import { loadConfig } from '../shared/config.ts';
import { knownMigrations } from '../shared/db/knex.ts';
import { awaitJob } from '../shared/queues/await-job.ts';
import { createRedis } from '../shared/queues/connection.ts';
import { createRuntime } from '../shared/runtime.ts';
import { parseRoles } from '../workers/main.ts';
import { startRoles } from '../workers/runner.ts';

/**
 * A server under benchmark, in its own process so the load generator does not share its CPU:
 * - `bare`: Express answering a small JSON body (the floor of any endpoint);
 * - `baseline`: Express + a BullMQ request and reply to a no-op worker + one INSERT: the
 *   mandatory I/O of a quote with no logic;
 * - `noop-worker`: the no-op worker for `baseline`;
 * - `api`: the real application (buildApp) on the configured environment.
 * Prints `PORT <n>` when listening.
 */
const mode = process.argv[2];
// Exit cleanly on SIGTERM so --cpu-prof can write its profile.
process.on('SIGTERM', () => process.exit(0));
const config = loadConfig();

async function listen(app: express.Express): Promise<void> {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  process.stdout.write(`PORT ${(server.address() as AddressInfo).port}\n`);
}

if (mode === 'bare') {
  const app = express();
  app.use(express.json());
  app.post('/bare', (req, res) => {
    res.json({ ok: true, echo: typeof req.body });
  });
  await listen(app);
} else if (mode === 'baseline') {
  const rt = createRuntime(config, 'bench-baseline');
  await rt.db.raw(
    'create table if not exists bench_rows (id bigserial primary key, body jsonb not null, at timestamptz not null default now())',
  );
  const events = new QueueEvents('bench-noop', {
    connection: createRedis(config, 'worker', 'bench-events'),
    prefix: config.queuePrefix,
  });
  await events.waitUntilReady();
  events.setMaxListeners(0);
  const noop = new Queue('bench-noop', { connection: rt.redis, prefix: config.queuePrefix });
  noop.setMaxListeners(0);
  const app = express();
  app.use(express.json());
  app.post('/baseline', async (req, res) => {
    const job = await noop.add('noop', req.body, { attempts: 1, removeOnComplete: { age: 60 } });
    const result = await awaitJob(noop, events, job, 5000);
    await rt.db('bench_rows').insert({ body: JSON.stringify(result) });
    res.json({ ok: true });
  });
  await listen(app);
} else if (mode === 'insert') {
  // The floor of a booking: Express and one INSERT.
  const rt = createRuntime(config, 'bench-insert');
  await rt.db.raw(
    'create table if not exists bench_rows (id bigserial primary key, body jsonb not null, at timestamptz not null default now())',
  );
  const app = express();
  app.use(express.json());
  app.post('/insert', async (req, res) => {
    await rt.db('bench_rows').insert({ body: JSON.stringify(req.body) });
    res.status(201).json({ ok: true });
  });
  await listen(app);
} else if (mode === 'noop-worker') {
  const worker = new Worker('bench-noop', async (job) => job.data, {
    connection: createRedis(config, 'worker', 'bench-noop'),
    prefix: config.queuePrefix,
    concurrency: 50,
  });
  await worker.waitUntilReady();
  process.stdout.write('PORT 0\n');
} else if (mode === 'workers') {
  // Worker roles in this process (as `npm run worker -- <roles>`), for end-to-end benchmarks.
  const rt = createRuntime(config, 'bench-workers');
  startRoles(parseRoles(process.argv[3] ?? 'all'), rt);
  process.stdout.write('PORT 0\n');
} else if (mode === 'api') {
  const rt = createRuntime(config, 'bench-api');
  await listen(buildApp({ ...rt, expectedMigrations: await knownMigrations() }));
} else {
  process.stderr.write('usage: tsx bench/server.ts bare|insert|baseline|noop-worker|api\n');
  process.exit(2);
}
