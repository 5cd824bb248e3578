import { Type } from '@sinclair/typebox';
import { unseal } from '../../shared/crypto.ts';
import { AppError } from '../../shared/errors.ts';
import { partnerJobsResponses } from '../../shared/schemas/partner-jobs.ts';
import { SIGNED_MESSAGE, underClaims } from '../../shared/services/idempotency.ts';
import { jobsAnswer, processJobs } from '../../shared/services/intake.ts';
import {
  ADAPTERS,
  activeSupplierBySlug,
  asSupplierSent,
  SLUG,
  SUPPLIER_SIGNATURE_TOLERANCE_SECONDS,
} from '../../shared/services/suppliers.ts';
import { baseUrlFor } from '../base-url.ts';
import { singleHeader } from '../middleware/headers.ts';
import { defineRoute, type RouteDef } from '../route.ts';

const SUPPLIER_HOOK_PATH = '/api/public/hooks/:supplier-booking';

const DESCRIPTION = [
  'Booking hook for configured suppliers (CONTRACT.md section 6): each supplier posts to /api/public/hooks/{supplier}-booking in its own format; an unknown or inactive supplier is 404 not_found, missing or wrong credentials 401 unauthorized (compared in constant time).',
  'Adapter secret-header: one job per request, the shared secret in header x-{supplier}-secret. Body: {"event": "booking.created" | "booking.updated" | "booking.cancelled", "booking": {"id": "<your reference>", "pickup_address", "dropoff_address", "pickup_at": "<ISO 8601>", "passenger": {"name", "phone", "email"}, "pax": 1-8, "vehicle": "<vehicle class>", "flight", "price"?: GBP, "notes"}} (created = new, updated = amend, cancelled = cancel; a cancel needs only booking.id).',
  `Adapter hmac: one job or a batch, headers x-{supplier}-timestamp: <Unix seconds, the time of signing> and x-{supplier}-signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" (the timestamp header value, a dot, then the raw body bytes) with the supplier secret>. A timestamp that is missing, not whole seconds, or more than ${SUPPLIER_SIGNATURE_TOLERANCE_SECONDS / 60} minutes from the server clock is 401 unauthorized (missing, invalid or stale timestamp), so a captured request cannot be replayed later; sign every attempt, retries included, afresh. A signature over the body alone is refused. The same signed message delivered again (the same timestamp, body and signature) is answered with its first result and the header "Idempotency-Replayed: true" and changes nothing, so a captured amend replayed inside the window cannot undo a newer one; while the first delivery is still being processed the copy is 409 idempotency_in_progress. Body: one job, or {"jobs": [job, ...]} (1 to 100), each {"reference": "<your reference>", "type": "new" | "amend" | "cancel" (default new), "from", "to", "when": "<ISO 8601>", "passengers": 1-8, "customer": {"name", "phone", "email"}, "vehicle_class", "flight_no", "fare"?: GBP, "comments"}.`,
  "Jobs are idempotent on the supplier reference: the same new job again is unchanged, with other content it amends; amend or cancel of an unknown reference is rejected 404 job_not_found. The Idempotency-Key header is honoured too, once the request is authenticated: the same key and body within 24 hours replays the first answer (Idempotency-Replayed: true), another body is 422 idempotency_key_reused; an answer with a job that failed on our side or hit a limit is not replayed. Accepted jobs are dispatched automatically. The answer is the partner jobs shape {results, summary}: 200 when every job succeeded, else 207 (a single-job body answers with its job's own status).",
].join('\n\n');

/** POST /api/public/hooks/{supplier}-booking: supplier job intake through the supplier's adapter. */
export function supplierHookRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      // Express 5 / path-to-regexp 8: `supplier` is the part before the literal `-booking`.
      path: SUPPLIER_HOOK_PATH,
      // Idempotency-Key claimed in the handler, once the caller is authenticated (`underClaims`).
      idempotent: 'handler',
      operationId: 'supplierBookingHook',
      summary: 'Supplier booking hook: new, amend and cancel jobs in the supplier format',
      description: DESCRIPTION,
      tags: ['suppliers'],
      auth: 'none',
      params: Type.Object({ supplier: Type.String({ description: 'The supplier slug' }) }),
      textCheckedPerJob: true,
      errors: [
        'unauthorized',
        'not_found',
        'invalid_input',
        'conflict',
        'idempotency_in_progress',
        'idempotency_key_reused',
      ],
      responses: partnerJobsResponses(),
      handler: async ({ req, deps, params, body, requestId }) => {
        // Slugs are lower case; the path is matched in any case, as the routes are.
        const slug = params.supplier.toLowerCase();
        const supplier = await activeSupplierBySlug(deps.db, slug);
        const adapter = supplier ? ADAPTERS[supplier.adapter] : undefined;
        if (!supplier || !adapter) {
          // Named back only when it could be a slug: not 5,000 characters, nor a bidi override.
          throw new AppError(
            'not_found',
            SLUG.test(slug)
              ? `No supplier hook "${slug}-booking" is configured.`
              : 'No supplier hook is configured at this path.',
          );
        }
        const secret = unseal(supplier.secretSealed, deps.config.dataEncryptionKey);
        const hookReq = { header: (name: string) => req.get(name), rawBody: req.rawBody };
        const auth = adapter.authenticate(hookReq, supplier, secret, Date.now());
        if (!auth.ok) {
          throw new AppError('unauthorized', auth.message, [], { 'WWW-Authenticate': adapter.challenge(supplier) });
        }
        const parsed = adapter.parse(body);
        if (!parsed.ok) {
          throw new AppError('invalid_input', parsed.message, [{ field: '/', problem: parsed.message }]);
        }
        // A signed message delivered again (the same signature: the same timestamp and body)
        // answers its first result and changes nothing, so a captured amend replayed inside the
        // timestamp window cannot undo a newer one. Remembered as an idempotency key (24 h).
        // The Idempotency-Key header, when sent, is honoured as on every creating POST
        // (CONTRACT.md section 2), scoped by the supplier; both are checked only once the
        // request is authenticated, so nobody without the credentials is answered from them.
        const claims: Parameters<typeof underClaims>[1][number][] = [];
        if (auth.messageId) {
          claims.push({
            scope: `supplier-message:${supplier.slug}`,
            key: auth.messageId,
            always: true,
            label: SIGNED_MESSAGE,
          });
        }
        const idempotencyKey = singleHeader(req, 'Idempotency-Key');
        if (idempotencyKey !== undefined) claims.push({ scope: `supplier-key:${supplier.slug}`, key: idempotencyKey });
        return underClaims(
          deps.db,
          claims,
          {
            method: req.method,
            // The hook's own path, whatever case the request spelled the slug in.
            path: `/api/public/hooks/${supplier.slug}-booking`,
            rawBody: req.rawBody,
            sealKey: deps.config.dataEncryptionKey,
            requestId,
          },
          async () => {
            const { results: processed } = await processJobs(
              { ...deps, logger: req.log ?? deps.logger },
              { partner: null, supplier, apiKeyId: null, testMode: false, scope: `supplier:${supplier.slug}` },
              parsed.jobs.map((j) => j.job),
              baseUrlFor(req, deps.config),
            );
            const results = processed.map((r) => asSupplierSent(adapter.fields, r));
            return jobsAnswer(results, parsed.single);
          },
        );
      },
    }),
  ];
}
