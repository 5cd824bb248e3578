import { AppError, detailsText } from '../errors.ts';

/** NUL, or half of a surrogate pair: text no column (text or jsonb) can store, and no person types. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const unstorable = (s: string) => s.includes('\u0000') || LONE_SURROGATE.test(s);
const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * The first string (value or property name) in `data` that is not storable text, as a JSON
 * pointer, or null. Walks without recursion: a body may be nested thousands deep. The pointer
 * itself is made storable (a bad property name's NUL or lone surrogate becomes U+FFFD), since
 * it is echoed in answers that may be remembered (idempotency) or logged.
 */
export function unstorableText(data: unknown): string | null {
  interface Node {
    value: unknown;
    key: string;
    parent: Node | null;
  }
  const pointer = (n: Node): string => {
    const keys: string[] = [];
    for (let at: Node | null = n; at?.parent; at = at.parent)
      keys.push(
        at.key
          .replace(/~/g, '~0')
          .replace(/\//g, '~1')
          .replaceAll('\u0000', '\uFFFD')
          .replace(LONE_SURROGATES, '\uFFFD'),
      );
    return keys.length === 0 ? '/' : `/${keys.reverse().join('/')}`;
  };
  const stack: Node[] = [{ value: data, key: '', parent: null }];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    if (typeof node.value === 'string') {
      if (unstorable(node.value)) return pointer(node);
    } else if (node.value !== null && typeof node.value === 'object') {
      for (const [key, value] of Object.entries(node.value)) {
        const child = { value, key, parent: node };
        if (unstorable(key)) return pointer(child);
        stack.push(child);
      }
    }
  }
  return null;
}

/** Throws 400 `invalid_input` naming the first unstorable string of `data` (`where`: "request body", "job"...). */
export function assertStorableText(data: unknown, where: string): void {
  const field = unstorableText(data);
  if (field !== null) {
    // Worded as `detailsText` words it (the pointer, then its problem), so a route that names
    // fields in its callers' spelling (`repointed`: suppliers, the v1 spellings) renames it here too.
    const details = [{ field, problem: 'must be well-formed Unicode text without NUL characters' }];
    throw new AppError(
      'invalid_input',
      `The ${where} is not valid: ${detailsText(details)} (it contains a NUL character or an unpaired surrogate).`,
      details,
    );
  }
}
