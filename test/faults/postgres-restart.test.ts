import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncBuiltInTariffs } from '../../shared/services/tariff-store.ts';
import type { TestDriver } from '../helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from '../helpers/env.ts';
import {
  alive,
  bookThroughOutage,
  expectNothingLost,
  liveDrivers,
  type Proc,
  privatePostgres,
  smtpStandIn,
  startWorkers,
  stopProc,
  twilioStandIn,
} from './support.ts';

/**
 * Postgres is shut down (fast: sessions ended) during a burst of bookings and started again: the
 * API answers 503 `service_unavailable` with the envelope and Retry-After while it is away,
 * nothing accepted is lost, and the same API and worker processes (pool connections, the relay's
 * LISTEN, jobs that failed meanwhile) recover and dispatch everything once. A private Postgres
 * cluster is used (its own initdb on a free port), never the machine's shared one.
 */
let pg: Awaited<ReturnType<typeof privatePostgres>>;
let env: TestEnv;
let api: Served;
let workers: Proc;
let twilio: Awaited<ReturnType<typeof twilioStandIn>>;
let smtp: Awaited<ReturnType<typeof smtpStandIn>>;
const drivers = new Map<string, TestDriver>();

beforeAll(async () => {
  pg = await privatePostgres();
  twilio = await twilioStandIn();
  smtp = await smtpStandIn();
  env = await createTestEnv({
    env: {
      DATABASE_URL: pg.url,
      TWILIO_API_BASE_URL: twilio.url,
      SMTP_URL: smtp.url,
      OFFER_TIMEOUT_SECONDS: '3600',
      PRESENCE_TTL_SECONDS: '3600',
      WORKER_LOCK_MS: '2000',
      OUTBOX_POLL_MS: '200',
      RATE_LIMIT_PER_IP_PER_MINUTE: '1000000',
      QUOTE_LIMIT_PER_HOUR: '1000000',
    },
  });
  await syncBuiltInTariffs(env.rt.db);
  api = await serve(await appFor(env));
  workers = await startWorkers('pricing,dispatch,notify,outbox-relay', env.childEnv);
  for (const d of await liveDrivers(env.rt.db, api.url, 4)) drivers.set(d.id, d);
}, 180_000);

afterAll(async () => {
  await stopProc(workers);
  await api?.close();
  await twilio?.stop();
  await smtp?.stop();
  await env?.cleanup();
  await pg?.destroy();
});

describe('Postgres restarted during a booking burst', () => {
  it('answers 503 while Postgres is away, loses no accepted booking and dispatches each once when it is back', async () => {
    const { accepted, refusedWhileDown } = await bookThroughOutage(api.url, pg.stop, pg.start);
    expect(refusedWhileDown).toBeGreaterThan(0);
    expect(accepted.length).toBeGreaterThanOrEqual(14);
    await expectNothingLost(env.rt.db, accepted, twilio.sent, smtp.mails, drivers);
    expect(alive(workers), workers.output().slice(-2000)).toBe(true);
  });
});
