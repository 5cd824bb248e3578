import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type ErrorCode, errorBody } from '../shared/errors.ts';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/**
 * Requests Node's HTTP parser refuses before Express sees them get the API's JSON error
 * envelope, not Node's bare status line: a request head over Node's limit (16 KB) is 431
 * `headers_too_large`; a head that is not HTTP (a malformed request line, a bad header) is 400
 * `invalid_input`; a client too slow to send its head is 408 with no body (Node's own answer).
 * The connection is closed after the answer, as Node does.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const code: ErrorCode = tooLarge ? 'headers_too_large' : 'invalid_input';
    const status = tooLarge ? 431 : 400;
    const requestId = `req_${randomUUID()}`;
    const body = JSON.stringify(
      errorBody(
        code,
        tooLarge
          ? 'The request line and headers are too large (at most 16 KB together).'
          : 'The request is not well-formed HTTP/1.1.',
        [{ field: '/', problem: tooLarge ? 'request head over 16 KB' : 'malformed request head' }],
        requestId,
      ),
    );
    socket.end(
      `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
