import twilio from 'twilio';
import type { Config } from '../config.ts';

export interface SmsSender {
  /** Sends one SMS (`channel: sms`) or WhatsApp message; resolves with the provider's id. */
  send(msg: { channel: 'sms' | 'whatsapp'; to: string; body: string }): Promise<string>;
}

/** A failure that retrying cannot fix (Twilio rejected the number or the request for good). */
export class PermanentSendError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermanentSendError';
  }
}

/**
 * Twilio through the official client. `TWILIO_API_BASE_URL` replaces https://api.twilio.com
 * so tests and the demo point it at a local server that answers as the REST API does
 * (`POST {base}/2010-04-01/Accounts/{sid}/Messages.json`, form fields, basic auth).
 */
export function createTwilioSender(config: Config['twilio']): SmsSender {
  const client = twilio(config.accountSid, config.authToken, { autoRetry: false, timeout: 10_000 });
  client.api.baseUrl = config.apiBaseUrl;
  return {
    async send({ channel, to, body }) {
      const from = channel === 'whatsapp' ? config.whatsappFrom : config.smsFrom;
      const toAddr = channel === 'whatsapp' && !to.startsWith('whatsapp:') ? `whatsapp:${to}` : to;
      try {
        const message = await client.messages.create({ from, to: toAddr, body });
        return message.sid;
      } catch (err) {
        const status = (err as { status?: number }).status;
        // 4xx other than 429 is Twilio refusing this message for good (bad number, blocked,
        // unverified sender): retrying sends nothing. 429 and 5xx are worth retrying.
        if (typeof status === 'number' && status >= 400 && status < 500 && status !== 429) {
          throw new PermanentSendError(`Twilio refused the message (${status}): ${(err as Error).message}`);
        }
        throw err;
      }
    },
  };
}
