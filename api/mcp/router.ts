import { authorizationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/authorize.js';
import { metadataHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/metadata.js';
import { clientRegistrationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/register.js';
import { revocationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/revoke.js';
import { tokenHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/token.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { OAuthMetadata, OAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import cors from 'cors';
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import { AppError } from '../../shared/errors.ts';
import { type ApiKeyIdentity, findApiKey, keyPattern } from '../../shared/services/api-keys.ts';
import { authenticateClient, MCP_SCOPES } from '../../shared/services/oauth.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { assertFormUtf8, assertUtf8, jsonBody, NOT_UTF8, refuseDeclaredOver } from '../middleware/body.ts';
import { countReleaser, type RateLimits } from '../middleware/rate-limit.ts';
import {
  AUTHORIZE_CODE_PATH,
  AUTHORIZE_DECISION_PATH,
  AUTHORIZE_EMAIL_PATH,
  AUTHORIZE_PATH,
  authorizationErrorsShown,
  codeSubmitted,
  decisionSubmitted,
  emailSubmitted,
  formHandler,
  pageLimited,
} from './authorize-page.ts';
import { idempotentRegistration } from './idempotent-register.ts';
import { issuesInWords } from './issues-in-words.ts';
import { checkedFirst, ipLimiter, mcpSubject, subjectLimiter } from './limits.ts';
import { grantOf, PgOAuthProvider } from './provider.ts';
import { buildMcpServer, callWithArgumentsNotAnObject, TOOL_SCOPES, type ToolName, toolCallsOf } from './tools.ts';

/** start_booking's own limit: new bookings a passenger makes through assistants in an hour. */
const MCP_BOOKINGS_LIMIT = { name: 'mcp-bookings', points: 20, durationSeconds: 3600 } as const;

export const MCP_PATH = '/mcp';
export const TOKEN_PATH = '/token';
export const REGISTER_PATH = '/register';
export const REVOKE_PATH = '/revoke';
export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';
export const AUTHORIZATION_SERVER_METADATA_PATH = '/.well-known/oauth-authorization-server';
/** Every path `mcpRouter` serves lies under one of these (`servedUnder`, api/app.ts). */
export const MCP_ROUTER_PATHS = [MCP_PATH, AUTHORIZE_PATH, TOKEN_PATH, REVOKE_PATH, REGISTER_PATH, '/.well-known'];

/** RFC 8414: this service is the authorization server of its own MCP endpoint, on every connected domain. */
export function authorizationServerMetadata(base: string): OAuthMetadata {
  return {
    issuer: base,
    authorization_endpoint: `${base}${AUTHORIZE_PATH}`,
    token_endpoint: `${base}${TOKEN_PATH}`,
    registration_endpoint: `${base}${REGISTER_PATH}`,
    revocation_endpoint: `${base}${REVOKE_PATH}`,
    scopes_supported: [...MCP_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post', 'client_secret_basic'],
    authorization_response_iss_parameter_supported: true,
  };
}

/** RFC 9728: the MCP endpoint of this domain, and who issues its tokens. */
export function protectedResourceMetadata(base: string, serviceName: string): OAuthProtectedResourceMetadata {
  return {
    resource: `${base}${MCP_PATH}`,
    authorization_servers: [base],
    scopes_supported: [...MCP_SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: `${serviceName} MCP tool server`,
  };
}

/**
 * Run an async check (a rate limit) as middleware before an OAuth endpoint; a refusal is
 * answered as OAuth errors are (`{error, error_description}`, with Retry-After). OPTIONS
 * preflights pass: the SDK handlers answer them.
 */
function before(check: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return checkedFirst(check, (res, err) => {
    res
      .status(err.status)
      .set('Cache-Control', 'no-store')
      .json({
        error: err.code === 'rate_limited' ? 'too_many_requests' : 'temporarily_unavailable',
        error_description: err.message,
      });
  });
}

/** RFC 7636 section 4.1: 43 to 128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/**
 * A code exchange's `code_verifier` must have PKCE's form (the SDK's handler takes any string
 * that hashes to the challenge, "" included): 400 `invalid_request` otherwise.
 */
const verifierChecked: RequestHandler = (req, res, next) => {
  const body = (req.body ?? {}) as Record<string, unknown>;
  const verifier = body.code_verifier;
  if (req.method !== 'POST' || body.grant_type !== 'authorization_code' || typeof verifier !== 'string') return next();
  if (CODE_VERIFIER.test(verifier)) return next();
  res.status(400).set('Cache-Control', 'no-store').json({
    error: 'invalid_request',
    error_description:
      'code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, "-", ".", "_" and "~" (RFC 7636 section 4.1).',
  });
};

function invalidClient(res: Response, description: string, basic: boolean): void {
  if (basic) res.setHeader('WWW-Authenticate', 'Basic realm="oauth"');
  res.status(401).set('Cache-Control', 'no-store').json({ error: 'invalid_client', error_description: description });
}

/**
 * Client authentication at the token and revocation endpoints, against the hashed secret:
 * `client_secret_post` (form fields) or `client_secret_basic` (Authorization: Basic, which the
 * SDK's handlers do not read: its client id is copied into the form for them). Public clients
 * (`none`) and unknown ids pass on: the SDK answers those (`invalid_client` for an unknown id).
 */
function clientAuthentication(deps: ApiDeps): RequestHandler {
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    const run = async () => {
      const body = { ...((req.body ?? {}) as Record<string, unknown>) };
      let clientId = typeof body.client_id === 'string' ? body.client_id : undefined;
      let secret = typeof body.client_secret === 'string' ? body.client_secret : undefined;
      const basic = /^Basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*$/i.exec(req.headers.authorization ?? '');
      // Basic credentials that are not base64 are a failed client authentication by the header
      // (RFC 6749 section 5.2: 401 invalid_client), not a request missing its client_id.
      if (!basic && /^Basic\b/i.test(req.headers.authorization ?? '')) {
        return invalidClient(res, 'The Basic credentials are malformed.', true);
      }
      if (basic) {
        const decoded = Buffer.from(basic[1] ?? '', 'base64').toString('utf8');
        const colon = decoded.indexOf(':');
        let id: string;
        let pass: string;
        try {
          if (colon < 0) throw new Error('no colon');
          id = decodeURIComponent(decoded.slice(0, colon));
          pass = decodeURIComponent(decoded.slice(colon + 1));
        } catch {
          return invalidClient(res, 'The Basic credentials are malformed.', true);
        }
        if ((clientId !== undefined && clientId !== id) || secret !== undefined) {
          res.status(400).json({
            error: 'invalid_request',
            error_description: 'Authenticate the client one way: Basic credentials or form fields.',
          });
          return;
        }
        clientId = id;
        secret = pass;
        body.client_id = id;
        req.body = body;
      }
      if (clientId === undefined) return next();
      const result = await authenticateClient(deps.db, clientId, secret);
      // RFC 6749 section 5.2: a client that authenticated with the Authorization header and
      // failed is answered 401 with WWW-Authenticate, an unknown one included.
      if (result === 'unknown' && basic) return invalidClient(res, 'No client is registered with this id.', true);
      if (result === 'ok' || result === 'public' || result === 'unknown') return next();
      invalidClient(
        res,
        result === 'missing_secret'
          ? 'This client must authenticate with its client secret.'
          : result === 'expired_secret'
            ? 'The client secret has expired: register the client again.'
            : 'The client secret is not correct.',
        basic !== null,
      );
    };
    run().catch(next);
  };
}

/**
 * The SDK's handlers describe a request that fails its schema with the schema library's issue
 * list as JSON (`[{"expected": "string", "code": "invalid_type", "path": ["client_id"], ...}]`),
 * a dump no OAuth client shows its user. Such a description is rewritten as the issues in
 * words ("client_id: Invalid input: expected string, received undefined"); any other answer
 * passes as it is.
 */
const readableOAuthErrors: RequestHandler = (_req, res, next) => {
  const json = res.json.bind(res);
  res.json = (body: unknown) => {
    const b = body as { error?: unknown; error_description?: unknown } | null;
    if (b && typeof b.error === 'string' && typeof b.error_description === 'string') {
      const words = issuesInWords(b.error_description);
      if (words) return json({ ...b, error_description: words });
    }
    return json(body);
  };
  next();
};

/**
 * The body's media type, checked before the SDK's handler reads the body: the token and
 * revocation endpoints take a form (RFC 6749 section 3.2, RFC 7009 section 2.1), registration
 * JSON (RFC 7591 section 3.1). Otherwise the handler saw no body and described it as a schema
 * failure of the whole request.
 */
function mediaTypeRequired(type: 'urlencoded' | 'json'): RequestHandler {
  const [mime, code, description] =
    type === 'urlencoded'
      ? [
          'application/x-www-form-urlencoded',
          'invalid_request',
          'Send the request as a form: Content-Type: application/x-www-form-urlencoded.',
        ]
      : [
          'application/json',
          'invalid_client_metadata',
          'Send the client metadata as JSON: Content-Type: application/json.',
        ];
  return (req, res, next) => {
    if (req.method !== 'POST' || req.is(mime)) return next();
    res.status(400).set('Cache-Control', 'no-store').json({ error: code, error_description: description });
  };
}

/**
 * A body the OAuth endpoints cannot read (too large, not valid JSON at /register, an encoding
 * not accepted) answered as OAuth answers errors (RFC 6749 section 5.2, RFC 7591 section 3.2.2:
 * `{error, error_description}`), not in the REST API's shape, which an OAuth client would not
 * understand. Too large stays 413 and an unsupported encoding 415; the rest are 400.
 */
function oauthBodyErrors(code: 'invalid_request' | 'invalid_client_metadata') {
  return (err: unknown, _req: Request, res: Response, next: NextFunction): void => {
    const type = (err as { type?: unknown } | null)?.type;
    if (res.headersSent || typeof type !== 'string') {
      next(err);
      return;
    }
    const [status, description] =
      type === 'entity.too.large'
        ? [413, 'The request body is larger than this endpoint accepts.']
        : type === 'entity.parse.failed'
          ? [400, 'The request body is not valid JSON.']
          : type === 'encoding.unsupported' || type === 'charset.unsupported'
            ? [415, 'The request body must be UTF-8 and not compressed.']
            : type === NOT_UTF8
              ? [400, 'The request body is not valid UTF-8 text.']
              : [400, 'The request body could not be read.'];
    res.status(status).set('Cache-Control', 'no-store').json({ error: code, error_description: description });
  };
}

/**
 * The id two or more requests of a batch share (the first such, in order), or undefined. JSON-RPC
 * 2.0 matches each response to its request by id, and the transport keeps one pending response
 * per id: with a repeated id every request would run but only one answer come back. Ids are
 * compared as the transport's map compares them (1 and "1" differ); notifications (no id) and
 * messages without a method (responses) are not requests.
 */
function repeatedRequestId(body: unknown): string | number | undefined {
  if (!Array.isArray(body)) return undefined;
  const seen = new Set<string | number>();
  for (const m of body) {
    if (typeof m !== 'object' || m === null) continue;
    const { id, method } = m as { id?: unknown; method?: unknown };
    if (typeof method !== 'string' || (typeof id !== 'string' && typeof id !== 'number')) continue;
    if (seen.has(id)) return id;
    seen.add(id);
  }
  return undefined;
}

/**
 * The elements of a batch that are JSON-RPC messages (`valid`), and an Invalid Request error for
 * each that is not (`answers`, JSON-RPC 2.0 section 6), carrying its id when one can be read
 * (a string or a number), else null. A body that is not an array has none.
 */
function invalidBatchElements(body: unknown): { valid: unknown[]; answers: unknown[] } {
  if (!Array.isArray(body)) return { valid: [], answers: [] };
  const valid: unknown[] = [];
  const answers: unknown[] = [];
  for (const m of body) {
    const parsed = JSONRPCMessageSchema.safeParse(m);
    if (parsed.success) {
      valid.push(m);
      continue;
    }
    const id = typeof m === 'object' && m !== null ? (m as { id?: unknown }).id : undefined;
    answers.push({
      jsonrpc: '2.0',
      error: {
        code: -32600,
        message:
          'Invalid Request: not a JSON-RPC 2.0 message (needs "jsonrpc": "2.0", a "method" and, for a request, a string or integer "id")',
      },
      id: typeof id === 'string' || typeof id === 'number' ? id : null,
    });
  }
  return { valid, answers };
}

/**
 * The transport's answer (JSON-response mode: `enableJsonResponse`, so never an event stream)
 * written to the Node response. A body that was a batch is answered with an array (JSON-RPC 2.0
 * section 6), as the transport does not: it counts the responses, and sends one (a batch holding
 * a single request) as the bare object. `refused`, the errors for a batch's elements that were
 * not messages (`invalidBatchElements`), follow the transport's responses; when the rest were
 * notifications only (the transport's 202), they are the answer. Otherwise only a 200 JSON
 * answer is wrapped; the transport's refusals of the whole request (400 with id null) and its
 * 202 for notifications only pass as they are.
 */
async function writeAnswer(
  res: Response,
  answer: globalThis.Response,
  batch: boolean,
  refused: readonly unknown[],
): Promise<void> {
  if (res.headersSent || res.destroyed) return;
  const type = answer.headers.get('content-type') ?? '';
  const json = answer.status === 200 && /^application\/json\b/i.test(type);
  if (refused.length > 0 && answer.status === 202) {
    res.status(200).json(refused);
    return;
  }
  res.status(answer.status);
  answer.headers.forEach((value, name) => {
    res.setHeader(name, value);
  });
  if (json) {
    const text = await answer.text();
    // Parsed only when it may hold a schema failure to reword (`paramsInWords`) or is a batch.
    if (!batch && !text.includes('-32603')) {
      res.end(text);
      return;
    }
    const body = paramsInWords(JSON.parse(text) as unknown);
    res.end(JSON.stringify(batch ? [...(Array.isArray(body) ? body : [body]), ...refused] : body));
    return;
  }
  res.end(Buffer.from(await answer.arrayBuffer()));
}

/**
 * A request whose params fail the SDK's schema (a `tools/call` without `params`, an
 * `initialize` without its fields) is answered by the SDK with -32603 Internal error and the
 * schema library's issue list as JSON for its message: rewritten as -32602 Invalid params with
 * the issues in words (`issuesInWords`), as JSON-RPC 2.0 section 5.1 has it, alone or in a
 * batch. Any other answer is left as it is.
 */
function paramsInWords(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(paramsInWords);
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (error?.code !== -32603 || typeof error.message !== 'string') return body;
  const words = issuesInWords(error.message);
  if (words === null) return body;
  return { ...(body as object), error: { code: -32602, message: `Invalid params: ${words}` } };
}

/**
 * The MCP tool server and its OAuth 2.1 authorization server, mounted at the application root
 * before the JSON body parser (the OAuth endpoints take form bodies):
 *
 * - metadata: RFC 9728 at `/.well-known/oauth-protected-resource` (and `/mcp` suffixed), RFC 8414
 *   at `/.well-known/oauth-authorization-server`, for the connected domain of the request;
 * - the SDK's handlers for `/authorize` (then the page's form posts), `/token`, `/register`
 *   (RFC 7591) and `/revoke` (RFC 7009) over the Postgres provider, limited per IP by the
 *   service's Redis limiter (their in-memory limiters are off);
 * - `/mcp`: the SDK's bearer check (401 with `WWW-Authenticate: Bearer ... resource_metadata=`,
 *   a token bound to another resource refused; without an Authorization header the challenge
 *   carries no error code), batches checked (size, emptiness, repeated ids), then a stateless
 *   Streamable HTTP transport and a new `McpServer` per request, answering JSON (a batch with
 *   an array: `writeAnswer`).
 */
export function mcpRouter(deps: ApiDeps, limits: RateLimits): Router {
  const { config } = deps;
  const provider = new PgOAuthProvider(deps);
  const router = express.Router();
  // Bytes that are not UTF-8 are refused, not decoded into U+FFFD (as on every JSON body).
  // A percent-escape that is not UTF-8 is refused as raw bytes that are not (`assertFormUtf8`):
  // never kept as its literal escapes.
  // Over a limit by the declared length: 413 at once, before reading (`refuseDeclaredOver`).
  const form = [
    refuseDeclaredOver(16 * 1024),
    express.urlencoded({ extended: false, limit: '16kb', verify: (_req, _res, buf) => assertFormUtf8(buf) }),
  ];

  // Metadata, per connected domain.
  const documents = new Map(
    config.publicBaseUrls.map((base) => [
      base,
      {
        resource: metadataHandler(protectedResourceMetadata(base, config.serviceName)),
        server: metadataHandler(authorizationServerMetadata(base)),
      },
    ]),
  );
  const documentsFor = (req: Request) =>
    documents.get(baseUrlFor(req, config)) ??
    (documents.values().next().value as NonNullable<ReturnType<typeof documents.get>>);
  router.use(`${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`, (req, res, next) =>
    documentsFor(req).resource(req, res, next),
  );
  router.use(PROTECTED_RESOURCE_METADATA_PATH, (req, res, next) => documentsFor(req).resource(req, res, next));
  router.use(AUTHORIZATION_SERVER_METADATA_PATH, (req, res, next) => documentsFor(req).server(req, res, next));

  // The authorization endpoint and its page.
  const pageLimit = ipLimiter(limits, { name: 'oauth-authorize', points: 120, durationSeconds: 600 });
  router.post(AUTHORIZE_EMAIL_PATH, form, formHandler(deps, pageLimit, emailSubmitted(deps)));
  router.post(AUTHORIZE_CODE_PATH, form, formHandler(deps, pageLimit, codeSubmitted(deps)));
  router.post(AUTHORIZE_DECISION_PATH, form, formHandler(deps, pageLimit, decisionSubmitted(deps)));
  router.use(
    AUTHORIZE_PATH,
    pageLimited(deps, pageLimit),
    authorizationErrorsShown(deps),
    authorizationHandler({ provider, rateLimit: false }),
  );

  // Token, revocation and registration endpoints. CORS first, as the SDK's handlers answer (any
  // origin): the limit's 429 and the client authentication's 401 are sent before those run,
  // and a browser-based client must be able to read them too.
  router.use([TOKEN_PATH, REVOKE_PATH, REGISTER_PATH], cors(), readableOAuthErrors);
  // Per client IP. Generous on /token and /revoke: a hosted assistant exchanges and refreshes
  // every passenger's tokens from a few shared addresses, so a tight limit would lock all of
  // them out together; codes and refresh tokens are 256-bit random, so the limits guard load,
  // not guessing. /register stays at 60 an hour: a client is registered once, and kept.
  router.use(
    TOKEN_PATH,
    before(ipLimiter(limits, { name: 'oauth-token', points: 1200, durationSeconds: 600 })),
    mediaTypeRequired('urlencoded'),
    form,
    verifierChecked,
    clientAuthentication(deps),
    tokenHandler({ provider, rateLimit: false }),
  );
  router.use(
    REVOKE_PATH,
    before(ipLimiter(limits, { name: 'oauth-revoke', points: 1200, durationSeconds: 600 })),
    mediaTypeRequired('urlencoded'),
    form,
    clientAuthentication(deps),
    revocationHandler({ provider, rateLimit: false }),
  );
  router.use(
    REGISTER_PATH,
    before(ipLimiter(limits, { name: 'oauth-register', points: 60, durationSeconds: 3600 })),
    mediaTypeRequired('json'),
    // Parsed here (the SDK's own parser then leaves it), so bytes that are not UTF-8 are
    // refused rather than stored in the client's metadata as U+FFFD. The SDK's limit: 100 KB.
    refuseDeclaredOver(100 * 1024),
    express.json({
      limit: '100kb',
      verify: (req, _res, buf) => {
        assertUtf8(buf);
        (req as Request).rawBody = buf;
      },
    }),
    idempotentRegistration(deps, REGISTER_PATH),
    // Secrets do not expire (client_secret_expires_at 0, RFC 7591): there is no endpoint to
    // rotate one (RFC 7592), and an expired secret would strand every passenger's refresh
    // token (MCP_REFRESH_TOKEN_TTL_DAYS) until they signed in again. The SDK's default is 30 days.
    clientRegistrationHandler({ clientsStore: provider.clientsStore, rateLimit: false, clientSecretExpirySeconds: 0 }),
  );
  router.use([TOKEN_PATH, REVOKE_PATH], oauthBodyErrors('invalid_request'));
  router.use(REGISTER_PATH, oauthBodyErrors('invalid_client_metadata'));

  // The MCP endpoint.
  const bearers = new Map(
    config.publicBaseUrls.map((base) => [
      base,
      requireBearerAuth({
        verifier: provider,
        resourceMetadataUrl: `${base}${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}`,
        expectedResource: new URL(`${base}${MCP_PATH}`),
      }),
    ]),
  );
  const bearer: RequestHandler = (req, res, next) => {
    const base = baseUrlFor(req, config);
    const check = bearers.get(base) ?? bearers.values().next().value;
    if (!check) return next(new AppError('internal_error', 'No connected domain is configured.'));
    // RFC 6750 section 3.1: a request carrying no authentication is challenged without an error
    // code (the SDK's check adds error="invalid_token" to every 401). The body stays the SDK's.
    if (req.headers.authorization === undefined) {
      res
        .status(401)
        .set('WWW-Authenticate', `Bearer resource_metadata="${base}${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}"`)
        .json({ error: 'invalid_token', error_description: 'Missing Authorization header' });
      return;
    }
    return check(req, res, next);
  };
  const general = subjectLimiter(limits, []);
  const toolLimits: Record<ToolName, ReturnType<typeof subjectLimiter>> = {
    estimate_fare: subjectLimiter(limits, [
      { name: 'quotes', points: config.pricing.quoteLimitPerHour, durationSeconds: 3600 },
    ]),
    get_service_info: general,
    start_booking: subjectLimiter(limits, [MCP_BOOKINGS_LIMIT]),
  };
  // A start_booking that booked nothing new (a repeat answered with its booking, a refusal)
  // gives its count back, as the v1 booking gives back an unconfirmed address's: a passenger's
  // hour is their bookings, not an assistant's retries. The window's full length as the time
  // left: only a window that began after this call's (it outlived its window) is left alone.
  const releaseCount = countReleaser(deps.redis);
  const giveBackBooking = (subject: string) =>
    releaseCount(
      [`${config.queuePrefix}:rl:${MCP_BOOKINGS_LIMIT.name}:key:${subject}`],
      [MCP_BOOKINGS_LIMIT.durationSeconds * 1000],
    );

  router.use(
    MCP_PATH,
    cors({
      origin: '*',
      methods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
      allowedHeaders: [
        'Authorization',
        'Content-Type',
        'Accept',
        'Mcp-Protocol-Version',
        'Mcp-Session-Id',
        'Last-Event-ID',
        config.apiKeyHeader,
        'X-Test-Scenario',
      ],
      exposedHeaders: [
        'WWW-Authenticate',
        'Mcp-Session-Id',
        'X-Request-Id',
        'RateLimit',
        'RateLimit-Policy',
        'Retry-After',
      ],
      maxAge: 600,
    }),
  );
  router.post(MCP_PATH, bearer, jsonBody(config.http.bodyLimitBytes), async (req: Request, res: Response) => {
    const grant = grantOf(req.auth);
    if (!grant) throw new AppError('unauthorized', 'The access token carries no passenger.');
    const subject = mcpSubject(grant.email);
    // The transport refuses a batch of more than MAX_BATCH_SIZE messages: refused here as it
    // would be, before its messages are counted (a 1 MB body holds thousands).
    if (Array.isArray(req.body) && req.body.length > MAX_BATCH_SIZE) {
      res.status(400).json({
        jsonrpc: '2.0',
        error: { code: -32600, message: `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages` },
        id: null,
      });
      return;
    }
    // JSON-RPC 2.0 section 6: an empty batch is an Invalid Request (the transport would answer 202).
    // Counted against the general limit, as every message is.
    if (Array.isArray(req.body) && req.body.length === 0) {
      await general(req, res, subject);
      res.status(400).json({
        jsonrpc: '2.0',
        error: { code: -32600, message: 'Invalid Request: a batch must hold at least one message' },
        id: null,
      });
      return;
    }
    // JSON-RPC 2.0 section 6: an element of a batch that is not a JSON-RPC message is answered
    // with its own Invalid Request error and the others run (the transport refuses the whole
    // batch for one). A batch of nothing else is answered with those errors alone.
    const invalid = invalidBatchElements(req.body);
    // A single message that is JSON but not a JSON-RPC message is an Invalid Request too
    // (-32600; the transport answered -32700 Parse error, which is for text that is not JSON).
    if (!Array.isArray(req.body)) {
      const [single] = invalidBatchElements([req.body]).answers;
      if (single !== undefined) {
        await general(req, res, subject);
        res.status(400).json(single);
        return;
      }
    }
    if (invalid.answers.length > 0) {
      if (invalid.valid.length === 0) {
        await general(req, res, subject);
        res.status(200).json(invalid.answers);
        return;
      }
      req.body = invalid.valid;
    }
    // Two requests of a batch with one id: refused whole, before any of them runs (the transport
    // would run both and answer one). Counted against the general limit, as an empty batch is.
    const repeated = repeatedRequestId(req.body);
    if (repeated !== undefined) {
      await general(req, res, subject);
      res.status(400).json({
        jsonrpc: '2.0',
        error: {
          code: -32600,
          message: `Invalid Request: the id ${JSON.stringify(repeated)} is used by more than one request in the batch; give each request its own id`,
        },
        id: null,
      });
      return;
    }
    const badArgs = callWithArgumentsNotAnObject(req.body);
    if (badArgs !== null) {
      await general(req, res, subject);
      res.status(200).json({
        jsonrpc: '2.0',
        id: badArgs,
        error: { code: -32602, message: 'Invalid params: "arguments" must be an object of the tool\'s arguments.' },
      });
      return;
    }
    // Every message counts once: a tool call against its tool's limits (the outcome, a 429
    // included, is the tool's to report, so calls the SDK refuses before the tool runs are
    // counted too), anything else against the general limit, here.
    const calls = toolCallsOf(req.body);
    // A tool call beyond the token's scopes is refused at the HTTP level, as the MCP
    // authorization spec asks (403 insufficient_scope, naming the scopes to ask for), so a
    // client can step up its authorization; the tool itself checks again.
    const missing = [...new Set(calls.tools.flatMap((t) => (t === null ? [] : [TOOL_SCOPES[t]])))].filter(
      (scope) => !grant.scopes.includes(scope),
    );
    if (missing.length > 0) {
      const base = baseUrlFor(req, config);
      const description = `This request calls a tool that needs ${missing.join(', ')}, which the token does not carry.`;
      res
        .status(403)
        .set(
          'WWW-Authenticate',
          `Bearer error="insufficient_scope", scope="${[...new Set([...grant.scopes, ...missing])].join(' ')}", resource_metadata="${base}${PROTECTED_RESOURCE_METADATA_PATH}${MCP_PATH}", error_description="${description}"`,
        )
        .json({ error: 'insufficient_scope', error_description: description });
      return;
    }
    const counted = new Map<ToolName, Array<Promise<void>>>();
    for (const tool of calls.tools) {
      if (tool === null) continue;
      const outcome = toolLimits[tool](req, res, subject);
      outcome.catch(() => {});
      counted.set(tool, [...(counted.get(tool) ?? []), outcome]);
    }
    if (calls.other || calls.tools.includes(null)) await general(req, res, subject);
    // An API key in the key header (beside the OAuth token) chooses the mode: a test key is the sandbox.
    // Every copy of the header, as the API reads keys: the same key twice is that key, two
    // different ones are no key (refused below), never one joined string ("k, k").
    const copies = [...new Set((req.headersDistinct[config.apiKeyHeader.toLowerCase()] ?? []).map((v) => v.trim()))];
    const rawKey = copies.length > 1 ? 'two different keys' : copies[0];
    let apiKey: ApiKeyIdentity | null = null;
    if (rawKey) {
      apiKey = keyPattern(config.serviceCode).test(rawKey) ? await findApiKey(deps.db, rawKey) : null;
      if (!apiKey) {
        await limits.countAuthFailure(req.ip ?? 'unknown');
        // 403, not 401: the token is good, and an MCP client meeting 401 signs the passenger
        // in again, which cannot mend the key.
        throw new AppError(
          'forbidden',
          `The API key in ${config.apiKeyHeader} is not valid or has been revoked: send a valid key, or none.`,
        );
      }
    }
    const server = buildMcpServer({
      apiKey,
      deps,
      req,
      base: baseUrlFor(req, config),
      grant,
      limit: (tool) => counted.get(tool)?.shift() ?? toolLimits[tool](req, res, subject),
      giveBack: () => giveBackBooking(subject),
    });
    // The web-standard transport (the SDK's Node transport is this one behind a Request/Response
    // adapter), so its answer can be read before it is written: `writeAnswer`.
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
    }
    const answer = await transport.handleRequest(
      new Request(new URL(req.originalUrl, baseUrlFor(req, config)), { method: req.method, headers }),
      { parsedBody: req.body, authInfo: req.auth },
    );
    await writeAnswer(res, answer, Array.isArray(req.body), invalid.answers);
  });
  // A body that is not JSON (or not UTF-8) is a JSON-RPC Parse error (-32700, id null), as
  // the transport answers an empty body, not the REST API's error envelope, which an MCP client
  // does not read. Too large (413) and another media type (415) stay the API's answers.
  router.use(MCP_PATH, (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    const type = (err as { type?: unknown } | null)?.type;
    if (res.headersSent || (type !== 'entity.parse.failed' && type !== NOT_UTF8)) {
      next(err);
      return;
    }
    res.status(400).json({
      jsonrpc: '2.0',
      error: {
        code: -32700,
        message:
          type === NOT_UTF8 ? 'Parse error: the body is not UTF-8 text' : 'Parse error: the body is not valid JSON',
      },
      id: null,
    });
  });
  router.all(MCP_PATH, bearer, (_req: Request, res: Response, _next: NextFunction) => {
    res
      .status(405)
      .set('Allow', 'POST, OPTIONS')
      .json({
        jsonrpc: '2.0',
        error: {
          code: -32000,
          message: 'Method not allowed: this MCP server is stateless; send each JSON-RPC message with POST.',
        },
        id: null,
      });
  });
  return router;
}
