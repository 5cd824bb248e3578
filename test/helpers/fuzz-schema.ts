import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';

/**
 * JSON Schema → fast-check, for the subset the OpenAPI document uses (TypeBox output):
 * object (properties, required, additionalProperties), string (minLength, maxLength, format
 * date-time/date/email/uuid/uri, pattern), integer and number (minimum, maximum, exclusive
 * bounds, multipleOf), boolean, enum, const, array (items, minItems, maxItems), anyOf/oneOf,
 * and the empty schema (any JSON value). `hints` give realistic values by property name (a
 * place the geocoder knows, a booking reference that exists); generated values are checked
 * against the schema by the caller (`validBy`), so a hint that breaks a bound is dropped, not sent.
 */
// biome-ignore lint/suspicious/noExplicitAny: JSON Schema documents are navigated freely
export type Schema = Record<string, any>;

export type Hints = Record<string, fc.Arbitrary<unknown>>;

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * The reference validator: the documented schema's meaning. `multipleOfPrecision` makes
 * `multipleOf: 0.01` mean "two decimals" as a reader of the document understands it (19.99 is
 * a multiple of 0.01), not binary floating point's answer.
 */
function referenceAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: false, coerceTypes, multipleOfPrecision: 9, validateFormats: true });
  addFormats(ajv);
  return ajv;
}
const bodyAjv = referenceAjv(false);
const paramAjv = referenceAjv(true);
const compiled = new WeakMap<object, ValidateFunction>();
const compiledCoerced = new WeakMap<object, ValidateFunction>();

/** Whether `value` is valid for `schema` (query strings and path parameters: as strings, coerced). */
export function validBy(schema: Schema, value: unknown, coerce = false): boolean {
  const cache = coerce ? compiledCoerced : compiled;
  let v = cache.get(schema);
  if (!v) {
    v = (coerce ? paramAjv : bodyAjv).compile(schema);
    cache.set(schema, v);
  }
  // ajv with coercion rewrites its input: check a copy.
  return v(coerce ? structuredClone(value) : value);
}

const MAX_VALID_STRING = 40;

const filterable = new Map<string, number>();

/**
 * A pattern's strings are filtered to the schema's lengths, and fast-check's `filter` retries
 * for ever when almost nothing passes (a pattern like `^[a-z]+$` with `minLength: 16`: it
 * hung a CI run). So first see, once per pattern and lengths, how many of 200 samples pass,
 * and fail at once, saying why, when too few do.
 */
function assertFilterable(arb: fc.Arbitrary<string>, fits: (v: string) => boolean, s: Schema): void {
  const id = `${s.pattern}|${s.minLength ?? ''}|${s.maxLength ?? ''}`;
  let passing = filterable.get(id);
  if (passing === undefined) {
    passing = fc.sample(arb, { numRuns: 200, seed: 1 }).filter(fits).length;
    filterable.set(id, passing);
  }
  if (passing < 10) {
    throw new Error(
      `fuzz-schema: pattern ${s.pattern} gave ${passing} of 200 strings within minLength ${s.minLength ?? 0} and maxLength ${s.maxLength ?? 'none'}; state the lengths in the pattern (${'{'}min,max${'}'}) so it can be fuzzed.`,
    );
  }
}

function stringArb(s: Schema): fc.Arbitrary<string> {
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const max = Math.max(min, Math.min(typeof s.maxLength === 'number' ? s.maxLength : MAX_VALID_STRING, min + 60));
  const fits = (v: string) => v.length >= min && v.length <= (s.maxLength ?? Number.POSITIVE_INFINITY);
  switch (s.format) {
    case 'date-time':
      return fc
        .integer({ min: -48, max: 24 * 14 })
        .map((h) => new Date(Math.floor(Date.now() / 60_000) * 60_000 + h * 3_600_000).toISOString());
    case 'date':
      return fc
        .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2040-12-31T00:00:00Z'), noInvalidDate: true })
        .map((d) => d.toISOString().slice(0, 10));
    case 'email':
      return fc.emailAddress().filter(fits);
    case 'uuid':
      return fc.uuid();
    case 'uri':
      return fc.webUrl().filter(fits);
    default:
  }
  if (typeof s.pattern === 'string') {
    const matching = fc.stringMatching(new RegExp(s.pattern));
    assertFilterable(matching, fits, s);
    return matching.filter(fits);
  }
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: max }) },
    { weight: 1, arbitrary: fc.string({ minLength: min, maxLength: max, unit: 'grapheme' }) },
  );
}

function numberArb(s: Schema, integer: boolean): fc.Arbitrary<number> {
  const lo =
    typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum : -1e6;
  const hi =
    typeof s.maximum === 'number' ? s.maximum : typeof s.exclusiveMaximum === 'number' ? s.exclusiveMaximum : 1e6;
  const inBounds = (n: number) =>
    (typeof s.exclusiveMinimum !== 'number' || n > s.exclusiveMinimum) &&
    (typeof s.exclusiveMaximum !== 'number' || n < s.exclusiveMaximum);
  if (integer) return fc.integer({ min: Math.ceil(lo), max: Math.floor(hi) }).filter(inBounds);
  if (typeof s.multipleOf === 'number') {
    const step = s.multipleOf;
    return fc
      .integer({ min: Math.ceil(lo / step), max: Math.floor(hi / step) })
      .map((k) => Number((k * step).toFixed(10)))
      .filter(inBounds);
  }
  return fc
    .oneof(
      fc.integer({ min: Math.ceil(lo), max: Math.floor(hi) }),
      fc.double({ min: lo, max: hi, noNaN: true, noDefaultInfinity: true }),
      fc.integer({ min: Math.ceil(lo * 100), max: Math.floor(hi * 100) }).map((k) => k / 100),
    )
    .filter(inBounds)
    .map((n) => (Object.is(n, -0) ? 0 : n));
}

/** A value valid for `schema` (mostly; the caller filters with `validBy`). */
export function arbitraryFor(schema: Schema, hints: Hints = {}, name?: string, depth = 0): fc.Arbitrary<unknown> {
  const generated = fromSchema(schema, hints, depth);
  const hint = name !== undefined ? hints[name] : undefined;
  return hint ? fc.oneof({ weight: 6, arbitrary: hint }, { weight: 1, arbitrary: generated }) : generated;
}

function fromSchema(s: Schema, hints: Hints, depth: number): fc.Arbitrary<unknown> {
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  // An object's anyOf/allOf are constraints on its properties (which of the tolerant spellings
  // are required): generated from its properties, the caller's `validBy` keeps those that hold.
  if (s.type === 'object' && s.properties) return objectArb(s, hints, depth);
  const alternatives = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (alternatives) return fc.oneof(...alternatives.map((a) => fromSchema(a, hints, depth)));
  if (Array.isArray(s.type))
    return fc.oneof(...(s.type as string[]).map((t) => fromSchema({ ...s, type: t }, hints, depth)));
  switch (s.type) {
    case 'string':
      return stringArb(s);
    case 'integer':
      return numberArb(s, true);
    case 'number':
      return numberArb(s, false);
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const min = s.minItems ?? 0;
      const max = Math.max(min, Math.min(s.maxItems ?? 3, min + 3));
      return fc.array(arbitraryFor((s.items as Schema) ?? {}, hints, undefined, depth + 1), {
        minLength: min,
        maxLength: max,
      });
    }
    case 'object':
      return objectArb(s, hints, depth);
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function objectArb(s: Schema, hints: Hints, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = (s.properties ?? {}) as Record<string, Schema>;
  const required = new Set((s.required ?? []) as string[]);
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [k, p] of Object.entries(props)) model[k] = arbitraryFor(p, hints, k, depth + 1);
  const requiredKeys = [...required].filter((k) => k in model);
  // Properties with realistic values are mostly sent, so that requests get past "missing" to the handler.
  const hinted = Object.keys(props).filter((k) => k in hints && !required.has(k));
  const record = hinted.length
    ? fc.oneof(
        { weight: 3, arbitrary: fc.record(model, { requiredKeys: [...requiredKeys, ...hinted] }) },
        { weight: 1, arbitrary: fc.record(model, { requiredKeys }) },
      )
    : fc.record(model, { requiredKeys });
  // Unknown fields are ignored, never an error (CONTRACT.md section 0): sometimes send one.
  if (s.additionalProperties === false || depth > 0) return record;
  return fc
    .tuple(
      record,
      fc.option(fc.tuple(fc.constantFrom('x_unknown', 'extra', '_comment'), fc.jsonValue({ maxDepth: 2 }))),
    )
    .map(([r, extra]) => (extra && !(extra[0] in props) ? { ...r, [extra[0]]: extra[1] } : r));
}

/** The JSON pointers of `schema`'s properties (nested objects included) with their schemas. */
export function propertyPaths(
  schema: Schema,
  base: string[] = [],
): Array<{ path: string[]; schema: Schema; required: boolean }> {
  const out: Array<{ path: string[]; schema: Schema; required: boolean }> = [];
  if (schema.type !== 'object' || !schema.properties) return out;
  const required = new Set((schema.required ?? []) as string[]);
  for (const [k, p] of Object.entries(schema.properties as Record<string, Schema>)) {
    out.push({ path: [...base, k], schema: p, required: required.has(k) });
    out.push(...propertyPaths(p, [...base, k]));
  }
  return out;
}
