import { createSocket, type RemoteInfo } from 'node:dgram';

/** How the stub answers for a name: an MX record, "no such domain", a server failure, or nothing. */
export type DnsAnswer = { mx: string } | 'nxdomain' | 'servfail' | 'silence';

export interface DnsStub {
  /** `127.0.0.1:port`, as EMAIL_DNS_SERVERS takes it. */
  server: string;
  /** Every question asked so far: `name TYPE`. */
  questions: string[];
  close(): Promise<void>;
}

const TYPES: Record<number, string> = { 1: 'A', 15: 'MX', 28: 'AAAA' };

function encodeName(name: string): Buffer {
  const parts = name.split('.').filter(Boolean);
  return Buffer.concat([
    ...parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'ascii')])),
    Buffer.from([0]),
  ]);
}

/**
 * A DNS server on loopback UDP that speaks enough of RFC 1035 for node:dns (c-ares): it reads
 * one question, answers MX questions for the names given an MX record, NOERROR with no
 * records for their other types, NXDOMAIN or SERVFAIL as told, and for `silence` nothing at
 * all (the client times out). Unlisted names are NXDOMAIN. For the mail-server check's tests,
 * so they run without the network and see each of its verdicts.
 */
export async function startDnsStub(answers: Record<string, DnsAnswer>): Promise<DnsStub> {
  const socket = createSocket('udp4');
  // A failed send (the client gone) is the client's timeout to notice, not the test run's crash.
  socket.on('error', () => {});
  const questions: string[] = [];
  socket.on('message', (msg: Buffer, from: RemoteInfo) => {
    if (msg.length < 12) return;
    // The question: labels up to a zero byte, then type and class.
    const labels: string[] = [];
    let at = 12;
    while (at < msg.length && msg[at] !== 0) {
      const len = msg[at] as number;
      labels.push(msg.subarray(at + 1, at + 1 + len).toString('ascii'));
      at += 1 + len;
    }
    const questionEnd = at + 5;
    if (questionEnd > msg.length) return; // not a whole question: no answer
    const qtype = msg.readUInt16BE(at + 1);
    const name = labels.join('.').toLowerCase();
    questions.push(`${name} ${TYPES[qtype] ?? qtype}`);
    const answer = answers[name] ?? 'nxdomain';
    if (answer === 'silence') return;
    const rcode = answer === 'nxdomain' ? 3 : answer === 'servfail' ? 2 : 0;
    const records: Buffer[] = [];
    if (typeof answer === 'object' && qtype === 15) {
      const exchange = encodeName(answer.mx);
      const rdata = Buffer.concat([Buffer.from([0, 10]), exchange]); // preference 10
      const head = Buffer.alloc(12);
      head.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      head.writeUInt16BE(15, 2);
      head.writeUInt16BE(1, 4); // IN
      head.writeUInt32BE(0, 6); // TTL 0: no resolver may keep the answer between tests
      head.writeUInt16BE(rdata.length, 10);
      records.push(head, rdata);
    }
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0); // the query's id
    const rd = (msg.readUInt16BE(2) >> 8) & 1;
    header.writeUInt16BE(0x8000 | 0x0400 | (rd << 8) | 0x0080 | rcode, 2); // QR, AA, RD, RA, RCODE
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(records.length > 0 ? 1 : 0, 6);
    socket.send(Buffer.concat([header, msg.subarray(12, questionEnd), ...records]), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    server: `127.0.0.1:${socket.address().port}`,
    questions,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
