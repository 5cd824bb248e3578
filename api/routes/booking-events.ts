import { Type } from '@sinclair/typebox';
import type { Request, Response } from 'express';
import { AppError } from '../../shared/errors.ts';
import { BookingRefParams } from '../../shared/schemas/bookings.ts';
import {
  type BookingTimeline,
  bookingEventHub,
  bookingForTrackingToken,
  bookingTimeline,
  ETA_STATUSES,
  TERMINAL_STATUSES,
  timelineEvents,
} from '../../shared/services/booking-events.ts';
import { noBookingOrToken } from '../../shared/services/bookings.ts';
import type { ApiDeps } from '../deps.ts';
import { defineRoute, type HandlerResult, type RouteDef, type StreamedResult } from '../route.ts';

export const BOOKING_EVENTS_PATH = '/api/public/v1/booking/:ref/events';

/** How long and how many: so that streams cannot pile up on a process. */
export interface BookingEventStreamLimits {
  /** Open streams per booking in one API process; one more is 429. */
  maxStreamsPerBooking: number;
  /** A stream is ended after this long; an EventSource reconnects with Last-Event-ID. */
  maxLifetimeMs: number;
  /** A `: ping` comment this often keeps proxies from timing the connection out. */
  heartbeatMs: number;
  /** Re-read the history this often even without a wake-up (a lost Redis message only delays). */
  recheckMs: number;
  /** The `retry:` reconnection delay suggested to EventSource clients. */
  retryMs: number;
}

export const DEFAULT_STREAM_LIMITS: BookingEventStreamLimits = {
  maxStreamsPerBooking: 5,
  maxLifetimeMs: 2 * 3600_000,
  heartbeatMs: 15_000,
  recheckMs: 15_000,
  retryMs: 3_000,
};

const EventsQuery = Type.Object({
  t: Type.Optional(
    Type.String({ description: "The tracking token: the last part of the booking's trackingUrl (`/track/{token}`)" }),
  ),
});

/** The `Last-Event-ID` a reconnecting client sends: the last `seq` it received; 0 when absent or not a number. */
export function lastEventId(raw: string | undefined): number {
  const s = raw?.trim() ?? '';
  return /^\d{1,9}$/.test(s) ? Number(s) : 0;
}

/** True once the HTTP server has stopped listening (graceful shutdown): streams end so the server can close. */
function serverStopped(req: Request): boolean {
  return (req.socket as { server?: { listening?: boolean } }).server?.listening === false;
}

/**
 * One client's stream. Every history entry after `afterSeq` is sent as
 * `id: <seq>\nevent: status\ndata: {...}\n\n`, then the stream waits: a wake-up on the booking's
 * Redis channel (or the periodic re-check) re-reads the history after the last `seq` sent, so
 * each entry is sent once and in order whichever wake-ups arrive. Reads never overlap: a
 * wake-up during a read makes the read run again. It ends after a terminal status, at the
 * lifetime limit, when the server shuts down, or when the client goes; every path releases
 * the subscription and the timers.
 */
async function openStream(
  deps: ApiDeps,
  req: Request,
  res: Response,
  ref: string,
  bookingId: string,
  afterSeq: number,
  limits: BookingEventStreamLimits,
): Promise<HandlerResult | StreamedResult> {
  const hub = bookingEventHub(deps.redis, deps.config.queuePrefix);
  const timers: NodeJS.Timeout[] = [];
  let lastSeq = afterSeq;
  let headersSent = false;
  let done = false;
  let reading = true; // the first read below; wake-ups meanwhile are remembered in `again`
  let again = false;
  let etaSent: number | null = null;
  let retryingSent: boolean | null = null;

  const subscription = hub.listen(
    bookingId,
    { wake: () => void pump(), end: () => finish() },
    { max: limits.maxStreamsPerBooking },
  );
  if (!subscription) {
    throw new AppError(
      'rate_limited',
      `This booking already has ${limits.maxStreamsPerBooking} open event streams; close one or retry in a minute.`,
      [],
      {
        'Retry-After': '60',
        'RateLimit-Policy': `"booking-streams";q=${limits.maxStreamsPerBooking};w=60`,
        RateLimit: '"booking-streams";r=0;t=60',
      },
    );
  }
  res.on('close', () => finish());
  // A client that left while the request was authenticated, limited and looked up has already
  // closed the response, and 'close' is not emitted again: without this its slot, Redis
  // listener and timers would be held until the lifetime limit.
  if (req.socket.destroyed || res.destroyed) finish();

  function finish(): void {
    if (done) return;
    done = true;
    for (const t of timers) clearTimeout(t);
    subscription?.close();
    if (headersSent) res.end();
  }

  function send(t: BookingTimeline): void {
    for (const event of timelineEvents(t)) {
      if (done) return;
      res.write(`id: ${event.seq}\nevent: status\ndata: ${JSON.stringify(event)}\n\n`);
      lastSeq = event.seq;
      if (event.etaMinutes !== undefined) etaSent = event.etaMinutes;
      if (event.retrying !== undefined) retryingSent = event.retrying;
      if (TERMINAL_STATUSES.has(event.status)) {
        finish();
        return;
      }
    }
    // No driver, and dispatch has since stopped asking (the last try before pickup found
    // nobody) or a try was queued again: no status is appended for that, so it is its own
    // event, `dispatch`, with no id, as `eta` is. Also sent first thing to a client resuming at
    // a `no_driver_available` it already has, which may have missed the change.
    if (!done && t.status === 'no_driver_available' && t.retrying !== retryingSent) {
      retryingSent = t.retrying;
      res.write(`event: dispatch\ndata: ${JSON.stringify({ retrying: t.retrying, at: new Date().toISOString() })}\n\n`);
    }
    // The driver moved since: while they are on the way, a changed ETA is its own event, `eta`,
    // with no id (it is not history: a reconnecting client gets the latest with the next one);
    // null when the driver's position has gone stale.
    // The re-check reads it every `recheckMs`; the driver's position is stored at most every
    // 30 seconds (`reportPresence`).
    if (!done && ETA_STATUSES.has(t.status) && t.etaMinutes !== etaSent) {
      etaSent = t.etaMinutes;
      res.write(`event: eta\ndata: ${JSON.stringify({ etaMinutes: t.etaMinutes, at: new Date().toISOString() })}\n\n`);
    }
  }

  async function pump(): Promise<void> {
    if (done) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        const t = await bookingTimeline(deps.db, bookingId, lastSeq);
        if (done) return;
        if (!t) {
          finish(); // the booking is gone
          return;
        }
        send(t);
      } while (again && !done);
    } catch (err) {
      req.log?.warn({ err }, 'booking events: re-reading the history failed; retrying on the next wake-up');
    } finally {
      reading = false;
    }
  }

  let first: BookingTimeline | null;
  try {
    first = await bookingTimeline(deps.db, bookingId, afterSeq);
    if (first && afterSeq > first.statusSeq) {
      // A Last-Event-ID this booking never sent (another booking's, or garbled): start over.
      lastSeq = 0;
      first = await bookingTimeline(deps.db, bookingId, 0);
    }
  } catch (err) {
    finish();
    throw err;
  }
  if (done) return { stream: true }; // the client left while we read
  if (!first) {
    finish();
    throw noBookingOrToken(ref);
  }
  if (first.entries.length === 0 && TERMINAL_STATUSES.has(first.status)) {
    // A client resuming after the last event of a finished booking: 204 tells EventSource to stop reconnecting.
    finish();
    return { status: 204, body: null };
  }

  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream');
  // Not stored by anyone: it names the driver and their car.
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Accel-Buffering', 'no');
  if (req.method === 'HEAD') {
    // Express serves HEAD with the GET handler: the headers, but no stream to hold open.
    finish();
    res.end();
    return { stream: true };
  }
  res.flushHeaders();
  req.socket.setNoDelay(true);
  headersSent = true;
  res.write(`retry: ${limits.retryMs}\n\n`);
  send(first);
  reading = false;
  if (done) return { stream: true };

  timers.push(
    setInterval(() => {
      if (serverStopped(req)) {
        // Shutting down: end the stream and its connection, so server.close() need not wait
        // for it (the client reconnects elsewhere with Last-Event-ID).
        finish();
        req.socket.end();
        return;
      }
      res.write(': ping\n\n');
    }, limits.heartbeatMs),
    setInterval(() => void pump(), limits.recheckMs),
    setTimeout(() => finish(), limits.maxLifetimeMs),
  );
  for (const t of timers) t.unref();
  if (again) void pump();
  return { stream: true };
}

/**
 * `GET /api/public/v1/booking/{ref}/events?t={trackingToken}` (CONTRACT.md section 6): the
 * booking's status changes as server-sent events, public with the tracking token of the
 * booking's trackingUrl. A wrong or missing token answers exactly as an unknown reference.
 */
export function bookingEventRoutes(overrides: Partial<BookingEventStreamLimits> = {}): RouteDef[] {
  const limits = { ...DEFAULT_STREAM_LIMITS, ...overrides };
  return [
    defineRoute({
      method: 'get',
      path: BOOKING_EVENTS_PATH,
      operationId: 'streamBookingEvents',
      summary: "Follow a booking's status live (server-sent events), with the tracking token",
      description:
        'A `text/event-stream` for EventSource. Each status change of the booking, from the first, is one event: ' +
        '`id: <seq>`, `event: status`, `data: {"status", "at", "seq"}`; while a driver is on the job the data also carries ' +
        '`driver: {name}` (first name and initial) and `vehicle: {make, model, colour, registration}`, and while the driver ' +
        'is on the way `etaMinutes` (from their last known position; null when unknown). The `no_driver_available` event that is the ' +
        "booking's status now carries `retrying`: true while dispatch will ask drivers again before pickup, false once it has stopped; when that changes with no new status (the last try before pickup found nobody), " +
        'it is sent as its own event, `event: dispatch`, `data: {"retrying", "at"}`, without an id. While the driver is on the way, a ' +
        'changed ETA is sent as its own event, `event: eta`, `data: {"etaMinutes", "at"}` (null when the position is stale), without an id, checked every ' +
        `${Math.round(limits.recheckMs / 1000)} s. ` +
        'A client that reconnects with ' +
        '`Last-Event-ID` receives only the events after it. A `: ping` comment is sent every ' +
        `${Math.round(limits.heartbeatMs / 1000)} s. The stream ends after a terminal status (completed, cancelled); ` +
        'resuming after that event answers 204, which tells EventSource to stop. A stream lasts at most ' +
        `${Math.round(limits.maxLifetimeMs / 60_000)} minutes (EventSource then reconnects and resumes), and a booking can ` +
        `have ${limits.maxStreamsPerBooking} streams open at once (429 beyond). An unknown reference and a wrong or ` +
        'missing token are both 404 booking_not_found.',
      tags: ['bookings'],
      auth: 'public',
      params: BookingRefParams,
      query: EventsQuery,
      errors: ['booking_not_found', 'rate_limited'],
      responses: {
        200: {
          description: 'The event stream',
          contentType: 'text/event-stream',
          schema: Type.String({
            description:
              'Server-sent events: `id: 3\\nevent: status\\ndata: {"status":"driver_assigned","at":"2026-11-22T10:00:00.000Z","seq":3,...}\\n\\n`',
          }),
        },
        204: { description: 'The booking has finished and every event was sent already: stop reconnecting' },
      },
      handler: async ({ deps, params, query, req, res }) => {
        const booking = await bookingForTrackingToken(
          deps.db,
          params.ref,
          query.t,
          deps.config.bookings.referencePrefix,
        );
        if (!booking) throw noBookingOrToken(params.ref);
        return openStream(deps, req, res, params.ref, booking.id, lastEventId(req.get('last-event-id')), limits);
      },
    }),
  ];
}
