import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type autocannon from 'autocannon';
import { createDb } from '../shared/db/knex.ts';
import { priceJourney } from '../shared/domain/tariffs/engine.ts';
import { VEHICLE_TYPES } from '../shared/domain/tariffs/types.ts';
import { defaultGazetteer } from '../shared/geo/gazetteer.ts';
import { createRouteEstimator } from '../shared/geo/route-estimate.ts';
import type { Place } from '../shared/geo/types.ts';
import { applyDriver, approveDriver } from '../shared/services/drivers.ts';
import { createPartner } from '../shared/services/partners.ts';
import { createTariffStore, syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { deleteKeys } from '../test/helpers/env.ts';
import { startTwilioStub } from '../test/helpers/twilio-stub.ts';
import { type BillingBenchResult, benchBilling } from './billing.ts';
import { type CurvePoint, latencyCurve, type QueueBaseline, rawQueueBaseline } from './curve.ts';
import {
  baseEnv,
  CONNECTIONS,
  children,
  config,
  DURATION,
  type HttpResult,
  id,
  load,
  NODE_TS,
  type ProcessStats,
  processLine,
  ROOT,
  ratio,
  start,
  steady,
  stop,
  systemProcesses,
  type Watch,
  watchProcesses,
} from './harness.ts';
import { benchMatching } from './matching.ts';
import { benchMix, type MixResult } from './mix.ts';

/**
 * `npm run bench`: every benchmark next to the baseline it is judged against, measured in the
 * same run on this machine. Writes bench/results.json and bench/results.md.
 * Each server runs in its own process; the load generator (autocannon) runs here.
 */
let sequence = 0;

/** Each request a different booking (name and e-mail), so none is a repeat of another. */
async function loadBookings(
  name: string,
  url: string,
  body: (n: number) => Record<string, unknown>,
  connections = CONNECTIONS,
  seconds = DURATION,
  watch?: Watch,
): Promise<HttpResult> {
  const requests = [
    {
      method: 'POST' as const,
      headers: { 'content-type': 'application/json' },
      setupRequest: (req: autocannon.Request) => {
        sequence += 1;
        return { ...req, body: JSON.stringify(body(sequence)) };
      },
    },
  ];
  return steady(name, { url, connections, requests }, seconds, watch);
}

/** Copies of one priced quote, each redeemable once, for the redemption benchmarks. */
async function cloneQuotes(db: ReturnType<typeof createDb>, quoteId: string, n: number): Promise<string[]> {
  const { rows } = await db.raw<{ rows: { id: string }[] }>(
    `insert into quotes (id, created_at, expires_at, api_key_id, partner_id, pickup, dropoff, depart_at, vehicle_type,
       passengers, meet_and_greet, worldwide, distance_miles, duration_minutes, fare_pence, applied_rules, tariff_source,
       warnings, base_url, test_mode, tariff_table_id, rate_card_id, request)
     select gen_random_uuid(), created_at, expires_at, api_key_id, partner_id, pickup, dropoff, depart_at, vehicle_type,
       passengers, meet_and_greet, worldwide, distance_miles, duration_minutes, fare_pence, applied_rules, tariff_source,
       warnings, base_url, test_mode, tariff_table_id, rate_card_id, request
     from quotes, generate_series(1, ?) where id = ? returning id`,
    [n, quoteId],
  );
  // Vacuumed and analysed now, untimed: otherwise autovacuum takes up this bulk insert during
  // the measured runs, a cost the baseline does not pay and a live system does not see at once.
  await db.raw('vacuum (analyze) quotes');
  // And its WAL checkpointed now: otherwise the checkpoint it sets off is written out during
  // the booking runs (their p99 jumped to 424-545 ms in half the runs before this, none since).
  await checkpoint(db);
  return rows.map((r) => r.id);
}

/**
 * The WAL written so far checkpointed, untimed, before a measured run: otherwise the checkpoint
 * the previous run's writes set off lands in the next run, whichever it is. CHECKPOINT needs a
 * superuser or pg_checkpoint; without one the runs go on as before.
 */
async function checkpoint(db: ReturnType<typeof createDb>): Promise<void> {
  await db.raw('checkpoint').catch((err: Error) => {
    process.stderr.write(`bench: no checkpoint (${err.message})\n`);
  });
}

/**
 * Booking commit to the job card's request at Twilio: the API, the pricing, dispatch, notify
 * and relay roles, a local Twilio stand-in and approved drivers online near the pickup; each
 * booking redeems a quote with pickup in 10 minutes (dispatched at once). Measured from the
 * API's answer (the booking committed) to the SMS request arriving at the stand-in.
 */
async function benchJobCard(db: ReturnType<typeof createDb>, quoteBody: Record<string, unknown>) {
  const samples = 30;
  // The throughput runs above left thousands of unrelayed jobs (their bookings' dispatch and
  // e-mails); they are not part of this measurement, so they are set aside first.
  await db('outbox').whereNull('relayed_at').update({ relayed_at: db.fn.now() });
  const twilio = await startTwilioStub();
  const arrived = new Map<string, number>();
  const seen = twilio.requests;
  const twilioEnv = { TWILIO_API_BASE_URL: twilio.url, OUTBOX_POLL_MS: '1000' };
  const workers = await start(['bench/server.ts', 'workers', 'pricing,dispatch,notify,outbox-relay'], twilioEnv);
  const api = await start(['bench/server.ts', 'api'], twilioEnv);
  const base = `http://127.0.0.1:${api.port}`;
  try {
    const tokens: string[] = [];
    for (let i = 0; i < samples + 5; i++) {
      const { driverId } = await applyDriver(
        db,
        {
          name: `Bench Driver ${i}`,
          phone: `+4477009${String(20000 + i)}`,
          email: `bench-driver-${i}@example.org`,
          licensingAuthority: 'Manchester City Council',
          licenceNumber: `BENCH-${id}-${i}`,
          licenceExpiry: '2030-01-01',
          vehicle: {
            make: 'Skoda',
            model: 'Octavia',
            colour: 'Black',
            registration: `BE${i} NCH`,
            class: 'saloon',
            seats: 4,
            wheelchairAccessible: false,
          },
          homeCity: 'Manchester',
          operatingRadiusMiles: 20,
        },
        { actor: 'bench' },
      );
      const approved = await approveDriver(db, driverId, 'bench');
      if (approved) tokens.push(approved.token);
    }
    for (const [i, token] of tokens.entries()) {
      await fetch(`${base}/api/public/v1/driver/presence`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ available: true, lat: 53.4774 + i * 0.001, lng: -2.2309 }),
      });
    }
    const latencies: number[] = [];
    for (let i = 0; i < samples; i++) {
      const q = (await (
        await fetch(`${base}/api/public/v1/quote`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ...quoteBody, departAt: new Date(Date.now() + 10 * 60_000).toISOString() }),
        })
      ).json()) as { quoteId: string };
      const before = seen.length;
      const res = await fetch(`${base}/api/public/bookings/create`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          quote_id: q.quoteId,
          passenger_name: `Card Bench ${i}`,
          passenger_phone: '+447700900123',
          payment_method: 'cash',
        }),
      });
      const committed = performance.now();
      const { booking_reference: ref } = (await res.json()) as { booking_reference: string };
      const deadline = Date.now() + 10_000;
      while (!seen.slice(before).some((r) => r.form.Body?.includes(ref)) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 2));
      }
      const hit = seen.slice(before).findIndex((r) => r.form.Body?.includes(ref));
      if (hit >= 0) {
        arrived.set(ref, performance.now());
        latencies.push(performance.now() - committed);
      }
    }
    const inOrder = latencies.map((l) => Math.round(l));
    latencies.sort((a, b) => a - b);
    const at = (q: number) =>
      Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN);
    return {
      samples: latencies.length,
      attempted: samples,
      p50ms: at(0.5),
      p95ms: at(0.95),
      maxMs: at(1),
      targetP95ms: 250,
      inOrder,
    };
  } finally {
    await stop(api.child);
    await stop(workers.child);
    await twilio.close();
  }
}

/**
 * Partner intake: batches of 100 new jobs (each priced by the pricing worker, written with its
 * partner_jobs guard, dispatch job queued), from 4 concurrent senders for a few seconds.
 * Reports the batch latency and the jobs per second sustained.
 */
async function benchIntake(db: ReturnType<typeof createDb>, base: string) {
  const partner = await createPartner(db, config, { name: 'Bench Fleet', dailyLimit: 100_000_000, actor: 'bench' });
  const pickupTime = new Date(Date.now() + 48 * 3600_000).toISOString();
  let n = 0;
  // Journeys of every kind of address the geocoder takes, so a batch is not one route repeated.
  const journeys = [
    ['Manchester Piccadilly', 'Manchester Airport'],
    ['Leeds station', 'LBA'],
    ['Heathrow T5', 'SW1A 2AA'],
    ['Birmingham New Street', 'BHX'],
    ['Liverpool Lime Street', 'L1 8JQ'],
    ['Bristol Temple Meads', 'Bath'],
    ['EH1 1YZ', 'Edinburgh Airport'],
    ['Glasgow Central', 'G2 3AA'],
    ['York', 'Harrogate'],
    ['Oxford', 'Heathrow Airport'],
    ['Cambridge', 'Stansted'],
    ['10 Downing Street, London SW1A 2AA', 'Gatwick'],
  ] as const;
  const batch = () =>
    Array.from({ length: 100 }, () => {
      n += 1;
      const [pickup, dropoff] = journeys[n % journeys.length] as readonly [string, string];
      return {
        jobRef: `BENCH-${n}`,
        pickup,
        dropoff,
        pickupTime,
        passengerName: `Bench ${n}`,
        passengerPhone: `+4477009${String(n % 100_000).padStart(5, '0')}`,
        passengers: 1 + (n % 4),
      };
    });
  const latencies: number[] = [];
  let jobs = 0;
  let failed = 0;
  // Four senders back to back for `seconds`; `record` false for the warm-up (JIT, pools,
  // prepared statements), as the HTTP runs warm up for 2 s before they measure.
  const send = async (seconds: number, record: boolean) => {
    const until = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (performance.now() < until) {
          const t0 = performance.now();
          const res = await fetch(`${base}/api/public/v1/jobs`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${partner.apiKey}` },
            body: JSON.stringify(batch()),
          });
          const body = (await res.json()) as { summary?: { succeeded: number; failed: number } };
          if (!record) continue;
          latencies.push(performance.now() - t0);
          jobs += body.summary?.succeeded ?? 0;
          failed += body.summary?.failed ?? 100;
        }
      }),
    );
  };
  await send(2, false);
  const started = performance.now();
  await send(DURATION, true);
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN);
  return {
    batches: latencies.length,
    jobsPerSecond: Math.round(jobs / seconds),
    failedJobs: failed,
    p50ms: at(0.5),
    p99ms: at(0.99),
    targets: { p99ms: 300, jobsPerSecond: 3000 },
  };
}

/**
 * The booking endpoints under load: v1 booking priced in the request, and the two redemptions
 * of a priced quote (the ones comparable to Express + one INSERT), each request a different booking.
 */
/**
 * The three booking endpoints, each run between two runs of Express + one INSERT (the first
 * before the priced booking, then one after each endpoint): the machine's speed drifts over a
 * run (here by up to 2× within minutes, on a shared 2-core machine), so each endpoint is set
 * against the INSERT runs either side of it, not against one run minutes away.
 */
async function bookingEndpoints(
  db: ReturnType<typeof createDb>,
  apiPort: number,
  watch: Watch,
  insertRun: () => Promise<HttpResult>,
) {
  const departAt = new Date(Date.now() + 48 * 3600_000).toISOString();
  // Every run, INSERT or booking, starts from a checkpoint: each run writes, and the checkpoint
  // its writes set off would otherwise fall in the run after it.
  const insertAfterCheckpoint = async () => {
    await checkpoint(db);
    return insertRun();
  };
  const inserts = [await insertAfterCheckpoint()];
  await checkpoint(db);
  const bookingR = await loadBookings(
    'POST /api/public/v1/booking (priced by the worker, stored, outbox, e-mail)',
    `http://127.0.0.1:${apiPort}/api/public/v1/booking`,
    (n) => ({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      departAt,
      passengerName: `Bench Passenger ${n}`,
      passengerEmail: `bench-${n}@example.org`,
      passengerPhone: '+447700900123',
    }),
    CONNECTIONS,
    DURATION,
    watch,
  );
  // Redeeming a quote prices nothing: the booking endpoints comparable to Express + one INSERT.
  const seedQuote = (await (
    await fetch(`http://127.0.0.1:${apiPort}/api/public/v1/quote`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...QUOTE_BODY, departAt }),
    })
  ).json()) as { quoteId: string };
  const quoteIds = await cloneQuotes(db, seedQuote.quoteId, 120_000);
  inserts.push(await insertAfterCheckpoint());
  await checkpoint(db);
  const redeemR = await loadBookings(
    'POST /api/public/bookings/create (redeem a quote)',
    `http://127.0.0.1:${apiPort}/api/public/bookings/create`,
    (n) => ({
      quote_id: quoteIds[n % quoteIds.length],
      passenger_name: `Bench Passenger ${n}`,
      passenger_phone: '+447700900123',
      payment_method: 'cash',
    }),
    CONNECTIONS,
    DURATION,
    watch,
  );
  inserts.push(await insertAfterCheckpoint());
  await checkpoint(db);
  const redeemV1R = await loadBookings(
    'POST /api/public/v1/booking with quote_id (redeem, confirmation e-mail)',
    `http://127.0.0.1:${apiPort}/api/public/v1/booking`,
    (n) => ({
      quote_id: quoteIds[(n + 60_000) % quoteIds.length],
      passenger_name: `Bench Passenger ${n}`,
      passenger_email: `bench-${n}@example.org`,
      passenger_phone: '+447700900123',
      payment_method: 'cash',
    }),
    CONNECTIONS,
    DURATION,
    watch,
  );
  inserts.push(await insertAfterCheckpoint());
  const [b0, b1, b2, b3] = inserts as [HttpResult, HttpResult, HttpResult, HttpResult];
  return {
    bookingR,
    redeemR,
    redeemV1R,
    insertR: meanRun(
      `baseline: express + 1 INSERT (mean of ${inserts.length} runs, one before and one after each booking run)`,
      inserts,
    ),
    around: { booking: meanRun('', [b0, b1]), redeem: meanRun('', [b1, b2]), redeemV1: meanRun('', [b2, b3]) },
    insertRuns: inserts.map((r) => r.requestsPerSecond),
  };
}

/** Each booking endpoint against the mean of the INSERT runs either side of it. */
function bookingRatios(b: Awaited<ReturnType<typeof bookingEndpoints>>) {
  return {
    redeemVsInsert: ratio(b.redeemR, b.around.redeem),
    redeemV1VsInsert: ratio(b.redeemV1R, b.around.redeemV1),
    bookingVsInsert: ratio(b.bookingR, b.around.booking),
  };
}

/** Several runs of one server as one row: means of requests a second, p50, p99 and CPU per request. */
function meanRun(name: string, runs: readonly HttpResult[]): HttpResult {
  const mean = (f: (r: HttpResult) => number) => runs.reduce((a, r) => a + f(r), 0) / runs.length;
  const cpuKeys = [...new Set(runs.flatMap((r) => Object.keys(r.cpuMsPerRequest ?? {})))];
  return {
    name,
    requestsPerSecond: Math.round(mean((r) => r.requestsPerSecond)),
    p50ms: Math.round(mean((r) => r.p50ms)),
    p99ms: Math.round(mean((r) => r.p99ms)),
    non2xx: runs.reduce((a, r) => a + r.non2xx, 0),
    errors: runs.reduce((a, r) => a + r.errors, 0),
    ...(cpuKeys.length > 0
      ? {
          cpuMsPerRequest: Object.fromEntries(
            cpuKeys.map((k) => [k, Math.round(mean((r) => r.cpuMsPerRequest?.[k] ?? 0) * 1000) / 1000]),
          ),
        }
      : {}),
  };
}

/**
 * The booking endpoints' baseline, Express + one INSERT, in its own process: `run()` measures
 * it (with its CPU per request) as often as asked; `close()` stops it.
 */
async function insertBaseline(): Promise<{ run: () => Promise<HttpResult>; close: () => Promise<void> }> {
  const insert = await start(['bench/server.ts', 'insert']);
  return {
    run: () =>
      load('baseline: express + 1 INSERT', `http://127.0.0.1:${insert.port}/insert`, { a: 1 }, CONNECTIONS, DURATION, {
        api: insert.child,
        ...systemProcesses(),
      }),
    close: () => stop(insert.child),
  };
}

/** The intake benchmark with the CPU and memory of the API, the pricing worker, Postgres and Redis. */
async function intakeWatched(
  db: ReturnType<typeof createDb>,
  apiSrv: { port: number; child: ChildProcess },
  pricing: ChildProcess,
) {
  const { result, processes } = await watchProcesses(
    { api: apiSrv.child, pricing, ...systemProcesses() },
    () => benchIntake(db, `http://127.0.0.1:${apiSrv.port}`),
    { self: true },
  );
  return { ...result, processes };
}

/** Drop the benchmark's schema and queue keys. */
async function cleanUp(db: ReturnType<typeof createDb>): Promise<void> {
  await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
  await db.destroy();
  await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
}

const QUOTE_BODY = { pickup: 'Manchester Piccadilly', dropoff: 'Manchester Airport', passengers: 2 };

/** The pricing worker and the API, each in its own process; `profDir` CPU-profiles the API. */
async function startApi(profDir?: string) {
  // The pricing worker prints no PORT line: give it a moment to connect and load its data.
  const pricing = spawn(process.execPath, [...NODE_TS, 'workers/main.ts', 'pricing'], {
    cwd: ROOT,
    env: baseEnv,
    stdio: 'ignore',
  });
  children.push(pricing);
  await new Promise((r) => setTimeout(r, 3000));
  const apiSrv = await start(
    profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, 'bench/server.ts', 'api'] : ['bench/server.ts', 'api'],
  );
  return { apiSrv, pricing };
}

/**
 * The quote endpoint next to its mandatory-I/O baseline (Express + a BullMQ request and reply
 * to a no-op worker + one INSERT), the same in the full run and in BENCH_ONLY=quote. Leaves the
 * pricing worker and the API running for what follows; `profDir` CPU-profiles the API.
 */
async function quoteAgainstBaseline(profDir?: string) {
  const noop = await start(['bench/server.ts', 'noop-worker']);
  const baseline = await start(['bench/server.ts', 'baseline']);
  const baseR = await load(
    'baseline: express + bullmq request/reply (no-op) + 1 INSERT',
    `http://127.0.0.1:${baseline.port}/baseline`,
    { pickup: 'x', dropoff: 'y' },
  );
  await stop(baseline.child);
  await stop(noop.child);
  const { apiSrv, pricing } = await startApi(profDir);
  const quoteR = await load(
    'POST /api/public/v1/quote',
    `http://127.0.0.1:${apiSrv.port}/api/public/v1/quote`,
    QUOTE_BODY,
  );
  return { baseR, quoteR, apiSrv, pricing };
}

async function main(): Promise<void> {
  const db = createDb(config);
  await db.raw('create schema if not exists ??', [config.databaseSchema]);
  await db.migrate.latest();
  await syncBuiltInTariffs(db);
  const results: Record<string, unknown> = {
    machine: {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
    },
    settings: { seconds: DURATION, connections: CONNECTIONS },
    at: new Date().toISOString(),
  };

  if (process.env.BENCH_ONLY === 'intake') {
    // BENCH_CPU_PROF=dir profiles the API, as for BENCH_ONLY=quote.
    const { apiSrv, pricing } = await startApi(process.env.BENCH_CPU_PROF);
    process.stdout.write(`${JSON.stringify(await intakeWatched(db, apiSrv, pricing))}\n`);
    await stop(apiSrv.child);
    await stop(pricing);
    await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
    await db.destroy();
    await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
    return;
  }
  if (process.env.BENCH_ONLY === 'quote') {
    // The quote endpoint next to its mandatory-I/O baseline, measured exactly as in the full
    // run (nothing is written to the results files). BENCH_CPU_PROF=dir profiles the API.
    const { baseR, quoteR, apiSrv, pricing } = await quoteAgainstBaseline(process.env.BENCH_CPU_PROF);
    await stop(apiSrv.child);
    await stop(pricing);
    process.stdout.write(`${JSON.stringify({ http: [baseR, quoteR], quoteVsBaseline: ratio(quoteR, baseR) })}\n`);
    await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
    await db.destroy();
    await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
    return;
  }
  if (process.env.BENCH_ONLY === 'bookings') {
    // The booking endpoints next to Express + one INSERT, as in the full run (results files untouched).
    // BENCH_CPU_PROF=dir profiles the API, as for BENCH_ONLY=quote.
    const { apiSrv, pricing } = await startApi(process.env.BENCH_CPU_PROF);
    const insert = await insertBaseline();
    const b = await bookingEndpoints(db, apiSrv.port, { api: apiSrv.child, pricing, ...systemProcesses() }, insert.run);
    await insert.close();
    await stop(apiSrv.child);
    await stop(pricing);
    const http = [b.insertR, b.redeemR, b.redeemV1R, b.bookingR];
    process.stdout.write(`${JSON.stringify({ http, ratios: bookingRatios(b), insertRuns: b.insertRuns })}\n`);
    await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
    await db.destroy();
    await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
    return;
  }
  if (process.env.BENCH_ONLY === 'report') {
    // bench/results.md again from the last full run's bench/results.json (nothing is measured).
    writeReport(
      JSON.parse(fs.readFileSync(path.join(ROOT, 'bench', 'results.json'), 'utf8')) as Record<string, unknown>,
    );
    await cleanUp(db);
    return;
  }
  if (process.env.BENCH_ONLY === 'mix') {
    // The end-to-end mix alone (nothing is written to the results files).
    process.stdout.write(`${JSON.stringify(await benchMix(db), null, 2)}\n`);
    await cleanUp(db);
    return;
  }
  if (process.env.BENCH_ONLY === 'curve') {
    // Latency from 10 to 1,000 clients, quote endpoint and bare Express (results files untouched).
    const { apiSrv, pricing } = await startApi();
    const curve = await latencyCurve(`http://127.0.0.1:${apiSrv.port}/api/public/v1/quote`, QUOTE_BODY, {
      api: apiSrv.child,
      pricing,
    });
    await stop(apiSrv.child);
    await stop(pricing);
    process.stdout.write(`${JSON.stringify({ curve, queue: await rawQueueBaseline() }, null, 2)}\n`);
    await cleanUp(db);
    return;
  }
  if (process.env.BENCH_ONLY === 'billing') {
    // The weekly invoice run over 100,000 drivers (its own schema; nothing written to the results files).
    process.stdout.write(`${JSON.stringify(await benchBilling({ databaseUrl: config.databaseUrl }))}\n`);
    await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
    await db.destroy();
    return;
  }
  if (process.env.BENCH_ONLY === 'jobcard') {
    // A quick look at one part while working on it (nothing is written to the results files).
    process.stdout.write(
      `${JSON.stringify(await benchJobCard(db, { pickup: 'Manchester Piccadilly', dropoff: 'Manchester Airport', passengers: 2 }))}\n`,
    );
    await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
    await db.destroy();
    await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
    return;
  }

  // 1. The pure engine, in this process, one core.
  const gazetteer = defaultGazetteer();
  const router = createRouteEstimator();
  const store = createTariffStore(db);
  const places = [
    'Manchester Piccadilly',
    'Manchester Airport',
    'Sheffield',
    'Glasgow Central',
    'Cardiff Central',
    'Newport, Wales',
    'Bracknell',
    'Oban',
    'SW1A 2AA',
    'Leeds',
  ];
  const resolved: Place[] = [];
  for (const p of places) {
    const g = await gazetteer.geocode(p);
    if (g.ok) resolved.push(g.place);
  }
  const departures = Array.from(
    { length: 64 },
    (_, i) => new Date(Date.UTC(2026, 11, 1 + (i % 28), i % 24, (i * 7) % 60)),
  );
  const tables = (await store.tablesAt(new Date())).map((s) => s.table);
  const routes = await Promise.all(resolved.map((a, i) => router.route(a, resolved[(i + 3) % resolved.length] ?? a)));
  const n = 200_000;
  let sink = 0;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const a = resolved[i % resolved.length];
    const b = resolved[(i + 3) % resolved.length];
    const r = routes[i % routes.length];
    if (!a || !b || !r) continue;
    const fare = priceJourney({
      tables,
      pickup: a,
      dropoff: b,
      departAt: departures[i % departures.length] as Date,
      distanceMeters: r.distanceMeters + (i % 5000),
      durationSeconds: r.durationSeconds,
      slowSeconds: r.slowSeconds,
      passengers: 1 + (i % 4),
      vehicleType: VEHICLE_TYPES[i % 4] ?? 'saloon',
      meetAndGreet: i % 7 === 0,
      classMultipliers: config.pricing.classMultipliers,
    });
    sink += fare.farePence;
  }
  const engineSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  results.engine = {
    iterations: n,
    quotesPerSecond: Math.round(n / engineSeconds),
    target: 50_000,
    checksum: sink % 1000,
  };

  // 1b. Geocoder lookups.
  const g0 = process.hrtime.bigint();
  const gn = 100_000;
  for (let i = 0; i < gn; i++) await gazetteer.geocode(places[i % places.length] as string);
  results.geocoder = { lookups: gn, microsecondsPerLookup: Number(process.hrtime.bigint() - g0) / 1e3 / gn };

  // 2. HTTP: bare Express, the mandatory-I/O baseline, the quote endpoint.
  const http: HttpResult[] = [];
  const bare = await start(['bench/server.ts', 'bare']);
  http.push(await load('bare express', `http://127.0.0.1:${bare.port}/bare`, { a: 1 }));
  await stop(bare.child);

  const { baseR: baselineR, quoteR: quoteHttp, apiSrv, pricing } = await quoteAgainstBaseline();
  http.push(baselineR, quoteHttp);
  // How latency grows from 10 to 1,000 clients (quote endpoint and bare Express).
  results.curve = await latencyCurve(`http://127.0.0.1:${apiSrv.port}/api/public/v1/quote`, QUOTE_BODY, {
    api: apiSrv.child,
    pricing,
  });
  const insert = await insertBaseline();
  const bookings = await bookingEndpoints(
    db,
    apiSrv.port,
    { api: apiSrv.child, pricing, ...systemProcesses() },
    insert.run,
  );
  await insert.close();
  results.intake = await intakeWatched(db, apiSrv, pricing);
  await stop(apiSrv.child);
  http.push(bookings.insertR, bookings.redeemR, bookings.redeemV1R, bookings.bookingR);
  results.insertRuns = bookings.insertRuns;
  await stop(pricing);

  // 3. Dispatch: presence search over 100,000 drivers, and booking commit → job card at Twilio.
  results.matching = await benchMatching({ redisUrl: config.redisUrl, prefix: `bench-matching-${id}` });
  results.queue = await rawQueueBaseline();
  results.jobCard = await benchJobCard(db, QUOTE_BODY);
  // 3b. Everything at once: quotes, bookings and batches dispatched to simulated drivers.
  results.mix = await benchMix(db);
  // 4. Billing: the weekly invoice run over 100,000 drivers × 20 rides, next to a bare aggregate.
  results.billing = await benchBilling({ databaseUrl: config.databaseUrl });

  const [bareR, baseR, quoteR] = http;
  results.http = http;
  results.ratios = {
    quoteVsBaseline:
      baseR && quoteR ? Math.round((quoteR.requestsPerSecond / baseR.requestsPerSecond) * 100) / 100 : null,
    quoteVsBare: bareR && quoteR ? Math.round((quoteR.requestsPerSecond / bareR.requestsPerSecond) * 100) / 100 : null,
    ...bookingRatios(bookings),
    bookingVsBaseline: baseR ? ratio(bookings.bookingR, baseR) : null,
    targets: { quoteVsBaseline: 0.7, quoteP99ms: 50, bookingVsInsert: 0.5, bookingP99ms: 100 },
  };

  fs.writeFileSync(path.join(ROOT, 'bench', 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
  writeReport(results);

  await db.raw('drop schema if exists ?? cascade', [config.databaseSchema]);
  await db.destroy();
  await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
}

/**
 * CPU per request (ms of one core) of each watched process in the booking runs and their
 * baseline: what a request costs the machine, steadier than requests a second when the
 * machine's speed changes from one run to the next.
 */
function cpuPerRequestLines(http: readonly HttpResult[]): string[] {
  const watched = http.filter((h) => h.cpuMsPerRequest);
  if (watched.length === 0) return [];
  return [
    '',
    'CPU per request, ms of one core (the same runs; "api" is the server under test):',
    ...watched.map((h) => {
      const parts = Object.entries(h.cpuMsPerRequest ?? {}).filter(([, ms]) => ms > 0);
      const sum = parts.reduce((a, [, ms]) => a + ms, 0);
      return `- ${h.name}: ${parts.map(([n, ms]) => `${n} ${ms}`).join(', ')}; **${Math.round(sum * 100) / 100} in all**`;
    }),
  ];
}

/** bench/results.md from a full run's results (`BENCH_ONLY=report` renders it again from bench/results.json). */
function writeReport(results: Record<string, unknown>): void {
  const http = results.http as HttpResult[];
  const machine = results.machine as { cpus: number; node: string };
  const settings = results.settings as { seconds: number; connections: number };
  const ratios = results.ratios as Record<string, number | null>;
  const matching = results.matching as {
    baselineNaive10km: { p99ms: number };
    nearest: { p50ms: number; p99ms: number };
  };
  const intake = results.intake as {
    batches: number;
    jobsPerSecond: number;
    failedJobs: number;
    p50ms: number;
    p99ms: number;
  };
  const jobCard = results.jobCard as { samples: number; p50ms: number; p95ms: number; maxMs: number };
  const curve = results.curve as CurvePoint[];
  const queue = results.queue as QueueBaseline;
  const mix = results.mix as MixResult;
  const intakeProcs = (results.intake as { processes: ProcessStats[] }).processes;
  const billing = results.billing as BillingBenchResult;
  const md = [
    `# Benchmark results (${results.at})`,
    '',
    `Machine: ${machine.cpus} cores, ${machine.node}. ${settings.seconds} s per HTTP run, ${settings.connections} connections.`,
    '',
    '| benchmark | req/s | p50 ms | p99 ms | non-2xx |',
    '| --- | --- | --- | --- | --- |',
    ...http.map((h) => `| ${h.name} | ${h.requestsPerSecond} | ${h.p50ms} | ${h.p99ms} | ${h.non2xx} |`),
    '',
    `Quote endpoint / baseline: **${(results.ratios as { quoteVsBaseline: number }).quoteVsBaseline}** (target ≥ 0.7); p99 target < 50 ms.`,
    `Booking endpoints / Express + 1 INSERT, each against the mean of the INSERT runs just before and after it${Array.isArray(results.insertRuns) ? ` (the INSERT runs in order: ${(results.insertRuns as number[]).join(', ')} req/s)` : ''} (target ≥ 0.5; p99 target < 100 ms):`,
    `- redeem a quote (bookings/create): **${ratios.redeemVsInsert}**`,
    `- v1 booking with quote_id (adds the confirmation e-mail): **${ratios.redeemV1VsInsert}**`,
    `- v1 booking priced in the same request: **${ratios.bookingVsInsert}**; it pays the pricing worker's request and reply, so its floor is the BullMQ baseline above: **${ratios.bookingVsBaseline}** of it.`,
    ...cpuPerRequestLines(http),
    '',
    `Matching, live presence over 100,000 London drivers: nearest-20 search p50 ${matching.nearest.p50ms} ms, **p99 ${matching.nearest.p99ms} ms** (target < 5 ms); a naive 10 km GEOSEARCH in the same run: p99 ${matching.baselineNaive10km.p99ms} ms.`,
    `Partner intake, batches of 100 new jobs from 4 senders (${intake.batches} batches, ${intake.failedJobs} jobs failed): **${intake.jobsPerSecond} jobs/s** (target ≥ 3,000), batch p50 ${intake.p50ms} ms, **p99 ${intake.p99ms} ms** (target < 300 ms).`,
    `Processes during intake (CPU % of one core, peak memory): ${processLine(intakeProcs)}.`,
    `Raw BullMQ, ${queue.jobs.toLocaleString('en-GB')} no-op jobs added in bulk and taken by one worker: **${queue.jobsPerSecond} jobs/s**; intake is ${Math.round((intake.jobsPerSecond / queue.jobsPerSecond) * 100) / 100} of it (each job is also priced and written with its booking).`,
    `Booking commit → job card at the Twilio stand-in (${jobCard.samples} bookings, outbox relay woken by NOTIFY): p50 ${jobCard.p50ms} ms, **p95 ${jobCard.p95ms} ms** (target < 250 ms), max ${jobCard.maxMs} ms.`,
    `Weekly billing run, ${billing.drivers.toLocaleString('en-GB')} drivers × ${billing.ridesPerDriver} completed rides (${billing.invoices.toLocaleString('en-GB')} invoices, ${billing.lines.toLocaleString('en-GB')} lines): **${billing.runSeconds} s** (target < 10 s); a bare aggregate + INSERT … SELECT over the same rows ${billing.baselineSeconds} s, ratio **${billing.ratio}** (target ≤ 3); a rerun that issues nothing ${billing.rerunSeconds} s.`,
    '',
    `Pure tariff engine: **${(results.engine as { quotesPerSecond: number }).quotesPerSecond} quotes/s** on one core (target ≥ 50,000).`,
    `Geocoder: ${(results.geocoder as { microsecondsPerLookup: number }).microsecondsPerLookup.toFixed(1)} µs per lookup.`,
    '',
    '## Latency from 10 to 1,000 concurrent clients',
    '',
    'The quote endpoint (API and pricing worker), and bare Express at the same concurrency. Processes are those of the quote run: CPU in % of one core (this machine has ' +
      `${machine.cpus}), peak memory (PSS: shared pages split among the processes sharing them).`,
    '',
    '| clients | quote req/s | quote p50 ms | quote p99 ms | quote errors | bare req/s | bare p50 ms | bare p99 ms | processes |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...curve.map(
      (c) =>
        `| ${c.clients} | ${c.quote.requestsPerSecond} | ${c.quote.p50ms} | ${c.quote.p99ms} | ${c.quote.non2xx + c.quote.errors} | ${c.bare.requestsPerSecond} | ${c.bare.p50ms} | ${c.bare.p99ms} | ${processLine(c.quote.processes)} |`,
    ),
    '',
    '## End-to-end mix',
    '',
    `For ${mix.seconds} s at fixed rates: ${mix.rates.quotesPerSecond} quotes/s, ${mix.rates.bookingsPerSecond} bookings/s (each a quote then a v1 booking), ${mix.rates.batchJobsPerSecond} partner jobs/s in batches; every role in its own process, on a test key, so ${mix.simulator.fleet} simulated drivers take the offers through the driver API (answer after ${mix.simulator.delayMs[0]}–${mix.simulator.delayMs[1]} ms, feed read every ${mix.simulator.tickMs} ms, rides at ${mix.simulator.timeScale}× speed).`,
    '',
    '| request | count | failed | p50 ms | p99 ms |',
    '| --- | --- | --- | --- | --- |',
    ...mix.requests.map((r) => `| ${r.kind} | ${r.count} | ${r.failed} | ${r.p50ms} | ${r.p99ms} |`),
    '',
    `Dispatch: ${mix.dispatch.bookings} bookings, ${mix.dispatch.offered} offered, ${mix.dispatch.accepted} accepted, ${mix.dispatch.completed} completed within a minute of the load; committed → first offer p50 ${mix.dispatch.toFirstOffer.p50ms} ms, p99 ${mix.dispatch.toFirstOffer.p99ms} ms; → accepted by a driver p50 ${mix.dispatch.toAccepted.p50ms} ms, p99 ${mix.dispatch.toAccepted.p99ms} ms (a simulated driver sees an offer on its turn, one presence report and feed read each, 8 drivers at a time). Status webhooks received by the partner: ${mix.webhooksReceived}.`,
    '',
    '| process | CPU % of one core | peak memory (PSS) MiB |',
    '| --- | --- | --- |',
    ...mix.processes.map((p) => `| ${p.name} | ${p.cpuPercent} | ${p.peakMemoryMiB} |`),
    '',
  ].join('\n');
  fs.writeFileSync(path.join(ROOT, 'bench', 'results.md'), md);
  process.stdout.write(`${md}\n`);
}

try {
  await main();
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
}
