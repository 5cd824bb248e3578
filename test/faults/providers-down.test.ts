import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/env.ts';
import { call, expectNothingLost, type FaultStack, faultStack, type Row, v1Booking } from './support.ts';

/**
 * The SMTP server and Twilio go away: bookings are still accepted and dispatched, their
 * e-mails and job cards wait in `outbound_messages` and are retried with backoff; when the
 * stand-ins come back on the same ports, each message is delivered once.
 */
let stack: FaultStack;

beforeAll(async () => {
  stack = await faultStack({}, 3);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
});

describe('the SMTP and Twilio stand-ins stopped', () => {
  it('keeps the messages, retries them, and delivers each once when the stand-ins return', async () => {
    const { env, api, twilio, smtp, drivers } = stack;
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
