import type { Knex } from 'knex';
import { assertJobId, assertPayload, type JobName, type JobPayload, queueOf } from '../queues/registry.ts';
import { currentRequestId } from '../trace.ts';

export interface OutboxRow {
  id: number;
  queue: string;
  job_name: string;
  payload: unknown;
  run_at: Date | null;
  job_id: string | null;
  created_at: Date;
  relayed_at: Date | null;
  attempts: number;
  last_error: string | null;
  request_id: string | null;
}

export interface EnqueueOptions {
  /** Run no earlier than this (a delayed job); default at once. */
  runAt?: Date;
  /**
   * A deterministic BullMQ job id when the domain has one (e.g. `dispatch-<booking>-3`), so
   * that two outbox rows for the same step are still one job. Default `outbox-<row id>`.
   */
  jobId?: string;
}

/**
 * Record a job in the outbox inside the caller's transaction: the job exists if and only if
 * the domain change commits. Takes a transaction, not the pool, on purpose.
 */
export async function enqueueJob<N extends JobName>(
  trx: Knex.Transaction,
  name: N,
  payload: JobPayload<N>,
  opts: EnqueueOptions = {},
): Promise<number> {
  const row = outboxRow(name, payload, opts);
  const [inserted] = await trx('outbox')
    .insert({ ...row, payload: JSON.stringify(row.payload) })
    .returning<{ id: number }[]>('id');
  if (!inserted) throw new Error('outbox insert returned no row');
  return inserted.id;
}

/**
 * The outbox row for a job, checked against the registry, for callers that write it in one
 * statement with the domain change (`insertAllIf` in shared/db/atomic.ts).
 */
export function outboxRow<N extends JobName>(
  name: N,
  payload: JobPayload<N>,
  opts: EnqueueOptions = {},
): {
  queue: string;
  job_name: N;
  payload: JobPayload<N>;
  run_at: Date | null;
  job_id: string | null;
  request_id: string | null;
} {
  assertPayload(name, payload);
  if (opts.jobId !== undefined) assertJobId(opts.jobId);
  return {
    queue: queueOf(name),
    job_name: name,
    payload,
    run_at: opts.runAt ?? null,
    job_id: opts.jobId ?? null,
    // The request (or the job of a request) this row is written in, for the logs (shared/trace.ts).
    request_id: currentRequestId(),
  };
}

export function outboxJobId(row: Pick<OutboxRow, 'id' | 'job_id'>): string {
  return row.job_id ?? `outbox-${row.id}`;
}

/**
 * Failed relays after which a row is set aside: `lockUnrelayed` no longer takes it, and the
 * rescue of lost dispatch jobs no longer waits for it. Only a failure that is the row's own
 * counts (BullMQ refusing its job, or Redis taking the rest of its batch: see the relay), so a
 * Redis outage does not add up to this; a row BullMQ refuses every time (a job id all digits, or
 * with a ':') does, in about as many seconds. Not 1: a Redis dropping out partway through a
 * batch counts a failure against the rows after the drop, and a good row must survive a few.
 * A set-aside row waits unrelayed, its `last_error` kept; put right and `attempts` set to 0, it
 * is relayed again.
 */
export const OUTBOX_MAX_ATTEMPTS = 10;

/**
 * Lock up to `limit` unrelayed rows of the `queues` this build relays, skipping rows another
 * relay holds, rows set aside (OUTBOX_MAX_ATTEMPTS) and the rows `except` (those that failed
 * earlier in the same pass). Rows naming another queue (written by a release since rolled
 * back, say) are left where they are, not taken first in every batch: enough of them would
 * otherwise fill each batch and stop the relay (`unrelayableCount` reports them).
 */
export async function lockUnrelayed(
  trx: Knex.Transaction,
  limit: number,
  queues: readonly string[],
  except: readonly number[] = [],
): Promise<OutboxRow[]> {
  return trx('outbox')
    .whereNull('relayed_at')
    .whereIn('queue', queues)
    .where('attempts', '<', OUTBOX_MAX_ATTEMPTS)
    .modify((q) => {
      if (except.length > 0) q.whereNotIn('id', except);
    })
    .orderBy('id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .select<OutboxRow[]>('*');
}

/**
 * Count a failed relay against a row: `attempts` + 1 and the error's message (only: never the
 * payload, which a Redis error's other fields can carry), cut to 500 characters.
 */
export async function recordRelayFailure(
  trx: Knex.Transaction,
  id: number,
  error: unknown,
): Promise<{ attempts: number; lastError: string }> {
  const lastError = (error instanceof Error ? error.message : String(error)).slice(0, 500);
  const [row] = await trx('outbox')
    .where({ id })
    .update({ attempts: trx.raw('attempts + 1'), last_error: lastError })
    .returning<{ attempts: number }[]>('attempts');
  return { attempts: row?.attempts ?? 0, lastError };
}

export async function markRelayed(trx: Knex.Transaction, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await trx('outbox').whereIn('id', ids).update({ relayed_at: trx.fn.now() });
}

/** Unrelayed rows naming a queue other than `queues`: never relayed by this build. */
export async function unrelayableCount(db: Knex, queues: readonly string[]): Promise<number> {
  const row = await db('outbox')
    .whereNull('relayed_at')
    .whereNotIn('queue', queues)
    .first<{ n: number }>(db.raw('count(*)::int as n'));
  return row?.n ?? 0;
}

/** Relayed rows are kept a week for audit, then removed by the relay's housekeeping. */
export async function pruneRelayed(db: Knex, olderThanDays = 7): Promise<number> {
  return db('outbox')
    .whereNotNull('relayed_at')
    .where('relayed_at', '<', db.raw(`now() - make_interval(days => ?)`, [olderThanDays]))
    .delete();
}

/** The channel the outbox relay LISTENs on: one per schema, so schemas sharing a database do not wake each other. */
export function outboxChannel(schema: string): string {
  return `outbox_${schema}`;
}

/** A statement that writes outbox rows: knex's insert, `insertAllIf` and `insertManyIf` all spell it so. */
const OUTBOX_INSERT = /\binsert into "outbox"/i;

type QueryCallback = (err: Error | null, result: unknown) => void;

/** The part of a pg connection the wake watches: knex sends every statement as `query(config, callback)`. */
interface PgConnection {
  query(...args: unknown[]): unknown;
}

/**
 * Wake the outbox relay after every commit that wrote outbox rows, from any code path that
 * uses the pool, with no trigger in the writing transaction. (A `NOTIFY` inside the writing
 * transaction, as the earlier trigger did, holds Postgres's global notify lock until that
 * transaction's commit is flushed, so every transaction writing the outbox committed one after
 * another: 620 inserts per second at 50 clients against 5,400 without it, measured with pgbench
 * on this machine.)
 *
 * `createDb` gives every new pg connection to `watch`, which sees each statement complete: an
 * outbox insert outside a transaction wakes the relay at once; inside one (between knex's
 * BEGIN and COMMIT) it marks the connection, and the COMMIT completing wakes it (a ROLLBACK
 * clears the mark). The wake is a `pg_notify` sent on its own pooled connection, coalesced: at
 * most one in flight per pool, and one more if rows were committed while it ran. A missed wake
 * (a crash between commit and notify) is covered by the relay's poll.
 */
export function outboxWake(schema: string): {
  watch(connection: PgConnection): void;
  attach(db: Knex): void;
} {
  const channel = outboxChannel(schema);
  let db: Knex | null = null;
  let inFlight = false;
  let again = false;
  const wake = (): void => {
    if (!db) return;
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    void db
      .raw('select pg_notify(?, ?)', [channel, ''])
      .catch(() => {
        // The relay's poll picks the rows up; a pool being destroyed lands here too.
      })
      .finally(() => {
        inFlight = false;
        if (again) {
          again = false;
          wake();
        }
      });
  };
  return {
    attach(knex) {
      db = knex;
    },
    watch(connection) {
      let inTransaction = false;
      let dirty = false;
      const completed = (sql: string) => {
        if (/^\s*BEGIN\b/i.test(sql)) {
          inTransaction = true;
          dirty = false;
        } else if (/^\s*COMMIT\b/i.test(sql)) {
          inTransaction = false;
          if (dirty) wake();
          dirty = false;
        } else if (/^\s*ROLLBACK\s*;?\s*$/i.test(sql)) {
          inTransaction = false;
          dirty = false;
        } else if (OUTBOX_INSERT.test(sql)) {
          if (inTransaction) dirty = true;
          else wake();
        }
      };
      const query = connection.query.bind(connection);
      connection.query = (...args: unknown[]) => {
        const config = args[0];
        const sql = typeof config === 'string' ? config : String((config as { text?: unknown })?.text ?? '');
        const last = args.length - 1;
        const callback = args[last];
        if (typeof callback !== 'function') return query(...args);
        args[last] = ((err, result) => {
          if (!err) completed(sql);
          (callback as QueryCallback)(err, result);
        }) satisfies QueryCallback;
        return query(...args);
      };
    },
  };
}
