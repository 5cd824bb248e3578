import { UnrecoverableError } from 'bullmq';
import type { JobPayload } from '../../shared/queues/registry.ts';
import { PermanentSendError } from '../../shared/providers/sms.ts';
import type { WorkerContext } from '../context.ts';

interface MessageRow {
  id: string;
  channel: 'email' | 'sms' | 'whatsapp';
  recipient: string;
  subject: string | null;
  body: string;
  html: string | null;
  state: 'queued' | 'sent' | 'failed' | 'recorded';
  purpose: string;
  test_mode: boolean;
}

/**
 * Messages that carry a secret (a one-time code, a verification or tracking link, a driver's token): once delivered, their text is
 * removed from our record, so the secret lives only in the recipient's inbox. Test-mode
 * messages keep their text: showing it is how sandbox integrators read them.
 */
export const SECRET_PURPOSES = new Set(['verification', 'confirmation', 'driver_token']);
export const REDACTED_BODY = '[removed after delivery: it contained a one-time code or link]';

/**
 * Deliver one outbound message. The row is the source of truth: a message already sent (or
 * recorded, in test mode) is not sent again, so a retried or duplicated job sends nothing.
 * The row is locked for the duration of the send so two workers never send it twice.
 */
export async function sendMessage(payload: JobPayload<'send-message'>, ctx: WorkerContext): Promise<void> {
  const retry = await ctx.db.transaction(async (trx): Promise<Error | null> => {
    const msg = await trx<MessageRow>('outbound_messages').where({ id: payload.messageId }).forUpdate().first();
    if (!msg) throw new UnrecoverableError(`outbound message ${payload.messageId} does not exist`);
    if (msg.state !== 'queued') return null;
    if (msg.test_mode) {
      await trx('outbound_messages').where({ id: msg.id }).update({ state: 'recorded', sent_at: trx.fn.now() });
      return null;
    }
    try {
      const providerId =
        msg.channel === 'email'
          ? await ctx.mailer.send({ to: msg.recipient, subject: msg.subject ?? '', text: msg.body, html: msg.html })
          : await ctx.sms.send({ channel: msg.channel, to: msg.recipient, body: msg.body });
      await trx('outbound_messages')
        .where({ id: msg.id })
        .update({
          state: 'sent',
          provider_id: providerId,
          sent_at: trx.fn.now(),
          last_error: null,
          attempts: trx.raw('attempts + 1'),
          ...(SECRET_PURPOSES.has(msg.purpose) ? { body: REDACTED_BODY, html: null } : {}),
        });
      return null;
    } catch (err) {
      const permanent = err instanceof PermanentSendError;
      await trx('outbound_messages')
        .where({ id: msg.id })
        .update({
          attempts: trx.raw('attempts + 1'),
          last_error: (err as Error).message.slice(0, 1000),
          ...(permanent ? { state: 'failed' } : {}),
        });
      if (permanent) {
        ctx.logger.warn({ messageId: msg.id, channel: msg.channel }, 'message refused for good; not retrying');
        return null;
      }
      return err as Error;
    }
  });
  // A temporary failure is recorded on the row, then thrown so BullMQ retries with backoff.
  if (retry) throw retry;
}
