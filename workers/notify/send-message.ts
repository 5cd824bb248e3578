import { type Job, UnrecoverableError } from 'bullmq';
import type { Knex } from 'knex';
import { PermanentSendError } from '../../shared/providers/sms.ts';
import type { JobPayload } from '../../shared/queues/registry.ts';
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
  booking_id: string | null;
  driver_id: string | null;
}

/**
 * Messages that carry a secret (a one-time code, a verification or tracking link, a driver's token): once delivered, their text is
 * removed from our record, so the secret lives only in the recipient's inbox. Test-mode
 * messages keep their text: showing it is how sandbox integrators read them.
 */
export const SECRET_PURPOSES = new Set([
  'verification',
  'confirmation',
  'driver_token',
  'no_driver_yet',
  'no_driver_final',
]);
export const REDACTED_BODY = '[removed after delivery: it contained a one-time code or link]';

/**
 * Deliver one outbound message. The row is the source of truth: a message already sent (or
 * recorded, in test mode) is not sent again, so a retried or duplicated job sends nothing.
 * The row is locked for the duration of the send so two workers never send it twice.
 */
export async function sendMessage(payload: JobPayload<'send-message'>, ctx: WorkerContext, job?: Job): Promise<void> {
  // The last attempt BullMQ will make: a temporary failure now is final, and recorded as such.
  const lastAttempt = job !== undefined && job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
  // Set once the provider has taken the message: from then on it must never be sent again.
  let accepted: { msg: MessageRow; providerId: string } | null = null;
  const attempt = ctx.db.transaction(async (trx): Promise<Error | null> => {
    const msg = await trx<MessageRow>('outbound_messages').where({ id: payload.messageId }).forUpdate().first();
    if (!msg) throw new UnrecoverableError(`outbound message ${payload.messageId} does not exist`);
    if (msg.state !== 'queued') return null;
    if (msg.purpose === 'job_card' && !(await offerStillOpen(trx, msg))) {
      // A job card retried after its offer closed (the passenger cancelled, an amendment
      // withdrew it, it expired): sent now it would arrive after the driver was told otherwise.
      await trx('outbound_messages')
        .where({ id: msg.id })
        .update({ state: 'failed', last_error: 'not sent: the offer it carries is no longer open' });
      return null;
    }
    if (msg.test_mode) {
      await trx('outbound_messages').where({ id: msg.id }).update({ state: 'recorded', sent_at: trx.fn.now() });
      return null;
    }
    try {
      const providerId =
        msg.channel === 'email'
          ? await ctx.mailer.send({ to: msg.recipient, subject: msg.subject ?? '', text: msg.body, html: msg.html })
          : await ctx.sms.send({ channel: msg.channel, to: msg.recipient, body: msg.body });
      accepted = { msg, providerId };
      await trx('outbound_messages')
        .where({ id: msg.id })
        .update(sentRow(trx, msg, providerId));
      return null;
    } catch (err) {
      // Recording a message the provider took failed: not a send failure (see below).
      if (accepted) throw err;
      // Refused for good, or still failing when the retries run out (the row would otherwise
      // stay `queued` for ever, keeping any secret it carries).
      const permanent = err instanceof PermanentSendError || lastAttempt;
      await trx('outbound_messages')
        .where({ id: msg.id })
        .update({
          attempts: trx.raw('attempts + 1'),
          last_error: (err as Error).message.slice(0, 1000),
          // Refused for good: it will never reach the recipient, so its secret leaves our record now.
          ...(permanent ? { state: 'failed', ...redacted(msg) } : {}),
        });
      if (permanent) {
        ctx.logger.warn(
          { messageId: msg.id, channel: msg.channel, retriesRunOut: !(err instanceof PermanentSendError) },
          'message failed for good; not retrying',
        );
        return null;
      }
      return err as Error;
    }
  });
  let retry: Error | null;
  try {
    retry = await attempt;
  } catch (err) {
    if (!accepted) throw err;
    // The provider took the message but our record of it did not commit (Postgres went away
    // mid-send): record it once Postgres answers again rather than letting a retry send it twice.
    await recordSent(ctx, accepted, err as Error);
    return;
  }
  // A temporary failure is recorded on the row, then thrown so BullMQ retries with backoff.
  if (retry) throw retry;
}

/**
 * Whether the offer a job card carries is still open to its driver (a card without them is
 * sent). The card's offer is the driver's latest offer of the booking made before the card:
 * ids are UUIDv7, ordered by when they were made, and the card is written just after its offer.
 * So an old card retried after an amendment re-offered the job to the same driver is not sent
 * with the old details.
 */
async function offerStillOpen(db: Knex, msg: MessageRow): Promise<boolean> {
  if (!msg.booking_id || !msg.driver_id) return true;
  const offer = await db('dispatch_offers')
    .where({ booking_id: msg.booking_id, driver_id: msg.driver_id })
    .where('id', '<', msg.id)
    .orderBy('id', 'desc')
    .first<{ state: string; open: boolean } | undefined>('state', db.raw('expires_at > now() as open'));
  return offer?.state === 'offered' && offer.open;
}

function sentRow(db: Knex, msg: MessageRow, providerId: string) {
  return {
    state: 'sent',
    provider_id: providerId,
    sent_at: db.fn.now(),
    last_error: null,
    attempts: db.raw('attempts + 1'),
    ...redacted(msg),
  };
}

/**
 * A secret-carrying message's text as it is kept once delivered (or refused for good): the
 * body and HTML replaced, and any run of 6 or more digits in the subject masked (a
 * verification e-mail's subject leads with its code, so the inbox preview shows it).
 */
function redacted(msg: Pick<MessageRow, 'purpose' | 'subject'>): Record<string, string | null> {
  if (!SECRET_PURPOSES.has(msg.purpose)) return {};
  return { body: REDACTED_BODY, html: null, subject: msg.subject?.replace(/\d{6,}/g, '••••••') ?? null };
}

/** How long a worker keeps trying to record a message the provider took (then the job fails and is retried). */
const RECORD_SENT_FOR_MS = 120_000;

/**
 * Mark a message sent after the transaction that sent it failed to commit, retrying with
 * backoff while Postgres is away (the job stays this worker's meanwhile). Only a row still
 * `queued` is changed: if that commit did land after all, nothing happens. Only if Postgres
 * stays away for longer than RECORD_SENT_FOR_MS does the error reach BullMQ, whose retry may
 * send the message again (at least once, never lost).
 */
async function recordSent(
  ctx: WorkerContext,
  { msg, providerId }: { msg: MessageRow; providerId: string },
  cause: Error,
): Promise<void> {
  ctx.logger.warn({ messageId: msg.id, err: cause }, 'message sent but not recorded; recording it again');
  const until = Date.now() + RECORD_SENT_FOR_MS;
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      await ctx
        .db('outbound_messages')
        .where({ id: msg.id, state: 'queued' })
        .update(sentRow(ctx.db, msg, providerId));
      return;
    } catch (err) {
      if (Date.now() + delay > until) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
