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

/** A failure worth retrying: Twilio not reached, busy, failing, or refusing the account for now. */
export class TemporarySendError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporarySendError';
  }
}

/**
 * HTTP statuses Twilio answers for the account or the deployment, not the message: bad or
 * rotated credentials (401, Twilio 20003), a suspended account (403), a wrong account SID or
 * base URL (404), a timeout (408), too many requests (429). Mending them mends every message,
 * so they are retried; any other 4xx refuses this message for good (a bad or landline number,
 * 21211 and 21614; a recipient who sent STOP, 21610).
 */
const ACCOUNT_STATUSES: ReadonlySet<number> = new Set([401, 403, 404, 408, 429]);

/** Phone numbers as Twilio's messages quote them: kept out of errors, which are logged. */
const PHONE = /\+?\d[\d ]{5,}\d/g;

/**
 * What a send failure says, and all it carries. The twilio client rethrows axios's errors for
 * failures below HTTP (timeouts, refused connections), and those hold the request: its basic
 * auth header (the account's auth token) and the form (recipient and text, a driver's token
 * in a `driver_token` message). They are logged by the worker, so only the status, Twilio's
 * code and a message with numbers masked are kept.
 */
function sendFailure(err: unknown): PermanentSendError | TemporarySendError {
  const e = err as { status?: unknown; code?: unknown; message?: unknown };
  const status = typeof e.status === 'number' ? e.status : null;
  const code = typeof e.code === 'number' || typeof e.code === 'string' ? String(e.code) : null;
  const text = (typeof e.message === 'string' ? e.message : 'unknown error').replace(PHONE, '…').slice(0, 300);
  if (status === null) return new TemporarySendError(`Twilio not reached${code ? ` (${code})` : ''}: ${text}`);
  const said = `Twilio ${status}${code ? ` (code ${code})` : ''}: ${text}`;
  if (status >= 400 && status < 500 && !ACCOUNT_STATUSES.has(status)) {
    return new PermanentSendError(`Twilio refused the message for good: ${said}`);
  }
  return new TemporarySendError(said);
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
        throw sendFailure(err);
      }
    },
  };
}
