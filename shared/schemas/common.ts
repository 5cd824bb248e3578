import { type Static, Type } from '@sinclair/typebox';
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

export const Uuid = Type.String({ format: 'uuid' });
export const DateTime = Type.String({ format: 'date-time' });

/** A string enum as JSON Schema `enum` (clear errors, compact OpenAPI), typed as the union. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  opts: { description?: string; default?: T[number] } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...opts });
}
