import { once } from 'node:events';
import net from 'node:net';

/**
 * One HTTP exchange written by hand on a socket (a request no client library would send: a
 * Content-Length larger than the body, a head over the limit), read until the server closes
 * the connection. Answers the status line, the head in lower case and the body as text.
 */
export async function rawExchange(
  baseUrl: string,
  request: string,
): Promise<{ statusLine: string; head: string; body: string }> {
  const { port, hostname } = new URL(baseUrl);
  const socket = net.connect(Number(port), hostname);
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(request);
  await once(socket, 'close');
  const [top = '', body = ''] = Buffer.concat(chunks).toString('utf8').split('\r\n\r\n');
  return { statusLine: top.split('\r\n')[0] ?? '', head: top.toLowerCase(), body };
}

/** A POST declaring `declared` bytes of body and sending only `sent`: the answer must not wait for the rest. */
export const shortBodyPost = (path: string, contentType: string, declared: number, sent: string): string =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${contentType}\r\nContent-Length: ${declared}\r\n\r\n${sent}`;
