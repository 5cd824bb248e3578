import { v7 as uuidv7 } from 'uuid';
import type { Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';

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
}

/**
 * Queue a message for the notify worker inside the caller's transaction: the row (the
 * record of what we send, used for SMS billing and test-mode viewing) and its send job
 * commit together or not at all. The job id is the message id, so it is sent once.
 */
export async function queueMessage(trx: Tx, msg: NewMessage): Promise<string> {
  const id = uuidv7();
  await trx('outbound_messages').insert({
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
  });
  await enqueueJob(trx, 'send-message', { messageId: id }, { jobId: `message-${id}` });
  return id;
}
