import type { RowInsert } from '../db/atomic.ts';
import type { Tx } from '../db/knex.ts';
import { enqueueJob, outboxRow } from '../db/outbox.ts';
import { uuidv7 } from '../ids.ts';

export interface NewMessage {
  channel: 'email' | 'sms' | 'whatsapp';
  /** E-mail address, or an E.164 phone number for SMS and WhatsApp. */
  recipient: string;
  subject?: string;
  body: string;
  html?: string;
  /** What the message is for: job_card, confirmation, verification, driver_token, ... */
  purpose: string;
  bookingId?: string;
  driverId?: string;
  partnerId?: string;
  /** Test-mode messages are recorded, never sent. */
  testMode?: boolean;
  /**
   * Test mode only (a check constraint refuses it on a live message): the test key whose holder
   * reads this booking-less message in the sandbox's /test/messages (a passenger-verify e-mail).
   */
  apiKeyId?: string;
}

/**
 * Queue a message for the notify worker inside the caller's transaction: the row (the
 * record of what we send, used for SMS billing and test-mode viewing) and its send job
 * commit together or not at all. The job id is the message id, so it is sent once.
 */
export async function queueMessage(trx: Tx, msg: NewMessage): Promise<string> {
  const { id, message, job } = messageRows(msg);
  await trx('outbound_messages').insert(message.row);
  await enqueueJob(trx, 'send-message', job.row.payload as { messageId: string }, { jobId: `message-${id}` });
  return id;
}

/**
 * The channels a driver hears about their jobs on: a job card, and then its withdrawal, the
 * job's changes or its cancellation, go by SMS and by WhatsApp alike, so a driver who reads
 * only one of them is never offered a job there and left untold that it is off. Each is its
 * own message, sent once; only the SMS is billed (README, Billing).
 */
export const DRIVER_JOB_CHANNELS = ['sms', 'whatsapp'] as const;

/** Queue a text about a job to a driver on each of DRIVER_JOB_CHANNELS, inside the caller's transaction. */
export async function queueDriverText(
  trx: Tx,
  msg: Omit<NewMessage, 'channel' | 'subject' | 'html' | 'driverId'> & { driverId: string },
): Promise<void> {
  for (const channel of DRIVER_JOB_CHANNELS) await queueMessage(trx, { ...msg, channel });
}

/** The message row and its send job, for callers writing them in one statement (`insertAllIf`). */
export function messageRows(msg: NewMessage): {
  id: string;
  message: RowInsert;
  job: RowInsert & { row: { payload: unknown } };
} {
  const id = uuidv7();
  return {
    id,
    message: {
      table: 'outbound_messages',
      row: {
        id,
        channel: msg.channel,
        recipient: msg.recipient,
        subject: msg.subject ?? null,
        body: msg.body,
        html: msg.html ?? null,
        purpose: msg.purpose,
        booking_id: msg.bookingId ?? null,
        driver_id: msg.driverId ?? null,
        partner_id: msg.partnerId ?? null,
        test_mode: msg.testMode ?? false,
        // Only when given: booking messages, written in batches, keep their columns.
        ...(msg.apiKeyId ? { api_key_id: msg.apiKeyId } : {}),
      },
    },
    job: { table: 'outbox', row: outboxRow('send-message', { messageId: id }, { jobId: `message-${id}` }) },
  };
}
