import { type Static, Type } from '@sinclair/typebox';
import { FIELD_LIMITS, type FieldKind } from '../domain/content-screen.ts';
import { ERROR_STATUS } from '../errors.ts';

/** The error envelope of CONTRACT.md section 1, as it appears in the OpenAPI document. */
export const ErrorEnvelope = Type.Object({
  error: Type.Object({
    code: Type.Union(
      (Object.keys(ERROR_STATUS) as (keyof typeof ERROR_STATUS)[]).map((c) => Type.Literal(c)),
      { description: 'Stable machine-readable code' },
    ),
    message: Type.String({ description: 'Human-readable explanation' }),
    details: Type.Array(
      Type.Object({
        field: Type.String({ description: 'JSON pointer to the field, e.g. /passengers' }),
        problem: Type.String(),
      }),
    ),
  }),
  requestId: Type.String({ description: 'Echoed in the X-Request-Id header; quote it to support' }),
});
export type ErrorEnvelope = Static<typeof ErrorEnvelope>;

/**
 * The `pattern` of a text field that must say something: a character other than white space
 * (a name of three spaces is no name). Validation reports it as "must not be blank".
 */
export const NOT_BLANK = '\\S';

/**
 * The schema annotation on free text the content screen reads (shared/domain/content-screen.ts):
 * its `maxLength` is the screen's limit for the field's kind or a tighter one, and a value over it
 * is refused as the screen refuses it, 400 `content_rejected` naming the field (issue 4), not
 * `invalid_input`.
 */
export const SCREENED = 'x-content-screened';

/**
 * Free text of a screened kind, at most the screen's limit for it (`FIELD_LIMITS`), or `max`
 * where the field is shorter than its kind (a car's colour is a name, but 30 characters).
 */
export function ScreenedText(
  kind: FieldKind,
  /** `required`: at least one character other than white space; `nonEmpty`: at least one character. */
  opts: { required?: boolean; nonEmpty?: boolean; max?: number; description?: string } = {},
): ReturnType<typeof Type.String> {
  return Type.String({
    ...(opts.required || opts.nonEmpty ? { minLength: 1 } : {}),
    ...(opts.required ? { pattern: NOT_BLANK } : {}),
    maxLength: Math.min(opts.max ?? FIELD_LIMITS[kind], FIELD_LIMITS[kind]),
    ...(opts.description ? { description: opts.description } : {}),
    [SCREENED]: kind,
  });
}

/**
 * The most a fare (or a payment of one) may be, in GBP: one bound for a partner's fareGBP and
 * job fare and for the payment a driver or operator records, so any fare a booking can carry
 * can also be paid and completed.
 */
export const MAX_FARE_GBP = 10_000;

export const Uuid = Type.String({ format: 'uuid' });
export const DateTime = Type.String({ format: 'date-time' });

/**
 * An enum that takes its values in any case and with spaces, hyphens or underscores as the
 * caller writes them ("MPV", "6 Seater", "Cash to driver"): each is read as the listed value it
 * spells before `enum` is checked (the validator's `x-any-case` keyword, validate.ts), so the
 * handler sees only listed values and the OpenAPI document still lists them.
 */
export const ANY_CASE = 'x-any-case';

/** A string enum as JSON Schema `enum` (clear errors, compact OpenAPI), typed as the union. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  opts: { description?: string; default?: T[number]; anyCase?: boolean } = {},
) {
  const { anyCase, ...rest } = opts;
  return Type.Unsafe<T[number]>({
    type: 'string',
    enum: [...values],
    ...rest,
    ...(anyCase ? { [ANY_CASE]: true } : {}),
  });
}
