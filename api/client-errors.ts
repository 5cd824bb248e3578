import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { type ErrorCode, errorBody } from '../shared/errors.ts';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  413: 'Payload Too Large',
  431: 'Request Header Fields Too Large',
};

/**
 * Requests Node's HTTP parser refuses before Express sees them get the API's JSON error
 * envelope, not Node's bare status line: a request head over Node's limit (16 KB) is 431
 * `headers_too_large`; a head that is not HTTP (a malformed request line, a bad header) is 400
 * `invalid_input`; chunk extensions over Node's limit are 413 `payload_too_large`; a client too
 * slow to send its head is 408 with no body (Node's own answer). The connection is closed after
 * the answer, as Node does; a connection with a response already under way is only destroyed.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A response already on its way on this connection (keep-alive) must not be cut into: as
    // Node itself does, such a socket is only destroyed.
    const inFlight = (socket as Duplex & { _httpMessage?: { _headerSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?._headerSent) {
      socket.destroy();
      return;
    }
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      answer(socket, 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
      return;
    }
    if (err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') {
      respond(socket, 413, 'payload_too_large', 'The chunk extensions are too large.', 'chunk extensions too large');
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    respond(
      socket,
      tooLarge ? 431 : 400,
      tooLarge ? 'headers_too_large' : 'invalid_input',
      tooLarge
        ? 'The request line and headers are too large (at most 16 KB together).'
        : 'The request is not well-formed HTTP/1.1.',
      tooLarge ? 'request head over 16 KB' : 'malformed request head',
    );
  });
}

/** Write the whole answer, then close both ways (the server allows half-open sockets: end() alone would leave it open). */
function answer(socket: Duplex, text: string): void {
  socket.end(text, () => socket.destroy());
}

/** The error envelope as a raw HTTP/1.1 response, with a request id of its own. */
function respond(socket: Duplex, status: number, code: ErrorCode, message: string, problem: string): void {
  const requestId = `req_${randomUUID()}`;
  const body = JSON.stringify(errorBody(code, message, [{ field: '/', problem }], requestId));
  answer(
    socket,
    `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}
