import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TwilioRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  form: Record<string, string>;
}

/**
 * A local server that answers as Twilio's REST API does for `Messages.json`: form-encoded
 * POST, basic auth, 201 with a message resource. `failFor` makes it answer an error for a
 * recipient: a Twilio-style 400 (permanent) or `times` 500s before succeeding.
 */
export async function startTwilioStub() {
  const requests: TwilioRequest[] = [];
  const failures = new Map<string, { status: number; times: number }>();
  let sid = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const form = Object.fromEntries(new URLSearchParams(raw));
      const entry: TwilioRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        authorization: req.headers.authorization,
        contentType: req.headers['content-type'],
        form,
      };
      requests.push(entry);
      const fail = failures.get(form.To ?? '');
      if (fail && fail.times > 0) {
        fail.times -= 1;
        res.writeHead(fail.status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            code: fail.status === 400 ? 21211 : 20500,
            message: 'stub failure',
            status: fail.status,
            more_info: '',
          }),
        );
        return;
      }
      sid += 1;
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          sid: `SM${String(sid).padStart(32, '0')}`,
          account_sid: /Accounts\/([^/]+)/.exec(req.url ?? '')?.[1],
          to: form.To,
          from: form.From,
          body: form.Body,
          status: 'queued',
          num_segments: '1',
          date_created: new Date().toUTCString(),
        }),
      );
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    failFor(to: string, status: number, times = Number.POSITIVE_INFINITY) {
      failures.set(to, { status, times });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
