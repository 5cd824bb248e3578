import type { TSchema } from '@sinclair/typebox';
import { TEST_SCENARIO_HEADER, TEST_SCENARIOS } from '../shared/domain/sandbox.ts';
import { ERROR_STATUS, type ErrorCode } from '../shared/errors.ts';
import { ErrorEnvelope } from '../shared/schemas/common.ts';
import { BookingAmendedWebhook, BookingStatusWebhook } from '../shared/schemas/webhook-events.ts';
import type { RouteDef } from './route.ts';

/** A TypeBox schema as plain JSON Schema (TypeBox's symbol keys drop out). */
function plain(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}

function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

function parameters(schema: TSchema | undefined, where: 'path' | 'query') {
  if (!schema) return [];
  const s = plain(schema) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(s.properties ?? {}).map(([name, prop]) => {
    const { description, ...rest } = prop;
    return {
      name,
      in: where,
      required: where === 'path' || (s.required ?? []).includes(name),
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

/** The error codes a route can answer with, beyond those it declares. */
function implicitErrors(route: RouteDef): ErrorCode[] {
  const codes: ErrorCode[] = ['internal_error'];
  // A request that carries a body is parsed as JSON whatever the route reads (api/middleware/body.ts):
  // malformed JSON is 400, another media type 415, too large 413.
  // A GET sent with a body has it read as well (and refused so); a request head over 16 KB is
  // 431 before any route (api/client-errors.ts).
  codes.push('invalid_input', 'payload_too_large', 'unsupported_media_type', 'headers_too_large');
  if (route.auth !== 'none') codes.push('unauthorized', 'service_unavailable');
  if (route.rateLimit !== false) codes.push('rate_limited', 'service_unavailable');
  // The Idempotency-Key header (CONTRACT.md section 2): reused with another body, or sent
  // again while the first request is still being answered.
  if (route.idempotent) codes.push('idempotency_key_reused', 'idempotency_in_progress', 'invalid_input');
  return codes;
}

/** The header every creating POST honours (CONTRACT.md section 2). */
const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Any 1 to 255 printable ASCII characters, new for each operation: the same key and body within 24 hours replays the first answer byte for byte (Idempotency-Replayed: true); the key with another body is 422 idempotency_key_reused; while the first is still being answered, 409 idempotency_in_progress. 5xx, 401 and 429 answers are not replayed, so a retry runs again.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

/** The sandbox's scenario header (README: Sandbox), on the routes that book. */
const TEST_SCENARIO = {
  name: TEST_SCENARIO_HEADER,
  in: 'header',
  required: false,
  description: `Test keys only (a live key sending it is 400): the simulated drivers play this scenario for the booking (or each job). Unknown names are 400. It may also be named in the notes as scenario:<name>.`,
  schema: { type: 'string', enum: [...TEST_SCENARIOS] },
};

/** On an answer an Idempotency-Key replayed. */
const IDEMPOTENCY_REPLAYED = {
  description: "true when this answer is the first request's, replayed byte for byte for the same Idempotency-Key",
  schema: { type: 'string', enum: ['true'] },
};

const RATE_HEADERS = {
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimitPolicy' },
  RateLimit: { $ref: '#/components/headers/RateLimit' },
};

export interface OpenApiOptions {
  title: string;
  version: string;
  description: string;
  servers: readonly string[];
  apiKeyHeader: string;
}

/**
 * The OpenAPI 3.1 document, generated from the declared routes: a route added later appears
 * with its schemas, parameters, security and error responses without anyone editing this.
 */
/** A `webhooks` entry: a POST to the receiver's endpoint, signed with Standard Webhooks. */
function webhookOperation(summary: string, description: string, schema: TSchema) {
  const signed = (name: string, text: string) => ({
    name,
    in: 'header',
    required: true,
    description: text,
    schema: { type: 'string' },
  });
  return {
    post: {
      summary,
      description: `${description} Verify the signature with a Standard Webhooks library and the endpoint's \`whsec_\` secret; answer 2xx within 10 seconds, or it is retried with backoff for just over 24 hours.`,
      parameters: [
        signed('webhook-id', 'The delivery id: the same on every retry of this delivery'),
        signed('webhook-timestamp', 'Seconds since the epoch, signed'),
        signed('webhook-signature', '`v1,<base64 HMAC-SHA256>`; two, space-separated, during a secret rotation'),
      ],
      requestBody: { required: true, content: { 'application/json': { schema: plain(schema) } } },
      responses: { '2XX': { description: 'Received: not delivered again' } },
    },
  };
}

export function buildOpenApi(routes: readonly RouteDef[], opts: OpenApiOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  for (const route of routes) {
    if (route.documented === false) continue;
    for (const t of route.tags) tags.add(t);
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(route.responses)) {
      const headers = {
        ...(route.rateLimit !== false ? RATE_HEADERS : {}),
        ...(route.idempotent ? { 'Idempotency-Replayed': IDEMPOTENCY_REPLAYED } : {}),
      };
      responses[status] = {
        description: r.description,
        ...(Object.keys(headers).length > 0 ? { headers } : {}),
        ...(r.schema ? { content: { [r.contentType ?? 'application/json']: { schema: plain(r.schema) } } } : {}),
      };
    }
    const byStatus = new Map<number, Set<ErrorCode>>();
    for (const code of [...(route.errors ?? []), ...implicitErrors(route)]) {
      const status = ERROR_STATUS[code];
      const set = byStatus.get(status) ?? new Set<ErrorCode>();
      set.add(code);
      byStatus.set(status, set);
    }
    for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
      // A route may answer an error status with a body of its own too (a partner batch's single
      // job answers with its own status, in the results shape): either body is documented.
      const own = route.responses[status];
      const envelope = { $ref: '#/components/schemas/Error' };
      responses[String(status)] = {
        description: `${own ? `${own.description}. ` : ''}Error: ${[...codes].map((c) => `\`${c}\``).join(', ')}`,
        ...(status === 429
          ? { headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' }, ...RATE_HEADERS } }
          : {}),
        content: {
          'application/json': { schema: own?.schema ? { anyOf: [envelope, plain(own.schema)] } : envelope },
        },
      };
    }
    const keySchemes = [{ ApiKeyHeader: [] }, { BearerAuth: [] }, { XApiKey: [] }];
    const operation: Record<string, unknown> = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: route.tags,
      parameters: [
        ...parameters(route.params, 'path'),
        ...parameters(route.query, 'query'),
        ...(route.idempotent ? [IDEMPOTENCY_KEY] : []),
        ...(route.testScenario ? [TEST_SCENARIO] : []),
      ],
      ...((route.documentedBody ?? route.body)
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: plain((route.documentedBody ?? route.body) as TSchema) } },
            },
          }
        : {}),
      responses,
      security: route.partnerSigned
        ? [...keySchemes, { PartnerSignature: [] }]
        : route.auth === 'key'
          ? keySchemes
          : route.auth === 'public'
            ? [{}, ...keySchemes, ...(route.refusesDriverToken ? [] : [{ DriverToken: [] }])]
            : route.auth === 'driver'
              ? [{ DriverToken: [] }]
              : route.auth === 'driver_or_key'
                ? [{ DriverToken: [] }, ...keySchemes]
                : [],
    };
    const path = openApiPath(route.path);
    paths[path] = { ...(paths[path] ?? {}), [route.method]: operation };
  }
  return {
    openapi: '3.1.0',
    info: { title: opts.title, version: opts.version, description: opts.description },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: opts.servers.map((url) => ({ url })),
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    // What we send to a platform's webhook endpoint (set with `webhook set`): signed with
    // Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
    webhooks: {
      bookingStatus: webhookOperation(
        'A booking status changed',
        'Sent for every status change after the first (sequence 2 on) of a booking the partner or supplier submitted, or that a partner operator holds.',
        BookingStatusWebhook,
      ),
      bookingAmended: webhookOperation(
        'A booking held by a partner operator was amended',
        'Sent to a partner operator holding a booking (it accepted the job) when the booker amends it.',
        BookingAmendedWebhook,
      ),
    },
    components: {
      schemas: { Error: plain(ErrorEnvelope) },
      securitySchemes: {
        ApiKeyHeader: { type: 'apiKey', in: 'header', name: opts.apiKeyHeader },
        BearerAuth: { type: 'http', scheme: 'bearer', description: 'The API key as a bearer token' },
        XApiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
        PartnerSignature: {
          type: 'apiKey',
          in: 'header',
          name: 'x-signature',
          description:
            "A partner's HMAC-SHA256 of the raw body (or of `<x-timestamp>.<raw body>`) with its signing secret, hex (a `sha256=` prefix is accepted), sent with `x-partner: <partner id>`",
        },
        DriverToken: {
          type: 'http',
          scheme: 'bearer',
          description: "A driver's token (`dtn_drv_…`), issued when an operator approves the driver",
        },
      },
      headers: {
        RateLimitPolicy: {
          description: 'Quota policies that apply, e.g. `"per-key";q=600;w=60` (IETF httpapi RateLimit draft)',
          schema: { type: 'string' },
        },
        RateLimit: {
          description: 'Remaining quota and seconds to reset per policy, e.g. `"per-key";r=599;t=60`',
          schema: { type: 'string' },
        },
        RetryAfter: { description: 'Seconds to wait before retrying', schema: { type: 'integer' } },
      },
    },
  };
}
