import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Db } from '../shared/db/knex.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { createPartner } from '../shared/services/partners.ts';
import { startSmtpCapture } from '../test/helpers/smtp-capture.ts';
import { startTwilioStub } from '../test/helpers/twilio-stub.ts';
import {
  config,
  DURATION,
  type ProcessStats,
  quantile,
  start,
  stop,
  systemProcesses,
  watchProcesses,
} from './harness.ts';

/**
 * The end-to-end mix: every role in its own process, as the Procfile runs them (API, pricing,
 * dispatch, notify, outbox relay, fanout) and the simulator's drivers, who take offers through
 * the driver API over HTTP. For a while, passengers quote and book, a partner sends batches,
 * all at fixed rates (open loop: arrivals do not wait for answers), on a partner's test key so
 * the bookings are offered to the simulated fleet (sandbox: messages are recorded, not sent;
 * the job-card benchmark measures sending). Reported: each request kind's latency, how long
 * dispatch takes (booking committed → first offer, → accepted by a driver), rides completed,
 * status webhooks received, and CPU and memory of every process, Postgres and Redis included.
 */
export interface MixResult {
  seconds: number;
  rates: { quotesPerSecond: number; bookingsPerSecond: number; batchJobsPerSecond: number };
  requests: Array<{ kind: string; count: number; failed: number; p50ms: number; p99ms: number }>;
  dispatch: {
    bookings: number;
    offered: number;
    accepted: number;
    completed: number;
    /** Bookings by status when the mix ended. */
    byStatus: Record<string, number>;
    toFirstOffer: { p50ms: number; p99ms: number };
    toAccepted: { p50ms: number; p99ms: number };
  };
  /** Failed requests by "<path> <status> <error code>". */
  failures: Record<string, number>;
  webhooksReceived: number;
  simulator: { fleet: number; delayMs: [number, number]; tickMs: number; timeScale: number };
  processes: ProcessStats[];
}

const QUOTES_PER_SECOND = Number(process.env.BENCH_MIX_QUOTES ?? 20);
const BOOKINGS_PER_SECOND = Number(process.env.BENCH_MIX_BOOKINGS ?? 2);
/** One batch of BATCH_SIZE partner jobs every BATCH_EVERY_MS. */
const BATCH_SIZE = 10;
const BATCH_EVERY_MS = 5000;
/**
 * Simulated drivers. Each one's turn is a presence report and a feed read over HTTP (8 drivers at
 * a time), so the fleet is load of its own: sized for the rides the rates above make.
 */
const FLEET = 50;
const SIM = { delayMin: 0, delayMax: 200, tick: 250, timeScale: 600 };

const PLACES = [
  'Manchester Piccadilly',
  'Manchester Airport',
  'M1 1AE',
  'Salford',
  'Stockport',
  'Manchester Victoria',
  'Deansgate station',
  'M4 4BF',
];
const journey = (n: number) => [PLACES[n % PLACES.length], PLACES[(n * 3 + 1) % PLACES.length]] as [string, string];

/** Calls `fire` `perSecond` times a second for `ms`, without waiting for answers; resolves when all have. */
async function openLoop(perSecond: number, ms: number, fire: (n: number) => Promise<void>): Promise<void> {
  const inFlight: Promise<void>[] = [];
  const t0 = performance.now();
  let n = 0;
  while (performance.now() - t0 < ms) {
    const due = Math.floor(((performance.now() - t0) / 1000) * perSecond);
    while (n < due) inFlight.push(fire(n++));
    await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all(inFlight);
}

export async function benchMix(db: Db): Promise<MixResult> {
  // Earlier runs left unrelayed jobs behind (their bookings' dispatch and e-mails): set aside.
  await db('outbox').whereNull('relayed_at').update({ relayed_at: db.fn.now() });
  const twilio = await startTwilioStub();
  const smtp = await startSmtpCapture();
  let webhooks = 0;
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      webhooks += 1;
      res.statusCode = 204;
      res.end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');

  const roleEnv = {
    TWILIO_API_BASE_URL: twilio.url,
    SMTP_URL: smtp.url,
    OUTBOX_POLL_MS: '1000',
    SIMULATOR_FLEET_SIZE: String(FLEET),
    SIMULATOR_CITIES: 'Manchester',
    SIMULATOR_ACCEPT_PROBABILITY: '1',
    SIMULATOR_DELAY_MIN_MS: String(SIM.delayMin),
    SIMULATOR_DELAY_MAX_MS: String(SIM.delayMax),
    SIMULATOR_TICK_MS: String(SIM.tick),
    SIMULATOR_TIME_SCALE: String(SIM.timeScale),
  };
  const api = await start(['bench/server.ts', 'api'], roleEnv);
  const base = `http://127.0.0.1:${api.port}`;
  const roles = ['pricing', 'dispatch', 'notify', 'outbox-relay', 'fanout'] as const;
  const workers = await Promise.all(roles.map((r) => start(['bench/server.ts', 'workers', r], roleEnv)));
  const simulator = await start(['bench/server.ts', 'workers', 'simulator'], { ...roleEnv, SIMULATOR_API_URL: base });
  try {
    const partner = await createPartner(db, config, {
      name: 'Mix Partner',
      webhookUrl: 'https://partner.example/hooks',
      dailyLimit: 100_000_000,
      actor: 'bench',
    });
    await db('webhook_endpoints')
      .where({ partner_id: partner.id })
      .update({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks` });
    const key = (
      await createApiKey(db, { serviceCode: config.serviceCode, name: 'mix', partnerId: partner.id, mode: 'test' })
    ).key;
    const headers = { 'content-type': 'application/json', [config.apiKeyHeader]: key };
    // Why requests failed, by "<status> <error code>" (the answer's, or the fetch's error).
    const why: Record<string, number> = {};
    const post = async (path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
      try {
        const res = await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
        const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
        if (res.status >= 300) {
          const code = (json.error as { code?: string } | undefined)?.code ?? '';
          const reason = `${path} ${res.status} ${code}`;
          why[reason] = (why[reason] ?? 0) + 1;
        }
        return { status: res.status, json };
      } catch (err) {
        const reason = `${path} ${(err as Error).cause ?? err}`;
        why[reason] = (why[reason] ?? 0) + 1;
        return { status: 0, json: {} };
      }
    };
    const soon = () => new Date(Date.now() + 10 * 60_000).toISOString();
    const book = async (n: number): Promise<{ ok: boolean; ms: number }> => {
      const [pickup, dropoff] = journey(n);
      const q = await post('/api/public/v1/quote', { pickup, dropoff, passengers: 1 + (n % 3), departAt: soon() });
      if (q.status !== 200) return { ok: false, ms: 0 };
      const t0 = performance.now();
      const b = await post('/api/public/v1/booking', {
        quote_id: q.json.quoteId,
        passenger_name: `Mix Passenger ${n}`,
        passenger_phone: '+447700900123',
        passenger_email: `mix-${n}@example.org`,
        payment_method: 'cash',
      });
      return { ok: b.status === 201, ms: performance.now() - t0 };
    };

    // Warm up: the simulated fleet reports its presence, then takes offers (three bookings accepted).
    const fleetDeadline = Date.now() + 90_000;
    const simStart = new Date();
    for (;;) {
      const { n } = (await db('drivers')
        .where({ simulated: true })
        .where('last_seen_at', '>=', simStart)
        .count('* as n')
        .first()) as { n: string };
      if (Number(n) >= FLEET) break;
      if (Date.now() > fleetDeadline) throw new Error(`mix: only ${n} of ${FLEET} simulated drivers came online`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const warmStart = new Date();
    for (let i = 0; i < 3; i++) await book(1_000_000 + i);
    const warmDeadline = Date.now() + 90_000;
    for (;;) {
      const { n } = (await db('bookings')
        .where('created_at', '>=', warmStart)
        .whereIn('status', ['driver_assigned', 'driver_en_route', 'driver_arrived', 'passenger_on_board', 'completed'])
        .count('* as n')
        .first()) as { n: string };
      if (Number(n) >= 3) break;
      if (Date.now() > warmDeadline) throw new Error('mix: the simulated fleet did not accept the warm-up bookings');
      await new Promise((r) => setTimeout(r, 250));
    }

    const seconds = DURATION * 2;
    const latencies: Record<string, number[]> = { quote: [], booking: [], batch: [] };
    const failed: Record<string, number> = { quote: 0, booking: 0, batch: 0 };
    const phaseStart = new Date();
    const webhooksBefore = webhooks;
    const { processes } = await watchProcesses(
      {
        api: api.child,
        ...Object.fromEntries(roles.map((r, i) => [r, workers[i]?.child])),
        simulator: simulator.child,
        ...systemProcesses(),
      },
      () =>
        Promise.all([
          openLoop(QUOTES_PER_SECOND, seconds * 1000, async (n) => {
            const [pickup, dropoff] = journey(n);
            const t0 = performance.now();
            const r = await post('/api/public/v1/quote', { pickup, dropoff, passengers: 1 + (n % 4) });
            if (r.status === 200) latencies.quote?.push(performance.now() - t0);
            else failed.quote = (failed.quote ?? 0) + 1;
          }),
          openLoop(BOOKINGS_PER_SECOND, seconds * 1000, async (n) => {
            const r = await book(n);
            if (r.ok) latencies.booking?.push(r.ms);
            else failed.booking = (failed.booking ?? 0) + 1;
          }),
          openLoop(1000 / BATCH_EVERY_MS, seconds * 1000, async (n) => {
            const jobs = Array.from({ length: BATCH_SIZE }, (_, i) => {
              const [pickup, dropoff] = journey(n * BATCH_SIZE + i);
              return {
                jobRef: `MIX-${n}-${i}`,
                pickup,
                dropoff,
                pickupTime: soon(),
                passengerName: `Mix Job ${n}-${i}`,
                passengerPhone: '+447700900456',
                passengers: 1,
              };
            });
            const t0 = performance.now();
            const r = await post('/api/public/v1/jobs', jobs);
            if (r.status === 200) latencies.batch?.push(performance.now() - t0);
            else failed.batch = (failed.batch ?? 0) + 1;
          }),
        ]),
      { self: true },
    );

    // Let dispatch and the rides finish (up to a minute), then read what happened from the database.
    const settleDeadline = Date.now() + 60_000;
    for (;;) {
      const { open } = (await db('bookings')
        .where('created_at', '>=', phaseStart)
        .whereIn('status', [
          'pending',
          'dispatching',
          'driver_assigned',
          'driver_en_route',
          'driver_arrived',
          'passenger_on_board',
        ])
        .count('* as open')
        .first()) as { open: string };
      if (Number(open) === 0 || Date.now() > settleDeadline) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const { rows } = await db.raw<{
      rows: Array<{ status: string; to_offer_ms: number | null; to_accept_ms: number | null }>;
    }>(
      `select b.status,
              extract(epoch from (min(o.offered_at) - b.created_at)) * 1000 as to_offer_ms,
              extract(epoch from (max(o.responded_at) filter (where o.state = 'accepted') - b.created_at)) * 1000
                as to_accept_ms
         from bookings b left join dispatch_offers o on o.booking_id = b.id
        where b.created_at >= ? and b.test_mode
        group by b.id`,
      [phaseStart],
    );
    const offered = rows.flatMap((r) => (r.to_offer_ms === null ? [] : [Number(r.to_offer_ms)]));
    const accepted = rows.flatMap((r) => (r.to_accept_ms === null ? [] : [Number(r.to_accept_ms)]));
    return {
      seconds,
      rates: {
        quotesPerSecond: QUOTES_PER_SECOND,
        bookingsPerSecond: BOOKINGS_PER_SECOND,
        batchJobsPerSecond: (BATCH_SIZE * 1000) / BATCH_EVERY_MS,
      },
      requests: Object.entries(latencies).map(([kind, ls]) => ({
        kind,
        count: ls.length,
        failed: failed[kind] ?? 0,
        p50ms: quantile(ls, 0.5),
        p99ms: quantile(ls, 0.99),
      })),
      dispatch: {
        bookings: rows.length,
        offered: offered.length,
        accepted: accepted.length,
        completed: rows.filter((r) => r.status === 'completed').length,
        byStatus: rows.reduce<Record<string, number>>((acc, r) => {
          acc[r.status] = (acc[r.status] ?? 0) + 1;
          return acc;
        }, {}),
        toFirstOffer: { p50ms: quantile(offered, 0.5), p99ms: quantile(offered, 0.99) },
        toAccepted: { p50ms: quantile(accepted, 0.5), p99ms: quantile(accepted, 0.99) },
      },
      failures: why,
      webhooksReceived: webhooks - webhooksBefore,
      simulator: { fleet: FLEET, delayMs: [SIM.delayMin, SIM.delayMax], tickMs: SIM.tick, timeScale: SIM.timeScale },
      processes,
    };
  } finally {
    await stop(simulator.child);
    await Promise.all(workers.map((w) => stop(w.child)));
    await stop(api.child);
    receiver.close();
    await twilio.close();
    await smtp.close();
  }
}
