import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { outboxWake } from './outbox.ts';

// Postgres BIGINT (int8) and COUNT(*) come back as strings by default; every bigint we store
// (ids, pence) fits in a JS number, so parse them as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number.parseFloat(v));
// DATE is a calendar day, not an instant: keep it as 'YYYY-MM-DD' rather than a local-midnight Date.
pg.types.setTypeParser(pg.types.builtins.DATE, (v) => v);

export type Db = Knex;
export type Tx = Knex.Transaction;
/** Repositories take either the pool or a transaction. */
export type Queryable = Knex | Knex.Transaction;

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'migrations');

interface MigrationModule {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/**
 * Migrations are TypeScript files in `migrations/`, named `YYYYMMDDHHMMSS_name.ts`. They are
 * imported from this module (not from inside knex) so that whichever TypeScript loader runs
 * the process (tsx in production, vitest in tests) also loads them.
 */
export const migrationSource: Knex.MigrationSource<string> = {
  async getMigrations() {
    const files = await fs.readdir(MIGRATIONS_DIR);
    return files.filter((f) => /^\d{14}_[a-z0-9-_]+\.ts$/.test(f)).sort();
  },
  getMigrationName(file) {
    return file;
  },
  async getMigration(file) {
    return (await import(pathToFileURL(path.join(MIGRATIONS_DIR, file)).href)) as MigrationModule;
  },
};

export function migrationConfig(): Knex.MigratorConfig {
  return { migrationSource, tableName: 'knex_migrations' };
}

/** knex's own warnings (pool errors, deprecations) into our logger rather than the console. */
function knexLog(logger: Logger) {
  const log = logger.child({ component: 'knex' });
  return {
    warn: (message: unknown) => log.warn({ detail: String(message) }, 'knex warning'),
    error: (message: unknown) => log.error({ detail: String(message) }, 'knex error'),
    deprecate: (method: string, alternative: string) => log.warn({ method, alternative }, 'knex deprecation'),
    debug: (message: unknown) => log.debug({ detail: String(message) }, 'knex debug'),
  };
}

export function createDb(
  config: Pick<Config, 'databaseUrl' | 'databaseSchema'>,
  opts: { poolMax?: number; appName?: string; acquireTimeoutMs?: number; logger?: Logger } = {},
): Db {
  // Every connection is watched for commits that wrote the outbox, which wake the relay.
  const wake = outboxWake(config.databaseSchema);
  const db = knexFactory({
    client: 'pg',
    connection: {
      connectionString: config.databaseUrl,
      application_name: opts.appName ?? 'dtn',
    },
    searchPath: [config.databaseSchema],
    pool: {
      min: 0,
      max: opts.poolMax ?? 10,
      afterCreate(connection: Parameters<typeof wake.watch>[0], done: (err: Error | null, c: unknown) => void) {
        wake.watch(connection);
        done(null, connection);
      },
    },
    acquireConnectionTimeout: opts.acquireTimeoutMs ?? 10_000,
    migrations: migrationConfig(),
    ...(opts.logger ? { log: knexLog(opts.logger) } : {}),
  });
  wake.attach(db);
  return db;
}

/** Names of all migrations this build knows, for the readiness check. */
export async function knownMigrations(): Promise<string[]> {
  return migrationSource.getMigrations([]);
}

export async function pendingMigrations(db: Db, expected: readonly string[]): Promise<string[]> {
  const exists = await db.schema.hasTable('knex_migrations');
  if (!exists) return [...expected];
  const rows = await db('knex_migrations').select<{ name: string }[]>('name');
  const done = new Set(rows.map((r) => r.name));
  return expected.filter((name) => !done.has(name));
}
