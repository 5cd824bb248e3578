import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Job } from 'bullmq';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueJob } from '../shared/db/outbox.ts';
import { createMailer } from '../shared/providers/mailer.ts';
import { builtinPaymentProvider } from '../shared/providers/payments.ts';
import { createTwilioSender, PermanentSendError, TemporarySendError } from '../shared/providers/sms.ts';
import { messageRows, queueMessage } from '../shared/services/messages.ts';
import type { WorkerContext } from '../workers/context.ts';
import { sendMessage } from '../workers/notify/send-message.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { insertOfferedBooking } from './helpers/bookings.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { createTestEnv, eventually, type TestEnv } from './helpers/env.ts';
import { type CapturedMail, startSmtpCapture } from './helpers/smtp-capture.ts';
import { startTwilioStub } from './helpers/twilio-stub.ts';

/**
 * The notify role end to end: a message queued in a transaction is relayed from the outbox and
 * delivered once, by e-mail to a real SMTP server (smtp-server) and by SMS and WhatsApp to a
 * local server that speaks Twilio's REST API, through the real twilio client.
 */
const SID = 'AC0123456789abcdef0123456789abcdef';
const TOKEN = 'stub-auth-token';

let env: TestEnv;
let roles: RunningRoles;
let twilio: Awaited<ReturnType<typeof startTwilioStub>>;
let smtp: Awaited<ReturnType<typeof startSmtpCapture>>;
let mails: CapturedMail[] = [];

beforeAll(async () => {
  twilio = await startTwilioStub();
  smtp = await startSmtpCapture();
  mails = smtp.mails;
  env = await createTestEnv({
    env: {
      SMTP_URL: smtp.url,
      MAIL_FROM: 'Direct Taxi Network <bookings@dtn.test>',
      TWILIO_ACCOUNT_SID: SID,
      TWILIO_AUTH_TOKEN: TOKEN,
      TWILIO_API_BASE_URL: twilio.url,
      TWILIO_SMS_FROM: '+447700900111',
      TWILIO_WHATSAPP_FROM: 'whatsapp:+447700900222',
    },
  });
  roles = startRoles(['notify', 'outbox-relay'], env.rt);
});
afterAll(async () => {
  await roles?.close();
  await env?.cleanup();
  await twilio?.close();
  await smtp?.close();
});

const row = (id: string) => env.rt.db('outbound_messages').where({ id }).first();

describe('notify: send-message', () => {
  it('e-mails through SMTP once', async () => {
    const id = await env.rt.db.transaction((trx) =>
      queueMessage(trx, {
        channel: 'email',
        recipient: 'ada@example.org',
        subject: 'Your ride DTN-7K3F9Q',
        body: 'See you at 10:00',
        purpose: 'confirmation',
      }),
    );
    const sent = await eventually(async () => ((await row(id))?.state === 'sent' ? row(id) : null));
    expect(sent.provider_id).toMatch(/@/);
    const mail = mails.find((m) => m.raw.includes('Your ride DTN-7K3F9Q'));
    expect(mail?.to).toEqual(['ada@example.org']);
    expect(mail?.from).toBe('bookings@dtn.test');
    expect(mail?.raw).toContain('See you at 10:00');
  });

  it('sends SMS and WhatsApp exactly as the Twilio REST API expects', async () => {
    const [smsId, waId] = await env.rt.db.transaction(async (trx) => [
      await queueMessage(trx, {
        channel: 'sms',
        recipient: '+447700900123',
        body: 'Job DTN-7K3F9Q: SW1A, 10:00, £23.40',
        purpose: 'job_card',
      }),
      await queueMessage(trx, {
        channel: 'whatsapp',
        recipient: '+447700900124',
        body: 'Job card',
        purpose: 'job_card',
      }),
    ]);
    await eventually(async () => (await row(smsId))?.state === 'sent' && (await row(waId))?.state === 'sent');
    const sms = twilio.requests.find((r) => r.form.To === '+447700900123');
    expect(sms).toMatchObject({
      method: 'POST',
      path: `/2010-04-01/Accounts/${SID}/Messages.json`,
      authorization: `Basic ${Buffer.from(`${SID}:${TOKEN}`).toString('base64')}`,
      contentType: 'application/x-www-form-urlencoded',
      form: { To: '+447700900123', From: '+447700900111', Body: 'Job DTN-7K3F9Q: SW1A, 10:00, £23.40' },
    });
    const wa = twilio.requests.find((r) => r.form.To === 'whatsapp:+447700900124');
    expect(wa?.form.From).toBe('whatsapp:+447700900222');
    expect((await row(smsId)).provider_id).toMatch(/^SM/);
  });

  it('does not retry a number Twilio rejects for good', async () => {
    twilio.failFor('+447700900666', 400);
    const id = await env.rt.db.transaction((trx) =>
      queueMessage(trx, { channel: 'sms', recipient: '+447700900666', body: 'x', purpose: 'job_card' }),
    );
    const failed = await eventually(async () => ((await row(id))?.state === 'failed' ? row(id) : null));
    expect(failed.last_error).toContain('400');
    await new Promise((r) => setTimeout(r, 1500));
    expect(twilio.requests.filter((r) => r.form.To === '+447700900666')).toHaveLength(1);
  });

  it('removes the secret of a message refused for good from the record, as it does of one delivered', async () => {
    twilio.failFor('+447700900665', 400);
    const id = await env.rt.db.transaction((trx) =>
      queueMessage(trx, {
        channel: 'sms',
        recipient: '+447700900665',
        body: 'Your driver token: dtn_drv_secret123',
        purpose: 'driver_token',
      }),
    );
    const failed = await eventually(async () => ((await row(id))?.state === 'failed' ? row(id) : null));
    expect(failed.body).toMatch(/removed after delivery/);
    expect(JSON.stringify(failed)).not.toContain('dtn_drv_secret123');
    // An ordinary message refused for good keeps its text (what went wrong is worth reading).
    twilio.failFor('+447700900664', 400);
    const plain = await env.rt.db.transaction((trx) =>
      queueMessage(trx, { channel: 'sms', recipient: '+447700900664', body: 'Job DTN-7K3F9Q', purpose: 'job_card' }),
    );
    expect((await eventually(async () => ((await row(plain))?.state === 'failed' ? row(plain) : null))).body).toBe(
      'Job DTN-7K3F9Q',
    );
  });

  it('retries what Twilio refuses for the account (401: bad or rotated credentials), not the message', async () => {
    twilio.failFor('+447700900771', 401, 1);
    const id = await env.rt.db.transaction((trx) =>
      queueMessage(trx, { channel: 'sms', recipient: '+447700900771', body: 'Job DTN-7K3F9R', purpose: 'job_card' }),
    );
    const sent = await eventually(async () => ((await row(id))?.state === 'sent' ? row(id) : null));
    expect(sent.attempts).toBe(2);
    expect(twilio.requests.filter((r) => r.form.To === '+447700900771')).toHaveLength(2);
  });

  it('keeps the auth token, the number and the text out of a send failure (it is logged)', async () => {
    // Twilio not reached: the client rethrows the HTTP library's error, which holds the request.
    const sender = createTwilioSender({ ...env.config.twilio, apiBaseUrl: 'http://127.0.0.1:9' });
    const err = await sender
      .send({ channel: 'sms', to: '+447700900772', body: 'Your driver token: dtn_drv_secret456' })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(TemporarySendError);
    const logged = JSON.stringify(pino.stdSerializers.err(err as Error));
    expect(logged).toContain('Twilio not reached');
    for (const secret of [TOKEN, Buffer.from(`${SID}:${TOKEN}`).toString('base64'), '900772', 'dtn_drv_secret456']) {
      expect(logged).not.toContain(secret);
    }
  });

  it('marks a message failed, its secret removed, when its last retry fails too', async () => {
    twilio.failFor('+447700900773', 500);
    // The row alone (no job for the running worker): this test plays the worker's last attempt.
    const { id, message } = messageRows({
      channel: 'sms',
      recipient: '+447700900773',
      body: 'Your driver token: dtn_drv_secret789',
      purpose: 'driver_token',
    });
    await env.rt.db('outbound_messages').insert(message.row);
    const ctx: WorkerContext = {
      ...env.rt,
      sms: createTwilioSender(env.config.twilio),
      payments: builtinPaymentProvider(),
    } as WorkerContext;
    const attempt = (attemptsMade: number) =>
      sendMessage({ messageId: id }, ctx, { attemptsMade, opts: { attempts: 8 } } as unknown as Job);
    // An attempt with retries left fails for BullMQ to retry; the row stays queued.
    await expect(attempt(0)).rejects.toThrow(TemporarySendError);
    expect((await row(id)).state).toBe('queued');
    // The last one: failed for good, and the token leaves our record.
    await attempt(7);
    const failed = await row(id);
    expect(failed).toMatchObject({ state: 'failed', attempts: 2 });
    expect(failed.last_error).toContain('Twilio 500');
    expect(JSON.stringify(failed)).not.toContain('dtn_drv_secret789');
  });

  it('sends a job card only while its offer is open: one retried after the offer closed is not sent', async () => {
    const driver = await approvedDriver(env.rt.db);
    const card = (bookingId: string) =>
      env.rt.db.transaction((trx) =>
        queueMessage(trx, {
          channel: 'sms',
          recipient: driver.phone,
          body: 'New job: Accept within 45s',
          purpose: 'job_card',
          bookingId,
          driverId: driver.id,
        }),
      );
    const open = await insertOfferedBooking(env.rt.db, 'DTN-CARD01', { driverId: driver.id });
    const sent = await card(open.id);
    expect((await eventually(async () => ((await row(sent))?.state === 'sent' ? row(sent) : null))).state).toBe('sent');
    // The passenger cancelled (or an amendment withdrew it) before the card went out.
    const closed = await insertOfferedBooking(env.rt.db, 'DTN-CARD02', { driverId: driver.id });
    await env.rt.db('dispatch_offers').where({ id: closed.offerId }).update({ state: 'withdrawn' });
    const late = await card(closed.id);
    const skipped = await eventually(async () => ((await row(late))?.state === 'failed' ? row(late) : null));
    expect(skipped.last_error).toMatch(/no longer open/);
    // Re-offered to the same driver after an amendment: the old card (of the withdrawn offer)
    // is still not sent, though the driver now has an open offer of the booking.
    const amended = await insertOfferedBooking(env.rt.db, 'DTN-CARD03', { driverId: driver.id });
    await env.rt.db('dispatch_offers').where({ id: amended.offerId }).update({ state: 'withdrawn' });
    await env.rt.db('dispatch_offers').insert({
      id: uuidv7({ msecs: Date.now() + 60_000 }), // made after the card below
      booking_id: amended.id,
      tier: 1,
      attempt: 2,
      driver_id: driver.id,
      state: 'offered',
      expires_at: new Date(Date.now() + 30 * 60_000),
    });
    const old = await card(amended.id);
    const notSent = await eventually(async () => ((await row(old))?.state === 'failed' ? row(old) : null));
    expect(notSent.last_error).toMatch(/no longer open/);
    expect(
      twilio.requests.filter((r) => r.form.To === driver.phone && r.form.Body?.startsWith('New job')),
    ).toHaveLength(1);
  });

  it('retries a temporary failure with backoff and then sends once', async () => {
    twilio.failFor('+447700900777', 500, 1);
    const id = await env.rt.db.transaction((trx) =>
      queueMessage(trx, { channel: 'sms', recipient: '+447700900777', body: 'y', purpose: 'job_card' }),
    );
    const sent = await eventually(async () => ((await row(id))?.state === 'sent' ? row(id) : null));
    expect(sent.attempts).toBe(2);
    expect(twilio.requests.filter((r) => r.form.To === '+447700900777')).toHaveLength(2);
  });

  it('keeps the recipient out of the error of a refused e-mail (it is logged and kept by BullMQ)', async () => {
    // A real SMTP server that greylists one recipient (450) and refuses another (550), naming them.
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onRcptTo(address, _session, callback) {
        const refusal = Object.assign(
          new Error(`<${address.address}>: ${address.address.startsWith('grey') ? 'Greylisted' : 'No such user'}`),
          {
            responseCode: address.address.startsWith('grey') ? 450 : 550,
          },
        );
        callback(refusal);
      },
    });
    server.listen(0, '127.0.0.1');
    await once(server.server, 'listening');
    const mailer = createMailer({
      smtpUrl: `smtp://127.0.0.1:${(server.server.address() as AddressInfo).port}`,
      mailFrom: 'Direct Taxi Network <bookings@dtn.test>',
    });
    try {
      for (const [to, kind] of [
        ['grey.person@example.com', TemporarySendError],
        ['gone.person@example.com', PermanentSendError],
      ] as const) {
        const err = await mailer.send({ to, subject: 'Your ride', text: 'See you' }).then(
          () => null,
          (e: unknown) => e as Error,
        );
        expect(err, to).toBeInstanceOf(kind);
        expect(err?.message).toMatch(/\b(450|550)\b/);
        // As the worker's log would print it (pino's error serializer), and as BullMQ keeps it.
        const logged = JSON.stringify(pino.stdSerializers.err(err as Error));
        expect(logged).not.toContain('person@example.com');
        expect(logged).not.toContain('person');
      }
    } finally {
      mailer.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('sends a message once even when its job is delivered twice', async () => {
    const id = await env.rt.db.transaction(async (trx) => {
      const messageId = await queueMessage(trx, {
        channel: 'sms',
        recipient: '+447700900888',
        body: 'z',
        purpose: 'job_card',
      });
      await enqueueJob(trx, 'send-message', { messageId }); // a second job for the same row
      return messageId;
    });
    await eventually(async () => (await row(id))?.state === 'sent');
    await eventually(async () => (await env.rt.db('outbox').whereNull('relayed_at').count({ n: '*' }))[0]?.n === 0);
    await new Promise((r) => setTimeout(r, 500));
    expect(twilio.requests.filter((r) => r.form.To === '+447700900888')).toHaveLength(1);
  });

  it('records a test-mode message without sending it', async () => {
    const id = await env.rt.db.transaction((trx) =>
      queueMessage(trx, {
        channel: 'sms',
        recipient: '+447700900999',
        body: 'sandbox',
        purpose: 'job_card',
        testMode: true,
      }),
    );
    await eventually(async () => (await row(id))?.state === 'recorded');
    expect(twilio.requests.filter((r) => r.form.To === '+447700900999')).toHaveLength(0);
  });
});
