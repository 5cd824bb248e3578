import nodemailer from 'nodemailer';
import type { Config } from '../config.ts';
import { PermanentSendError } from './sms.ts';

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
        const code = (err as { responseCode?: number }).responseCode;
        // 5xx from the server is a permanent refusal (no such mailbox, policy); 4xx and
        // connection errors are temporary.
        if (typeof code === 'number' && code >= 500) {
          throw new PermanentSendError(`SMTP refused the message (${code}): ${(err as Error).message}`);
        }
        throw err;
      }
    },
    close() {
      transport.close();
    },
  };
}
