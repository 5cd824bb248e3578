import type { Knex } from 'knex';
import { assertJobId, assertPayload, type JobName, type JobPayload, queueOf } from '../queues/registry.ts';

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
): { queue: string; job_name: N; payload: JobPayload<N>; run_at: Date | null; job_id: string | null } {
  assertPayload(name, payload);
  if (opts.jobId !== undefined) assertJobId(opts.jobId);
  return { queue: queueOf(name), job_name: name, payload, run_at: opts.runAt ?? null, job_id: opts.jobId ?? null };
}

export function outboxJobId(row: Pick<OutboxRow, 'id' | 'job_id'>): string {
  return row.job_id ?? `outbox-${row.id}`;
}

/** Lock up to `limit` unrelayed rows, skipping rows another relay holds. */
export async function lockUnrelayed(trx: Knex.Transaction, limit: number): Promise<OutboxRow[]> {
  return trx('outbox')
    .whereNull('relayed_at')
    .orderBy('id')
    .limit(limit)
    .forUpdate()
    .skipLocked()
    .select<OutboxRow[]>('*');
}

export async function markRelayed(trx: Knex.Transaction, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await trx('outbox').whereIn('id', ids).update({ relayed_at: trx.fn.now() });
}

/** Relayed rows are kept a week for audit, then removed by the relay's housekeeping. */
export async function pruneRelayed(db: Knex, olderThanDays = 7): Promise<number> {
  return db('outbox')
    .whereNotNull('relayed_at')
    .where('relayed_at', '<', db.raw(`now() - make_interval(days => ?)`, [olderThanDays]))
    .delete();
}
