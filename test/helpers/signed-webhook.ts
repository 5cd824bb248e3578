import type { IncomingMessage } from 'node:http';
import { Webhook } from 'standardwebhooks';

/** A webhook request as a partner's endpoint received it, and whether its signature verified. */
export interface SignedRequest {
  path: string;
  body: string;
  headers: Record<string, string>;
  verified: boolean;
}

/**
 * Read a webhook request and check its Standard Webhooks signature (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature`) with the reference `standardwebhooks` package,
 * independent of our signing code, against any of `secrets`.
 */
export function readSigned(req: IncomingMessage, secrets: readonly string[]): Promise<SignedRequest> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      let verified = false;
      for (const secret of secrets) {
        try {
          new Webhook(secret).verify(body, headers);
          verified = true;
          break;
        } catch {}
      }
      resolve({ path: req.url ?? '/', body, headers, verified });
    });
  });
}
