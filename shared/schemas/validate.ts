import type { TSchema } from '@sinclair/typebox';
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { anyCaseKey } from '../domain/any-case.ts';
import type { ErrorDetail } from '../errors.ts';
import { ANY_CASE, NOT_BLANK, SCREENED } from './common.ts';

// ajv-formats is CommonJS; under ESM its default export is the plugin function.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function makeAjv(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    coerceTypes,
    useDefaults: true,
    // Unknown fields are ignored, never an error (CONTRACT.md section 0); schemas are
    // written without additionalProperties: false unless a payload is internal.
    removeAdditional: false,
    strict: false,
    // `multipleOf: 0.01` means two decimals: 19.99 / 0.01 is 1998.9999999999998 in binary
    // floating point, which ajv would otherwise refuse as "not a multiple".
    multipleOfPrecision: 9,
    // Each error carries the schema it failed (`parentSchema`): a screened text over its
    // length is a content refusal (`SCREENED`).
    verbose: true,
  });
  addFormats(ajv);
  // ajv's date-time also passes forms JavaScript's Date cannot read (a leap second, `23:59:60`;
  // an offset of hours only, `+01`): refused here, so no route meets an Invalid Date later.
  const dateTime = ajv.formats['date-time'] as { validate: (s: string) => boolean; compare?: unknown };
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (s: string) => dateTime.validate(s) && Number.isFinite(Date.parse(s)),
    ...(typeof dateTime.compare === 'function'
      ? { compare: dateTime.compare as (a: string, b: string) => number | undefined }
      : {}),
  });
  // `x-any-case` (StringEnum's anyCase): a string that spells a listed value in another case or
  // spacing is replaced by that value before `enum` is checked; anything else is left to fail it.
  ajv.addKeyword({
    keyword: ANY_CASE,
    schemaType: 'boolean',
    modifying: true,
    before: 'enum',
    errors: false,
    compile(on: boolean, parentSchema) {
      const listed = new Map(
        ((parentSchema as { enum?: unknown[] }).enum ?? [])
          .filter((v): v is string => typeof v === 'string')
          .map((v) => [anyCaseKey(v), v]),
      );
      return (data: unknown, cxt) => {
        if (!on || typeof data !== 'string' || !cxt?.parentData || cxt.parentDataProperty === undefined) return true;
        const value = listed.get(anyCaseKey(data));
        if (value !== undefined) (cxt.parentData as Record<string | number, unknown>)[cxt.parentDataProperty] = value;
        return true;
      };
    },
  });
  return ajv;
}

/** Bodies: types must be right as sent. Query strings and path parameters: coerced. */
const bodyAjv = makeAjv(false);
const paramAjv = makeAjv(true);

/**
 * A validator's findings. `contentRejected` is set when every one is a screened text over its
 * length (`SCREENED`): the request is refused as the content screen refuses it, 400
 * `content_rejected`, rather than `invalid_input`.
 */
export type Findings = ErrorDetail[] & { contentRejected?: boolean };
export type Validator = (data: unknown) => Findings;

/** A screened text over its length: the screen's wording, or null for any other error. */
function overLongScreened(err: ErrorObject): string | null {
  if (err.keyword !== 'maxLength' || !(err.parentSchema as Record<string, unknown> | undefined)?.[SCREENED])
    return null;
  return `is longer than ${(err.params as { limit: number }).limit} characters`;
}

function pointer(err: ErrorObject): string {
  const base = err.instancePath || '';
  if (err.keyword === 'required') return `${base}/${(err.params as { missingProperty: string }).missingProperty}`;
  if (err.keyword === 'additionalProperties') {
    return `${base}/${(err.params as { additionalProperty: string }).additionalProperty}`;
  }
  return base === '' ? '/' : base;
}

function problem(err: ErrorObject): string {
  switch (err.keyword) {
    case 'required':
      return 'is required';
    case 'const':
      return `must be ${JSON.stringify((err.params as { allowedValue: unknown }).allowedValue)}`;
    case 'enum':
      return `must be one of: ${(err.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
    case 'additionalProperties':
      return 'is not allowed';
    case 'maxLength':
      return overLongScreened(err) ?? err.message ?? 'is invalid';
    case 'pattern':
      return (err.params as { pattern: string }).pattern === NOT_BLANK
        ? 'must not be blank'
        : (err.message ?? 'is invalid');
    default:
      return err.message ?? 'is invalid';
  }
}

/** ajv errors as `details` with JSON pointers; one entry per field and problem. */
export function toDetails(errors: readonly ErrorObject[] | null | undefined): Findings {
  const seen = new Set<string>();
  const out: Findings = [];
  // A union of literals fails as one `const` error per literal: say it once, as an enum.
  const constsAt = new Map<string, unknown[]>();
  for (const err of errors ?? []) {
    if (err.keyword === 'const') {
      const list = constsAt.get(err.instancePath) ?? [];
      list.push((err.params as { allowedValue: unknown }).allowedValue);
      constsAt.set(err.instancePath, list);
    }
  }
  // A union's branches each report: "must be object" from the branch the value is not, beside
  // what the branch it is (an array, say) found wrong. Where a value failed on more than its
  // type, its type errors are the other branches' and are dropped: "/ must NOT have more than
  // 100 items", not also "/ must be object". A value of no branch's type keeps them all.
  const beyondType = new Set<string>();
  for (const err of errors ?? []) {
    if (err.keyword !== 'type' && err.keyword !== 'anyOf' && err.keyword !== 'oneOf' && err.keyword !== 'if') {
      beyondType.add(err.instancePath);
    }
  }
  for (const err of errors ?? []) {
    // anyOf/oneOf summaries repeat what their branches said.
    if (err.keyword === 'anyOf' || err.keyword === 'oneOf' || err.keyword === 'if') continue;
    // Only a union branch's type error: a lone schema's (an integer of 9.5 past its maximum) stays.
    if (err.keyword === 'type' && /\/(anyOf|oneOf)\//.test(err.schemaPath) && beyondType.has(err.instancePath)) {
      continue;
    }
    const consts = err.keyword === 'const' ? constsAt.get(err.instancePath) : undefined;
    const d = {
      field: pointer(err),
      problem: consts && consts.length > 1 ? `must be one of: ${consts.join(', ')}` : problem(err),
    };
    const k = `${d.field}\u0000${d.problem}`;
    if (!seen.has(k)) {
      seen.add(k);
      out.push(d);
    }
  }
  if (errors && errors.length > 0 && errors.every((e) => overLongScreened(e) !== null)) out.contentRejected = true;
  return out;
}

export function compileSchema(schema: TSchema, opts: { coerce?: boolean } = {}): Validator {
  const validate = (opts.coerce ? paramAjv : bodyAjv).compile(schema);
  return (data) => {
    if (validate(data)) return [];
    const details = toDetails(validate.errors);
    // Verbose errors hold the request's values (`data`): not kept past the request that sent them.
    validate.errors = null;
    return details;
  };
}
