import type { Config } from '../../shared/config.ts';
import type { Db } from '../../shared/db/knex.ts';
import { haversineMiles, type LatLng } from '../../shared/domain/dispatch/geometry.ts';
import type { Logger } from '../../shared/logger.ts';
import { ensureSimulatedFleet, type SimulatedDriver } from '../../shared/services/simulated-fleet.ts';

/**
 * The `simulator` worker role: a fleet of simulated drivers that keeps test-mode (sandbox)
 * bookings moving without a real taxi. Each driver is a real, approved, test-mode driver row
 * (shared/services/simulated-fleet.ts) and uses the driver API over HTTP exactly as a driver
 * app does: it reports presence while it drives straight lines around its city, reads its feed,
 * accepts or declines offers (by `SIMULATOR_ACCEPT_PROBABILITY`, after a random delay between
 * `SIMULATOR_DELAY_MIN_MS` and `SIMULATOR_DELAY_MAX_MS`), and takes an accepted job through
 * en route, arrived, on board and completed (paid by a random method), driving to the pickup
 * and the dropoff at `SIMULATOR_TIME_SCALE` times real speed. A test booking's scenario (the
 * feed's `sandbox.move`) overrides its choices: decline, accept or hand the job back.
 *
 * It never crashes the process: the API or the database being away is logged and retried with
 * backoff (up to 30 s between tries); `stop()` ends the loop, lets the drivers' steps under way
 * finish (2 s at most, then aborts them) and reports every driver unavailable (best effort, 2 s at
 * most), so they leave the map at once and no earlier report lands after that.
 */

export interface SimulatorDeps {
  db: Db;
  config: Pick<Config, 'simulator' | 'dataEncryptionKey'>;
  logger: Logger;
  /** Randomness (tests may fix it). */
  random?: () => number;
}

export interface RunningSimulator {
  stop(): Promise<void>;
}

/** Miles per hour of a simulated taxi, before the time scale. */
const SPEED_MPH = 25;
/** How far from home (miles) an idle driver wanders. */
const WANDER_MILES = 2;
/** Simulated seconds a driver waits at the pickup before the passenger is on board. */
const PICKUP_WAIT_SECONDS = 120;
/** Close enough to a target (miles) to count as there. */
const ARRIVED_MILES = 0.05;
const MAX_BACKOFF_MS = 30_000;
const REQUEST_TIMEOUT_MS = 10_000;
/** How long `stop()` waits for the drivers' going-offline reports. */
const OFFLINE_TIMEOUT_MS = 2_000;
/** Drivers stepped at once per tick. */
const CONCURRENCY = 8;

interface FeedJob {
  bookingReference: string;
  state: string;
  pickup: LatLng;
  dropoff: LatLng;
  fareGBP: number | null;
  /** How the passenger pays (as booked). */
  paymentMethod?: string;
  sandbox?: { scenario: string | null; move: 'accept' | 'decline' | 'hand_back' | null };
}

interface DriverState {
  driver: SimulatedDriver;
  pos: LatLng;
  target: LatLng | null;
  /** Offers decided, by booking reference: what to do and when. */
  decisions: Map<string, { action: 'accept' | 'decline'; at: number }>;
  /** The job in hand: when its next step may happen. */
  job: { ref: string; nextAt: number } | null;
  /** Rate limited or refused: skip this driver until then. */
  pausedUntil: number;
}

class ApiUnavailable extends Error {}

export function startSimulator(deps: SimulatorDeps): RunningSimulator {
  const cfg = deps.config.simulator;
  const log = deps.logger;
  const random = deps.random ?? Math.random;
  const abort = new AbortController();
  let stopped = false;
  let states: DriverState[] | null = null;
  let failures = 0;
  let refreshFleet = false;
  let lastTick = 0;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> = Promise.resolve();

  const delay = () => cfg.delayMinMs + random() * (cfg.delayMaxMs - cfg.delayMinMs);
  /** Miles covered in `ms` of real time. */
  const milesIn = (ms: number) => (SPEED_MPH * cfg.timeScale * ms) / 3_600_000;

  const wanderTarget = (home: LatLng): LatLng => {
    const angle = random() * 2 * Math.PI;
    const miles = random() * WANDER_MILES;
    return {
      lat: home.lat + (miles / 69) * Math.sin(angle),
      lng: home.lng + (miles / (69 * Math.cos((home.lat * Math.PI) / 180))) * Math.cos(angle),
    };
  };

  /** Drive in a straight line towards the target; true when there. */
  const move = (s: DriverState, ms: number): boolean => {
    if (!s.target) return true;
    const left = haversineMiles(s.pos, s.target);
    const step = milesIn(ms);
    if (left <= Math.max(step, ARRIVED_MILES)) {
      s.pos = { ...s.target };
      return true;
    }
    const f = step / left;
    s.pos = { lat: s.pos.lat + (s.target.lat - s.pos.lat) * f, lng: s.pos.lng + (s.target.lng - s.pos.lng) * f };
    return false;
  };

  async function call(
    s: DriverState,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown }> {
    let res: Response;
    try {
      res = await fetch(`${cfg.apiUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${s.driver.token}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.any([abort.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
      });
    } catch (err) {
      throw new ApiUnavailable(
        `${method} ${path}: ${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}`,
      );
    }
    const text = await res.text();
    if (res.status >= 500) throw new ApiUnavailable(`${method} ${path}: HTTP ${res.status}`);
    if (res.status === 401) refreshFleet = true;
    if (res.status === 429) {
      const retry = Number(res.headers.get('retry-after') ?? '5');
      s.pausedUntil = Date.now() + (Number.isFinite(retry) ? retry : 5) * 1000;
    }
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: res.status, json };
  }

  const post = (s: DriverState, ref: string, action: string, body: unknown = {}) =>
    call(s, 'POST', `/api/public/v1/jobs/${encodeURIComponent(ref)}/${action}`, body);

  async function progress(s: DriverState, job: FeedJob, now: number, arrived: boolean): Promise<void> {
    const ref = job.bookingReference;
    if (!s.job || s.job.ref !== ref) s.job = { ref, nextAt: now + delay() };
    s.target = job.state === 'passenger_on_board' ? job.dropoff : job.pickup;
    if (now < s.job.nextAt) return;
    const next = (ms = delay()) => {
      if (s.job) s.job.nextAt = Date.now() + ms;
    };
    switch (job.state) {
      case 'accepted': {
        const r = await post(s, ref, 'status', { status: 'driver_en_route' });
        if (r.status === 200) next();
        return;
      }
      case 'driver_en_route': {
        if (job.sandbox?.move === 'hand_back') {
          const r = await post(s, ref, 'hand-back', {
            reason: 'simulated driver: vehicle trouble (scenario driver_cancels)',
          });
          if (r.status === 200) {
            log.info({ bookingReference: ref, driverId: s.driver.id }, 'simulated driver handed the job back');
            s.job = null;
            s.target = null;
          }
          return;
        }
        if (!arrived) return;
        const r = await post(s, ref, 'status', { status: 'driver_arrived' });
        if (r.status === 200) next((PICKUP_WAIT_SECONDS * 1000) / cfg.timeScale);
        return;
      }
      case 'driver_arrived': {
        const r = await post(s, ref, 'status', { status: 'passenger_on_board' });
        if (r.status === 200) {
          s.target = job.dropoff;
          next();
        }
        return;
      }
      case 'passenger_on_board': {
        if (!arrived) return;
        // The passenger pays as booked: on account, by bank transfer, or by the driver's
        // payment link as chosen; a booking for cash or card is paid either way at the kerb.
        const booked = job.paymentMethod;
        const atKerb = ['cash', 'card'] as const;
        const method =
          booked === 'account' || booked === 'bank_transfer' || booked === 'pay_link'
            ? booked
            : (atKerb[Math.floor(random() * atKerb.length)] ?? 'cash');
        const amountGBP = Math.round((job.fareGBP ?? 0) * 100) / 100;
        const payment =
          method === 'card'
            ? { method, amountGBP, processorFeeGBP: Math.round(amountGBP * 1.5 + 20) / 100 }
            : { method, amountGBP };
        const r = await post(s, ref, 'status', { status: 'completed', payment });
        if (r.status === 200 || r.status === 404) {
          if (r.status === 200)
            log.info({ bookingReference: ref, driverId: s.driver.id, method }, 'simulated ride completed');
          s.job = null;
          s.target = null;
        }
        return;
      }
      default:
        return;
    }
  }

  async function stepDriver(s: DriverState, now: number, elapsed: number): Promise<void> {
    if (s.pausedUntil > now) return;
    if (!s.job && (!s.target || move(s, 0))) s.target = wanderTarget(s.driver.home);
    const arrived = move(s, elapsed);
    await call(s, 'POST', '/api/public/v1/driver/presence', { available: s.job === null, ...s.pos });
    const feed = await call(s, 'GET', '/api/public/v1/jobs');
    if (feed.status !== 200) return;
    const jobs = ((feed.json as { jobs?: FeedJob[] } | null)?.jobs ?? []).filter((j) => j && typeof j === 'object');
    const offered = new Set<string>();
    for (const job of jobs.filter((j) => j.state === 'offered')) {
      offered.add(job.bookingReference);
      let decision = s.decisions.get(job.bookingReference);
      if (!decision) {
        const move = job.sandbox?.move;
        const action =
          move === 'accept' || move === 'decline'
            ? move
            : s.job === null && random() < cfg.acceptProbability
              ? 'accept'
              : 'decline';
        decision = { action, at: now + delay() };
        s.decisions.set(job.bookingReference, decision);
      }
      if (decision.at > now) continue;
      s.decisions.delete(job.bookingReference);
      const r = await post(
        s,
        job.bookingReference,
        decision.action,
        decision.action === 'decline' ? { reason: 'simulated driver declined' } : {},
      );
      if (r.status === 200) {
        log.info(
          { bookingReference: job.bookingReference, driverId: s.driver.id, scenario: job.sandbox?.scenario ?? null },
          decision.action === 'accept' ? 'simulated driver accepted an offer' : 'simulated driver declined an offer',
        );
      }
    }
    // Forget decisions on offers that are gone (expired, withdrawn).
    for (const ref of s.decisions.keys()) if (!offered.has(ref)) s.decisions.delete(ref);
    const held = jobs.find((j) => j.state !== 'offered');
    if (held) await progress(s, held, now, arrived);
    else if (s.job) {
      s.job = null;
      s.target = null;
    }
  }

  async function loadFleet(): Promise<void> {
    const fleet = await ensureSimulatedFleet(deps.db, deps.config, { size: cfg.fleetSize, cities: cfg.cities });
    const previous = new Map((states ?? []).map((s) => [s.driver.id, s]));
    states = fleet.map(
      (driver) =>
        previous.get(driver.id) ?? {
          driver,
          pos: wanderTarget(driver.home),
          target: null,
          decisions: new Map(),
          job: null,
          pausedUntil: 0,
        },
    );
    for (const s of states) {
      const fresh = fleet.find((d) => d.id === s.driver.id);
      if (fresh) s.driver = fresh;
    }
    refreshFleet = false;
  }

  async function tick(): Promise<void> {
    if (states === null || refreshFleet) await loadFleet();
    const now = Date.now();
    const elapsed = lastTick === 0 ? 0 : Math.min(now - lastTick, 10 * cfg.tickMs);
    lastTick = now;
    const queue = [...(states ?? [])];
    let unavailable: Error | null = null;
    await Promise.all(
      Array.from({ length: Math.min(CONCURRENCY, queue.length) }, async () => {
        for (let s = queue.shift(); s && !stopped; s = queue.shift()) {
          try {
            await stepDriver(s, now, elapsed);
          } catch (err) {
            if (err instanceof ApiUnavailable) {
              unavailable = err;
              queue.length = 0;
            } else throw err;
          }
        }
      }),
    );
    if (unavailable) throw unavailable;
  }

  function schedule(ms: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick()
        .then(() => {
          if (failures > 0) log.info({ failures }, 'simulator reconnected');
          failures = 0;
          schedule(cfg.tickMs);
        })
        .catch((err: unknown) => {
          if (stopped) return;
          failures += 1;
          const wait = Math.min(cfg.tickMs * 2 ** Math.min(failures, 10), MAX_BACKOFF_MS);
          if (failures === 1 || failures % 10 === 0)
            log.warn({ err, failures, retryInMs: wait }, 'simulator cannot reach the API or the database; retrying');
          schedule(wait);
        });
    }, ms);
  }

  if (cfg.fleetSize === 0) log.info('simulator has no fleet (SIMULATOR_FLEET_SIZE=0): idle');
  else {
    log.info({ fleetSize: cfg.fleetSize, cities: cfg.cities, apiUrl: cfg.apiUrl }, 'simulator started');
    schedule(0);
  }

  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      // The tick in progress takes no new driver now; let the steps under way finish (bounded)
      // before the going-offline reports, so no presence report still in flight at the API can
      // land after a driver's "unavailable". Only when they take longer are they aborted (the
      // API may then still apply one late: that driver expires as any silent driver does).
      let wait: NodeJS.Timeout | undefined;
      const settled = await Promise.race([
        running.then(
          () => true,
          () => true,
        ),
        new Promise<boolean>((resolve) => {
          wait = setTimeout(() => resolve(false), OFFLINE_TIMEOUT_MS);
        }),
      ]);
      clearTimeout(wait);
      abort.abort();
      if (!settled) await running.catch(() => {});
      // Off the map at once: otherwise dispatch would keep offering test bookings to drivers
      // nobody drives until their presence expires. Best effort, bounded: the API may be
      // stopping too (a driver left on the map then expires as any silent driver does).
      await Promise.all(
        (states ?? []).map((s) =>
          fetch(`${cfg.apiUrl}/api/public/v1/driver/presence`, {
            method: 'POST',
            headers: { authorization: `Bearer ${s.driver.token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ available: false, ...s.pos }),
            signal: AbortSignal.timeout(OFFLINE_TIMEOUT_MS),
          })
            .then((res) => res.body?.cancel())
            .catch(() => {}),
        ),
      );
      log.info({ drivers: states?.length ?? 0 }, 'simulator stopped: its drivers are offline');
    },
  };
}
