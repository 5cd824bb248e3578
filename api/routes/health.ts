import { Type } from '@sinclair/typebox';
import { pendingMigrations } from '../../shared/db/knex.ts';
import { AppError } from '../../shared/errors.ts';
import { defineRoute, type RouteDef } from '../route.ts';

const started = Date.now();

async function check(fn: () => Promise<unknown>, timeoutMs = 2_000): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return 'ok';
  } catch (err) {
    return (err as Error).message || 'failed';
  } finally {
    clearTimeout(timer);
  }
}

/** Liveness (the process answers) and readiness (Postgres, Redis, migrations current). */
export const healthRoutes: RouteDef[] = [
  defineRoute({
    method: 'get',
    path: '/healthz',
    operationId: 'healthz',
    summary: 'Liveness: the process is up',
    tags: ['operations'],
    auth: 'none',
    rateLimit: false,
    documented: false,
    responses: { 200: { description: 'Up', schema: Type.Object({ status: Type.Literal('ok') }) } },
    handler: ({ deps }) => ({
      status: 200,
      body: {
        status: 'ok',
        service: deps.config.serviceName,
        uptimeSeconds: Math.round((Date.now() - started) / 1000),
      },
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/readyz',
    operationId: 'readyz',
    summary: 'Readiness: Postgres, Redis and migrations',
    tags: ['operations'],
    auth: 'none',
    rateLimit: false,
    documented: false,
    responses: { 200: { description: 'Ready' } },
    handler: async ({ deps }) => {
      const [postgres, redis, migrations] = await Promise.all([
        check(() => deps.db.raw('select 1')),
        check(() => deps.redis.ping()),
        check(async () => {
          const pending = await pendingMigrations(deps.db, deps.expectedMigrations);
          if (pending.length > 0) throw new Error(`${pending.length} pending: ${pending.join(', ')}`);
        }),
      ]);
      const checks = { postgres, redis, migrations };
      const failing = Object.entries(checks).filter(([, v]) => v !== 'ok');
      if (failing.length > 0) {
        throw new AppError(
          'service_unavailable',
          `Not ready: ${failing.map(([k]) => k).join(', ')}.`,
          failing.map(([k, v]) => ({ field: `/checks/${k}`, problem: v })),
          { 'Retry-After': '5' },
        );
      }
      return { status: 200, body: { status: 'ready', checks } };
    },
  }),
];
