import type { NextFunction, Request, Response } from 'express';
import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../../shared/config.ts';
import { AppError } from '../../shared/errors.ts';
import type { RouteDef, RoutePolicy } from '../route.ts';
import type { Caller } from './auth.ts';

interface Limiter {
  name: string;
  points: number;
  durationSeconds: number;
  limiter: RateLimiterRedis;
}

export interface RateLimits {
  middleware(route: RouteDef): (req: Request, res: Response, next: NextFunction) => Promise<void>;
  /** Count a failed authentication against an IP; throws 429 once there are too many. */
  countAuthFailure(ip: string): Promise<void>;
}

/** Failed key attempts allowed per IP before it is refused for a while. */
const AUTH_FAILURES = { name: 'auth-failures', points: 20, durationSeconds: 600 };

function unavailable(): AppError {
  return new AppError('service_unavailable', 'The service is briefly unavailable; retry in a few seconds.', [], {
    'Retry-After': '5',
  });
}

/**
 * Rate limits on Redis (rate-limiter-flexible), per API key when the caller has one and per
 * IP otherwise, plus any policies a route declares (e.g. 30 quotes an hour). Every limited
 * response carries `RateLimit-Policy` and `RateLimit` (IETF httpapi draft, structured-field
 * form: `"per-key";q=600;w=60` and `"per-key";r=599;t=60`); a 429 adds `Retry-After`.
 * When Redis is unreachable the request is answered 503, not let through unlimited.
 */
export function createRateLimits(redis: Redis, config: Pick<Config, 'rateLimit' | 'queuePrefix'>): RateLimits {
  const make = (p: RoutePolicy): Limiter => ({
    ...p,
    limiter: new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `${config.queuePrefix}:rl:${p.name}`,
      points: p.points,
      duration: p.durationSeconds,
    }),
  });
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

  async function consume(l: Limiter, id: string): Promise<{ l: Limiter; res: RateLimiterRes; exceeded: boolean }> {
    try {
      return { l, res: await l.limiter.consume(id), exceeded: false };
    } catch (err) {
      if (err instanceof RateLimiterRes) return { l, res: err, exceeded: true };
      throw unavailable();
    }
  }

  function tooMany(results: Array<{ l: Limiter; res: RateLimiterRes; exceeded: boolean }>, message: string): AppError {
    const retryAfter = Math.max(
      1,
      ...results.filter((r) => r.exceeded).map((r) => Math.ceil(r.res.msBeforeNext / 1000)),
    );
    return new AppError('rate_limited', message, [], { 'Retry-After': String(retryAfter), ...headers(results) });
  }

  function headers(results: Array<{ l: Limiter; res: RateLimiterRes }>): Record<string, string> {
    return {
      'RateLimit-Policy': results.map(({ l }) => `"${l.name}";q=${l.points};w=${l.durationSeconds}`).join(', '),
      RateLimit: results
        .map(
          ({ l, res }) => `"${l.name}";r=${Math.max(0, res.remainingPoints)};t=${Math.ceil(res.msBeforeNext / 1000)}`,
        )
        .join(', '),
    };
  }

  return {
    middleware(route) {
      const routePolicies = route.rateLimit === false ? [] : (route.rateLimit ?? []).map(policy);
      return async (_req, res, next) => {
        const caller = res.locals.caller as Caller;
        const id =
          caller.kind === 'api_key'
            ? `key:${caller.key.id}`
            : caller.kind === 'driver'
              ? `driver:${caller.driver.id}`
              : `ip:${caller.ip}`;
        const general = caller.kind === 'anonymous' ? perIp : perKey;
        const results = await Promise.all([general, ...routePolicies].map((l) => consume(l, id)));
        if (results.some((r) => r.exceeded)) {
          throw tooMany(results, 'Too many requests: slow down and retry after the number of seconds in Retry-After.');
        }
        for (const [name, value] of Object.entries(headers(results))) res.setHeader(name, value);
        next();
      };
    },
    async countAuthFailure(ip) {
      const r = await consume(authFailures, `ip:${ip}`);
      if (r.exceeded) throw tooMany([r], 'Too many failed authentication attempts from this address.');
    },
  };
}
