/**
 * Text helpers for the gazetteer: name normalisation, UK postcode parsing, a bounded
 * Damerau-Levenshtein distance and a bigram index that finds fuzzy candidates quickly.
 */

const NUMBER_WORDS: Record<string, string> = {
  one: '1',
  two: '2',
  three: '3',
  four: '4',
  five: '5',
  six: '6',
  seven: '7',
  eight: '8',
  nine: '9',
};

/**
 * Lower case, accents and apostrophes dropped ("King's" → "kings"), "&" → "and", every other
 * run of punctuation or space → one space, "saint" → "st", number words one–nine → digits.
 * Applied to both the data and the queries, so they compare equal.
 */
export function normalizeName(text: string): string {
  let s = text.toLowerCase();
  // Non-ASCII: strip accents (NFKD then drop combining marks); curly apostrophes are dropped below.
  if (hasNonAscii(s)) s = s.normalize('NFKD').replace(/\p{M}/gu, '');
  let out = '';
  let gap = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57)) {
      if (gap && out !== '') out += ' ';
      out += s[i];
      gap = false;
    } else if (c === 39 || c === 96 || c === 0x2018 || c === 0x2019 || c === 0xb4) {
      // apostrophes vanish: "King's" → "kings"
    } else if (c === 38) {
      if (out !== '') out += ' ';
      out += 'and';
      gap = true;
    } else {
      gap = true;
    }
  }
  if (!WORD_SWAPS.test(out)) return out;
  return out
    .split(' ')
    .map((t) => (t === 'saint' ? 'st' : (NUMBER_WORDS[t] ?? t)))
    .join(' ');
}

function hasNonAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 127) return true;
  return false;
}

const WORD_SWAPS = /\b(?:saint|one|two|three|four|five|six|seven|eight|nine)\b/;

export function tokensOf(norm: string): string[] {
  return norm === '' ? [] : norm.split(' ');
}

// ----- postcodes -----

/** An outward code: A9, A99, A9A, AA9, AA99, AA9A. */
export const OUTWARD_RE = /^([A-Z]{1,2})([0-9][A-Z0-9]?)$/;
/** An inward code: 9AA. */
export const INWARD_RE = /^[0-9][A-Z]{2}$/;

export interface PostcodeMatch {
  outward: string;
  inward: string;
  /** Offsets of the postcode in the original text. */
  start: number;
  end: number;
}

/** The area letters of an outward code ("SW1A" → "SW"), or null if it is not one. */
export function outwardArea(outward: string): string | null {
  const m = OUTWARD_RE.exec(outward);
  return m?.[1] ?? null;
}

/**
 * The last full UK postcode in a text, in any case and with or without the space
 * ("sw1a2aa", "SW1A 2AA", "… London SW1A 2AA"). Shape only: the caller checks the district.
 */
export function findPostcode(text: string): PostcodeMatch | null {
  const tokens = [...text.matchAll(/[A-Za-z0-9]+/g)].map((m) => ({
    t: m[0].toUpperCase(),
    start: m.index ?? 0,
    end: (m.index ?? 0) + m[0].length,
  }));
  let found: PostcodeMatch | null = null;
  for (let i = 0; i < tokens.length; i++) {
    const cur = tokens[i];
    if (!cur) continue;
    const next = tokens[i + 1];
    if (OUTWARD_RE.test(cur.t) && next && INWARD_RE.test(next.t)) {
      found = { outward: cur.t, inward: next.t, start: cur.start, end: next.end };
      i += 1;
      continue;
    }
    if (cur.t.length >= 5 && cur.t.length <= 7) {
      const outward = cur.t.slice(0, -3);
      const inward = cur.t.slice(-3);
      if (OUTWARD_RE.test(outward) && INWARD_RE.test(inward)) {
        found = { outward, inward, start: cur.start, end: cur.end };
      }
    }
  }
  return found;
}

// ----- fuzzy matching -----

/**
 * Damerau-Levenshtein distance (optimal string alignment: insert, delete, substitute, swap two
 * neighbours) bounded by `max`: returns `max + 1` as soon as the distance must exceed `max`.
 */
export function damerauLevenshtein(a: string, b: string, max: number): number {
  const la = a.length;
  const lb = b.length;
  if (Math.abs(la - lb) > max) return max + 1;
  if (la === 0 || lb === 0) return Math.max(la, lb) <= max ? Math.max(la, lb) : max + 1;
  let prev2 = new Array<number>(lb + 1).fill(0);
  let prev = new Array<number>(lb + 1);
  let cur = new Array<number>(lb + 1);
  for (let j = 0; j <= lb; j++) prev[j] = j;
  for (let i = 1; i <= la; i++) {
    cur[0] = i;
    let rowMin = i;
    const ca = a.charCodeAt(i - 1);
    for (let j = 1; j <= lb; j++) {
      const cb = b.charCodeAt(j - 1);
      const cost = ca === cb ? 0 : 1;
      let v = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && ca === b.charCodeAt(j - 2) && a.charCodeAt(i - 2) === cb) {
        v = Math.min(v, (prev2[j - 2] ?? 0) + 1);
      }
      cur[j] = v;
      if (v < rowMin) rowMin = v;
    }
    if (rowMin > max) return max + 1;
    const spare = prev2;
    prev2 = prev;
    prev = cur;
    cur = spare;
  }
  const d = prev[lb] ?? max + 1;
  return d <= max ? d : max + 1;
}

/** The edits allowed for a normalised name: none under 5 characters, 1 up to 11, 2 from 12. */
export function fuzzyBudget(norm: string): number {
  if (norm.length < 5) return 0;
  return norm.length < 12 ? 1 : 2;
}

/** Code of a normalised character: a–z 0–25, 0–9 26–35, anything else (space) 36. */
function charCode(c: number): number {
  if (c >= 97 && c <= 122) return c - 97;
  if (c >= 48 && c <= 57) return c - 22;
  return 36;
}

/** The distinct bigrams of " s " as numbers (37 × 37 possible). */
function bigrams(s: string): Set<number> {
  const out = new Set<number>();
  let prev = 36;
  for (let i = 0; i < s.length; i++) {
    const cur = charCode(s.charCodeAt(i));
    out.add(prev * 37 + cur);
    prev = cur;
  }
  out.add(prev * 37 + 36);
  return out;
}

const BIGRAMS = 37 * 37;

export interface FuzzyHit {
  key: string;
  distance: number;
}

/**
 * A bigram index over a fixed set of keys, partitioned by key length. Hits must start with the
 * query's first letter. A key within `k` edits
 * of the query is within `k` in length and shares at least |bigrams(query)| − 3k distinct
 * bigrams with it (one edit destroys at most two bigram occurrences of the query, an adjacent
 * swap three), so only the postings of lengths |query| ± k are counted, and only keys reaching
 * the count are checked with the bounded distance.
 */
export function createFuzzyIndex(keys: readonly string[]) {
  const postings = new Map<number, number[]>();
  keys.forEach((key, id) => {
    for (const g of bigrams(key)) {
      const slot = key.length * BIGRAMS + g;
      const list = postings.get(slot);
      if (list) list.push(id);
      else postings.set(slot, [id]);
    }
  });
  const counts = new Uint16Array(keys.length);

  return {
    /** Keys within `k` edits of `query`, nearest first (then alphabetical). */
    search(query: string, k: number): FuzzyHit[] {
      if (k <= 0 || query === '') return [];
      const grams = bigrams(query);
      const need = grams.size - 3 * k;
      if (need < 1) return [];
      const touched: number[] = [];
      for (let len = Math.max(1, query.length - k); len <= query.length + k; len++) {
        for (const g of grams) {
          const list = postings.get(len * BIGRAMS + g);
          if (!list) continue;
          for (const id of list) {
            const c = counts[id] ?? 0;
            if (c === 0) touched.push(id);
            counts[id] = c + 1;
          }
        }
      }
      const hits: FuzzyHit[] = [];
      for (const id of touched) {
        const c = counts[id] ?? 0;
        counts[id] = 0;
        if (c < need) continue;
        const key = keys[id];
        // Misspellings keep the first letter far more often than not; requiring it keeps
        // "new street" from becoming "bow street".
        if (key === undefined || key.charCodeAt(0) !== query.charCodeAt(0)) continue;
        const distance = damerauLevenshtein(query, key, k);
        if (distance <= k) hits.push({ key, distance });
      }
      return hits.sort((x, y) => x.distance - y.distance || (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
    },
  };
}

export type FuzzyIndex = ReturnType<typeof createFuzzyIndex>;
