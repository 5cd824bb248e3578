import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { Queryable } from './knex.ts';

/**
 * Hot statements run as named (prepared) statements: Postgres parses and plans a named
 * statement once per connection (the pg driver sends its Parse once) instead of on every call.
 * For the booking path's statements (a 5-table CTE, the passenger standing read) parsing and
 * planning cost about as much as running them: naming them cut Postgres's CPU per redemption
 * from 1.2 ms to 0.8 ms (two runs each, same machine, same hour).
 *
 * The name is a hash of the text, so a name never stands for two texts; at most MAX_NAMED
 * texts are named, the rest run unnamed. When a migration changes a table a named statement
 * returns rows of (say, a column added to `quotes` read with `q.*`), Postgres refuses the
 * prepared statement ("cached plan must not change result type") on every connection that
 * prepared it; `rawNamed` then moves the text to a fresh name and runs it again, so running
 * processes carry on across a migration. Poolers in transaction mode need prepared-statement
 * support (PgBouncer 1.21+ `max_prepared_statements`).
 */
const MAX_NAMED = 500;
const names = new Map<string, string>();
let generation = 0;

function nameFor(sql: string, fresh = false): string | undefined {
  let name = fresh ? undefined : names.get(sql);
  if (name === undefined && (names.size < MAX_NAMED || names.has(sql))) {
    if (fresh) generation += 1;
    name = `dtn_${createHash('sha1').update(`${generation}\n${sql}`).digest('hex').slice(0, 24)}`;
    names.set(sql, name);
  }
  return name;
}

/** SQLSTATE 0A000 with this message: the statement's result row type changed under it (DDL). */
function isStaleResultType(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === '0A000' && typeof e.message === 'string' && e.message.includes('must not change result type');
}

/**
 * `db.raw(sql, bindings)` as a named statement (see above). Inside a transaction it runs
 * unnamed: a refused statement there aborts the transaction, so it could not be run again.
 */
export async function rawNamed<T>(db: Queryable, sql: string, bindings: readonly Knex.RawBinding[]): Promise<T> {
  const run = (name: string | undefined) =>
    db.raw(sql, bindings as Knex.RawBinding[]).options(name ? { name } : {}) as unknown as Promise<T>;
  if ((db as Knex.Transaction).isTransaction) return run(undefined);
  try {
    return await run(nameFor(sql));
  } catch (err) {
    if (!isStaleResultType(err)) throw err;
    return run(nameFor(sql, true));
  }
}
