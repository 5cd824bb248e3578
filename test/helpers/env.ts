import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { Redis } from 'ioredis';
import type { Knex } from 'knex';
import { buildApp } from '../../api/app.ts';
import { answerClientErrors } from '../../api/client-errors.ts';
import type { RouteDef } from '../../api/route.ts';
import { type Config, loadConfig } from '../../shared/config.ts';
import { knownMigrations } from '../../shared/db/knex.ts';
import { createRuntime, type Runtime } from '../../shared/runtime.ts';
import { testDatabaseUrl, testRedisUrl } from './urls.ts';

export interface TestEnv {
  config: Config;
  rt: Runtime;
  /** Environment for child processes (CLI, workers) that must see this file's schema and prefix. */
  childEnv: NodeJS.ProcessEnv;
  cleanup(): Promise<void>;
}

/**
 * An isolated world for one test file: its own Postgres schema (migrated unless told not to)
 * and its own BullMQ/Redis key prefix. `cleanup()` drops both.
 */
export async function createTestEnv(opts: { env?: Record<string, string>; migrate?: boolean } = {}): Promise<TestEnv> {
  const id = randomBytes(5).toString('hex');
  const vars: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: testDatabaseUrl(),
    DATABASE_SCHEMA: `t_${id}`,
    REDIS_URL: testRedisUrl(),
    QUEUE_PREFIX: `test-${id}`,
    PUBLIC_BASE_URLS: 'http://localhost:3000',
    OUTBOX_POLL_MS: '200',
    // No DNS from tests: the mail-server check has its own unit tests with an injected resolver.
    EMAIL_MX_CHECK: 'off',
    // Tests talk only to 127.0.0.1: SMS, e-mail and drivers' map keys go to local stand-ins, or to closed local
    // ports (a refused connection) when a test does not start one.
    TWILIO_API_BASE_URL: 'http://127.0.0.1:9',
    SMTP_URL: 'smtp://127.0.0.1:9',
    MAP_PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    ...opts.env,
  };
  const config = loadConfig(vars);
  const rt = createRuntime(config, 'test');
  await rt.db.raw('create schema ??', [config.databaseSchema]);
  if (opts.migrate !== false) await rt.db.migrate.latest();
  const childEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...vars };
  return {
    config,
    rt,
    childEnv,
    async cleanup() {
      await rt.db.raw('drop schema if exists ?? cascade', [config.databaseSchema]).catch(() => {});
      await rt.close();
      await deleteKeys(config.redisUrl, `${config.queuePrefix}:*`);
    },
  };
}

export async function deleteKeys(redisUrl: string, pattern: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

export async function appFor(env: TestEnv, extraRoutes: RouteDef[] = []): Promise<Express> {
  return buildApp({ ...env.rt, expectedMigrations: await knownMigrations() }, { extraRoutes });
}

export interface Served {
  url: string;
  close(): Promise<void>;
}

/** Listen on a free loopback port (or `port`); requests go through real HTTP. */
export async function serve(app: Express, listenPort = 0): Promise<Served> {
  const server = app.listen(listenPort, '127.0.0.1');
  answerClientErrors(server);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Wait until `fn` returns a truthy value (polling), or fail after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 15_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) throw new Error(`condition not met in ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Whether `waiters` other sessions come (within 5 s) to wait on a lock `trx` holds, directly or
 * behind another waiter (and not on some other test's):
 * a test holds a row lock, sends requests, and releases it only once they all wait on it.
 */
export async function blockedBy(db: Knex, trx: Knex.Transaction, waiters = 1): Promise<boolean> {
  const { rows: me } = await trx.raw<{ rows: { pid: number }[] }>('select pg_backend_pid() as pid');
  for (let i = 0; i < 200; i++) {
    // A second waiter on a row waits on the first (it queues for the tuple lock): count them all.
    const { rows } = await db.raw<{ rows: unknown[] }>(
      `with recursive waiting(pid) as (
         select pid from pg_stat_activity where ? = any(pg_blocking_pids(pid))
         union
         select a.pid from pg_stat_activity a join waiting w on w.pid = any(pg_blocking_pids(a.pid))
       ) select pid from waiting`,
      [me[0]?.pid ?? 0],
    );
    if (rows.length >= waiters) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return false;
}
