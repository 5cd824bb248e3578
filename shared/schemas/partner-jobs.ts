import { type Static, type TSchema, type TUnsafe, Type } from '@sinclair/typebox';
import { FIELD_LIMITS } from '../domain/content-screen.ts';
import { MAX_FARE_GBP, ScreenedText, StringEnum } from './common.ts';

export const PARTNER_JOB_ACTIONS = ['new', 'amend', 'cancel'] as const;
export const MAX_JOBS_PER_REQUEST = 100;

/** The longest jobRef accepted: the content screen's limit for a reference (`FIELD_LIMITS.reference`). */
export const MAX_JOB_REF_LENGTH = FIELD_LIMITS.reference;

/**
 * A field an amendment may clear by sending null (JSON Schema `type: [<type>, "null"]`): on
 * `amend` null sets it back to its default (no phone, no notes, the tariff fare, ...); on `new`
 * null is the same as leaving it out. The schema's own checks apply to a value as before (a
 * screened text over its length is still refused as the screen refuses it).
 */
function Clearable<T extends TSchema>(schema: T): TUnsafe<Static<T> | null> {
  const { type, ...rest } = schema as unknown as { type: string } & Record<string, unknown>;
  return Type.Unsafe<Static<T> | null>({ ...rest, type: [type, 'null'] });
}

/**
 * One partner job (SPEC.md 2.9). Each job of a batch is validated on its own against this
 * schema, so a bad job is a per-job `rejected` outcome and never fails the batch. pickup,
 * dropoff and pickupTime are required for `new` (checked by the intake); an `amend` sends only
 * what changes (the rest of the job is kept, and a clearable field sent as null is cleared); a
 * `cancel` needs only jobRef. Unknown fields are ignored.
 *
 * `jobRef` is an identifier, not free text: one over 64 characters, or with control or
 * invisible characters, is `invalid_input` (the content screen's instructions and encoded-data
 * rules still apply to it, as `content_rejected`), so it carries no `x-content-screened`.
 */
export const PartnerJob = Type.Object(
  {
    jobRef: Type.String({
      minLength: 1,
      maxLength: MAX_JOB_REF_LENGTH,
      description: `The partner's own unique reference: idempotency, amendments and cancellations. 1 to ${MAX_JOB_REF_LENGTH} characters, without control or invisible characters (tab, line feed, zero-width and bidirectional marks) and without a space at either end; a longer, blank or malformed one is rejected 400 invalid_input`,
    }),
    action: Type.Optional(StringEnum(PARTNER_JOB_ACTIONS, { default: 'new' })),
    pickup: Type.Optional(
      ScreenedText('address', { nonEmpty: true, description: 'Required for new; on amend, left out keeps it' }),
    ),
    dropoff: Type.Optional(
      ScreenedText('address', { nonEmpty: true, description: 'Required for new; on amend, left out keeps it' }),
    ),
    pickupTime: Type.Optional(
      Type.String({ format: 'date-time', description: 'Required for new; on amend, left out keeps it' }),
    ),
    passengerName: Type.Optional(
      Clearable(ScreenedText('name', { nonEmpty: true, description: 'Default "Passenger"; null on amend clears it' })),
    ),
    passengerPhone: Type.Optional(
      Clearable(
        Type.String({
          minLength: 5,
          maxLength: 32,
          description: 'Mobile number, international format; null on amend clears it',
        }),
      ),
    ),
    passengerEmail: Type.Optional(
      Clearable(Type.String({ minLength: 1, maxLength: 254, description: 'null on amend clears it' })),
    ),
    passengers: Type.Optional(Type.Integer({ minimum: 1, maximum: 8, default: 1 })),
    vehicleType: Type.Optional(
      Clearable(
        Type.String({
          minLength: 1,
          maxLength: 20,
          description: 'null on amend clears it (the vehicle is then chosen by the number of passengers)',
        }),
      ),
    ),
    flightNumber: Type.Optional(Clearable(ScreenedText('flightNumber', { description: 'null on amend clears it' }))),
    fare: Type.Optional(
      Clearable(
        Type.Number({
          exclusiveMinimum: 0,
          maximum: MAX_FARE_GBP,
          multipleOf: 0.01,
          description:
            'Agreed fare in GBP, at most two decimals; only for partners allowed to set fares. null on amend clears it: the job is priced on the published tariffs',
        }),
      ),
    ),
    notes: Type.Optional(Clearable(ScreenedText('notes', { description: 'null on amend clears it' }))),
  },
  { title: 'PartnerJob' },
);
export type PartnerJob = Static<typeof PartnerJob>;

/**
 * The request body as the route checks it: one job object, or an array of 1 to 100 of them.
 * Jobs themselves are checked one by one (PartnerJob), so the envelope only bounds the batch.
 */
export const PartnerJobsRequest = Type.Union([
  Type.Object({}, { description: 'One job (PartnerJob fields)' }),
  Type.Array(Type.Unknown({ description: 'A job (PartnerJob fields)' }), {
    minItems: 1,
    maxItems: MAX_JOBS_PER_REQUEST,
  }),
]);

/**
 * The request body as documented: one PartnerJob, or 1 to 100 of them. Each job of an array is
 * checked on its own, so an item that is not a PartnerJob is that job's rejection in a 207, not
 * the request's: the array's items are documented as PartnerJob or anything else.
 */
export const PartnerJobsDocumented = Type.Union([
  PartnerJob,
  Type.Array(
    Type.Union([
      PartnerJob,
      Type.Unknown({ description: 'Anything else is rejected as that job alone (its result), not the batch' }),
    ]),
    { minItems: 1, maxItems: MAX_JOBS_PER_REQUEST },
  ),
]);

const JobError = Type.Object({
  code: Type.String(),
  message: Type.String(),
  details: Type.Array(Type.Object({ field: Type.String(), problem: Type.String() })),
  retryAfterSeconds: Type.Optional(
    Type.Integer({
      minimum: 1,
      description:
        'A job refused for now (daily_limit_reached beside jobs that went through; service_unavailable while pricing is briefly down): seconds until it may be sent again, as Retry-After says on a whole-request 429 or 503',
    }),
  ),
});

export const PartnerJobResult = Type.Object({
  index: Type.Integer({ minimum: 0 }),
  jobRef: Type.Union([Type.String(), Type.Null()], {
    description: `The job's jobRef as sent; null when it had none that could be one (missing, not a string, or over ${MAX_JOB_REF_LENGTH} characters: never a truncation, which could be another job's): index always tells the jobs apart`,
  }),
  action: Type.Union([StringEnum(PARTNER_JOB_ACTIONS), Type.Null()]),
  outcome: StringEnum(['created', 'amended', 'cancelled', 'unchanged', 'rejected'] as const),
  status: Type.Integer(),
  bookingReference: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([JobError, Type.Null()]),
});
export type PartnerJobResult = Static<typeof PartnerJobResult>;

export const PartnerJobsResponse = Type.Object({
  results: Type.Array(PartnerJobResult),
  summary: Type.Object({
    received: Type.Integer(),
    succeeded: Type.Integer(),
    failed: Type.Integer(),
  }),
});

/**
 * The answers of a job intake endpoint (partner jobs, supplier hooks): 200 when every job
 * succeeded, 207 for a batch with failures, and for a single job its own status, so a rejected
 * single job answers its error status with the results shape (CONTRACT.md section 6).
 */
export function partnerJobsResponses(): Record<number, { description: string; schema: typeof PartnerJobsResponse }> {
  const single = 'A single job was rejected: its result, in the same shape';
  return {
    200: { description: 'Every job succeeded', schema: PartnerJobsResponse },
    201: { description: 'A single new job was created', schema: PartnerJobsResponse },
    207: { description: 'Mixed result: see each job', schema: PartnerJobsResponse },
    ...Object.fromEntries(
      [400, 403, 404, 409, 422, 429, 500].map((s) => [s, { description: single, schema: PartnerJobsResponse }]),
    ),
  };
}
