import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseCsv } from '../shared/geo/csv.ts';
import { createFuzzyIndex, damerauLevenshtein, findPostcode, fuzzyBudget, normalizeName } from '../shared/geo/text.ts';

/** Unbounded optimal-string-alignment distance, the slow way, as a reference. */
function osa(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i] as number[];
      const prev = d[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        v = Math.min(v, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = v;
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

const word = fc.string({ unit: fc.constantFrom('a', 'b', 'c', 'd', 'e', ' '), maxLength: 12 });

describe('normalizeName', () => {
  it.each([
    ["King's Cross", 'kings cross'],
    ['  MANCHESTER   Piccadilly!! ', 'manchester piccadilly'],
    ['Stratford-upon-Avon', 'stratford upon avon'],
    ['Saint Albans', 'st albans'],
    ['St. Albans', 'st albans'],
    ['Heathrow Terminal Five', 'heathrow terminal 5'],
    ['Heathrow Terminals 2 & 3', 'heathrow terminals 2 and 3'],
    ['Ynys Môn', 'ynys mon'],
    ['Bishop’s Stortford', 'bishops stortford'],
    ['', ''],
    ['!!!', ''],
  ])('%s → %s', (input, expected) => {
    expect(normalizeName(input)).toBe(expected);
  });

  it('is idempotent', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        expect(normalizeName(normalizeName(s))).toBe(normalizeName(s));
      }),
    );
  });
});

describe('findPostcode', () => {
  it.each([
    ['SW1A 2AA', 'SW1A', '2AA'],
    ['sw1a2aa', 'SW1A', '2AA'],
    ['10 Downing Street, London SW1A 2AA', 'SW1A', '2AA'],
    ['M1 1AE', 'M1', '1AE'],
    ['m11ae', 'M1', '1AE'],
    ['EH1 1YZ please', 'EH1', '1YZ'],
    ['W1A 1AA', 'W1A', '1AA'],
    ['BT7 1NN', 'BT7', '1NN'],
  ])('%s', (text, outward, inward) => {
    expect(findPostcode(text)).toMatchObject({ outward, inward });
  });

  it.each(['Heathrow T5', 'M1', 'Manchester', '221B Baker Street', 'Flat 2', ''])('%s has none', (text) => {
    expect(findPostcode(text)).toBeNull();
  });

  it('reports where it was found', () => {
    const text = 'Call at London SW1A 2AA today';
    const m = findPostcode(text);
    expect(m && text.slice(m.start, m.end)).toBe('SW1A 2AA');
  });
});

describe('bounded Damerau-Levenshtein', () => {
  it('counts insertions, deletions, substitutions and adjacent swaps as one edit each', () => {
    expect(damerauLevenshtein('birmingham', 'birmingham', 2)).toBe(0);
    expect(damerauLevenshtein('birmingam', 'birmingham', 2)).toBe(1);
    expect(damerauLevenshtein('brimingham', 'birmingham', 2)).toBe(1);
    expect(damerauLevenshtein('manchster picadilly', 'manchester piccadilly', 2)).toBe(2);
    expect(damerauLevenshtein('leeds', 'london', 2)).toBe(3);
  });

  it('equals the unbounded distance when within the bound, and bound + 1 otherwise', () => {
    fc.assert(
      fc.property(word, word, fc.integer({ min: 0, max: 3 }), (a, b, max) => {
        const exact = osa(a, b);
        expect(damerauLevenshtein(a, b, max)).toBe(exact <= max ? exact : max + 1);
        expect(damerauLevenshtein(b, a, max)).toBe(damerauLevenshtein(a, b, max));
      }),
    );
  });

  it('gives no edits to names under 5 characters, 1 up to 11, 2 from 12', () => {
    expect(fuzzyBudget('ayr')).toBe(0);
    expect(fuzzyBudget('leeds')).toBe(1);
    expect(fuzzyBudget('birmingham')).toBe(1);
    expect(fuzzyBudget('manchster picadilly')).toBe(2);
  });
});

describe('fuzzy index', () => {
  it('finds exactly the keys a brute-force scan finds (same first letter, within k)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(word, { maxLength: 40 }), word, fc.integer({ min: 1, max: 2 }), (keys, q, k) => {
        const index = createFuzzyIndex(keys);
        const got = index.search(q, k).map((h) => h.key);
        const grams = new Set(Array.from({ length: q.length + 1 }, (_, i) => ` ${q} `.slice(i, i + 2)));
        const expected = keys
          .filter((key) => key[0] === q[0] && osa(q, key) <= k && grams.size - 3 * k >= 1)
          .sort((x, y) => osa(q, x) - osa(q, y) || (x < y ? -1 : x > y ? 1 : 0));
        expect(got).toEqual(expected);
      }),
    );
  });

  it('returns nearest first', () => {
    const index = createFuzzyIndex(['birmingham', 'birkenhead', 'bermingham', 'brimingham']);
    expect(index.search('birmingham', 2)).toEqual([
      { key: 'birmingham', distance: 0 },
      { key: 'bermingham', distance: 1 },
      { key: 'brimingham', distance: 1 },
    ]);
  });
});

describe('parseCsv', () => {
  it('handles quotes, doubled quotes, commas and newlines inside quotes, and CRLF', () => {
    expect(parseCsv('a,b,c\r\n1,"x, y","say ""hi"""\n2,"two\nlines",\n')).toEqual([
      ['a', 'b', 'c'],
      ['1', 'x, y', 'say "hi"'],
      ['2', 'two\nlines', ''],
    ]);
  });

  it('keeps a last line without a newline', () => {
    expect(parseCsv('a,b\n1,2')).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
  });
});
