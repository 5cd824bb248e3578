import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  alive,
  bookThroughOutage,
  expectNothingLost,
  type FaultStack,
  faultStack,
  privatePostgres,
} from './support.ts';

/**
 * Postgres is shut down (fast: sessions ended) during a burst of bookings and started again: the
 * API answers 503 `service_unavailable` with the envelope and Retry-After while it is away,
 * nothing accepted is lost, and the same API and worker processes (pool connections, the relay's
 * LISTEN, jobs that failed meanwhile) recover and dispatch everything once. A private Postgres
 * cluster is used (its own initdb on a free port), never the machine's shared one.
 */
let pg: Awaited<ReturnType<typeof privatePostgres>>;
let stack: FaultStack;

beforeAll(async () => {
  pg = await privatePostgres();
  stack = await faultStack({ DATABASE_URL: pg.url }, 4);
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await pg?.destroy();
});

describe('Postgres restarted during a booking burst', () => {
  it('answers 503 while Postgres is away, loses no accepted booking and dispatches each once when it is back', async () => {
    const { env, api, workers, twilio, smtp, drivers } = stack;
    const { accepted, refusedWhileDown } = await bookThroughOutage(api.url, pg.stop, pg.start);
    expect(refusedWhileDown).toBeGreaterThan(0);
    expect(accepted.length).toBeGreaterThanOrEqual(14);
    await expectNothingLost(env.rt.db, accepted, twilio.sent, smtp.mails, drivers);
    expect(alive(workers), workers.output().slice(-2000)).toBe(true);
  });
});
