import { timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';
import { sha256 } from '../crypto.ts';
import type { Queryable } from '../db/knex.ts';
import { operatorDriverOf } from '../domain/operator-driver.ts';
import { normaliseReference } from '../domain/reference.ts';
import { haversineMeters } from '../geo/route-estimate.ts';

/**
 * Live booking events (the tracking page's server-sent events, CONTRACT.md section 6).
 *
 * The status history in Postgres (`booking_status_history`, ordered by its per-booking `seq`)
 * is the only source of what happened. Redis pub/sub only wakes readers up: whoever appends a
 * status publishes an empty message on `<prefix>:booking-events:<bookingId>` after the
 * transaction commits, and every open stream of that booking re-reads the history after the
 * last `seq` it sent. A lost message therefore only delays an event (streams also re-read on a
 * timer), and order and exactly-once delivery come from `seq`, never from Redis.
 */

/** Statuses after which a booking's stream has nothing more to say. (There is no `no_show` status.) */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'cancelled']);

/** Statuses whose events carry the assigned driver and vehicle. */
const DRIVER_STATUSES: ReadonlySet<string> = new Set([
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'passenger_on_board',
]);

/** Statuses whose events carry an ETA to the pickup (the driver is on the way). */
export const ETA_STATUSES: ReadonlySet<string> = new Set(['driver_assigned', 'driver_en_route']);

/** Straight-line miles × this = road miles, for the ETA. */
export const ETA_ROAD_FACTOR = 1.3;
/** Average speed to the pickup, mph, for the ETA. */
export const ETA_SPEED_MPH = 20;
/** A driver position older than this is not used for an ETA (presence is reported every few seconds while working). */
export const ETA_POSITION_MAX_AGE_MS = 15 * 60_000;

const METRES_PER_MILE = 1609.344;

export function bookingEventsChannel(prefix: string, bookingId: string): string {
  return `${prefix}:booking-events:${bookingId}`;
}

/**
 * Wake the open event streams of a booking. Call it after the transaction that appended the
 * status has committed (a reader woken earlier would not see the row yet). The message carries
 * no data. Never throws: when Redis is unreachable the streams still pick the change up on
 * their periodic re-check, so a failed publish only delays the event.
 */
export async function publishBookingEvent(redis: Redis, prefix: string, bookingId: string): Promise<void> {
  try {
    await redis.publish(bookingEventsChannel(prefix, bookingId), '');
  } catch {
    // Delayed, not lost: see above.
  }
}

/**
 * The booking behind a tracking link: the reference (any case, as typed) and the token from the
 * link. Null when the reference is unknown, malformed, or the token is missing or wrong (the
 * caller answers all of these alike, so the answer does not reveal which references exist).
 * Only the token's SHA-256 is stored; the hashes are compared in constant time.
 */
export async function bookingForTrackingToken(
  db: Queryable,
  rawRef: string,
  token: string | undefined,
  referencePrefix: string,
): Promise<{ id: string; reference: string; status: string } | null> {
  const ref = normaliseReference(rawRef, referencePrefix);
  if (!ref || !token) return null;
  const row = await db('bookings')
    .where({ reference: ref })
    .first<{ id: string; reference: string; status: string; tracking_token_hash: Buffer } | undefined>(
      'id',
      'reference',
      'status',
      'tracking_token_hash',
    );
  if (!row) return null;
  const presented = sha256(token);
  const stored = row.tracking_token_hash;
  if (stored.length !== presented.length || !timingSafeEqual(stored, presented)) return null;
  return { id: row.id, reference: row.reference, status: row.status };
}

export interface TimelineEntry {
  seq: number;
  status: string;
  at: Date;
}

export interface TimelineDriver {
  /** First name and last initial ("Samuel O."): enough to recognise the driver at the kerb. */
  name: string;
  vehicle: { make: string; model: string; colour: string; registration: string } | null;
}

export interface BookingTimeline {
  /** The booking's status now. */
  status: string;
  /** The booking's last history `seq` (bookings.status_seq). */
  statusSeq: number;
  /** History entries with `seq > afterSeq`, in order. */
  entries: TimelineEntry[];
  /** The assigned driver (bookings.driver_id, else a partner operator's named driver), or null. */
  driver: TimelineDriver | null;
  /** Minutes from the driver's last known position to the pickup; null when not known. */
  etaMinutes: number | null;
  /** `no_driver_available` now: whether a next try is due (`dispatch_retry_at` set), else false. */
  retrying: boolean;
}

/** One `status` event of the stream (the `data:` of an SSE frame whose `id:` is `seq`). */
export interface BookingStatusEvent {
  status: string;
  at: string;
  seq: number;
  driver?: { name: string };
  vehicle?: TimelineDriver['vehicle'];
  etaMinutes?: number | null;
  /**
   * On the `no_driver_available` entry that is the booking's status now: whether dispatch will
   * ask drivers again before pickup (the booking's `dispatch_retry_at`), or has stopped.
   */
  retrying?: boolean;
}

/** "Samuel Adebayo Okafor" → "Samuel O."; a single name is shown as it is. */
export function shortDriverName(full: string): string {
  const parts = full.trim().split(/\s+/).filter(Boolean);
  const first = parts[0] ?? '';
  // The initial of the last word that is a name (starts with a letter): "Jo Sim 0003" is "Jo S.".
  const last = parts.slice(1).findLast((p) => /^\p{L}/u.test(p));
  return last ? `${first} ${[...last][0]?.toUpperCase()}.` : first;
}

/** Straight-line miles × 1.3 at 20 mph, rounded up to whole minutes. */
export function etaMinutes(from: { lat: number; lng: number }, to: { lat: number; lng: number }): number {
  const miles = haversineMeters(from, to) / METRES_PER_MILE;
  return Math.ceil(((miles * ETA_ROAD_FACTOR) / ETA_SPEED_MPH) * 60);
}

interface BookingDriverRow {
  status: string;
  dispatch_retry_at: Date | null;
  status_seq: number;
  pickup: { lat?: unknown; lng?: unknown } | null;
  driver_id: string | null;
  driver_name: string | null;
  operator_driver: unknown;
  last_lat: number | null;
  last_lng: number | null;
  last_seen_at: Date | null;
  make: string | null;
  model: string | null;
  colour: string | null;
  registration: string | null;
}

/**
 * What a booking's stream has to send after `afterSeq`: the history entries, and the driver,
 * vehicle and ETA as they are now. The history is read before the booking, so a driver
 * assigned in the same transaction as an entry that was read is always seen. The vehicle is
 * the booking's (`vehicle_id`), else the driver's most recent active one. Null when the
 * booking does not exist.
 */
export async function bookingTimeline(
  db: Queryable,
  bookingId: string,
  afterSeq: number,
  now: Date = new Date(),
): Promise<BookingTimeline | null> {
  const entries = await db('booking_status_history')
    .where({ booking_id: bookingId })
    .andWhere('seq', '>', afterSeq)
    .orderBy('seq')
    .select<TimelineEntry[]>('seq', 'status', 'at');
  const { rows } = await db.raw<{ rows: BookingDriverRow[] }>(
    `select b.status, b.status_seq, b.dispatch_retry_at, b.pickup, b.driver_id, d.name as driver_name, b.operator_driver,
            d.last_lat, d.last_lng, d.last_seen_at,
            v.make, v.model, v.colour, v.registration
       from bookings b
       left join drivers d on d.id = b.driver_id
       left join lateral (
         select make, model, colour, registration from vehicles
          where (b.vehicle_id is not null and id = b.vehicle_id)
             or (b.vehicle_id is null and driver_id = b.driver_id and active)
          order by created_at desc
          limit 1
       ) v on true
      where b.id = ?`,
    [bookingId],
  );
  const row = rows[0];
  if (!row) return null;
  let driver: TimelineDriver | null = null;
  let eta: number | null = null;
  if (row.driver_id && row.driver_name !== null) {
    driver = {
      name: shortDriverName(row.driver_name),
      vehicle:
        row.make !== null && row.model !== null && row.colour !== null && row.registration !== null
          ? { make: row.make, model: row.model, colour: row.colour, registration: row.registration }
          : null,
    };
    const pickup = row.pickup;
    const fresh = row.last_seen_at !== null && now.getTime() - row.last_seen_at.getTime() <= ETA_POSITION_MAX_AGE_MS;
    if (
      fresh &&
      row.last_lat !== null &&
      row.last_lng !== null &&
      typeof pickup?.lat === 'number' &&
      typeof pickup.lng === 'number'
    ) {
      eta = etaMinutes({ lat: row.last_lat, lng: row.last_lng }, { lat: pickup.lat, lng: pickup.lng });
    }
  } else {
    // A partner operator's own driver, as the operator named them (we have no position: no ETA).
    const named = operatorDriverOf(row.operator_driver);
    if (named) driver = { name: shortDriverName(named.name), vehicle: named.vehicle ?? null };
  }
  return {
    status: row.status,
    statusSeq: row.status_seq,
    entries,
    driver,
    etaMinutes: eta,
    retrying: row.status === 'no_driver_available' && row.dispatch_retry_at !== null,
  };
}

/**
 * The stream events of a timeline: every entry, with the driver and vehicle on the statuses
 * where a driver is on the job, and the ETA while they are on the way to the pickup.
 */
export function timelineEvents(t: BookingTimeline): BookingStatusEvent[] {
  return t.entries.map((e) => {
    const event: BookingStatusEvent = { status: e.status, at: e.at.toISOString(), seq: e.seq };
    if (t.driver && DRIVER_STATUSES.has(e.status)) {
      event.driver = { name: t.driver.name };
      event.vehicle = t.driver.vehicle;
      if (ETA_STATUSES.has(e.status)) event.etaMinutes = t.etaMinutes;
    }
    if (e.status === 'no_driver_available' && t.status === 'no_driver_available' && e.seq === t.statusSeq) {
      event.retrying = t.retrying;
    }
    return event;
  });
}

export interface BookingEventListener {
  /** A status may have been appended: re-read. Called on each message, and when a message may have been missed. */
  wake(): void;
  /** The hub is closing (process shutdown): end the stream. */
  end?(): void;
}

export interface BookingEventSubscription {
  /** Stop listening. Idempotent. The last listener of a booking unsubscribes its channel; the last of all closes the connection. */
  close(): void;
}

export interface BookingEventHubStats {
  /** Whether the shared subscriber connection exists. */
  connected: boolean;
  /** Channels (bookings) subscribed. */
  channels: number;
  /** Listeners (open streams) across all channels. */
  listeners: number;
}

export interface BookingEventHub {
  /**
   * Listen for a booking's wake-ups, or null when it already has `max` listeners in this
   * process. The channel is subscribed at once; when the subscription is confirmed, listeners
   * that joined before are woken, since a message published in between was missed.
   */
  listen(bookingId: string, listener: BookingEventListener, opts?: { max?: number }): BookingEventSubscription | null;
  /** Listeners of one booking in this process. */
  listenerCount(bookingId: string): number;
  stats(): BookingEventHubStats;
  /** End every listener (their `end`) and close the connection: for process shutdown. */
  close(): void;
}

interface Channel {
  listeners: Set<BookingEventListener>;
}

const hubs = new WeakMap<Redis, Map<string, BookingEventHub>>();

/**
 * The process's hub for booking wake-ups: ONE Redis subscriber connection (a `duplicate()` of
 * `redis`, made on first use) shared by every open stream, one SUBSCRIBE per booking with
 * listeners counted, UNSUBSCRIBE when a booking's last listener leaves, and the connection
 * closed when the last listener of all leaves. Same `redis` and prefix → same hub.
 */
export function bookingEventHub(redis: Redis, prefix: string): BookingEventHub {
  let byPrefix = hubs.get(redis);
  if (!byPrefix) {
    byPrefix = new Map();
    hubs.set(redis, byPrefix);
  }
  let hub = byPrefix.get(prefix);
  if (!hub) {
    hub = createHub(redis, prefix);
    byPrefix.set(prefix, hub);
  }
  return hub;
}

function createHub(redis: Redis, prefix: string): BookingEventHub {
  let sub: Redis | null = null;
  const channels = new Map<string, Channel>();
  let listeners = 0;

  const wakeAll = () => {
    for (const ch of channels.values()) for (const l of [...ch.listeners]) l.wake();
  };

  const connection = (): Redis => {
    if (sub) return sub;
    // Unlike the fail-fast producer connection it is copied from, the subscriber queues
    // commands until connected and keeps reconnecting; ioredis re-subscribes on reconnect.
    // No command timeout: a SUBSCRIBE queued while Redis is away waits for it.
    const s = redis.duplicate({
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      commandTimeout: undefined,
      connectionName: `${redis.options.connectionName ?? 'dtn'}-booking-events`,
    });
    s.on('error', () => {}); // reconnects by itself; an unhandled 'error' would crash the process
    let readyBefore = false;
    s.on('ready', () => {
      // After a reconnect, messages sent while we were away are lost: everyone re-reads.
      if (readyBefore && sub === s) wakeAll();
      readyBefore = true;
    });
    s.on('message', (channel: string) => {
      if (sub !== s) return;
      const ch = channels.get(channel);
      if (ch) for (const l of [...ch.listeners]) l.wake();
    });
    sub = s;
    return s;
  };

  return {
    listen(bookingId, listener, opts = {}) {
      const name = bookingEventsChannel(prefix, bookingId);
      const existing = channels.get(name);
      if (existing && opts.max !== undefined && existing.listeners.size >= opts.max) return null;
      const s = connection();
      let ch = existing;
      if (!ch) {
        const created: Channel = { listeners: new Set() };
        channels.set(name, created);
        ch = created;
        s.subscribe(name).then(
          () => {
            if (channels.get(name) !== created) return;
            for (const l of [...created.listeners]) l.wake();
          },
          () => {
            // Redis unreachable: the streams' periodic re-check carries on; ioredis subscribes on reconnect.
          },
        );
      }
      const channel = ch;
      channel.listeners.add(listener);
      listeners++;
      let closed = false;
      return {
        close() {
          if (closed) return;
          closed = true;
          // Not there any more when the hub was closed under it.
          if (!channel.listeners.delete(listener)) return;
          listeners--;
          if (channel.listeners.size > 0) return;
          if (channels.get(name) === channel) channels.delete(name);
          if (listeners === 0) {
            // `s` is still the hub's connection: it is replaced only once every listener has gone.
            sub = null;
            s.disconnect();
          } else {
            s.unsubscribe(name).catch(() => {});
          }
        },
      };
    },
    listenerCount(bookingId) {
      return channels.get(bookingEventsChannel(prefix, bookingId))?.listeners.size ?? 0;
    },
    stats() {
      return { connected: sub !== null, channels: channels.size, listeners };
    },
    close() {
      for (const ch of [...channels.values()]) for (const l of [...ch.listeners]) l.end?.();
      // Listeners without `end` are dropped: their streams fall back to the periodic re-check.
      for (const ch of channels.values()) ch.listeners.clear();
      channels.clear();
      listeners = 0;
      const s = sub;
      sub = null;
      s?.disconnect();
    },
  };
}
