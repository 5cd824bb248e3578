import { AppError } from '../../shared/errors.ts';
import {
  MAX_JOB_REF_LENGTH,
  PartnerJobsDocumented,
  PartnerJobsRequest,
  partnerJobsResponses,
} from '../../shared/schemas/partner-jobs.ts';
import { SIGNED_MESSAGE, underClaims } from '../../shared/services/idempotency.ts';
import {
  assertActive,
  type IntakeCaller,
  type IntakePartner,
  jobsAnswer,
  loadPartner,
  partnerByKeyAndSignature,
  partnerBySignature,
  processJobs,
} from '../../shared/services/intake.ts';
import { baseUrlFor } from '../base-url.ts';
import { singleHeader } from '../middleware/headers.ts';
import { callerScope } from '../mount.ts';
import { defineRoute, type RouteDef } from '../route.ts';
import { scenarioHeader } from '../sandbox.ts';

/** The route's path; also where its idempotency claims are remembered, however the URL was spelt. */
const JOBS_PATH = '/api/public/v1/jobs';

/**
 * POST /api/public/v1/jobs: partner job intake (SPEC.md 2.9, CONTRACT.md section 6).
 *
 * Auth: a partner's API key (validated by the mount: `auth: 'public'`), else the HMAC headers
 * `x-partner` and `x-signature` checked against the raw body by the route's `verify`, before
 * the body is validated (so an unsigned request is 401, not a 400). No credentials, a bad key
 * or a bad signature is 401, and so is a key sent with HMAC headers that are not a valid
 * signature by the key's own partner (`partnerByKeyAndSignature`); a key that belongs to no
 * partner (sent alone), or a suspended partner, is 403.
 * Jobs are idempotent by (partner, jobRef); the Idempotency-Key header is honoured too
 * (CONTRACT.md section 2), claimed once the partner is authenticated (`underClaims`).
 */
export function partnerJobRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: JOBS_PATH,
      // Idempotency-Key claimed in the handler, once the caller is authenticated (`underClaims`).
      idempotent: 'handler',
      testScenario: true,
      operationId: 'submitPartnerJobs',
      summary: 'Submit partner jobs: one job or a batch of up to 100 (new, amend, cancel)',
      description:
        'Partners only: send your partner API key (Authorization: Bearer, or x-api-key), or sign the raw body with HMAC-SHA256 using your signing secret and send x-partner: <partner id> and x-signature: <hex> (sha256= prefix accepted); recommended: also send x-timestamp: <Unix seconds> and sign "<timestamp>.<raw body>" instead, which refuses a request older than 5 minutes and answers a copy of a signed request with its first answer (a captured amendment cannot be replayed), or, when that answer had a job refused for now, 409 conflict: sign it afresh. Use one or the other: a request with an API key and x-partner or x-signature as well is 401 unauthorized (WWW-Authenticate error="invalid_request") and nothing is written, unless the signature is valid and is by the partner the key belongs to. ' +
        `Each job has jobRef (your unique reference: 1 to ${MAX_JOB_REF_LENGTH} characters, without control or invisible characters; a longer or malformed one is rejected 400 invalid_input, and its result's jobRef is null when it is too long: match results by index), action (new, amend, cancel; default new), pickup, dropoff, pickupTime (required for new), passengerName, passengerPhone, passengerEmail, passengers (1 to 8), vehicleType, flightNumber, fare (GBP, only for partners allowed to set fares) and notes. ` +
        'An amend sends only what changes: what it leaves out is kept, and passengerName, passengerPhone, passengerEmail, vehicleType, flightNumber, fare and notes sent as null are cleared (a cleared fare is priced on the published tariffs); an amend that changes nothing is unchanged. A repeated new job restates the whole job: with the same content it is unchanged; with other content it amends, fields it leaves out taking their defaults. A job is re-priced only when pickup, dropoff, pickupTime, passengers or vehicleType change, or its fare is cleared; an amend that changes the journey and leaves fare out is priced on the published tariffs (an agreed fare is kept for the same journey only: send the fare with the new journey to keep one). ' +
        'Every job gets its own outcome (created 201, amended, cancelled, unchanged 200, rejected 4xx with an error); an array answers 200 when all succeeded, else 207; a single object answers with its own status. New jobs count against a daily limit per partner (Europe/London day): a new job over it is rejected 429 daily_limit_reached with retryAfterSeconds; a request all of whose jobs are refused so answers 429 (with Retry-After and RateLimit headers), in the same {results, summary} shape.',
      tags: ['partners'],
      auth: 'public',
      partnerSigned: true,
      refusesDriverToken: 'Job intake is for partners: a driver token cannot submit jobs.',
      body: PartnerJobsRequest,
      documentedBody: PartnerJobsDocumented,
      textCheckedPerJob: true,
      errors: ['forbidden', 'daily_limit_reached', 'conflict', 'idempotency_in_progress', 'idempotency_key_reused'],
      responses: partnerJobsResponses(),
      // Signed requests are authenticated before the body is validated: unsigned is 401, not 400.
      // A key sent with HMAC headers as well is 401 unless the signature is valid and is the
      // key's partner's: a conflicting or bad credential is never passed over for the other.
      verify: async ({ req, deps, caller }) => {
        const partnerHeader = req.get('x-partner');
        const signatureHeader = req.get('x-signature');
        if (caller.kind === 'anonymous') {
          return partnerBySignature(
            deps.db,
            deps.config.dataEncryptionKey,
            partnerHeader,
            signatureHeader,
            req.rawBody,
            req.get('x-timestamp'),
          );
        }
        if (caller.kind === 'api_key' && (partnerHeader !== undefined || signatureHeader !== undefined)) {
          return partnerByKeyAndSignature(
            deps.db,
            deps.config.dataEncryptionKey,
            caller.key.partnerId,
            partnerHeader,
            signatureHeader,
            req.rawBody,
            req.get('x-timestamp'),
          );
        }
        return undefined;
      },
      handler: async ({ req, deps, caller, body, verified, requestId }) => {
        let partner: IntakePartner | undefined;
        let apiKeyId: string | null = null;
        let testMode = false;
        if (caller.kind === 'api_key') {
          if (!caller.key.partnerId) {
            throw new AppError('forbidden', 'This API key does not belong to a partner: job intake is for partners.');
          }
          partner = await loadPartner(deps.db, caller.key.partnerId);
          apiKeyId = caller.key.id;
          testMode = caller.key.mode === 'test';
        } else if (caller.kind === 'anonymous') {
          partner = verified;
        } else {
          throw new AppError('forbidden', 'Job intake is for partners: a driver token cannot submit jobs.');
        }
        if (!partner) throw new AppError('forbidden', 'This API key does not belong to a partner.');
        const single = !Array.isArray(body);
        const jobs: unknown[] = single ? [body] : (body as unknown[]);
        // A suspended partner may still cancel its jobs (its customers keep cancelling), in a
        // request of cancellations only; anything else from it is 403.
        const cancelsOnly =
          jobs.length > 0 &&
          jobs.every((j) => j !== null && typeof j === 'object' && (j as { action?: unknown }).action === 'cancel');
        if (!cancelsOnly) assertActive(partner);
        const intakeCaller: IntakeCaller = {
          partner,
          apiKeyId,
          testMode,
          scope: caller.kind === 'api_key' ? callerScope(caller) : `partner:${partner.id}`,
          testScenario: scenarioHeader(req, testMode),
        };
        // The Idempotency-Key is claimed here, once the partner is authenticated, scoped by its
        // API key or, signing with HMAC, by the partner (whatever address it sends from).
        const key = singleHeader(req, 'Idempotency-Key');
        const claims: Parameters<typeof underClaims>[1][number][] =
          key === undefined
            ? []
            : [{ scope: caller.kind === 'api_key' ? callerScope(caller) : `hmac:${partner.id}`, key }];
        // A timestamped signed message delivered again (the same signature: the same timestamp
        // and body) answers its first result and changes nothing, so a captured amendment
        // replayed inside the 5 minutes cannot undo a newer one (remembered 24 h, as the
        // supplier hmac adapter's messages).
        const messageId = verified?.messageId;
        if (messageId) {
          claims.unshift({
            scope: `partner-message:${partner.id}`,
            key: messageId,
            always: true,
            label: SIGNED_MESSAGE,
          });
        }
        return underClaims(
          deps.db,
          claims,
          {
            method: req.method,
            path: JOBS_PATH,
            rawBody: req.rawBody,
            sealKey: deps.config.dataEncryptionKey,
            requestId,
          },
          async () => {
            const { results, limitHeaders } = await processJobs(
              { ...deps, logger: req.log ?? deps.logger },
              intakeCaller,
              jobs,
              baseUrlFor(req, deps.config),
            );
            return jobsAnswer(results, single, limitHeaders);
          },
        );
      },
    }),
  ];
}
