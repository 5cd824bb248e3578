import { randomFillSync } from 'node:crypto';

/**
 * UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then a 32-bit counter seeded at
 * random each millisecond (RFC 9562 section 6.2, method 1) and random bits, so ids made by
 * one process sort in the order they were made, as the `uuid` package's v7 does.
 *
 * The `uuid` package asks Web Crypto for 16 random bytes on every call, and that call showed up
 * at 2 to 5% of the API's CPU under load (the booking and intake benchmarks make several ids
 * per booking). Here the random bytes come from a pool filled 4 KiB at a time.
 */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let offset = POOL_BYTES;

function random10(): Buffer {
  if (offset + 10 > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const bytes = pool.subarray(offset, offset + 10);
  offset += 10;
  return bytes;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

let lastMs = -1;
let seq = 0;

export function uuidv7(): string {
  const rnd = random10();
  let ms = Date.now();
  if (ms > lastMs) {
    // A new millisecond: the counter starts at a random value with its top bit clear, so it
    // has room to count up within the millisecond.
    seq =
      ((rnd[0] as number) & 0x7f) * 0x1000000 +
      (rnd[1] as number) * 0x10000 +
      (rnd[2] as number) * 0x100 +
      (rnd[3] as number);
    lastMs = ms;
  } else {
    // The same millisecond (or the clock stepped back): count on; on overflow borrow the next one.
    seq = (seq + 1) >>> 0;
    if (seq === 0) lastMs += 1;
    ms = lastMs;
  }
  const b = new Array<number>(16);
  b[0] = Math.floor(ms / 0x10000000000) & 0xff;
  b[1] = Math.floor(ms / 0x100000000) & 0xff;
  b[2] = Math.floor(ms / 0x1000000) & 0xff;
  b[3] = Math.floor(ms / 0x10000) & 0xff;
  b[4] = Math.floor(ms / 0x100) & 0xff;
  b[5] = ms & 0xff;
  // Version 7, then the counter's 32 bits across rand_a and rand_b (variant 10 in between).
  b[6] = 0x70 | ((seq >>> 28) & 0x0f);
  b[7] = (seq >>> 20) & 0xff;
  b[8] = 0x80 | ((seq >>> 14) & 0x3f);
  b[9] = (seq >>> 6) & 0xff;
  b[10] = ((seq << 2) & 0xff) | ((rnd[4] as number) & 0x03);
  b[11] = rnd[5] as number;
  b[12] = rnd[6] as number;
  b[13] = rnd[7] as number;
  b[14] = rnd[8] as number;
  b[15] = rnd[9] as number;
  const h = b.map((x) => HEX[x] as string);
  return `${h[0]}${h[1]}${h[2]}${h[3]}-${h[4]}${h[5]}-${h[6]}${h[7]}-${h[8]}${h[9]}-${h[10]}${h[11]}${h[12]}${h[13]}${h[14]}${h[15]}`;
}
