import { randomBytes } from 'node:crypto';
import { loadConfig } from '../shared/config.ts';
import { createDb } from '../shared/db/knex.ts';
import { type BillingWeek, parseWeek } from '../shared/domain/billing/week.ts';
import { isMain } from '../shared/lifecycle.ts';
import { issueInvoices } from '../shared/services/billing.ts';

/**
 * The weekly invoice run at scale: 100,000 drivers with 20 rides each completed in the week
 * (2,000,000 bookings and their completion rows), next to a baseline over the same rows in
 * the same run: a bare aggregate (earnings and rides per driver) written with one
 * INSERT … SELECT. Target: the run under 10 s, and at most 3 times the baseline.
 * A tenth of the drivers are in their trial; fares vary so that some weeks stay under £500.
 *
 * `npx tsx bench/billing.ts` prints JSON; BENCH_BILLING_DRIVERS and BENCH_BILLING_RIDES
 * override the sizes. Runs in a schema of its own, dropped at the end (kept, for EXPLAIN, with
 * BENCH_BILLING_KEEP=1).
 */
export interface BillingBenchResult {
  drivers: number;
  ridesPerDriver: number;
  loadSeconds: number;
  baselineSeconds: number;
  runSeconds: number;
  rerunSeconds: number;
  invoices: number;
  lines: number;
  ratio: number;
}

const WEEK = '2026-W40';

export async function benchBilling(
  opts: { databaseUrl: string; drivers?: number; ridesPerDriver?: number } = {
    databaseUrl: loadConfig(process.env).databaseUrl,
  },
): Promise<BillingBenchResult> {
  const drivers = opts.drivers ?? 100_000;
  const rides = opts.ridesPerDriver ?? 20;
  const schema = `bench_billing_${randomBytes(4).toString('hex')}`;
  const db = createDb({ databaseUrl: opts.databaseUrl, databaseSchema: schema }, { poolMax: 2 });
  const week = parseWeek(WEEK) as BillingWeek;
  const seconds = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e9;
  try {
    await db.raw('create schema ??', [schema]);
    await db.migrate.latest();

    const t0 = process.hrtime.bigint();
    await db.raw(
      `insert into drivers (id, name, phone, email, status, licensing_authority, licence_number, licence_expiry,
                            home_city, home_lat, home_lng, operating_radius_miles, approved_at, trial_ends_at)
       select md5('d' || i)::uuid, 'Driver ' || i, '+44770' || lpad(i::text, 7, '0'), 'd' || i || '@example.com',
              'approved', 'Bench', 'B' || i, '2030-01-01', 'Leeds', 53.8, -1.55, 20, ?::timestamptz - interval '200 days',
              case when i % 10 = 0 then ?::timestamptz + interval '30 days' else ?::timestamptz - interval '110 days' end
         from generate_series(1, ?) i`,
      [week.start, week.start, week.start, drivers],
    );
    const total = drivers * rides;
    // 2,000,000 rows in one statement would hold a lot of WAL at once; chunks of 250,000.
    for (let from = 0; from < total; from += 250_000) {
      const to = Math.min(total, from + 250_000) - 1;
      await db.raw(
        `with b as (
           insert into bookings (id, reference, origin, status, passenger_name, pickup, dropoff, pickup_time,
                                 fare_pence, tracking_token_hash, driver_id, status_seq)
           select md5('b' || g)::uuid, 'DTN-B' || g, 'api', 'completed', 'Bench Passenger',
                  '{"name":"Leeds","lat":53.79,"lng":-1.54}', '{"name":"Bradford","lat":53.79,"lng":-1.75}',
                  ?::timestamptz + (g % 590000) * interval '1 second', 1500 + (g::bigint * 7919) % 3000,
                  decode(md5('t' || g), 'hex'), md5('d' || (1 + g % ?))::uuid, 1
             from generate_series(?::int, ?::int) g
           returning id, pickup_time
         )
         insert into booking_status_history (booking_id, seq, status, at, actor)
         select id, 1, 'completed', pickup_time + interval '40 minutes', 'bench' from b`,
        [week.start, drivers, from, to],
      );
    }
    await db.raw('vacuum analyze bookings');
    await db.raw('vacuum analyze booking_status_history');
    await db.raw('vacuum analyze drivers');
    const loadSeconds = seconds(t0);

    // Baseline: the same rows, aggregated per driver and written with one INSERT … SELECT.
    await db.raw('create table bench_baseline (driver_id uuid, earnings bigint, rides int)');
    const b0 = process.hrtime.bigint();
    await db.raw(
      `insert into bench_baseline
       select b.driver_id, sum(b.fare_pence), count(*)
         from booking_status_history h join bookings b on b.id = h.booking_id
        where h.status = 'completed' and h.at >= ? and h.at < ?
        group by b.driver_id`,
      [week.start, week.end],
    );
    const baselineSeconds = seconds(b0);

    const r0 = process.hrtime.bigint();
    const run = await issueInvoices(db, week);
    const runSeconds = seconds(r0);
    const r1 = process.hrtime.bigint();
    const rerun = await issueInvoices(db, week);
    const rerunSeconds = seconds(r1);
    if (run.issued !== drivers || rerun.issued !== 0) {
      throw new Error(`billing run issued ${run.issued} then ${rerun.issued}; expected ${drivers} then 0`);
    }
    const round = (n: number) => Math.round(n * 1000) / 1000;
    return {
      drivers,
      ridesPerDriver: rides,
      loadSeconds: round(loadSeconds),
      baselineSeconds: round(baselineSeconds),
      runSeconds: round(runSeconds),
      rerunSeconds: round(rerunSeconds),
      invoices: run.issued,
      lines: run.lines,
      ratio: round(runSeconds / baselineSeconds),
    };
  } finally {
    if (process.env.BENCH_BILLING_KEEP === '1') process.stderr.write(`kept schema ${schema}\n`);
    else await db.raw('drop schema if exists ?? cascade', [schema]).catch(() => {});
    await db.destroy();
  }
}

if (isMain(import.meta.url)) {
  const result = await benchBilling({
    databaseUrl: loadConfig(process.env).databaseUrl,
    ...(process.env.BENCH_BILLING_DRIVERS ? { drivers: Number(process.env.BENCH_BILLING_DRIVERS) } : {}),
    ...(process.env.BENCH_BILLING_RIDES ? { ridesPerDriver: Number(process.env.BENCH_BILLING_RIDES) } : {}),
  });
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
