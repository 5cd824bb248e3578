/**
 * The names operators give partners and API keys (the CLI's `partner create` and `key create`,
 * the operator pages' forms, and the services behind both): one line of visible text of at most
 * NAME_MAX characters. Control characters, line breaks and invisible formatting (bidi overrides,
 * zero-width characters) are refused, as they would make a name read as something else in a
 * list, a log or a terminal. One rule, so the CLI and the pages refuse the same names with the
 * same words.
 */

/** The longest name, in characters (code points), as an operator's own (`operators.ts`). */
export const NAME_MAX = 100;

/** Controls (C0, DEL, C1), formatting characters (bidi controls, zero-width ones) and the Unicode line breaks. */
const NOT_ONE_LINE_OF_TEXT = /[\p{Cc}\p{Cf}\u2028\u2029]/u;
const NOT_ONE_LINE_OF_TEXT_ALL = new RegExp(NOT_ONE_LINE_OF_TEXT.source, 'gu');

/** A refused name; `problem` reads after the field's name ("--name …", "The name …"). */
export class NameError extends Error {
  constructor(readonly problem: string) {
    super(`name ${problem}`);
    this.name = 'NameError';
  }
}

/** What is wrong with a (trimmed) name, or null when it is fine. */
export function nameProblem(name: string): string | null {
  if (name.trim() === '') return 'is required';
  if (NOT_ONE_LINE_OF_TEXT.test(name)) return 'must be one line of text, without control characters';
  if ([...name].length > NAME_MAX) return `must be at most ${NAME_MAX} characters`;
  return null;
}

/** The name, or NameError when `nameProblem` finds it wrong. */
export function assertName(name: string): string {
  const problem = nameProblem(name);
  if (problem !== null) throw new NameError(problem);
  return name;
}

/** `text` without what `nameProblem` refuses in a name (to show a refused name back, for correcting). */
export function visibleText(text: string): string {
  return text.replace(NOT_ONE_LINE_OF_TEXT_ALL, '');
}
