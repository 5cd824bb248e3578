import type { JobsOptions, Queue } from 'bullmq';
import pg from 'pg';
import type { Config } from '../../shared/config.ts';
import type { Db } from '../../shared/db/knex.ts';
import {
  lockUnrelayed,
  markRelayed,
  OUTBOX_MAX_ATTEMPTS,
  type OutboxRow,
  outboxChannel,
  outboxJobId,
  pruneRelayed,
  recordRelayFailure,
  unrelayableCount,
} from '../../shared/db/outbox.ts';
import { failpoint } from '../../shared/failpoints.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Queues } from '../../shared/queues/connection.ts';
import { QUEUE_NAMES, type QueueName } from '../../shared/queues/registry.ts';
import { pruneRepeatGuards } from '../../shared/services/bookings.ts';
import { pruneIdempotencyKeys } from '../../shared/services/idempotency.ts';
import { pruneJobDays } from '../../shared/services/intake.ts';
import { pruneOAuth } from '../../shared/services/oauth.ts';
import { tracedData } from '../../shared/trace.ts';

export interface OutboxRelay {
  /** Move every waiting row now; resolves with how many were moved. */
  drain(): Promise<number>;
  /** Stop listening and polling; waits for a drain in progress. */
  stop(): Promise<void>;
}

interface RelayDeps {
  db: Db;
  queues: Queues;
  config: Pick<Config, 'databaseUrl' | 'databaseSchema' | 'outbox'>;
  logger: Logger;
}

/**
 * The outbox relay: moves committed outbox rows into BullMQ. Each row becomes a job whose id
 * is deterministic (`outbox-<row id>` unless the row names one), added while the row is locked
 * and marked relayed in the same transaction. A crash before the mark leaves the row to be
 * relayed again, and BullMQ ignores a job id it already holds, so a job is enqueued exactly
 * once. Relays can run in parallel: rows are taken with SKIP LOCKED. A row BullMQ refuses fails
 * alone, and is set aside after OUTBOX_MAX_ATTEMPTS (`drainBatch`). Woken at once by the
 * NOTIFY every writer's pool sends after a commit that wrote outbox rows
 * (`wakeRelayAfterOutboxCommits` in shared/db/outbox.ts); a slow poll is only the fallback.
 */
export function startOutboxRelay(deps: RelayDeps): OutboxRelay {
  const { db, queues, config, logger } = deps;
  const log = logger.child({ component: 'outbox-relay' });
  let stopped = false;
  let running: Promise<void> | null = null;
  let again = false;
  let listener: pg.Client | null = null;
  let reconnectTimer: NodeJS.Timeout | null = null;
  let lastPrune = 0;
  let housekeeping: Promise<void> | null = null;

  /**
   * One batch, in one transaction: its rows added to their queues, then marked relayed. A
   * queue's rows go in one `addBulk`; when that fails, one at a time, so that a row BullMQ
   * refuses every time fails alone and the rows behind it still move. Which failures count
   * against a row (`recordRelayFailure`; set aside at OUTBOX_MAX_ATTEMPTS): only those that are
   * its own, not Redis being away, which would otherwise set every waiting row aside in a few
   * seconds of outage. A failure is the row's own when BullMQ refused the job before sending
   * anything to Redis (`refusedByBullMQ`), or when another row of the batch went into Redis,
   * which was taking jobs then. A failure before any row went in, with Redis not answering a
   * read, is Redis away: the batch stops there and rolls back, counting nothing, as a failed
   * batch did before. A Redis that answers but takes no job (out of memory) counts nothing
   * either: the batch moves nothing, and the pass ends as a failed one. A Redis that drops out
   * partway through a batch counts one failure against the rows after the drop, once: later
   * batches fail whole (nothing went in), which OUTBOX_MAX_ATTEMPTS allows for.
   */
  async function drainBatch(
    except: ReadonlySet<number>,
  ): Promise<{ moved: number; full: boolean; failed: number[]; uncounted: unknown }> {
    return db.transaction(async (trx) => {
      const rows = await lockUnrelayed(trx, config.outbox.batchSize, QUEUE_NAMES, [...except]);
      if (rows.length === 0) return { moved: 0, full: false, failed: [], uncounted: null };
      const byQueue = new Map<QueueName, OutboxRow[]>();
      for (const row of rows) {
        const list = byQueue.get(row.queue as QueueName) ?? [];
        list.push(row);
        byQueue.set(row.queue as QueueName, list);
      }
      const now = Date.now();
      const jobOf = (row: OutboxRow) => {
        const opts: JobsOptions = { jobId: outboxJobId(row) };
        if (row.run_at && row.run_at.getTime() > now) opts.delay = row.run_at.getTime() - now;
        return { name: row.job_name, data: tracedData(row.payload, row.request_id), opts };
      };
      const relayed: number[] = [];
      const failures: { row: OutboxRow; error: unknown }[] = [];
      let redisAnswers: boolean | undefined;
      for (const [queue, list] of byQueue) {
        try {
          await queues[queue].addBulk(list.map(jobOf));
          relayed.push(...list.map((r) => r.id));
        } catch {
          // One row BullMQ refuses fails the whole addBulk: its rows one at a time instead.
          for (const row of list) {
            const { name, data, opts } = jobOf(row);
            try {
              // Jobs of the failed addBulk already in Redis are not added twice: same job id.
              await queues[queue].add(name, data, opts);
              relayed.push(row.id);
            } catch (error) {
              if (relayed.length === 0 && !refusedByBullMQ(error)) {
                redisAnswers ??= await answersRead(queues[queue]);
                if (!redisAnswers) throw error;
              }
              failures.push({ row, error });
            }
          }
        }
      }
      failpoint('outbox-after-enqueue');
      await markRelayed(trx, relayed);
      let uncounted: unknown = null;
      for (const { row, error } of failures) {
        if (relayed.length === 0 && !refusedByBullMQ(error)) {
          uncounted ??= error;
          continue;
        }
        const { attempts, lastError } = await recordRelayFailure(trx, row.id, error);
        // The message only: a Redis error can carry the command's arguments, the payload among them.
        const fields = { outboxId: row.id, queue: row.queue, jobName: row.job_name, attempts, lastError };
        if (attempts >= OUTBOX_MAX_ATTEMPTS) {
          log.error(
            fields,
            'outbox row set aside after failing every relay: it waits unrelayed until put right and its attempts set to 0',
          );
        } else {
          log.warn(fields, 'outbox row failed to relay; the rest of its batch moved');
        }
      }
      return {
        moved: relayed.length,
        full: rows.length === config.outbox.batchSize,
        failed: failures.map((f) => f.row.id),
        uncounted,
      };
    });
  }

  async function drainAll(): Promise<number> {
    let total = 0;
    // Rows that failed in this pass: not taken again by its later batches (each would count
    // them again), but tried again by the next pass.
    const failed = new Set<number>();
    for (;;) {
      const batch = await drainBatch(failed);
      total += batch.moved;
      // Rows failed uncounted: nothing went in, though Redis answers (out of memory, say). The
      // pass ends as a failed one, and the next tries again.
      if (batch.uncounted) throw batch.uncounted;
      for (const id of batch.failed) failed.add(id);
      if (!batch.full || stopped) break;
    }
    // Housekeeping runs beside the relaying, not in it: its deletes can take a while on a
    // week of rows, and no job waits for them.
    if (Date.now() - lastPrune > 3_600_000 && !housekeeping) {
      lastPrune = Date.now();
      housekeeping = housekeep()
        .catch((err: unknown) => log.warn({ err }, 'outbox relay housekeeping failed; will retry in an hour'))
        .finally(() => {
          housekeeping = null;
        });
    }
    return total;
  }

  /** Hourly: relayed rows, expired keys, guards, tokens and counters deleted; rows no queue takes reported. */
  async function housekeep(): Promise<void> {
    const unrelayable = await unrelayableCount(db, QUEUE_NAMES);
    if (unrelayable > 0) {
      log.error({ rows: unrelayable }, 'outbox rows name a queue this build does not know; they wait unrelayed');
    }
    const pruned = await pruneRelayed(db);
    const keys = await pruneIdempotencyKeys(db);
    const guards = await pruneRepeatGuards(db);
    const oauth = await pruneOAuth(db);
    const jobDays = await pruneJobDays(db);
    if (
      pruned > 0 ||
      keys > 0 ||
      guards > 0 ||
      oauth.tokens > 0 ||
      oauth.authorizations > 0 ||
      oauth.clients > 0 ||
      jobDays > 0
    )
      log.info(
        {
          pruned,
          idempotencyKeys: keys,
          repeatGuards: guards,
          oauthTokens: oauth.tokens,
          oauthClients: oauth.clients,
          oauthAuthorizations: oauth.authorizations,
          partnerJobDays: jobDays,
        },
        'pruned relayed outbox rows, expired idempotency keys, repeat guards, OAuth tokens and old job counts',
      );
  }

  /** Coalescing trigger: at most one drain runs; a wake-up during it causes one more pass. */
  function wake(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        try {
          const moved = await drainAll();
          if (moved > 0) log.debug({ moved }, 'relayed outbox rows');
        } catch (err) {
          log.warn({ err }, 'outbox relay pass failed; will retry');
          break;
        }
      } while (again && !stopped);
    })().finally(() => {
      running = null;
    });
  }

  async function listen(): Promise<void> {
    if (stopped) return;
    const client = new pg.Client({ connectionString: config.databaseUrl, application_name: 'dtn-outbox-listen' });
    client.on('error', (err) => {
      log.warn({ err }, 'outbox LISTEN connection lost; reconnecting');
      void client.end().catch(() => {});
      if (listener === client) listener = null;
      scheduleReconnect();
    });
    client.on('notification', () => wake());
    try {
      await client.connect();
      await client.query(`LISTEN "${outboxChannel(config.databaseSchema)}"`);
      listener = client;
      if (stopped) await client.end();
      wake();
    } catch (err) {
      log.warn({ err }, 'outbox LISTEN failed; polling until it succeeds');
      await client.end().catch(() => {});
      scheduleReconnect();
    }
  }

  function scheduleReconnect(): void {
    if (stopped || reconnectTimer) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null;
      void listen();
    }, 1_000);
  }

  const poll = setInterval(wake, config.outbox.pollMs);
  void listen();
  wake();

  return {
    async drain() {
      while (running) await running;
      return drainAll();
    },
    async stop() {
      stopped = true;
      clearInterval(poll);
      if (reconnectTimer) clearTimeout(reconnectTimer);
      while (running) await running;
      if (housekeeping) await housekeeping;
      if (listener) await listener.end().catch(() => {});
      listener = null;
    },
  };
}

/**
 * BullMQ's own check of a job's options (`Job.validateOptions`), thrown before anything is sent
 * to Redis: a job id all digits or with a ':'. The row's fault, whatever Redis is doing.
 */
function refusedByBullMQ(error: unknown): boolean {
  return error instanceof Error && /^Custom Id cannot/.test(error.message);
}

/** Whether Redis answers at all: a read of the queue's counts. */
async function answersRead(queue: Queue): Promise<boolean> {
  try {
    await queue.count();
    return true;
  } catch {
    return false;
  }
}
