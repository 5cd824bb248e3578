import { once } from 'node:events';
import net from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookingEventRoutes } from '../api/routes/booking-events.ts';
import { appendStatus } from '../shared/db/bookings.ts';
import {
  bookingEventHub,
  bookingEventsChannel,
  etaMinutes,
  publishBookingEvent,
  shortDriverName,
} from '../shared/services/booking-events.ts';
import { trackingToken } from '../shared/services/bookings.ts';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { bookThroughApi } from './helpers/bookings.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * Live booking events (CONTRACT.md section 6): `GET /api/public/v1/booking/{ref}/events?t=…`
 * as server-sent events over real HTTP, woken by Redis pub/sub after each committed status.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;

/** The same stream with short timers and a low per-booking limit, on a test-only path. */
const FAST_PATH = '/api/public/v1/test-fast-booking/:ref/events';
const fastRoutes = bookingEventRoutes({
  heartbeatMs: 250,
  recheckMs: 300,
  maxLifetimeMs: 2_500,
  maxStreamsPerBooking: 2,
}).map((r) => ({ ...r, path: FAST_PATH, operationId: 'testFastBookingEvents', documented: false }));

beforeAll(async () => {
  env = await createTestEnv({
    env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', QUOTE_LIMIT_PER_HOUR: '100000' },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env, fastRoutes));
});
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  retry?: string;
  comments: string[];
}

/** Reads an event stream incrementally: `next()` is the next frame, or 'end' when the server closed it. */
class SseReader {
  private buffer = '';
  private ended = false;
  private readonly decoder = new TextDecoder();
  constructor(
    readonly res: Response,
    private readonly abort: AbortController,
  ) {}

  private reader = (): ReadableStreamDefaultReader<Uint8Array> => {
    this.r ??= (this.res.body as ReadableStream<Uint8Array>).getReader();
    return this.r;
  };
  private r: ReadableStreamDefaultReader<Uint8Array> | undefined;

  async next(timeoutMs = 3_000): Promise<Frame | 'end'> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const cut = this.buffer.indexOf('\n\n');
      if (cut >= 0) {
        const raw = this.buffer.slice(0, cut);
        this.buffer = this.buffer.slice(cut + 2);
        return parseFrame(raw);
      }
      if (this.ended) return 'end';
      const left = until - Date.now();
      if (left <= 0) throw new Error(`no frame within ${timeoutMs} ms (buffer: ${JSON.stringify(this.buffer)})`);
      let timer: NodeJS.Timeout | undefined;
      const chunk = await Promise.race([
        this.reader().read(),
        new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), left);
        }),
      ]).finally(() => clearTimeout(timer));
      if (chunk === 'timeout') continue;
      if (chunk.done) this.ended = true;
      else this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  /** The next `status` event, skipping comments and the retry frame. */
  async nextEvent(timeoutMs = 3_000): Promise<{ id: string; data: Record<string, unknown> } | 'end'> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const f = await this.next(Math.max(1, until - Date.now()));
      if (f === 'end') return 'end';
      if (f.event === 'status' && f.data !== undefined && f.id !== undefined) {
        return { id: f.id, data: JSON.parse(f.data) as Record<string, unknown> };
      }
    }
  }

  close(): void {
    this.abort.abort();
  }
}

function parseFrame(raw: string): Frame {
  const frame: Frame = { comments: [] };
  for (const line of raw.split('\n')) {
    if (line.startsWith(':')) {
      frame.comments.push(line.slice(1).trim());
      continue;
    }
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'id' || field === 'event' || field === 'retry') frame[field] = value;
    if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
  }
  return frame;
}

async function open(
  ref: string,
  token: string | undefined,
  opts: { lastEventId?: string; path?: string } = {},
): Promise<SseReader> {
  const abort = new AbortController();
  const path = (opts.path ?? '/api/public/v1/booking/:ref/events').replace(':ref', encodeURIComponent(ref));
  const qs = token === undefined ? '' : `?t=${encodeURIComponent(token)}`;
  const res = await fetch(`${api.url}${path}${qs}`, {
    headers: { accept: 'text/event-stream', ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}) },
    signal: abort.signal,
  });
  return new SseReader(res, abort);
}

const book = () => bookThroughApi(api.url, env.rt.db);

/** The next frame of the named event, skipping comments, the retry frame and other events; fails at the end. */
async function nextNamed(s: SseReader, event: string): Promise<Frame> {
  for (;;) {
    const f = await s.next();
    if (f === 'end') throw new Error(`the stream ended before an \`${event}\` event`);
    if (f.event === event) return f;
  }
}

/** A status appended the way the workers do it: in a transaction, then the wake-up after commit. */
async function advance(
  bookingId: string,
  status: string,
  extra: Record<string, unknown> = {},
  publish = true,
): Promise<void> {
  await env.rt.db.transaction(async (trx) => {
    if (Object.keys(extra).length > 0) await trx('bookings').where({ id: bookingId }).update(extra);
    await appendStatus(trx, bookingId, status, 'test');
  });
  if (publish) await publishBookingEvent(env.rt.redis, env.config.queuePrefix, bookingId);
}

async function subscribers(bookingId: string): Promise<number> {
  const reply = (await env.rt.redis.pubsub('NUMSUB', bookingEventsChannel(env.config.queuePrefix, bookingId))) as [
    string,
    number,
  ];
  return Number(reply[1]);
}

const hub = () => bookingEventHub(env.rt.redis, env.config.queuePrefix);

async function newDriver(): Promise<{ driverId: string; vehicleId: string }> {
  const driverId = uuidv7();
  const vehicleId = uuidv7();
  await env.rt.db('drivers').insert({
    id: driverId,
    name: 'Samuel Adebayo Okafor',
    phone: '+447700900801',
    email: 'samuel@example.org',
    status: 'approved',
    licensing_authority: 'Manchester City Council',
    licence_number: `MCC-${driverId}`,
    licence_expiry: '2028-12-31',
    home_city: 'Manchester',
    home_lat: 53.48,
    home_lng: -2.24,
    operating_radius_miles: 20,
    // About 2 miles north of Manchester Piccadilly.
    last_lat: 53.506,
    last_lng: -2.231,
    last_seen_at: new Date(),
  });
  await env.rt.db('vehicles').insert({
    id: vehicleId,
    driver_id: driverId,
    make: 'Toyota',
    model: 'Prius',
    colour: 'Silver',
    registration: 'MA19 XYZ',
    class: 'saloon',
    seats: 4,
  });
  return { driverId, vehicleId };
}

describe('helpers', () => {
  it('shortens names to first name and initial, and estimates minutes at 20 mph over 1.3 × straight line', () => {
    expect(shortDriverName('Samuel Adebayo Okafor')).toBe('Samuel O.');
    expect(shortDriverName('  cher  ')).toBe('cher');
    // The initial of the last word that is a name: a number or a symbol is none.
    expect(shortDriverName('Jo Sim 0003')).toBe('Jo S.');
    expect(shortDriverName('Jo 0003')).toBe('Jo');
    expect(shortDriverName('Ana Ørsted')).toBe('Ana Ø.');
    // 0.1° of latitude is 6.9 miles: × 1.3 / 20 mph = 26.9 minutes → 27.
    expect(etaMinutes({ lat: 53.5, lng: -2.2 }, { lat: 53.6, lng: -2.2 })).toBe(27);
  });
});

describe('GET /api/public/v1/booking/{ref}/events', () => {
  it('answers 404 booking_not_found alike for a wrong or missing token and an unknown reference', async () => {
    const b = await book();
    const cases: Array<[string, string | undefined]> = [
      [b.ref, 'not-the-token'],
      [b.ref, undefined],
      [b.ref, ''],
      ['DTN-000000', b.token],
      ['nonsense', b.token],
    ];
    for (const [ref, token] of cases) {
      const s = await open(ref, token);
      expect(s.res.status, `${ref} ${token}`).toBe(404);
      expect(s.res.headers.get('content-type')).toMatch(/^application\/json/);
      const body = (await s.res.json()) as { error: { code: string }; requestId: string };
      expect(body.error.code).toBe('booking_not_found');
      expect(body.requestId).toEqual(expect.any(String));
    }
    expect(hub().listenerCount(b.id)).toBe(0);
  });

  it('streams the history, then each committed status promptly and in order, and closes after completed', async () => {
    const b = await book();
    const { driverId, vehicleId } = await newDriver();
    // The reference is case-insensitive, as everywhere.
    const s = await open(b.ref.toLowerCase(), b.token);
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get('content-type')).toBe('text/event-stream');
    expect(s.res.headers.get('cache-control')).toBe('no-store');
    expect(s.res.headers.get('x-accel-buffering')).toBe('no');

    const retry = await s.next();
    expect(retry).toMatchObject({ retry: '3000' });
    const first = await s.nextEvent();
    expect(first).toEqual({
      id: '1',
      data: { status: 'pending', at: expect.stringMatching(/Z$/), seq: 1 },
    });

    // Well inside the 15 s fallback: these arrive because of the Redis wake-up.
    let t0 = Date.now();
    await advance(b.id, 'dispatching');
    expect(await s.nextEvent()).toMatchObject({ id: '2', data: { status: 'dispatching', seq: 2 } });
    expect(Date.now() - t0).toBeLessThan(1_500);

    t0 = Date.now();
    await advance(b.id, 'driver_assigned', { driver_id: driverId, vehicle_id: vehicleId });
    const assigned = await s.nextEvent();
    expect(Date.now() - t0).toBeLessThan(1_500);
    expect(assigned).toEqual({
      id: '3',
      data: {
        status: 'driver_assigned',
        at: expect.any(String),
        seq: 3,
        driver: { name: 'Samuel O.' },
        vehicle: { make: 'Toyota', model: 'Prius', colour: 'Silver', registration: 'MA19 XYZ' },
        etaMinutes: expect.any(Number),
      },
    });
    if (assigned === 'end') throw new Error('the stream ended early');
    const eta = assigned.data.etaMinutes as number;
    expect(eta).toBeGreaterThanOrEqual(5);
    expect(eta).toBeLessThanOrEqual(12);

    // Several at once: each exactly once, in seq order, whatever wake-ups arrive.
    await advance(b.id, 'driver_en_route');
    await advance(b.id, 'driver_arrived');
    await advance(b.id, 'passenger_on_board');
    const burst = [await s.nextEvent(), await s.nextEvent(), await s.nextEvent()];
    expect(burst.map((e) => (e === 'end' ? e : [e.id, e.data.status]))).toEqual([
      ['4', 'driver_en_route'],
      ['5', 'driver_arrived'],
      ['6', 'passenger_on_board'],
    ]);
    expect(burst[0]).toMatchObject({ data: { driver: { name: 'Samuel O.' }, etaMinutes: expect.any(Number) } });
    expect(burst[2]).toMatchObject({ data: { driver: { name: 'Samuel O.' } } });
    expect((burst[2] as { data: Record<string, unknown> }).data).not.toHaveProperty('etaMinutes');

    await advance(b.id, 'completed');
    const done = await s.nextEvent();
    expect(done).toMatchObject({ id: '7', data: { status: 'completed', seq: 7 } });
    expect((done as { data: Record<string, unknown> }).data).not.toHaveProperty('driver');
    expect(await s.next()).toBe('end');
    await eventually(async () => (await subscribers(b.id)) === 0 && hub().listenerCount(b.id) === 0, 3_000);

    // Resuming after the last event of a finished booking: 204, so EventSource stops reconnecting.
    const again = await open(b.ref, b.token, { lastEventId: '7' });
    expect(again.res.status).toBe(204);
    // Without Last-Event-ID the whole history is replayed and the stream closes again.
    const replay = await open(b.ref, b.token);
    const seqs: string[] = [];
    for (let e = await replay.nextEvent(); e !== 'end'; e = await replay.nextEvent()) seqs.push(e.id);
    expect(seqs).toEqual(['1', '2', '3', '4', '5', '6', '7']);
  });

  it('says on a no_driver_available event whether dispatch asks again before pickup', async () => {
    const b = await book();
    await advance(b.id, 'dispatching');
    await advance(b.id, 'no_driver_available', { dispatch_retry_at: new Date(Date.now() + 5 * 60_000) });
    const s = await open(b.ref, b.token);
    expect(await s.nextEvent()).toMatchObject({ id: '1' });
    const dispatching = await s.nextEvent();
    expect(dispatching).toMatchObject({ id: '2', data: { status: 'dispatching' } });
    expect(dispatching === 'end' ? null : dispatching.data).not.toHaveProperty('retrying');
    expect(await s.nextEvent()).toMatchObject({ id: '3', data: { status: 'no_driver_available', retrying: true } });
    s.close();
  });

  it('says so on its own event when dispatch stops asking with no new status, and to a client resuming at that status', async () => {
    const b = await book();
    await advance(b.id, 'dispatching');
    await advance(b.id, 'no_driver_available', { dispatch_retry_at: new Date(Date.now() + 5 * 60_000) });
    const s = await open(b.ref, b.token);
    for (const id of ['1', '2']) expect(await s.nextEvent()).toMatchObject({ id });
    expect(await s.nextEvent()).toMatchObject({ id: '3', data: { retrying: true } });
    // The last try before pickup found nobody: the row's next try is cleared, no status is appended.
    await env.rt.db('bookings').where({ id: b.id }).update({ dispatch_retry_at: null });
    await publishBookingEvent(env.rt.redis, env.config.queuePrefix, b.id);
    const stopped = await nextNamed(s, 'dispatch');
    expect(stopped.id).toBeUndefined();
    expect(JSON.parse(stopped.data ?? '')).toEqual({ retrying: false, at: expect.any(String) });
    s.close();
    // A client that had event 3 (saying it was retrying) and reconnects is told where dispatch stands.
    const resumed = await open(b.ref, b.token, { lastEventId: '3' });
    expect(JSON.parse((await nextNamed(resumed, 'dispatch')).data ?? '')).toMatchObject({ retrying: false });
    resumed.close();
  });

  it('resumes after Last-Event-ID', async () => {
    const b = await book();
    await advance(b.id, 'dispatching');
    await advance(b.id, 'no_driver_available');
    const s = await open(b.ref, b.token, { lastEventId: '1' });
    expect(s.res.status).toBe(200);
    expect(await s.nextEvent()).toMatchObject({ id: '2', data: { status: 'dispatching' } });
    // No driver, and no next try due: the event says dispatch has stopped.
    expect(await s.nextEvent()).toMatchObject({ id: '3', data: { status: 'no_driver_available', retrying: false } });
    await advance(b.id, 'cancelled');
    expect(await s.nextEvent()).toMatchObject({ id: '4', data: { status: 'cancelled' } });
    expect(await s.next()).toBe('end');
    // A Last-Event-ID that is not a number, or beyond this booking's history, is ignored: everything from the start.
    for (const lastEventId of ['abc', '99']) {
      const garbled = await open(b.ref, b.token, { lastEventId });
      expect(await garbled.nextEvent()).toMatchObject({ id: '1' });
      garbled.close();
    }
    // HEAD answers the headers without holding a stream open.
    const head = await fetch(`${api.url}/api/public/v1/booking/${b.ref}/events?t=${b.token}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/event-stream');
    await eventually(async () => hub().listenerCount(b.id) === 0, 3_000);
  });

  it('shares one subscriber connection, and a client that disconnects releases its subscription and timers', async () => {
    const a = await book();
    const b = await book();
    const s1 = await open(a.ref, a.token);
    const s2 = await open(a.ref, a.token);
    const s3 = await open(b.ref, b.token);
    for (const s of [s1, s2, s3]) expect(await s.nextEvent()).toMatchObject({ id: '1' });
    await eventually(async () => (await subscribers(a.id)) === 1 && (await subscribers(b.id)) === 1, 3_000);
    expect(hub().stats()).toEqual({ connected: true, channels: 2, listeners: 3 });

    // Both streams of booking a are woken by one message on one subscription.
    await advance(a.id, 'dispatching');
    expect(await s1.nextEvent()).toMatchObject({ id: '2' });
    expect(await s2.nextEvent()).toMatchObject({ id: '2' });

    s1.close();
    await eventually(async () => hub().listenerCount(a.id) === 1, 3_000);
    expect(await subscribers(a.id)).toBe(1);
    s2.close();
    await eventually(async () => (await subscribers(a.id)) === 0 && hub().listenerCount(a.id) === 0, 3_000);
    expect(hub().stats()).toEqual({ connected: true, channels: 1, listeners: 1 });
    s3.close();
    await eventually(async () => hub().stats().listeners === 0, 3_000);
    expect(hub().stats()).toEqual({ connected: false, channels: 0, listeners: 0 });
    await eventually(async () => (await subscribers(b.id)) === 0, 3_000);
  });

  it('wakes the stream at once when the partner cancels its job (not at the 15 s re-read)', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Cancelling Partner', actor: 'test' });
    const sendJob = async (job: Record<string, unknown>) => {
      const res = await fetch(`${api.url}/api/public/v1/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${partner.apiKey}` },
        body: JSON.stringify(job),
      });
      return (await res.json()) as { results: { outcome: string; bookingReference: string }[] };
    };
    const made = await sendJob({
      jobRef: 'SSE-CANCEL-1',
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      pickupTime: new Date(Date.now() + 3 * 3600_000).toISOString(),
      passengerName: 'Pat Partner',
      passengerPhone: '07700 900888',
    });
    const ref = made.results[0]?.bookingReference as string;
    const row = await env.rt.db('bookings').where({ reference: ref }).first('id');
    const stream = await open(ref, trackingToken(row.id, env.config.dataEncryptionKey));
    expect(await stream.nextEvent()).toMatchObject({ id: '1' });
    const cancelled = await sendJob({ jobRef: 'SSE-CANCEL-1', action: 'cancel' });
    expect(cancelled.results[0]?.outcome).toBe('cancelled');
    // Well inside the stream's 15-second re-read: only the wake-up can bring it this soon.
    expect(await stream.nextEvent(5_000)).toMatchObject({ id: '2', data: { status: 'cancelled' } });
    stream.close();
  });

  it('releases the slot of a client that left before its stream was set up', async () => {
    const b = await book();
    const { port } = new URL(api.url);
    // The booking lookup waits behind this lock, so each request below is provably in flight
    // (past the route's checks, before its stream is set up) when its client leaves.
    const hold = await env.rt.db.transaction();
    const sockets: net.Socket[] = [];
    try {
      await hold.raw('lock table bookings in access exclusive mode');
      // More clients than the booking's 5 streams, each gone before its answer (a reload, a tab closed).
      for (let i = 0; i < 7; i++) {
        const socket = net.connect(Number(port), '127.0.0.1');
        await once(socket, 'connect');
        socket.write(
          `GET /api/public/v1/booking/${encodeURIComponent(b.ref)}/events?t=${encodeURIComponent(b.token)} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`,
        );
        sockets.push(socket);
      }
      await eventually(async () => {
        const waiting = await env.rt.db.raw<{ rows: { n: number }[] }>(
          "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query ilike '%bookings%'",
        );
        return (waiting.rows[0]?.n ?? 0) >= 7;
      }, 10_000);
      for (const socket of sockets) socket.destroy();
      // The server sees each client go before the lookup answers.
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      await hold.rollback();
    }
    // Each left request then finishes its lookup: none may keep a slot, so a real stream opens.
    const s = await open(b.ref, b.token);
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get('cache-control')).toBe('no-store');
    expect(await s.nextEvent()).toMatchObject({ id: '1' });
    await eventually(async () => hub().listenerCount(b.id) === 1, 3_000);
    s.close();
  });

  it('re-checks without a wake-up, sends heartbeats, limits streams per booking and ends at the lifetime limit', async () => {
    const b = await book();
    const path = FAST_PATH;
    const s1 = await open(b.ref, b.token, { path });
    const s2 = await open(b.ref, b.token, { path });
    expect(await s1.nextEvent()).toMatchObject({ id: '1' });
    expect(await s2.nextEvent()).toMatchObject({ id: '1' });

    const over = await open(b.ref, b.token, { path });
    expect(over.res.status).toBe(429);
    expect(over.res.headers.get('retry-after')).toBe('60');
    expect(((await over.res.json()) as { error: { code: string } }).error.code).toBe('rate_limited');

    // No publish: the periodic re-check finds it.
    await advance(b.id, 'dispatching', {}, false);
    expect(await s1.nextEvent(2_000)).toMatchObject({ id: '2', data: { status: 'dispatching' } });

    let pinged = false;
    for (let i = 0; i < 5 && !pinged; i++) {
      const f = await s2.next(2_000);
      if (f !== 'end' && f.comments.includes('ping')) pinged = true;
    }
    expect(pinged).toBe(true);

    // The lifetime limit (2.5 s here) ends both streams; the slots are free again.
    for (const s of [s1, s2]) {
      for (let f = await s.next(4_000); f !== 'end'; f = await s.next(4_000)) {
        // heartbeats and events until the end
      }
    }
    await eventually(async () => hub().listenerCount(b.id) === 0 && (await subscribers(b.id)) === 0, 3_000);
    const after = await open(b.ref, b.token, { path, lastEventId: '2' });
    expect(after.res.status).toBe(200);
    after.close();
  });

  it('sends a changed ETA as an `eta` event while the driver is on the way, and none once they have arrived', async () => {
    const b = await book();
    const { driverId, vehicleId } = await newDriver();
    await advance(b.id, 'driver_assigned', { driver_id: driverId, vehicle_id: vehicleId });
    const s = await open(b.ref, b.token, { path: FAST_PATH });
    let assigned = await s.nextEvent();
    while (assigned !== 'end' && assigned.data.status !== 'driver_assigned') assigned = await s.nextEvent();
    if (assigned === 'end') throw new Error('the stream ended early');
    const before = assigned.data.etaMinutes as number;
    expect(before).toBeGreaterThan(2);
    // The driver reports a position about half a mile from the pickup (Manchester Piccadilly).
    await env.rt
      .db('drivers')
      .where({ id: driverId })
      .update({ last_lat: 53.484, last_lng: -2.2309, last_seen_at: new Date() });
    const eta = async () => {
      for (;;) {
        const f = await s.next(5_000);
        if (f === 'end') throw new Error('the stream ended');
        if (f.event === 'eta') return f;
        if (f.event === 'status') throw new Error(`a status event came first: ${f.data}`);
      }
    };
    const moved = await eta();
    expect(moved.id).toBeUndefined();
    const data = JSON.parse(moved.data as string) as { etaMinutes: number; at: string };
    expect(data.etaMinutes).toBeLessThan(before);
    expect(data.etaMinutes).toBeGreaterThanOrEqual(1);
    expect(Date.parse(data.at)).not.toBeNaN();
    // Unchanged, it is not sent again: the next re-checks send heartbeats only.
    const quiet = Date.now() + 1_000;
    while (Date.now() < quiet) {
      const f = await s.next(2_000);
      if (f === 'end') throw new Error('the stream ended');
      expect(f.event).toBeUndefined();
    }
    // Arrived: no ETA on the status, and none after it however the driver moves.
    await advance(b.id, 'driver_arrived');
    const arrived = await s.nextEvent();
    expect(arrived).not.toBe('end');
    expect((arrived as { data: Record<string, unknown> }).data).not.toHaveProperty('etaMinutes');
    await env.rt
      .db('drivers')
      .where({ id: driverId })
      .update({ last_lat: 53.49, last_lng: -2.2309, last_seen_at: new Date() });
    const after = Date.now() + 1_000;
    while (Date.now() < after) {
      const f = await s.next(2_000);
      if (f === 'end') break;
      expect(f.event).toBeUndefined();
    }
    s.close();
  });

  it('is in the OpenAPI document as text/event-stream', async () => {
    const res = await fetch(`${api.url}/api/public/v1/openapi.json`);
    const doc = (await res.json()) as {
      paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>;
    };
    const op = doc.paths['/api/public/v1/booking/{ref}/events']?.get;
    expect(op?.responses['200']?.content).toHaveProperty(['text/event-stream']);
    expect(op?.responses['404']).toBeDefined();
    expect(doc.paths['/api/public/v1/test-fast-booking/{ref}/events']).toBeUndefined();
  });
});
