import nodemailer from 'nodemailer';
import type { Config } from '../config.ts';
import { PermanentSendError, TemporarySendError } from './sms.ts';

export interface Mailer {
  send(msg: { to: string; subject: string; text: string; html?: string | null }): Promise<string>;
  close(): void;
}

/** E-mail over SMTP (`SMTP_URL`, e.g. smtp://127.0.0.1:2525) with nodemailer. */
export function createMailer(config: Pick<Config, 'smtpUrl' | 'mailFrom'>): Mailer {
  const transport = nodemailer.createTransport(config.smtpUrl, { from: config.mailFrom });
  return {
    async send({ to, subject, text, html }) {
      try {
        const info = await transport.sendMail({ to, subject, text, ...(html ? { html } : {}) });
        return info.messageId;
      } catch (err) {
        throw sendFailure(err);
      }
    },
    close() {
      transport.close();
    },
  };
}

/** E-mail addresses as SMTP replies and nodemailer's messages quote them (`<ada@example.org>`). */
const ADDRESS = /[^\s<>"'(),;:[\]@]+@[^\s<>"'(),;:[\]]+/g;

/**
 * nodemailer's error as our send failure: 5xx from the server is a permanent refusal (no such
 * mailbox, policy); 4xx (greylisting) and connection errors are temporary. It is logged by the
 * worker and kept in BullMQ's failure record, and nodemailer's own carries the recipient
 * (`rejected`, `rejectedErrors`, the server's reply), so only the codes and the message with
 * addresses masked are kept.
 */
export function sendFailure(err: unknown): Error {
  const e = err as { responseCode?: unknown; code?: unknown; message?: unknown };
  const code = typeof e.responseCode === 'number' ? e.responseCode : null;
  const kind = typeof e.code === 'string' && /^[A-Z_]{2,32}$/.test(e.code) ? e.code : null;
  const text = (typeof e.message === 'string' ? e.message : 'unknown error').replace(ADDRESS, '…').slice(0, 300);
  const said = [code, kind].filter((x) => x !== null).join(' ');
  if (code !== null && code >= 500) return new PermanentSendError(`SMTP refused the message (${said}): ${text}`);
  return new TemporarySendError(`SMTP did not take the message${said ? ` (${said})` : ''}: ${text}`);
}
