import { validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { uuidv7 } from '../shared/ids.ts';

describe('uuidv7', () => {
  it('makes RFC 9562 version 7 UUIDs (checked by the uuid package) carrying the current millisecond', () => {
    const before = Date.now();
    const id = uuidv7();
    const after = Date.now();
    expect(validate(id)).toBe(true);
    expect(version(id)).toBe(7);
    expect(id[19]).toMatch(/[89ab]/); // variant 10
    const ms = Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after + 1);
  });

  it('sorts in the order made and never repeats, many per millisecond', () => {
    const ids = Array.from({ length: 200_000 }, () => uuidv7());
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) {
      if (!((ids[i] as string) > (ids[i - 1] as string)))
        throw new Error(`out of order at ${i}: ${ids[i - 1]} ${ids[i]}`);
    }
  });

  it('differs in its random bits from one call to the next', () => {
    const tails = new Set(Array.from({ length: 1000 }, () => uuidv7().slice(-10)));
    expect(tails.size).toBe(1000);
  });
});
