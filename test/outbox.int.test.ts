import { once } from 'node:events';
import net from 'node:net';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { enqueueJob, OUTBOX_MAX_ATTEMPTS } from '../shared/db/outbox.ts';
import { closeQueues, createQueues, createRedis, waitForRedis } from '../shared/queues/connection.ts';
import { JOB_DAYS_KEPT } from '../shared/services/intake.ts';
import { startOutboxRelay } from '../workers/outbox-relay/relay.ts';
import { capturingLogger } from './helpers/captured-log.ts';
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

/**
 * A row as only a hand-written insert (or an old release) leaves it: a job id BullMQ refuses.
 * BullMQ 6 (`Job.validateOptions`) refuses one that is an integer as written ('12345') and one
 * with a ':' unless it has exactly three parts ('card:7'; 'a:b:c' is taken).
 */
async function refusedRow(jobId: string): Promise<number> {
  const [row] = await env.rt
    .db('outbox')
    .insert({
      queue: 'notify',
      job_name: 'send-message',
      payload: JSON.stringify({ messageId: uuidv7() }),
      job_id: jobId,
    })
    .returning<{ id: number }[]>('id');
  if (!row) throw new Error('no row');
  return row.id;
}

const rowOf = (id: number) => env.rt.db('outbox').where({ id }).first('relayed_at', 'attempts', 'last_error');

/** A TCP hop to the real Redis that can be cut: Redis going away under a relay connected to it. */
async function cuttableRedis(): Promise<{ url: string; cut(): void }> {
  const target = new URL(env.config.redisUrl);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    client.pipe(upstream).pipe(client);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = new URL(target);
  url.host = `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    url: url.toString(),
    cut() {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
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

  it('relays the rows behind one BullMQ refuses, counts its failures, and sets it aside after OUTBOX_MAX_ATTEMPTS', async () => {
    const good = [await commitJob()];
    const digits = await refusedRow('12345');
    good.push(await commitJob());
    const colon = await refusedRow('card:7');
    good.push(await commitJob());
    const log = capturingLogger();
    const relay = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: log.logger });
    try {
      await relay.drain();
      // The good rows moved, in the same pass as the refusals: nothing waits behind them.
      for (const id of good) expect(await env.rt.queues.notify.getJob(`outbox-${id}`)).toBeDefined();
      expect(await unrelayed()).toBe(2);
      expect(await rowOf(digits)).toMatchObject({ relayed_at: null, last_error: 'Custom Id cannot be integers' });
      expect(await rowOf(colon)).toMatchObject({ relayed_at: null, last_error: 'Custom Id cannot contain :' });
      expect((await rowOf(digits)).attempts).toBeGreaterThanOrEqual(1);
      expect(log.lines.filter((l) => /set aside/.test(String(l.msg)))).toEqual([]);

      // Each pass counts one more, up to the limit; then the relay takes them no more.
      for (let i = 0; i < 3 * OUTBOX_MAX_ATTEMPTS && (await rowOf(colon)).attempts < OUTBOX_MAX_ATTEMPTS; i++)
        await relay.drain();
      await relay.drain();
      expect(await rowOf(digits)).toMatchObject({ relayed_at: null, attempts: OUTBOX_MAX_ATTEMPTS });
      expect(await rowOf(colon)).toMatchObject({ relayed_at: null, attempts: OUTBOX_MAX_ATTEMPTS });
      // Logged once each as set aside, naming the row; no payload in the line.
      const setAside = log.lines.filter((l) => /set aside/.test(String(l.msg)));
      expect(setAside).toEqual([
        expect.objectContaining({
          level: 50,
          outboxId: digits,
          queue: 'notify',
          jobName: 'send-message',
          attempts: OUTBOX_MAX_ATTEMPTS,
          lastError: 'Custom Id cannot be integers',
        }),
        expect.objectContaining({ level: 50, outboxId: colon, lastError: 'Custom Id cannot contain :' }),
      ]);
      expect(JSON.stringify(setAside)).not.toMatch(/messageId/);
      // Set aside, they are not taken: a new row moves, and they stay as they are.
      const later = await commitJob();
      await relay.drain();
      expect(await env.rt.queues.notify.getJob(`outbox-${later}`)).toBeDefined();
      expect((await rowOf(digits)).attempts).toBe(OUTBOX_MAX_ATTEMPTS);
    } finally {
      await relay.stop();
    }
  });

  it('counts no failed relay against any row while Redis is away', async () => {
    const hop = await cuttableRedis();
    const connection = createRedis({ redisUrl: hop.url }, 'producer', 'outbox-cut');
    await waitForRedis(connection);
    const queues = createQueues(connection, env.config.queuePrefix);
    await Promise.all(Object.values(queues).map((q) => q.waitUntilReady()));
    const relay = startOutboxRelay({ db: env.rt.db, queues, config: env.config, logger: env.rt.logger });
    try {
      await relay.drain();
      hop.cut();
      // A refused row among good ones: the batch fails, and so does its first row on its own.
      const ids = [await commitJob(), await refusedRow('12345'), await commitJob()];
      for (let i = 0; i < 3; i++) await expect(relay.drain()).rejects.toThrow();
      const rows = await env.rt
        .db('outbox')
        .whereIn('id', ids)
        .orderBy('id')
        .select('relayed_at', 'attempts', 'last_error');
      expect(rows).toEqual(ids.map(() => ({ relayed_at: null, attempts: 0, last_error: null })));
    } finally {
      await relay.stop();
      connection.disconnect();
      await closeQueues(queues);
    }
    // Redis back (a relay on the real connection): the good rows move, the refused row is counted.
    const back = startOutboxRelay({ db: env.rt.db, queues: env.rt.queues, config: env.config, logger: env.rt.logger });
    try {
      await back.drain();
      expect(await unrelayed()).toBe(1);
      const refused = await env.rt.db('outbox').whereNull('relayed_at').first('job_id', 'attempts');
      expect(refused.job_id).toBe('12345');
      expect(refused.attempts).toBeGreaterThanOrEqual(1);
    } finally {
      await back.stop();
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
