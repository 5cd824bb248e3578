import type { NextFunction, Request, Response } from 'express';
import type { Redis } from 'ioredis';
import type { Config } from '../../shared/config.ts';
import { AppError } from '../../shared/errors.ts';
import type { RouteDef, RoutePolicy } from '../route.ts';
import type { Caller } from './auth.ts';

interface Limiter {
  name: string;
  points: number;
  durationSeconds: number;
  /** Redis key prefix: `<queuePrefix>:rl:<name>`, a caller's counter is `<prefix>:<caller>`. */
  keyPrefix: string;
}

/** One limiter's count after this request: how many it has used and when its window ends. */
interface Consumed {
  l: Limiter;
  remainingPoints: number;
  msBeforeNext: number;
  exceeded: boolean;
}

export interface RateLimits {
  middleware(route: RouteDef): (req: Request, res: Response, next: NextFunction) => Promise<void>;
  /** Count a failed authentication against an IP; throws 429 once there are too many. */
  countAuthFailure(ip: string): Promise<void>;
}

/** Failed key attempts allowed per IP before it is refused for a while. */
const AUTH_FAILURES = { name: 'auth-failures', points: 20, durationSeconds: 600 };

/**
 * Fixed windows, one counter per key: the window starts with the first request (SET NX EX)
 * and each request adds one; the reply is every counter and its time left. This is the script
 * of rate-limiter-flexible's RateLimiterRedis (same keys, same counting), applied to many
 * counters in one call: all the limiters of all the requests that arrive together.
 */
const CONSUME_LUA = `
local out = {}
for i = 1, #KEYS do
  local d = ARGV[i]
  redis.call('set', KEYS[i], 0, 'EX', d, 'NX')
  local consumed = redis.call('incrby', KEYS[i], 1)
  local ttl = redis.call('pttl', KEYS[i])
  if ttl == -1 then
    redis.call('expire', KEYS[i], d)
    ttl = 1000 * d
  end
  out[#out + 1] = consumed
  out[#out + 1] = ttl
end
return out
`;
const COMMAND = 'dtnRateLimitConsume';
/** Most requests counted by one script call. */
const MAX_BATCH = 200;

type ConsumeCommand = (numKeys: number, ...keysThenArgs: string[]) => Promise<number[]>;

/** A limit that could not be counted (Redis away or too slow): 503, never let through unlimited. */
export function unavailable(): AppError {
  return new AppError('service_unavailable', 'The service is briefly unavailable; retry in a few seconds.', [], {
    'Retry-After': '5',
  });
}

/**
 * Adds one to each fixed-window counter `keys[i]` (window `durations[i]` seconds) and answers,
 * per key, the count after it and the window's time left in ms: [count, ttl, count, ttl, ...].
 */
export type FixedWindowCounter = (keys: readonly string[], durations: readonly string[]) => Promise<number[]>;

const counters = new WeakMap<Redis, FixedWindowCounter>();

/**
 * The fixed-window counter of a Redis connection, shared by every limit counted on it (the
 * route limits here, the unverified-address limit of bookings): counts asked in the same turn
 * of the event loop go to Redis as one script call; the script walks the keys in order, so
 * two requests of one caller are two increments, exactly as two calls would be. A Redis
 * failure fails each of them.
 */
export function fixedWindowCounter(redis: Redis): FixedWindowCounter {
  const existing = counters.get(redis);
  if (existing) return existing;
  // ioredis sends the script by its SHA (EVALSHA), loading it again after a restart.
  if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { lua: CONSUME_LUA });
  const run = (redis as unknown as Record<string, ConsumeCommand>)[COMMAND] as ConsumeCommand;

  interface Pending {
    keys: string[];
    durations: string[];
    resolve(reply: number[]): void;
    reject(err: unknown): void;
  }
  let pending: Pending[] = [];
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    const all = pending;
    pending = [];
    for (let i = 0; i < all.length; i += MAX_BATCH) send(all.slice(i, i + MAX_BATCH));
  };
  const send = (batch: Pending[]) => {
    const keys: string[] = [];
    const durations: string[] = [];
    for (const p of batch) {
      keys.push(...p.keys);
      durations.push(...p.durations);
    }
    let reply: Promise<number[]>;
    try {
      reply = run.call(redis, keys.length, ...keys, ...durations);
    } catch (err) {
      reply = Promise.reject(err);
    }
    reply
      .then((reply) => {
        if (!Array.isArray(reply) || reply.length !== 2 * keys.length) {
          throw new Error(`rate-limit script answered ${Array.isArray(reply) ? reply.length : typeof reply} values`);
        }
        let at = 0;
        for (const p of batch) {
          p.resolve(reply.slice(at, at + 2 * p.keys.length));
          at += 2 * p.keys.length;
        }
      })
      // Every waiting request settles, whatever went wrong (a settled one ignores this).
      .catch((err: unknown) => {
        for (const p of batch) p.reject(err);
      });
  };

  const counter: FixedWindowCounter = (keys, durations) =>
    new Promise<number[]>((resolve, reject) => {
      pending.push({ keys: [...keys], durations: [...durations], resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  counters.set(redis, counter);
  return counter;
}

/**
 * Rate limits on Redis, per API key when the caller has one and per IP otherwise, plus any
 * policies a route declares (e.g. 30 quotes an hour). Every limited response carries
 * `RateLimit-Policy` and `RateLimit` (IETF httpapi draft, structured-field form:
 * `"per-key";q=600;w=60` and `"per-key";r=599;t=60`); a 429 adds `Retry-After`.
 * When Redis is unreachable the request is answered 503, not let through unlimited.
 */
export function createRateLimits(redis: Redis, config: Pick<Config, 'rateLimit' | 'queuePrefix'>): RateLimits {
  const count = fixedWindowCounter(redis);
  const make = (p: RoutePolicy): Limiter => ({ ...p, keyPrefix: `${config.queuePrefix}:rl:${p.name}` });
  const perKey = make({ name: 'per-key', points: config.rateLimit.perKeyPerMinute, durationSeconds: 60 });
  const perIp = make({ name: 'per-ip', points: config.rateLimit.perIpPerMinute, durationSeconds: 60 });
  const authFailures = make(AUTH_FAILURES);
  const policies = new Map<string, Limiter>();
  const policy = (p: RoutePolicy): Limiter => {
    let l = policies.get(p.name);
    if (!l) {
      l = make(p);
      policies.set(p.name, l);
    }
    return l;
  };

  /** Count one request against each of its limiters. */
  async function consume(limiters: readonly Limiter[], id: string): Promise<Consumed[]> {
    const keys: string[] = [];
    const durations: string[] = [];
    for (const l of limiters) {
      keys.push(`${l.keyPrefix}:${id}`);
      durations.push(String(l.durationSeconds));
    }
    let reply: number[];
    try {
      reply = await count(keys, durations);
    } catch {
      throw unavailable();
    }
    return limiters.map((l, i) => {
      const consumed = Number(reply[2 * i]);
      return {
        l,
        remainingPoints: Math.max(l.points - consumed, 0),
        msBeforeNext: Number(reply[2 * i + 1]),
        exceeded: consumed > l.points,
      };
    });
  }

  function tooMany(results: Consumed[], message: string): AppError {
    const retryAfter = Math.max(1, ...results.filter((r) => r.exceeded).map((r) => Math.ceil(r.msBeforeNext / 1000)));
    return new AppError('rate_limited', message, [], { 'Retry-After': String(retryAfter), ...headers(results) });
  }

  function policyHeader(limiters: readonly Limiter[]): string {
    return limiters.map((l) => `"${l.name}";q=${l.points};w=${l.durationSeconds}`).join(', ');
  }

  function headers(results: Consumed[]): Record<string, string> {
    return {
      'RateLimit-Policy': policyHeader(results.map((r) => r.l)),
      RateLimit: results
        .map((r) => `"${r.l.name}";r=${Math.max(0, r.remainingPoints)};t=${Math.ceil(r.msBeforeNext / 1000)}`)
        .join(', '),
    };
  }

  return {
    middleware(route) {
      const routePolicies = route.rateLimit === false ? [] : (route.rateLimit ?? []).map(policy);
      // The limiters, and so the policy header, are fixed per route and kind of caller.
      const forKey = [perKey, ...routePolicies];
      const forIp = [perIp, ...routePolicies];
      const keyPolicy = policyHeader(forKey);
      const ipPolicy = policyHeader(forIp);
      return async (_req, res, next) => {
        const caller = res.locals.caller as Caller;
        const id =
          caller.kind === 'api_key'
            ? `key:${caller.key.id}`
            : caller.kind === 'driver'
              ? `driver:${caller.driver.id}`
              : `ip:${caller.ip}`;
        const anonymous = caller.kind === 'anonymous';
        const results = await consume(anonymous ? forIp : forKey, id);
        if (results.some((r) => r.exceeded)) {
          throw tooMany(results, 'Too many requests: slow down and retry after the number of seconds in Retry-After.');
        }
        res.setHeader('RateLimit-Policy', anonymous ? ipPolicy : keyPolicy);
        res.setHeader(
          'RateLimit',
          results.map((r) => `"${r.l.name}";r=${r.remainingPoints};t=${Math.ceil(r.msBeforeNext / 1000)}`).join(', '),
        );
        next();
      };
    },
    async countAuthFailure(ip) {
      const results = await consume([authFailures], `ip:${ip}`);
      if (results[0]?.exceeded) throw tooMany(results, 'Too many failed authentication attempts from this address.');
    },
  };
}

/**
 * Failed proofs offered for a booking (a wrong e-mail, a wrong tracking token, a reference that
 * is not a booking): a booking's e-mail is guessable where an API key is not. Two fixed windows
 * of an hour: per caller and booking (`perBooking`), so one booking's e-mail cannot be guessed
 * by trying names, and per caller (`perCaller`: an IP address, an IPv6 one by its /64, or an API
 * key, whose integrator serves many passengers), so references cannot be tried at speed. The
 * caller is the API key, else the IP address.
 */
export const BOOKING_PROOF_LIMITS = {
  perBooking: { name: 'booking-proof-failures', points: 10 },
  perCaller: { name: 'booking-proof-failures-total', anonymousPoints: 60, keyPoints: 600 },
  durationSeconds: 3600,
} as const;

export interface BookingProofGuard {
  /**
   * Counts the attempt before anything is compared (so guesses sent in parallel cannot all be
   * compared), 429 past either limit (and then taken back: nothing was compared); answers the
   * release that takes the count back for a proof that passed (or that failed for another
   * reason than a wrong proof).
   */
  attempt(caller: Caller, reference: string): Promise<() => Promise<void>>;
}

/**
 * Takes one back from each counter that is still the window it was counted in: one whose time
 * left (PTTL) is at most what it was when counted (ARGV[i], ms). A window that ended is not
 * re-created, and the next one is not touched (a count taken back just after a window turned
 * would otherwise come off the new window's, and an address could be given more than its limit).
 */
const RELEASE_LUA = `
for i = 1, #KEYS do
  local left = redis.call('pttl', KEYS[i])
  if left > 0 and left <= tonumber(ARGV[i]) then redis.call('decr', KEYS[i]) end
end
return 0`;

/** An IP address as a rate-limit bucket: IPv4 as it is (IPv4-mapped IPv6 too), IPv6 by its /64, which one subscriber holds whole. */
export function ipBucket(ip: string): string {
  const bare = ip.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped) return mapped[1] as string;
  if (!bare.includes(':')) return bare;
  const [head = '', tail] = bare.split('::');
  const front = head ? head.split(':') : [];
  const back = tail ? tail.split(':') : [];
  const groups =
    tail === undefined ? front : [...front, ...Array(Math.max(0, 8 - front.length - back.length)).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

const RELEASE_COMMAND = 'dtnRateLimitRelease';

/**
 * Takes one back from each of `keys`, fixed-window counts taken by `fixedWindowCounter`, for a
 * request that turned out not to be what the limit counts: `ttls` are the times left the
 * counter answered with (ms), so only the window counted in is touched (`RELEASE_LUA`).
 * Never fails: a count not taken back (Redis away) expires with its window.
 */
export function countReleaser(redis: Redis): (keys: readonly string[], ttls: readonly number[]) => Promise<void> {
  // Sent by its SHA (EVALSHA), as the counter's script is.
  if (!(RELEASE_COMMAND in redis)) redis.defineCommand(RELEASE_COMMAND, { lua: RELEASE_LUA });
  const run = (redis as unknown as Record<string, ConsumeCommand>)[RELEASE_COMMAND] as ConsumeCommand;
  return async (keys, ttls) => {
    try {
      await run.call(redis, keys.length, ...keys, ...ttls.map(String));
    } catch {
      // A count not taken back expires with its window: never a reason to fail the request.
    }
  };
}

export function bookingProofGuard(redis: Redis, queuePrefix: string): BookingProofGuard {
  const count = fixedWindowCounter(redis);
  const releaseKeys = countReleaser(redis);
  const { perBooking, perCaller, durationSeconds } = BOOKING_PROOF_LIMITS;
  const window = String(durationSeconds);
  return {
    async attempt(caller, reference) {
      const keyed = caller.kind === 'api_key';
      const who = keyed ? `key:${caller.key.id}` : `ip:${ipBucket(caller.ip)}`;
      const totalPoints = keyed ? perCaller.keyPoints : perCaller.anonymousPoints;
      const keys = [
        `${queuePrefix}:rl:${perBooking.name}:${who}:${reference}`,
        `${queuePrefix}:rl:${perCaller.name}:${who}`,
      ];
      let reply: number[];
      try {
        reply = await count(keys, [window, window]);
      } catch {
        throw unavailable();
      }
      const release = () => releaseKeys(keys, [Number(reply[1]), Number(reply[3])]);
      const policies = [
        { name: perBooking.name, points: perBooking.points, used: Number(reply[0]), ttl: Number(reply[1]) },
        { name: perCaller.name, points: totalPoints, used: Number(reply[2]), ttl: Number(reply[3]) },
      ];
      const over = policies.filter((p) => p.used > p.points);
      if (over.length === 0) return release;
      // Refused, it is compared with nothing: no failed proof, so taken back at once (a passenger
      // retrying with the right address does not use up their IP's allowance for other bookings).
      await release();
      const retryAfter = String(Math.max(1, ...over.map((p) => Math.ceil(p.ttl / 1000))));
      throw new AppError(
        'rate_limited',
        'Too many booking lookups with a wrong e-mail address, token or reference from here: retry after the number of seconds in Retry-After.',
        [],
        {
          'Retry-After': retryAfter,
          'RateLimit-Policy': policies.map((p) => `"${p.name}";q=${p.points};w=${durationSeconds}`).join(', '),
          RateLimit: policies
            // What is left once this refused attempt is taken back.
            .map((p) => `"${p.name}";r=${Math.max(0, p.points - (p.used - 1))};t=${Math.ceil(p.ttl / 1000)}`)
            .join(', '),
        },
      );
    },
  };
}
