import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { arbitraryFor, validBy } from './helpers/fuzz-schema.ts';

describe('the fuzz generator (test/helpers/fuzz-schema.ts)', () => {
  it('gives strings that match a pattern with its lengths stated', () => {
    const schema = { type: 'string', pattern: '^[A-Za-z0-9_-]{16,128}$', minLength: 16, maxLength: 128 };
    const values = fc.sample(arbitraryFor(schema), { numRuns: 50, seed: 7 });
    expect(values).toHaveLength(50);
    for (const v of values) expect(validBy(schema, v), String(v)).toBe(true);
  });

  it('fails at once, naming the pattern, when the lengths are only in minLength (its filter would spin for ever)', () => {
    const schema = { type: 'string', pattern: '^[A-Za-z0-9_-]+$', minLength: 40 };
    expect(() => fc.sample(arbitraryFor(schema), { numRuns: 5, seed: 7 })).toThrow(
      /pattern \^\[A-Za-z0-9_-\]\+\$ gave \d+ of 200 strings/,
    );
  });
});
