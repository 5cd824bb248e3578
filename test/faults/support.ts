import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { SMTPServer } from 'smtp-server';
import { expect } from 'vitest';
import type { Db } from '../../shared/db/knex.ts';
import { type CreatedPartner, createPartner } from '../../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../../shared/services/tariff-store.ts';
import { approvedDriver, type TestDriver } from '../helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from '../helpers/env.ts';
import { type Ran, ROOT } from '../helpers/process.ts';
import { readSigned } from '../helpers/signed-webhook.ts';

/**
 * What the fault tests share: private Redis and Postgres servers they may kill and restart
 * (never the machine's shared ones), stand-ins for Twilio, SMTP and a partner's webhook
 * receiver that can be stopped, started again on the same port, or made to hold requests
 * without answering, worker roles as real child processes, and bursts of bookings.
 */

const run = promisify(execFile);
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function freePort(): Promise<number> {
  const srv = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => srv.once('listening', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

// ---------------------------------------------------------------------------------------
// Private Redis
// ---------------------------------------------------------------------------------------

/**
 * A private redis-server on a free port with its own directory. It persists as a production
 * Redis under BullMQ should (append-only file, fsync on every write), so `kill()` is a crash
 * that loses nothing and `start()` brings the same data back on the same port.
 */
export async function privateRedis() {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-fault-redis-'));
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  const url = `redis://127.0.0.1:${port}/0`;

  async function ping(): Promise<boolean> {
    const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => {});
    try {
      await r.connect();
      return (await r.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      r.disconnect();
    }
  }

  async function start(): Promise<void> {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes'];
    args.push('--appendfsync', 'always', '--dir', dir, '--daemonize', 'no');
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    await eventually(ping, 20_000);
  }

  async function kill(): Promise<void> {
    if (!child) return;
    child.kill('SIGKILL');
    await exited;
    child = null;
  }

  await start();
  return {
    url,
    start,
    /** kill -9: Redis is gone until start(). */
    kill,
    async destroy() {
      await kill();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------
// Private Postgres
// ---------------------------------------------------------------------------------------

function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'pg_ctl')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0]) return path.join(root, versions[0], 'bin');
  throw new Error('the Postgres fault test needs the Postgres server binaries (initdb, pg_ctl) in /usr/lib/postgresql');
}

/** initdb refuses to run as root: as root, the server's own programs run as the `postgres` user. */
async function asPostgres(bin: string, args: string[]): Promise<void> {
  const asRoot = process.getuid?.() === 0;
  await run(asRoot ? 'runuser' : bin, asRoot ? ['-u', 'postgres', '--', bin, ...args] : args, { timeout: 60_000 });
}

/**
 * A private Postgres cluster (its own initdb, data directory and socket directory under the
 * temp dir) on a free port: stop() and start() bring it down and up again, as a restart of the
 * database server does, without touching any other cluster on the machine.
 */
export async function privatePostgres() {
  const bin = postgresBinDir();
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-fault-pg-'));
  fs.chmodSync(dir, 0o755);
  if (process.getuid?.() === 0) await run('chown', ['postgres', dir]);
  const data = path.join(dir, 'data');
  await asPostgres(path.join(bin, 'initdb'), ['-D', data, '--auth=trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync']);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const pgCtl = (...args: string[]) => asPostgres(path.join(bin, 'pg_ctl'), ['-D', data, ...args]);
  const start = () => pgCtl('-o', opts, '-l', path.join(dir, 'log'), '-w', 'start');
  await start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    /** A fast shutdown: open sessions are ended, the server is gone until start(). */
    stop: () => pgCtl('-m', 'fast', '-w', 'stop'),
    async destroy() {
      await pgCtl('-m', 'immediate', '-w', 'stop').catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------
// Stand-ins
// ---------------------------------------------------------------------------------------

/** An HTTP server on a fixed port that can be stopped and started again on the same port. */
function restartable(handler: http.RequestListener, port: number) {
  let server: http.Server | null = null;
  return {
    async start() {
      const s = http.createServer(handler);
      s.listen(port, '127.0.0.1');
      await new Promise((resolve, reject) => {
        s.once('listening', resolve);
        s.once('error', reject);
      });
      server = s;
    },
    async stop() {
      const s = server;
      server = null;
      if (!s) return;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    },
  };
}

interface Held {
  answer(): void;
  gone: boolean;
}

/**
 * Answers held back while `hold()` is on. A held request whose client dies before release is
 * never answered and never counts: to its sender it was not accepted, as when a provider has
 * not yet taken a message when the connection drops.
 */
function holder() {
  let holding = false;
  const held: Held[] = [];
  return {
    hold() {
      holding = true;
    },
    release() {
      holding = false;
      for (const h of held.splice(0)) if (!h.gone) h.answer();
    },
    held: () => held.filter((h) => !h.gone).length,
    /** Answer now, or when released; `answer` is not called if the client went away meanwhile. */
    later(res: http.ServerResponse, answer: () => void) {
      if (!holding) {
        answer();
        return;
      }
      const h: Held = { answer, gone: false };
      res.once('close', () => {
        if (!res.writableFinished) h.gone = true;
      });
      held.push(h);
    },
  };
}

export interface SentSms {
  to: string;
  from: string;
  body: string;
}

/** Twilio's Messages.json as a stand-in: `sent` holds each message it accepted (answered 201). */
export async function twilioStandIn() {
  const port = await freePort();
  const sent: SentSms[] = [];
  const gate = holder();
  let sid = 0;
  const server = restartable((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const form = Object.fromEntries(new URLSearchParams(raw));
      gate.later(res, () => {
        sid += 1;
        sent.push({ to: form.To ?? '', from: form.From ?? '', body: form.Body ?? '' });
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            sid: `SM${String(sid).padStart(32, '0')}`,
            to: form.To,
            from: form.From,
            body: form.Body,
            status: 'queued',
            num_segments: '1',
          }),
        );
      });
    });
  }, port);
  await server.start();
  return { url: `http://127.0.0.1:${port}`, sent, ...server, hold: gate.hold, release: gate.release, held: gate.held };
}

export interface SentMail {
  to: string[];
  raw: string;
}

/** An SMTP server (smtp-server) that can be stopped and started again on the same port. */
export async function smtpStandIn() {
  const port = await freePort();
  const mails: SentMail[] = [];
  let server: SMTPServer | null = null;
  const start = async () => {
    const s = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      closeTimeout: 200,
      onData(stream, session, callback) {
        let raw = '';
        stream.on('data', (d) => (raw += d));
        stream.on('end', () => {
          mails.push({ to: session.envelope.rcptTo.map((r) => r.address), raw });
          callback();
        });
      },
    });
    s.listen(port, '127.0.0.1');
    await new Promise((resolve, reject) => {
      s.server.once('listening', resolve);
      s.server.once('error', reject);
    });
    server = s;
  };
  await start();
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    start,
    async stop() {
      const s = server;
      server = null;
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
}

export interface ReceivedWebhook {
  id: string;
  body: string;
  verified: boolean;
}

/**
 * A partner's webhook endpoint verifying every request with the reference `standardwebhooks`
 * package. `delivered` holds the requests it answered 204 (duplicates of a webhook-id are
 * allowed by Standard Webhooks; count distinct ids).
 */
export async function webhookReceiver() {
  const port = await freePort();
  const delivered: ReceivedWebhook[] = [];
  const secrets: string[] = [];
  const gate = holder();
  const server = restartable(async (req, res) => {
    const { headers, body, verified } = await readSigned(req, secrets);
    gate.later(res, () => {
      delivered.push({ id: headers['webhook-id'] ?? '', body, verified });
      res.statusCode = 204;
      res.end();
    });
  }, port);
  await server.start();
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    delivered,
    secrets,
    ...server,
    hold: gate.hold,
    release: gate.release,
    held: gate.held,
  };
}

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

export interface Proc {
  child: ChildProcess;
  output(): string;
  exited: Promise<Ran>;
}

/**
 * `workers/main.ts <roles>` as a child process, once it says its roles started. Run as
 * `node --import tsx` (one process: the tsx CLI would put a second node process under it, which
 * a kill -9 of the first would leave running).
 */
export async function startWorkers(roles: string, env: NodeJS.ProcessEnv, failpoints?: string): Promise<Proc> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'workers', 'main.ts'), roles], {
    cwd: ROOT,
    env: { ...env, LOG_LEVEL: 'info', ...(failpoints ? { DTN_FAILPOINTS: failpoints } : {}) },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<Ran>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  const proc: Proc = { child, output: () => stdout + stderr, exited };
  const want = roles.split(',').length;
  await eventually(async () => {
    if (!alive(proc)) throw new Error(`workers exited: ${proc.output()}`);
    return (proc.output().match(/"msg":"(worker|outbox relay) started"/g) ?? []).length >= want;
  }, 60_000);
  return proc;
}

/** Whether the process is still running. */
export const alive = (proc: Proc) => proc.child.exitCode === null && proc.child.signalCode === null;

/** kill -9, and wait until it is gone. */
export async function kill9(proc: Proc): Promise<Ran> {
  if (alive(proc)) proc.child.kill('SIGKILL');
  return proc.exited;
}

/** SIGTERM and wait (a graceful stop at the end of a test). */
export async function stopProc(proc: Proc | null | undefined): Promise<void> {
  if (!proc) return;
  if (alive(proc)) proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), 20_000);
  await proc.exited;
  clearTimeout(timer);
}

// ---------------------------------------------------------------------------------------
// The world: drivers, a partner with a webhook endpoint, bursts of bookings
// ---------------------------------------------------------------------------------------

// Real places: Manchester Piccadilly 53.4774,-2.2309.
export const MANCHESTER = { lat: 53.4774, lng: -2.2309 };

export async function call(
  baseUrl: string,
  method: string,
  urlPath: string,
  token: string | null,
  body?: unknown,
  timeoutMs = 30_000,
) {
  const res = await fetch(`${baseUrl}${urlPath}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    signal: AbortSignal.timeout(timeoutMs),
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: Record<string, unknown> | null = null;
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : null;
  } catch {}
  return { status: res.status, json, text, headers: res.headers };
}

/**
 * Drivers near Manchester Piccadilly, approved, live on the map, each able to hold 10 jobs
 * (the most a driver may): enough for a burst without any offer being refused for load.
 */
export async function liveDrivers(db: Db, baseUrl: string, n: number): Promise<TestDriver[]> {
  const drivers: TestDriver[] = [];
  for (let i = 0; i < n; i++) {
    const d = await approvedDriver(db, { name: `Fault Driver ${i + 1}` });
    await db('drivers').where({ id: d.id }).update({ max_concurrent_jobs: 10 });
    const at = { lat: MANCHESTER.lat + (i + 1) * 0.003, lng: MANCHESTER.lng };
    const r = await call(baseUrl, 'POST', '/api/public/v1/driver/presence', d.token, { available: true, ...at });
    expect(r.status, r.text).toBe(200);
    drivers.push(d);
  }
  return drivers;
}

export async function offline(baseUrl: string, drivers: TestDriver[]): Promise<void> {
  for (const d of drivers) {
    await call(baseUrl, 'POST', '/api/public/v1/driver/presence', d.token, { available: false, ...MANCHESTER });
  }
}

/** A partner that may set fares (no pricing round trip), with its webhook endpoint at the receiver. */
export async function partnerWithWebhook(
  env: TestEnv,
  receiverUrl: string,
  secrets: string[],
): Promise<CreatedPartner> {
  const partner = await createPartner(env.rt.db, env.config, {
    name: `Fault Partner ${Date.now()}`,
    canSetFares: true,
    webhookUrl: 'https://partner.example/hooks',
    actor: 'test',
  });
  await env.rt.db('webhook_endpoints').where({ partner_id: partner.id }).update({ url: receiverUrl });
  secrets.push(partner.webhookSecret as string);
  return partner;
}

let jobSeq = 0;

/** One partner job (a booking dispatched at once: pickup in 20 minutes), sent alone. */
export async function partnerJob(baseUrl: string, partner: CreatedPartner, prefix: string) {
  jobSeq += 1;
  const jobRef = `${prefix}-${jobSeq}`;
  const r = await call(baseUrl, 'POST', '/api/public/v1/jobs', partner.apiKey, {
    jobRef,
    pickup: 'Manchester Piccadilly',
    dropoff: 'Manchester Airport',
    pickupTime: new Date(Date.now() + 20 * 60_000).toISOString(),
    passengerName: `Fault Passenger ${jobSeq}`,
    passengerPhone: '07700 900123',
    passengers: 1,
    fare: 30,
  });
  return { jobRef, ...r };
}

/**
 * A burst: `n` partner jobs sent one per request, `concurrency` requests at a time. Every job
 * must be created; answers the booking references.
 */
export async function partnerBurst(
  baseUrl: string,
  partner: CreatedPartner,
  prefix: string,
  n: number,
  opts: { concurrency?: number; pauseMs?: number } = {},
): Promise<string[]> {
  const refs: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next += 1;
      const r = await partnerJob(baseUrl, partner, prefix);
      expect([200, 201], r.text).toContain(r.status);
      const result = (r.json?.results as Array<{ outcome: string; bookingReference: string }> | undefined)?.[0];
      expect(result?.outcome, r.text).toBe('created');
      refs.push(result?.bookingReference as string);
      if (opts.pauseMs) await sleep(opts.pauseMs);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 4 }, worker));
  return refs;
}

// biome-ignore lint/suspicious/noExplicitAny: rows read back in assertions
export type Row = Record<string, any>;

/**
 * Every booking was dispatched once: exactly one offer (attempt 1, still open: offers last
 * longer than the test), its job card queued once per channel and sent, and the Twilio
 * stand-in holding exactly one SMS and one WhatsApp message for it, to the offered driver.
 */
export async function expectDispatchedOnce(
  db: Db,
  refs: string[],
  sent: SentSms[],
  drivers: Map<string, TestDriver>,
  timeoutMs = 90_000,
): Promise<void> {
  const bookings = await db('bookings').whereIn('reference', refs).select<Row[]>('id', 'reference');
  expect(bookings).toHaveLength(refs.length);
  const ids = bookings.map((b) => b.id);
  const cardsFor = (ref: string) => sent.filter((m) => m.body.includes(ref));
  await eventually(async () => {
    const offered = await db('dispatch_offers').whereIn('booking_id', ids).countDistinct<Row[]>('booking_id as n');
    const unsent = await db('outbound_messages')
      .whereIn('booking_id', ids)
      .where({ purpose: 'job_card' })
      .whereNot({ state: 'sent' })
      .count<Row[]>('* as n');
    return (
      Number(offered[0]?.n) === ids.length && Number(unsent[0]?.n) === 0 && refs.every((r) => cardsFor(r).length >= 2)
    );
  }, timeoutMs);
  // Anything duplicated would show up now: give stragglers time to arrive.
  await sleep(1_500);
  const offers = await db('dispatch_offers').whereIn('booking_id', ids).select<Row[]>('*');
  for (const b of bookings) {
    const mine = offers.filter((o) => o.booking_id === b.id);
    expect(
      mine.map((o) => [o.attempt, o.state]),
      `offers of ${b.reference}`,
    ).toEqual([[1, 'offered']]);
    const driver = drivers.get(mine[0]?.driver_id);
    expect(driver, `offered driver of ${b.reference}`).toBeDefined();
    const rows = await db('outbound_messages').where({ booking_id: b.id, purpose: 'job_card' }).select<Row[]>('*');
    expect(rows.map((m) => `${m.channel}:${m.state}`).sort(), `job card rows of ${b.reference}`).toEqual([
      'sms:sent',
      'whatsapp:sent',
    ]);
    expect(
      cardsFor(b.reference)
        .map((m) => m.to)
        .sort(),
      `job cards received for ${b.reference}`,
    ).toEqual([driver?.phone, `whatsapp:${driver?.phone}`].sort());
  }
}

/** Accept every open offer of these bookings as its driver, and run each ride to completion. */
export async function completeRides(
  baseUrl: string,
  db: Db,
  refs: string[],
  drivers: Map<string, TestDriver>,
): Promise<void> {
  const offers = await db('dispatch_offers as o')
    .join('bookings as b', 'b.id', 'o.booking_id')
    .whereIn('b.reference', refs)
    .where({ 'o.state': 'offered' })
    .select<Row[]>('b.reference', 'o.driver_id');
  expect(offers).toHaveLength(refs.length);
  let next = 0;
  const worker = async () => {
    while (next < offers.length) {
      const o = offers[next] as Row;
      next += 1;
      const token = drivers.get(o.driver_id)?.token ?? null;
      const steps: Array<[string, unknown]> = [
        ['accept', undefined],
        ['status', { status: 'driver_en_route' }],
        ['status', { status: 'driver_arrived' }],
        ['status', { status: 'passenger_on_board' }],
        ['status', { status: 'completed', payment: { method: 'cash', amountGBP: 30 } }],
      ];
      for (const [step, body] of steps) {
        const r = await call(baseUrl, 'POST', `/api/public/v1/jobs/${o.reference}/${step}`, token, body);
        expect(r.status, `${o.reference} ${step}: ${r.text}`).toBe(200);
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}

// ---------------------------------------------------------------------------------------
// A store going away under a burst of v1 bookings
// ---------------------------------------------------------------------------------------

let passengerSeq = 0;

/** The body of a v1 booking (priced by the pricing worker, dispatched at once), unique per call. */
export function v1Booking(): Record<string, unknown> {
  passengerSeq += 1;
  const tag = `${Date.now().toString(36)}${passengerSeq}`;
  return {
    pickup: 'Manchester Piccadilly',
    dropoff: 'Manchester Airport',
    departAt: new Date(Date.now() + 20 * 60_000).toISOString(),
    passengerName: `Outage Passenger ${passengerSeq}`,
    passengerEmail: `outage-${tag}@example.org`,
    passengerPhone: '+447700900456',
    paymentMethod: 'cash',
  };
}

/** A 503 as the contract has it: the envelope, `service_unavailable`, a request id and Retry-After. */
export function expectUnavailable(r: Awaited<ReturnType<typeof call>>, what: string): void {
  expect(r.status, `${what}: ${r.text}`).toBe(503);
  const error = r.json?.error as { code?: string; message?: string; details?: unknown } | undefined;
  expect(error?.code, `${what}: ${r.text}`).toBe('service_unavailable');
  expect(typeof error?.message).toBe('string');
  expect(Array.isArray(error?.details)).toBe(true);
  expect(r.json?.requestId).toEqual(expect.any(String));
  expect(Number(r.headers.get('retry-after')), `${what}: Retry-After`).toBeGreaterThan(0);
}

/**
 * v1 bookings while a store goes away and comes back: a burst during which `down()` runs (each
 * answer is 201 or the 503 envelope, never a 500 and never a hang), requests while it is down
 * (all 503, `/readyz` too), then `up()`, readiness, and bookings retried on 503 until accepted,
 * as a client would. Answers the references of every accepted booking.
 */
export async function bookThroughOutage(
  baseUrl: string,
  down: () => Promise<void>,
  up: () => Promise<void>,
): Promise<{ accepted: string[]; refusedWhileDown: number }> {
  const accepted: string[] = [];
  const post = (body: Record<string, unknown>) => call(baseUrl, 'POST', '/api/public/v1/booking', null, body, 20_000);
  const answer = (r: Awaited<ReturnType<typeof call>>, what: string): boolean => {
    if (r.status === 201) {
      accepted.push(r.json?.bookingReference as string);
      return true;
    }
    expectUnavailable(r, what);
    return false;
  };

  // A burst; the store goes away with requests in flight.
  let sent = 0;
  const burst = Promise.all(
    Array.from({ length: 4 }, async () => {
      while (sent < 16) {
        sent += 1;
        answer(await post(v1Booking()), 'during the burst');
      }
    }),
  );
  await eventually(async () => accepted.length >= 4, 60_000);
  await down();
  await burst;

  // While it is away: every request is refused quickly with the envelope.
  let refusedWhileDown = 0;
  for (let i = 0; i < 6; i++) {
    const r = await post(v1Booking());
    expectUnavailable(r, 'while down');
    refusedWhileDown += 1;
  }
  const ready = await call(baseUrl, 'GET', '/readyz', null, undefined, 20_000);
  expectUnavailable(ready, 'readyz while down');

  // Back: the same processes recover, and every client retry ends accepted.
  await up();
  await eventually(async () => (await call(baseUrl, 'GET', '/readyz', null)).status === 200, 60_000);
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      const body = v1Booking();
      await eventually(async () => answer(await post(body), 'after the restart'), 60_000);
    }),
  );
  return { accepted, refusedWhileDown };
}

/**
 * After an outage: every accepted booking is in Postgres, and every booking there (an answer lost
 * to the outage may still have been written) is dispatched once with its job cards sent once, and
 * its confirmation e-mailed once.
 */
export async function expectNothingLost(
  db: Db,
  accepted: string[],
  sent: SentSms[],
  mails: SentMail[],
  drivers: Map<string, TestDriver>,
): Promise<void> {
  const all = (await db('bookings').pluck('reference')) as string[];
  for (const ref of accepted) expect(all, `accepted booking ${ref} is stored`).toContain(ref);
  await expectDispatchedOnce(db, all, sent, drivers);
  // E-mails: each row (confirmations) sent, and received once.
  await eventually(async () => {
    const [row] = await db('outbound_messages')
      .where({ channel: 'email' })
      .whereNot({ state: 'sent' })
      .count<Row[]>('* as n');
    return Number(row?.n) === 0;
  }, 60_000);
  const rows = await db('outbound_messages').where({ channel: 'email' }).select<Row[]>('recipient');
  expect(rows.length).toBeGreaterThanOrEqual(all.length);
  await sleep(500);
  const want = new Map<string, number>();
  for (const r of rows) want.set(r.recipient, (want.get(r.recipient) ?? 0) + 1);
  for (const [to, n] of want)
    expect(
      mails.filter((m) => m.to.includes(to)),
      `e-mails to ${to}`,
    ).toHaveLength(n);
}

/**
 * The environment every fault test starts from: offers and presence that outlive the test (a
 * booking's one offer is its whole dispatch), a killed worker's jobs found stalled after about
 * 2 s, a relay that polls every 200 ms, and no rate limit in the way of a burst.
 */
export const FAULT_ENV: Readonly<Record<string, string>> = {
  OFFER_TIMEOUT_SECONDS: '3600',
  PRESENCE_TTL_SECONDS: '3600',
  WORKER_LOCK_MS: '2000',
  OUTBOX_POLL_MS: '200',
  RATE_LIMIT_PER_IP_PER_MINUTE: '1000000',
  RATE_LIMIT_PER_KEY_PER_MINUTE: '1000000',
  QUOTE_LIMIT_PER_HOUR: '1000000',
};

export interface FaultStack {
  env: TestEnv;
  api: Served;
  workers: Proc;
  twilio: Awaited<ReturnType<typeof twilioStandIn>>;
  smtp: Awaited<ReturnType<typeof smtpStandIn>>;
  drivers: Map<string, TestDriver>;
  stop(): Promise<void>;
}

/**
 * A booking system to break: the Twilio and SMTP stand-ins, the test environment (FAULT_ENV and
 * `env`, e.g. a private Redis or Postgres URL), the API in this process, the pricing, dispatch,
 * notify and relay roles in one child process, and `driverCount` approved drivers on the map.
 */
export async function faultStack(env: Record<string, string>, driverCount: number): Promise<FaultStack> {
  const twilio = await twilioStandIn();
  const smtp = await smtpStandIn();
  const testEnv = await createTestEnv({
    env: { ...FAULT_ENV, TWILIO_API_BASE_URL: twilio.url, SMTP_URL: smtp.url, ...env },
  });
  await syncBuiltInTariffs(testEnv.rt.db);
  const api = await serve(await appFor(testEnv));
  const workers = await startWorkers('pricing,dispatch,notify,outbox-relay', testEnv.childEnv);
  const drivers = new Map((await liveDrivers(testEnv.rt.db, api.url, driverCount)).map((d) => [d.id, d]));
  return {
    env: testEnv,
    api,
    workers,
    twilio,
    smtp,
    drivers,
    async stop() {
      await stopProc(workers);
      await api.close();
      await twilio.stop();
      await smtp.stop();
      await testEnv.cleanup();
    },
  };
}
