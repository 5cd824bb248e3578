import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncBuiltInTariffs } from '../../shared/services/tariff-store.ts';
import type { TestDriver } from '../helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from '../helpers/env.ts';
import {
  call,
  expectNothingLost,
  liveDrivers,
  type Proc,
  type Row,
  smtpStandIn,
  startWorkers,
  stopProc,
  twilioStandIn,
  v1Booking,
} from './support.ts';

/**
 * The SMTP server and Twilio go away: bookings are still accepted and dispatched, their
 * e-mails and job cards wait in `outbound_messages` and are retried with backoff; when the
 * stand-ins come back on the same ports, each message is delivered once.
 */
let env: TestEnv;
let api: Served;
let workers: Proc;
let twilio: Awaited<ReturnType<typeof twilioStandIn>>;
let smtp: Awaited<ReturnType<typeof smtpStandIn>>;
const drivers = new Map<string, TestDriver>();

beforeAll(async () => {
  twilio = await twilioStandIn();
  smtp = await smtpStandIn();
  env = await createTestEnv({
    env: {
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
  for (const d of await liveDrivers(env.rt.db, api.url, 3)) drivers.set(d.id, d);
}, 120_000);

afterAll(async () => {
  await stopProc(workers);
  await api?.close();
  await twilio?.stop();
  await smtp?.stop();
  await env?.cleanup();
});

describe('the SMTP and Twilio stand-ins stopped', () => {
  it('keeps the messages, retries them, and delivers each once when the stand-ins return', async () => {
    // The drivers' tokens went out first; nothing else is waiting.
    await eventually(async () => {
      const [row] = await env.rt.db('outbound_messages').whereNot({ state: 'sent' }).count<Row[]>('* as n');
      return Number(row?.n) === 0;
    }, 60_000);
    const before = { sms: twilio.sent.length, mails: smtp.mails.length };
    await twilio.stop();
    await smtp.stop();
    const refs: string[] = [];
    await Promise.all(
      Array.from({ length: 3 }, async () => {
        for (let i = 0; i < 4; i++) {
          const r = await call(api.url, 'POST', '/api/public/v1/booking', null, v1Booking());
          expect(r.status, r.text).toBe(201);
          refs.push(r.json?.bookingReference as string);
        }
      }),
    );
    // Dispatched meanwhile; every e-mail and job card has been tried and failed at least twice.
    const ids = (await env.rt.db('bookings').whereIn('reference', refs).pluck('id')) as string[];
    await eventually(async () => {
      const offered = await env.rt
        .db('dispatch_offers')
        .whereIn('booking_id', ids)
        .countDistinct<Row[]>('booking_id as n');
      const messages = await env.rt.db('outbound_messages').whereIn('booking_id', ids).select<Row[]>('*');
      return (
        Number(offered[0]?.n) === ids.length &&
        messages.length >= ids.length * 3 &&
        messages.every((m) => m.state === 'queued' && m.attempts >= 2 && m.last_error)
      );
    }, 60_000);
    expect(twilio.sent).toHaveLength(before.sms);
    expect(smtp.mails).toHaveLength(before.mails);

    await twilio.start();
    await smtp.start();
    await expectNothingLost(env.rt.db, refs, twilio.sent, smtp.mails, drivers);
    const messages = await env.rt.db('outbound_messages').whereIn('booking_id', ids).select<Row[]>('*');
    expect(messages.every((m) => m.state === 'sent' && m.last_error === null && m.attempts >= 3)).toBe(true);
  });
});
