import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { enqueueJob } from '../shared/db/outbox.ts';
import { JOB_DAYS_KEPT } from '../shared/services/intake.ts';
import { startOutboxRelay } from '../workers/outbox-relay/relay.ts';
import { createTestEnv, eventually, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * The transactional outbox: a job exists if and only if the transaction that implied it
 * committed, and reaches BullMQ exactly once even when the relay dies at the worst moment.
 * No worker consumes the notify queue here, so every relayed job stays visible in it.
 */
let env: TestEnv;

beforeAll(async () => {
  // A slow fallback poll, so a quick relay proves the NOTIFY wake-up works.
  env = await createTestEnv({ env: { OUTBOX_POLL_MS: '60000' } });
});
afterAll(async () => {
  await env?.cleanup();
});
beforeEach(async () => {
  await env.rt.queues.notify.obliterate({ force: true });
  await env.rt.db('outbox').delete();
});

const notifyJobs = () => env.rt.queues.notify.getJobs(['waiting', 'delayed', 'active', 'completed', 'failed']);
const unrelayed = async () => Number((await env.rt.db('outbox').whereNull('relayed_at').count({ n: '*' }))[0]?.n);

async function commitJob(messageId = uuidv7(), runAt?: Date): Promise<number> {
  return env.rt.db.transaction((trx) => enqueueJob(trx, 'send-message', { messageId }, runAt ? { runAt } : {}));
}

describe('transactional outbox', () => {
  it('relays a committed job, woken by NOTIFY, with the row id as job id', async () => {
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      await new Promise((r) => setTimeout(r, 300)); // LISTEN established
      const messageId = uuidv7();
      const id = await commitJob(messageId);
      const job = await eventually(() => env.rt.queues.notify.getJob(`outbox-${id}`), 5_000);
      expect(job.name).toBe('send-message');
      expect(job.data).toEqual({ messageId });
      await eventually(async () => (await unrelayed()) === 0);
    } finally {
      await relay.stop();
    }
  });

  it('writes nothing when the transaction rolls back', async () => {
    await expect(
      env.rt.db.transaction(async (trx) => {
        await enqueueJob(trx, 'send-message', { messageId: uuidv7() });
        throw new Error('domain change failed');
      }),
    ).rejects.toThrow('domain change failed');
    expect(await env.rt.db('outbox').count({ n: '*' })).toEqual([{ n: 0 }]);
  });

  it('refuses a payload that does not match the registry', async () => {
    await expect(
      env.rt.db.transaction((trx) => enqueueJob(trx, 'send-message', { messageId: 'not-a-uuid' })),
    ).rejects.toThrow(/payload of job send-message is invalid/);
    await expect(
      env.rt.db.transaction((trx) => enqueueJob(trx, 'send-message', { messageId: uuidv7() }, { jobId: 'a:b' })),
    ).rejects.toThrow(/invalid job id/);
  });

  it('keeps a job committed while no relay runs, and enqueues it once when a relay starts', async () => {
    const id = await commitJob();
    expect(await notifyJobs()).toHaveLength(0);
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      await eventually(async () => (await unrelayed()) === 0);
      const jobs = await notifyJobs();
      expect(jobs.map((j) => j.id)).toEqual([`outbox-${id}`]);
    } finally {
      await relay.stop();
    }
  });

  it('enqueues exactly once when the relay is killed -9 between enqueue and commit, then restarted', async () => {
    const ids = [await commitJob(), await commitJob(), await commitJob()];
    // A real relay process that SIGKILLs itself after adding the jobs to BullMQ and before it
    // marks the rows relayed: the worst moment for a crash.
    const crashed = await runTs('workers/main.ts', ['outbox-relay'], {
      ...env.childEnv,
      DTN_FAILPOINTS: 'outbox-after-enqueue',
    });
    expect(crashed.signal ?? crashed.code).not.toBe(0);
    expect(crashed.stdout + crashed.stderr).not.toMatch(/stopped/);
    expect(await unrelayed()).toBe(3); // its transaction died with it
    expect((await notifyJobs()).map((j) => j.id).sort()).toEqual(ids.map((i) => `outbox-${i}`).sort());

    // Restarted, the relay moves the same rows again: BullMQ keeps one job per id.
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      await eventually(async () => (await unrelayed()) === 0);
    } finally {
      await relay.stop();
    }
    const jobs = await notifyJobs();
    expect(jobs).toHaveLength(3);
    expect(jobs.map((j) => j.id).sort()).toEqual(ids.map((i) => `outbox-${i}`).sort());
  });

  it('lets several relays share the work without duplicating a job', async () => {
    const n = 120;
    await env.rt.db.transaction(async (trx) => {
      for (let i = 0; i < n; i++) await enqueueJob(trx, 'send-message', { messageId: uuidv7() });
    });
    const cfg = { ...env.config, outbox: { pollMs: 50, batchSize: 7 } };
    const relays = [1, 2, 3].map(() =>
      startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: cfg, logger: env.rt.logger }),
    );
    try {
      await eventually(async () => (await unrelayed()) === 0);
    } finally {
      await Promise.all(relays.map((r) => r.stop()));
    }
    const counts = await env.rt.queues.notify.getJobCounts('waiting');
    expect(counts.waiting).toBe(n);
  });

  it('relays past rows naming a queue this build does not know, however many, and leaves them unrelayed', async () => {
    // As a release since rolled back would leave them: more than a batch of them, oldest first.
    const strays = Array.from({ length: env.config.outbox.batchSize + 50 }, () => ({
      queue: 'no-such-queue',
      job_name: 'no-such-job',
      payload: JSON.stringify({}),
    }));
    await env.rt.db.batchInsert('outbox', strays, 500);
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      const id = await commitJob();
      await eventually(() => env.rt.queues.notify.getJob(`outbox-${id}`), 5_000);
      // The job is in its queue a moment before its row is marked relayed: then only the strays are left.
      await eventually(async () => (await unrelayed()) === strays.length, 5_000);
      expect(await unrelayed()).toBe(strays.length);
    } finally {
      await relay.stop();
    }
  });

  it('turns a future run time into a delayed job', async () => {
    const id = await commitJob(uuidv7(), new Date(Date.now() + 3_600_000));
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      const job = await eventually(() => env.rt.queues.notify.getJob(`outbox-${id}`), 5_000);
      expect(await job.getState()).toBe('delayed');
      expect(job.opts.delay).toBeGreaterThan(3_500_000);
    } finally {
      await relay.stop();
    }
  });

  it('removes expired idempotency keys in its housekeeping, and keeps live ones', async () => {
    const row = (key: string, expires: Date) => ({
      scope: 'ip:127.0.0.1',
      key,
      method: 'POST',
      path: '/x',
      request_hash: Buffer.alloc(32),
      state: 'completed',
      expires_at: expires,
    });
    await env.rt
      .db('idempotency_keys')
      .insert([row('old', new Date(Date.now() - 1000)), row('live', new Date(Date.now() + 3_600_000))]);
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      await eventually(async () => !(await env.rt.db('idempotency_keys').where({ key: 'old' }).first()));
      expect(await env.rt.db('idempotency_keys').where({ key: 'live' }).first()).toBeDefined();
    } finally {
      await relay.stop();
    }
  });

  it("removes partners' daily job counts older than a month in its housekeeping, and keeps recent ones", async () => {
    const partner = uuidv7();
    await env.rt.db('partners').insert({ id: partner, name: 'Counted', signing_secret_sealed: 'sealed' });
    const londonDay = async (daysAgo: number) =>
      (
        await env.rt.db.raw<{ rows: { d: string }[] }>(
          `select ((now() at time zone 'Europe/London')::date - ?::int)::text as d`,
          [daysAgo],
        )
      ).rows[0]?.d as string;
    // A day either side of the limit, so a London midnight passing during the test changes nothing.
    const days = {
      today: await londonDay(0),
      kept: await londonDay(JOB_DAYS_KEPT - 1),
      gone: await londonDay(JOB_DAYS_KEPT + 1),
    };
    await env.rt.db('partner_job_days').insert([
      { partner_id: partner, test_mode: false, day: days.today, jobs: 5 },
      { partner_id: partner, test_mode: true, day: days.kept, jobs: 3 },
      { partner_id: partner, test_mode: false, day: days.gone, jobs: 7 },
    ]);
    const left = () =>
      env.rt.db('partner_job_days').where({ partner_id: partner }).orderBy('jobs').pluck<number[]>('jobs');
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      await eventually(async () => (await left()).length === 2);
      expect(await left()).toEqual([3, 5]);
    } finally {
      await relay.stop();
    }
  });
});
