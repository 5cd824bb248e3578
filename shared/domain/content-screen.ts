import type { ErrorDetail } from '../errors.ts';

/**
 * Content screen for the free-text fields of a booking (SPEC.md section 5 rule 1: requests are
 * "screened for prompt-injection content before they reach the booking engine"). Bookings
 * arrive from AI assistants, and their free text (notes, names, addresses, the agent's name,
 * flight numbers, references) is later read by people and by other automated systems, so it
 * must carry booking information and nothing else. A refusal becomes `content_rejected` (400,
 * CONTRACT.md section 1) with one `{field, problem}` detail per refused field.
 *
 * Pure and synchronous. Every field is bounded by `FIELD_LIMITS` before anything else runs,
 * and every pattern below is linear: no nested unbounded quantifiers, and every gap between
 * words is a bounded run of whole words, so no input can cause catastrophic backtracking.
 *
 * Checks, in order; the first that fails refuses the field:
 *
 * 1. Length: more code points than the field kind's limit (ajv's `maxLength` counts the same).
 * 2. Hidden and control characters (see `classify`): C0/C1 controls (tab and line feed, and a
 *    carriage return directly before a line feed, are allowed in notes only); zero-width and
 *    bidirectional controls (U+200B-U+200F, U+202A-U+202E, U+2066-U+2069, U+061C); word
 *    joiners and invisible operators (U+2060-U+2064, and the rest of U+2060-U+206F); U+FEFF;
 *    tag characters (U+E0000-U+E007F) and the rest of the invisible "default ignorable" set
 *    (soft hyphen, Hangul fillers, ...); line and paragraph separators; two variation
 *    selectors in a row (one after a character is ordinary emoji presentation, a run of them
 *    is the "variation selector smuggling" channel); unpaired surrogates and noncharacters.
 * 3. Flight numbers only: an IATA flight designator (see `FLIGHT_NUMBER`). Nothing else is
 *    checked for a flight number: the pattern leaves no room for anything else.
 * 4. Instructions aimed at a language model, looked for in normalised forms of the text (NFKC,
 *    lower case, accents, homoglyphs and leetspeak folded, spacing and punctuation tricks
 *    undone: see `canonicalForms`). The rule families (`WORD_RULES`, `SQUASHED_RULES`,
 *    `MARKUP_RULES`): "ignore/disregard/forget ... previous instructions / the above";
 *    "stop following your rules"; persona changes ("you are now", "from now on you", "act as",
 *    "pretend", "roleplay", "your new role"); the model's configuration ("system prompt",
 *    "new instructions", "developer mode", "jailbreak", "do anything now", "override",
 *    "bypass the safety filters"); addressing the model ("note to the AI"); the fare ("set /
 *    change / waive the fare", "fare = 0", "make this ride free", "100% discount", "charge
 *    nothing"); payment state ("mark as paid", "status: paid"); other people's bookings and
 *    data ("cancel all other bookings", "drop table"); secrets ("reveal your prompt", "print
 *    the API key"); role markup (`</system>`, `[INST]`, `<|im_start|>`, `assistant:` opening a
 *    line or sentence, `### Instruction`, `"role": "system"`, `<script>`). Rules are phrases,
 *    not single words, so "Ignore the first gate, use the second one" passes.
 * 5. Base64- or hex-looking blobs of 40 characters or more (`hasEncodedBlob`).
 *
 * Empty and whitespace-only values, like absent ones, are not screened: whether a field is
 * required is the request schema's business.
 */

/** Maximum length of each kind of field, in Unicode code points. */
export const FIELD_LIMITS = {
  /** Passenger name: comfortably more than any real full name (UK passports print 30-odd characters per line). */
  name: 100,
  /** Notes for the driver: a few sentences; matches the request schemas' `maxLength: 500`. */
  notes: 500,
  /** Flight number: an IATA designator is at most 7 characters ("BA 1234A" with a space is 8). */
  flightNumber: 10,
  /** Name of the calling assistant (`agent`), e.g. "ChatGPT" or "Acme Travel Concierge". */
  agent: 80,
  /** Pickup or drop-off address as typed: a full UK postal address fits in well under 200. */
  address: 300,
  /** A booking reference or a partner's own job reference (`jobRef`). */
  reference: 64,
} as const;

export type FieldKind = keyof typeof FIELD_LIMITS;

export type ScreenField = { pointer: string; kind: keyof typeof FIELD_LIMITS; value: string | undefined | null };

export type ScreenResult = { ok: true } | { ok: false; details: ErrorDetail[]; reasons: string[] };

/** The problem texts: short and deliberately silent about which rule matched. */
const PROBLEM = {
  instructions: 'contains instructions, not booking information',
  encoded: 'contains encoded data, not booking information',
  control: 'contains control characters',
  hidden: 'contains hidden characters',
  invalid: 'contains invalid characters',
  flightNumber: 'is not a valid flight number (e.g. BA 123)',
} as const;

/**
 * Screens each field; absent, empty and whitespace-only values pass. On refusal, `details`
 * has one entry per refused field (`field` is the field's JSON pointer) and `reasons` says,
 * for logs only, which check refused it (never the text itself).
 */
export function screenFields(fields: ScreenField[]): ScreenResult {
  const details: ErrorDetail[] = [];
  const reasons: string[] = [];
  for (const f of fields) {
    const refusal = screenOne(f.kind, f.value);
    if (refusal) {
      details.push({ field: f.pointer, problem: refusal.problem });
      reasons.push(`${f.pointer}: ${refusal.reason}`);
    }
  }
  return details.length === 0 ? { ok: true } : { ok: false, details, reasons };
}

interface Refusal {
  problem: string;
  reason: string;
}

function screenOne(kind: FieldKind, value: unknown): Refusal | null {
  if (typeof value !== 'string' || value.trim() === '') return null;

  const limit = FIELD_LIMITS[kind];
  const length = codePointLength(value);
  if (length > limit) {
    return { problem: `is longer than ${limit} characters`, reason: `too_long ${length} > ${limit}` };
  }

  const hidden = findHidden(value, kind === 'notes');
  if (hidden) return hidden;

  if (kind === 'flightNumber') {
    return FLIGHT_NUMBER.test(value.normalize('NFKC').trim().toUpperCase())
      ? null
      : { problem: PROBLEM.flightNumber, reason: 'flight_number_format' };
  }

  const matched = injectionRules(value);
  if (matched.length > 0) return { problem: PROBLEM.instructions, reason: `injection ${matched.join(',')}` };
  if (hasEncodedBlob(value)) return { problem: PROBLEM.encoded, reason: 'encoded_blob' };
  return null;
}

function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// Hidden and control characters
// ---------------------------------------------------------------------------------------------

type CharClass = 'control' | 'hidden' | 'invalid' | 'selector' | null;

/** Invisible format characters (inclusive ranges), in the spirit of Default_Ignorable_Code_Point. */
const HIDDEN_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x00ad, 0x00ad], // soft hyphen
  [0x034f, 0x034f], // combining grapheme joiner
  [0x061c, 0x061c], // Arabic letter mark (bidi control)
  [0x115f, 0x1160], // Hangul choseong and jungseong fillers
  [0x17b4, 0x17b5], // Khmer inherent vowels
  [0x180e, 0x180e], // Mongolian vowel separator
  [0x200b, 0x200f], // zero-width space, ZWNJ, ZWJ, LRM, RLM
  [0x2028, 0x202e], // line and paragraph separators, bidi embeddings and overrides
  [0x2060, 0x206f], // word joiner, invisible operators, bidi isolates, deprecated format controls
  [0x3164, 0x3164], // Hangul filler
  [0xfeff, 0xfeff], // zero-width no-break space (BOM)
  [0xffa0, 0xffa0], // half-width Hangul filler
  [0xfff0, 0xfffb], // unassigned specials, interlinear annotation controls
  [0x1bca0, 0x1bca3], // shorthand format controls
  [0x1d173, 0x1d17a], // musical symbol format controls
  [0xe0000, 0xe0fff], // tag characters and the rest of plane 14 (variation selectors excepted, below)
];

function classify(cp: number): CharClass {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return 'control';
  if (cp < 0xad) return null;
  if (cp >= 0xd800 && cp <= 0xdfff) return 'invalid'; // an unpaired surrogate
  if (
    (cp >= 0xfe00 && cp <= 0xfe0f) ||
    (cp >= 0xe0100 && cp <= 0xe01ef) ||
    (cp >= 0x180b && cp <= 0x180f && cp !== 0x180e)
  ) {
    return 'selector';
  }
  if ((cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe) return 'invalid'; // noncharacters
  for (const [lo, hi] of HIDDEN_RANGES) {
    if (cp < lo) break;
    if (cp <= hi) return 'hidden';
  }
  return null;
}

const hex = (cp: number) => `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;

function findHidden(s: string, multiline: boolean): Refusal | null {
  let previous: CharClass | 'start' | 'space' = 'start';
  for (let i = 0; i < s.length; ) {
    const cp = s.codePointAt(i) as number;
    const at = i;
    i += cp > 0xffff ? 2 : 1;
    const cls = classify(cp);
    if (cls === 'control') {
      const allowed = multiline && (cp === 0x09 || cp === 0x0a || (cp === 0x0d && s.charCodeAt(i) === 0x0a));
      if (!allowed) return { problem: PROBLEM.control, reason: `control ${hex(cp)} at ${at}` };
      previous = 'space';
    } else if (cls === 'hidden') {
      return { problem: PROBLEM.hidden, reason: `hidden ${hex(cp)} at ${at}` };
    } else if (cls === 'invalid') {
      return { problem: PROBLEM.invalid, reason: `invalid ${hex(cp)} at ${at}` };
    } else if (cls === 'selector') {
      // A variation selector belongs after a visible character, one at a time.
      if (previous !== null) return { problem: PROBLEM.hidden, reason: `variation_selector ${hex(cp)} at ${at}` };
      previous = 'selector';
    } else {
      previous = cp === 0x20 ? 'space' : null;
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Flight numbers
// ---------------------------------------------------------------------------------------------

/**
 * An IATA flight designator: a two-character airline code (two letters, or a letter and a
 * digit either way round, as in "U2" and "9W"; never two digits), then 1 to 4 digits, then an
 * optional operational suffix letter; spaces allowed between the parts ("BA 123", "EZY" is an
 * ICAO code and not accepted). Checked after NFKC, trimming and upper-casing.
 */
const FLIGHT_NUMBER = /^(?:[A-Z][A-Z0-9]|[0-9][A-Z]) {0,3}[0-9]{1,4} {0,2}[A-Z]?$/;

// ---------------------------------------------------------------------------------------------
// Normalisation
// ---------------------------------------------------------------------------------------------

/** Letters that look like Latin ones (Cyrillic, Greek, Armenian, IPA, small capitals). */
const HOMOGLYPHS: ReadonlyMap<string, string> = new Map(
  [
    // Cyrillic
    'аa вb еe ѐe ёe кk мm нh оo пn рp сc тt уy хx ьb ѕs іi їi јj ԁd ԛq ԝw һh ӏl үy ѵv ѡw ɡg',
    // Greek
    'αa βb γy εe ηn ιi κk νv οo ρp τt υu χx ωw ϲc ϳj',
    // Armenian
    'օo սu հh ոn ցg զq',
    // IPA and Latin small capitals
    'ıi ȷj ɑa ɩi ɪi ʟl ʀr ʏy ᴀa ʙb ᴄc ᴅd ᴇe ɢg ʜh ᴊj ᴋk ᴍm ɴn ᴏo ᴘp ꜱs ᴛt ᴜu ᴠv ᴡw ᴢz',
  ]
    .join(' ')
    .split(' ')
    .map((pair) => [pair.slice(0, 1), pair.slice(1)] as [string, string]),
);

/** Leetspeak, applied only inside words that also contain a letter ("1gn0re", not "1234"). */
const LEET: Readonly<Record<string, string>> = {
  '0': 'o',
  '3': 'e',
  '4': 'a',
  '5': 's',
  '7': 't',
  '8': 'b',
  '9': 'g',
  '@': 'a',
  $: 's',
  '€': 'e',
};

const LETTER = /\p{L}/u;
const MARKS = /\p{M}+/gu;
const NOT_ALNUM = /[^\p{L}\p{N}]+/u;

interface Forms {
  /** Lower-case, homoglyphs folded, horizontal whitespace collapsed, punctuation kept: for markup. */
  markup: string;
  /** Words separated by single spaces, punctuation gone, leetspeak decoded: one per reading of "1" and "|". */
  words: string[];
  /** The same with no spaces at all, for words broken up by spaces or punctuation. */
  squashed: string[];
}

/**
 * NFKC (full-width and mathematical letters become plain ones), lower case, accents dropped,
 * homoglyphs folded, invisible characters dropped. Then, for the word forms: leetspeak decoded
 * inside words ("pr3v10us"), punctuation between single letters removed ("i.g.n.o.r.e") and
 * otherwise treated as a space ("ignore-previous"), and runs of three or more single letters
 * joined ("I G N O R E").
 */
function canonicalForms(raw: string): Forms {
  const folded = raw.normalize('NFKC').toLowerCase().normalize('NFD').replace(MARKS, '');
  let base = '';
  for (const ch of folded) {
    const cls = classify(ch.codePointAt(0) as number);
    if (cls === 'control') base += ch === '\n' ? '\n' : ' ';
    else if (cls === null) base += HOMOGLYPHS.get(ch) ?? ch;
  }
  const markup = base.replace(/[^\S\n]+/g, ' ').replace(/ ?\n[\s]*/g, '\n');

  const tokens = base.split(/\s+/).filter((t) => t !== '');
  const needsVariant = tokens.some((t) => /[1|!]/.test(t) && LETTER.test(t));
  const words: string[] = [];
  const squashed: string[] = [];
  for (const one of needsVariant ? ['i', 'l'] : ['i']) {
    const out = wordTokens(tokens, one);
    words.push(out.join(' '));
    squashed.push(out.join(''));
  }
  return { markup, words, squashed };
}

function wordTokens(tokens: string[], one: string): string[] {
  const out: string[] = [];
  for (const token of tokens) {
    let t = token;
    if (LETTER.test(t)) {
      let decoded = '';
      const chars = Array.from(t);
      for (let i = 0; i < chars.length; i++) {
        const c = chars[i] as string;
        const next = chars[i + 1] ?? '';
        if (c === '1' || c === '|') decoded += one;
        else if (c === '!') decoded += LETTER.test(next) ? 'i' : c;
        else decoded += LEET[c] ?? c;
      }
      t = decoded;
    }
    const parts = t.split(NOT_ALNUM).filter((p) => p !== '');
    if (parts.length > 1 && parts.every((p) => codePointLength(p) === 1)) out.push(parts.join(''));
    else out.push(...parts);
  }
  // Join runs of three or more single letters: "i g n o r e" -> "ignore".
  const joined: string[] = [];
  let run: string[] = [];
  const flush = () => {
    if (run.length >= 3) joined.push(run.join(''));
    else joined.push(...run);
    run = [];
  };
  for (const t of out) {
    if (codePointLength(t) === 1 && LETTER.test(t)) run.push(t);
    else {
      flush();
      joined.push(t);
    }
  }
  flush();
  return joined;
}

// ---------------------------------------------------------------------------------------------
// Instruction rules
// ---------------------------------------------------------------------------------------------

/** A whole-word alternative: matches only at word (space) boundaries of the words form. */
const w = (alternatives: string) => `(?<![^ ])(?:${alternatives})(?![^ ])`;
/** Up to n arbitrary whole words (each followed by its space): bounded, so linear. */
const gap = (n: number) => `(?:[^ ]+ ){0,${n}}`;
/** Consecutive whole words; `gap(n) + w(...)` allows up to n words before the next one. */
const seq = (...parts: string[]) => parts.join(' ');

interface Rule {
  id: string;
  re: RegExp;
}

const rule = (id: string, source: string): Rule => ({ id, re: new RegExp(source, 'u') });

const IGNORE_VERB =
  'ignore|ignoring|disregard|disregarding|forget|forgetting|skip|bypass|override|overriding|neglect|discard|abandon|never mind|nevermind';
const STRONG_NOUN =
  'instructions?|prompts?|directives?|guidelines?|guardrails?|programming|constraints?|restrictions?|polic(?:y|ies)|system messages?|training';
const WEAK_NOUN =
  'rules?|directions?|commands?|orders?|messages?|texts?|inputs?|content|guidance|settings?|tasks?|context|conversation|filters?|chat';
const STRONG_QUAL =
  'all|any|every|previous|previously|prior|preceding|above|earlier|former|foregoing|original|initial|system|your|those|these|the above|the previous|the prior|all the|all of the|all your|all previous|all prior';
/** What "ignore the above / previous ..." may legitimately refer to in a booking. */
const BENIGN_AFTER =
  'address|addresses|pickup|pick|drop|dropoff|destination|time|times|date|number|phone|postcode|location|gate|gates|door|doors|entrance|exit|note|notes|booking|bookings|flight|stop|stops|one|ones|details?|email|driver|car|taxi|ride|request|street|road|terminal|reference|name';
const FARE_NOUN =
  'fare|fares|price|prices|pricing|cost|costs|tariff|tariffs|total|quote|quoted price|charge|charges|fee|fees|bill|balance|rate|rates|amount|amount due|payment due';
const FARE_CORE = 'fare|fares|price|prices|cost|costs|tariff|total|quote|bill|balance|amount|amount due|payment';
const ZERO = '0|0 0+|00+|o|zero|nothing|nil|null|none|nought|naught|free|gratis|complimentary';
const RIDE = 'ride|rides|trip|trips|journey|journeys|booking|bookings|fare|fares|transfer|taxi|cab';
/** Paid, but not "paid parking" or "the paid car park". */
const PAID =
  '(?:already |fully )?(?:paid|prepaid|pre paid|settled|refunded)(?! (?:parking|car|car park|carpark|area|zone|bays?|lot|lane|section|entrance|exit|drop|pick|road|toll)(?![^ ]))';
/** Secrets of the platform or the model. */
const SECRET =
  'api keys?|apikeys?|secret keys?|private keys?|signing keys?|encryption keys?|access keys?|passwords?|secrets?|tokens?|credentials?|system prompt|env vars?|environment variables?';
/** ... and what only a model's configuration is called. */
const SECRET_NOUN = `${SECRET}|prompt|instructions|configuration|config|env|environment|source code|database|hidden text`;
const MODEL =
  'ai|a i|ai assistant|ai agent|ai model|ai system|llm|llms|language model|large language model|chatbot|bot|gpt|chatgpt|claude|gemini|copilot|model|assistant|booking engine|booking system|system|automated system';
const GREETED_MODEL =
  'ai|a i|ai assistant|ai agent|llm|language model|large language model|chatbot|bot|gpt|chatgpt|claude|gemini|copilot|model|assistant|system';

/** Rules over the words form (lower-case words separated by single spaces). */
const WORD_RULES: readonly Rule[] = [
  // "ignore all previous instructions", "disregard your guidelines"
  rule('ignore-instructions', seq(w(IGNORE_VERB), gap(3) + w(STRONG_NOUN))),
  // "ignore all previous messages": a weaker noun needs a qualifier ("ignore the first gate" passes)
  rule('ignore-rules', seq(w(IGNORE_VERB), gap(1) + w(STRONG_QUAL), gap(2) + w(WEAK_NOUN))),
  // "disregard the above", "IGNORE previous" (but not "ignore the previous address")
  rule(
    'ignore-above',
    `${w(IGNORE_VERB)} (?:(?:all|everything) )?(?:of )?(?:(?:the|that|this|my|your) )?${w('above|foregoing|preceding|previous|prior|earlier')}(?! (?:${BENIGN_AFTER})(?![^ ]))`,
  ),
  rule(
    'ignore-everything',
    seq(w('ignore|disregard|forget'), w('everything|anything|all that|all of that|all of this')),
  ),
  rule(
    'stop-following',
    seq(
      w('stop|don t|do not|dont|never|no longer'),
      w('following|follow|obeying|obey|listening to|adhering to|complying with|comply with'),
      gap(2) + w(`${STRONG_NOUN}|rules`),
    ),
  ),
  // persona changes
  rule(
    'you-are-now',
    seq(
      w('you are|you re|youre|u r|you will be|you ll be|you shall be'),
      w('now|from now on|henceforth'),
      w(
        'an?(?! (?:bit|little|few|couple|minute|min|mile|short|long|moment)(?![^ ]))|the|my|dan|no longer|free|unrestricted|unfiltered|uncensored|jailbroken|acting|operating|playing|called|named|known as|going to be|in (?:[^ ]+ )?mode|root|admin|administrator|allowed|authori[sz]ed|permitted|evil|ai|chatgpt|gpt',
      ),
    ),
  ),
  rule(
    'you-are-no-longer',
    seq(
      w('you are|you re|youre'),
      w('no longer'),
      w('an?|bound|restricted|limited|required to follow|chatgpt|claude|gpt|assistant|ai|language model'),
    ),
  ),
  rule(
    'from-now-on',
    seq(
      w('from now on|henceforth|from this point on|from this point forward'),
      w(
        'you (?:are|must|shall|act|respond|answer|reply|behave|obey|ignore|only|always|will (?:act|respond|answer|reply|behave|obey|ignore|only|always))|act|respond|answer|reply|behave|ignore|obey',
      ),
    ),
  ),
  rule(
    'act-as',
    seq(
      w('act|acting|acts|behave|behaving|pose|posing|masquerade'),
      w('as'),
      w(
        'if|though|an?|the|my|your|root|admin|administrator|system|sysadmin|developer|dev|dan|assistant|ai|gpt|chatgpt|operator|dispatcher|manager|supervisor|owner|unfiltered|uncensored|jailbroken|sudo|god',
      ),
    ),
  ),
  rule(
    'respond-as',
    seq(
      w('respond|answer|reply|speak|talk|write'),
      w('as|like'),
      w(
        'if|though|root|admin|administrator|system|developer|dan|an ai|ai|gpt|chatgpt|unfiltered|uncensored|jailbroken',
      ),
    ),
  ),
  rule(
    'pretend',
    w(
      'pretend|pretends|pretending|pretended|roleplay|role play|role playing|roleplaying|make believe|simulate|simulating|impersonate|impersonating',
    ),
  ),
  rule('imagine-you', seq(w('imagine|suppose|assume|hypothetically'), w('you are|you re|youre|that you are|you were'))),
  // the model's own configuration
  rule(
    'system-prompt',
    w(
      'system (?:prompts?|messages?|instructions?|rules|directives?|role|settings?|override)|(?:initial|original|hidden|secret|internal|base|meta|developer|dev|pre) prompts?|developer (?:messages?|instructions)|preprompt|prompt injection',
    ),
  ),
  rule(
    'new-instructions',
    seq(
      w('new|updated|revised|changed|replacement|real|actual|true|secret|hidden|overriding|override|priority'),
      w('instructions?|directives?|system prompt|prompt'),
    ),
  ),
  rule(
    'new-role',
    seq(
      w('your'),
      w('new|real|true|actual|only'),
      w('role|persona|identity|task|tasks|objective|goal|purpose|instructions?'),
    ),
  ),
  // "Note to the AI:", "Hey ChatGPT" (but not "note the system at the gate" or "message my assistant")
  rule(
    'addressing-model',
    `${w('instructions?|directives?|note|notes|message|messages|attention|reminder|command|commands')} ${w('to|for')} (?:(?:the|this|any|all) )?${w(MODEL)}`,
  ),
  rule('greeting-model', `${w('hey|hi|hello|dear|psst|attention')} (?:the )?${w(GREETED_MODEL)}`),
  rule(
    'developer-mode',
    w(
      '(?:developer|dev|god|debug|admin|administrator|maintenance|sudo|root|unrestricted|unfiltered|uncensored|jailbreak|jailbroken|dan|evil) mode|jailbreak|jailbreaking|jailbroken|jailbreaks|jail break|jail broken|do anything now|dan (?:prompt|jailbreak)|sudo|superuser|root access|elevated privileges|admin (?:privileges|rights)|(?:admin|system|root|sudo) commands?|(?:unrestricted|unfiltered|uncensored) (?:ai|assistant|model|responses?|output)',
    ),
  ),
  rule(
    'override',
    w('override|overrides|overriding|overridden|overrule|overrules|overruled|overwrite|overwrites|overwriting'),
  ),
  rule(
    'bypass-safety',
    seq(
      w('bypass|bypassing|circumvent|circumventing|evade|evading|disable|disabling|turn off|switch off|deactivate'),
      gap(2) +
        w(
          'filters?|safety|safeguards?|restrictions?|guardrails?|security|checks?|validation|screening|screen|moderation|content policy|policies|rules|protections?|limits?',
        ),
    ),
  ),
  rule(
    'dont-tell',
    seq(
      w('don t|do not|dont|never'),
      w('tell|inform|mention|reveal|notify|alert|let'),
      gap(2) + w('user|human|operator|admin|administrator|developers?|moderators?'),
    ),
  ),
  // the fare
  rule(
    'fare-change',
    seq(
      w(
        'change|changes|changing|update|updating|adjust|adjusting|modify|modifying|alter|altering|edit|editing|force|forcing|reset|resetting|lower|lowering|reduce|reducing|cut|cutting|slash|slashing|zero|zeroing|discount|discounting|waive|waiving|waived|forgo|forgive|write off',
      ),
      gap(3) + w(FARE_NOUN),
    ),
  ),
  rule(
    'fare-set',
    seq(w('set|sets|setting'), gap(2) + w(FARE_NOUN), w('to|at|as|equal|equals|[0-9]+|zero|free|nothing|nil')),
  ),
  rule(
    'fare-zero',
    `${w(FARE_CORE)} (?:(?:is|are|should|must|will|shall|be|becomes|become|now|only|just|exactly|set|to|at|of|equal|equals|gbp|the|as|reduced|changed|updated|lowered|made|due|for|this|my|booking|ride|trip|journey|on) ){0,4}${w(ZERO)}`,
  ),
  rule('charge-nothing', seq(w('charge|charging|bill|billing|invoice'), gap(2) + w('nothing|0|0 0+|00+|zero|nil|o'))),
  rule(
    'fare-free',
    `${w(RIDE)} (?:(?:is|be|should|must|will|shall|to|as|now|made|being|completely|totally|entirely) ){0,3}${w('free|complimentary|gratis|on the house|free of charge|at no cost|at no charge')}`,
  ),
  rule(
    'for-free',
    seq(w(`${RIDE}|it|this|everything`), w('for free|free of charge|at no cost|at no charge|on the house')),
  ),
  rule(
    'free-ride',
    seq(w('free|complimentary|zero cost|no cost|no charge|no fare|0 fare|zero fare|gratis'), w(`${RIDE}|upgrade`)),
  ),
  rule(
    'full-discount',
    `${w('100|one hundred|hundred|full|total|complete')} (?:(?:%|percent|per cent|pc) )?${w('off|discount|discounted|reduction|waiver')}|${w('discount|discounted|reduction')} (?:(?:of|by) )?${w('100')}`,
  ),
  // "mark this booking as paid", "set the status to paid"
  rule(
    'mark-paid',
    seq(
      w(
        'mark|marks|marked|marking|flag|flags|flagged|flagging|treat|treated|consider|considered|set|update|updated|change|changed|record|recorded|register|registered|log|logged|show|shown|list|listed|confirm|confirmed|make|switch',
      ),
      gap(4) + w('as|to'),
      w(PAID),
    ),
  ),
  rule(
    'status-paid',
    `${w('payment status|booking status|status')} (?:(?:to|as|is|now|should|must|be|set|changed|updated) ){0,3}${w(PAID)}|${w('payment')} (?:(?:to|as|is|now|should|must|be|set|changed|updated) ){1,3}${w(PAID)}`,
  ),
  // other people's bookings and the data behind them
  rule(
    'cancel-others',
    seq(
      w(
        'cancel|cancels|cancelling|canceling|cancelled|canceled|delete|deleting|remove|removing|void|voiding|erase|wipe|purge|refund|refunding|reassign|reassigning|reject|rejecting|decline|declining|block|blocking|ban|banning|suspend|suspending|deactivate',
      ),
      gap(3) +
        w(
          'all|every|other|others|another|any|everyone s|everyone|everybody s|everybody|someone else s|other people s|competitor s|rival',
        ),
      gap(2) +
        w(
          'bookings?|rides?|trips?|jobs?|reservations?|orders?|journeys?|customers?|users?|passengers?|accounts?|drivers?|quotes?',
        ),
    ),
  ),
  rule(
    'destroy-data',
    seq(
      w('delete|drop|wipe|erase|purge|truncate|destroy|dump'),
      gap(2) + w('database|databases|db|table|tables|schema|all records|all data|all bookings|all users|all accounts'),
    ),
  ),
  // secrets
  rule(
    'reveal-secrets',
    seq(
      w(
        'reveal|revealing|leak|leaking|dump|dumping|expose|exposing|print|printing|output|outputting|display|displaying|disclose|disclosing|divulge|exfiltrate|echo|spill|recite',
      ),
      gap(4) + w(SECRET_NOUN),
    ),
  ),
  rule(
    'request-secrets',
    seq(w('show me|tell me|give me|send me|share|email me|text me|list|read out'), gap(4) + w(SECRET)),
  ),
  rule(
    'ask-secrets',
    seq(
      w('what is|what are|whats|what re|tell|give|send|show|share|email|text|provide|list|reveal|print|output|repeat'),
      gap(3) + w('your|system|internal|admin|root|api|secret|private|hidden|initial|original'),
      w(SECRET_NOUN),
    ),
  ),
  rule(
    'mentions-secrets',
    w(
      'api keys?|apikeys?|api tokens?|secret keys?|private keys?|signing secrets?|signing keys?|encryption keys?|access tokens?|bearer tokens?|auth tokens?|client secrets?|admin passwords?|root passwords?|database passwords?|ssh keys?|env vars|environment variables|dotenv',
    ),
  ),
];

/** Rules over the squashed form: only long, distinctive strings, so word joins cannot fake them. */
const SQUASHED_RULES: readonly Rule[] = [
  rule(
    'ignore-instructions',
    '(?:ignore|disregard|forget|override|bypass)(?:all|any|the|your|my|of|these|those|every|previous|prior|preceding|above|earlier|former|foregoing|original|initial|system|existing){1,4}(?:instructions?|prompts?|directives?|guidelines?|rules|commands|guardrails|programming|constraints)',
  ),
  rule('system-prompt', 'systemprompt(?!ed|ing)|promptinjection'),
  rule('developer-mode', 'developermode(?!l)|jailbr[eo]a?k|doanythingnow'),
  rule('mark-paid', 'mark(?:this|the|my|our)?(?:booking|ride|trip|journey|fare|order|it)?as(?:already)?paid'),
  rule('fare-set', 'set(?:the|this|my)?(?:fare|price|cost|total)(?:to|at)(?:0|zero|free|nothing)'),
  rule('reveal-secrets', 'reveal(?:your|the)(?:system)?(?:prompt|instructions|password|apikey|secret)'),
  rule('cancel-others', 'cancel(?:all|every)(?:the)?(?:other)?(?:bookings|rides|trips|jobs|reservations)'),
];

const ROLE_NAME =
  'system|sys|assistant|user|human|developer|ai|bot|model|tool|function|instructions?|prompt|inst|context|admin|root|im_start|im_end|s|endoftext|eot_id|start_header_id|end_header_id';

/** Rules over the markup form (lower case, punctuation kept, one space between words, newlines kept). */
const MARKUP_RULES: readonly Rule[] = [
  // </system>, <assistant>, <s>, <system role="x">, but not <user@example.com>
  rule('role-tag', `<\\/? ?(?:${ROLE_NAME})(?: [^<>\\n]{0,80})? ?\\/?>`),
  rule('special-token', '<\\|[^|<>\\n]{1,40}\\|>|\\[\\/?(?:inst|sys|system|assistant|user|s|human|ai)\\]|<<\\/?sys>>'),
  rule(
    'role-header',
    '(?:^|\\n)#{1,6} ?(?:system|instructions?|assistant|user|human|response|input|context|prompt|new instructions)\\b',
  ),
  // "assistant:" or "SYSTEM:" opening the text, a line, a sentence or a bracket ("my assistant: Jane" passes)
  rule(
    'role-prefix',
    '(?:^|[\\n.!?;,>\\])}([{*"\'-] ?)(?:system|assistant|human|developer|ai|model|bot|chatgpt|gpt|claude|tool|function) ?:',
  ),
  rule('json-role', '\\brole ?["\']? ?[:=] ?["\']?(?:system|assistant|developer|user|tool|function)\\b'),
  rule('script', '<\\/? ?(?:script|iframe)\\b|javascript ?:'),
];

function injectionRules(value: string): string[] {
  const forms = canonicalForms(value);
  const matched = new Set<string>();
  for (const r of MARKUP_RULES) if (r.re.test(forms.markup)) matched.add(r.id);
  for (const text of forms.words) for (const r of WORD_RULES) if (r.re.test(text)) matched.add(r.id);
  for (const text of forms.squashed) for (const r of SQUASHED_RULES) if (r.re.test(text)) matched.add(r.id);
  return [...matched];
}

// ---------------------------------------------------------------------------------------------
// Encoded blobs
// ---------------------------------------------------------------------------------------------

const BLOB = /[A-Za-z0-9+/_-]{40,}/g;

/**
 * A run of 40 or more base64 (or base64url) characters that looks encoded rather than written:
 * upper and lower case with digits or `+`/`/` (base64), or hexadecimal digits and letters.
 * A long written word ("Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch") passes.
 */
function hasEncodedBlob(value: string): boolean {
  const text = value.normalize('NFKC');
  for (const m of text.matchAll(BLOB)) {
    const run = m[0];
    const upper = /[A-Z]/.test(run);
    const lower = /[a-z]/.test(run);
    const digit = /[0-9]/.test(run);
    if (upper && lower && (digit || /[+/]/.test(run))) return true;
    if (/^[0-9a-f]+$/i.test(run) && digit && /[a-f]/i.test(run)) return true;
  }
  return false;
}
