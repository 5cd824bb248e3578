import { once } from 'node:events';
import net from 'node:net';

/**
 * A stand-in Redis on loopback that speaks enough RESP for a client to connect (HELLO is
 * refused so clients fall back to RESP2; INFO, CLIENT, SELECT, PING, SCAN, QUIT answered) and
 * then, once `stall()` is called, reads every command and answers none: a Redis that hangs
 * (a long fork, a network that drops packets without a reset), which a refused connection
 * does not reproduce. Other commands are answered with an error while not stalled.
 */
export interface StallingRedis {
  url: string;
  stall(): void;
  resume(): void;
  /** Commands received while stalled (unanswered). */
  readonly unanswered: string[];
  close(): Promise<void>;
}

const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

/** Parse complete RESP arrays of bulk strings from `buf`; returns the commands and the rest. */
function parse(buf: Buffer): { commands: string[][]; rest: Buffer } {
  const commands: string[][] = [];
  let pos = 0;
  const line = (): string | null => {
    const end = buf.indexOf('\r\n', pos);
    if (end < 0) return null;
    const s = buf.subarray(pos, end).toString();
    pos = end + 2;
    return s;
  };
  for (;;) {
    const start = pos;
    const head = line();
    if (head === null || !head.startsWith('*')) {
      pos = start;
      break;
    }
    const n = Number(head.slice(1));
    const args: string[] = [];
    let complete = true;
    for (let i = 0; i < n; i++) {
      const len = line();
      if (len === null || pos + Number(len.slice(1)) + 2 > buf.length) {
        complete = false;
        break;
      }
      const size = Number(len.slice(1));
      args.push(buf.subarray(pos, pos + size).toString());
      pos += size + 2;
    }
    if (!complete) {
      pos = start;
      break;
    }
    commands.push(args);
  }
  return { commands, rest: buf.subarray(pos) };
}

function reply(args: string[]): string {
  const name = (args[0] ?? '').toUpperCase();
  if (name === 'INFO') return bulk('# Server\r\nredis_version:7.0.15\r\nloading:0\r\n');
  if (name === 'PING') return '+PONG\r\n';
  if (name === 'SCAN') return '*2\r\n$1\r\n0\r\n*0\r\n';
  if (name === 'CLIENT' || name === 'SELECT' || name === 'QUIT') return '+OK\r\n';
  return `-ERR stand-in does not implement ${name}\r\n`;
}

export async function startStallingRedis(): Promise<StallingRedis> {
  let stalled = false;
  const unanswered: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      const { commands, rest } = parse(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const args of commands) {
        if (stalled) unanswered.push((args[0] ?? '').toUpperCase());
        else socket.write(reply(args));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}/0`,
    stall: () => {
      stalled = true;
    },
    resume: () => {
      stalled = false;
    },
    unanswered,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
