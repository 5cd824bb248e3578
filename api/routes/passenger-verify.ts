import type { Response } from 'express';
import {
  type CheckEmailOptions,
  checkEmail,
  EMAIL_PROBLEM_MESSAGES,
  mailboxKey,
  mxCheckFor,
  normaliseEmail,
} from '../../shared/domain/email-acceptance.ts';
import { AppError } from '../../shared/errors.ts';
import {
  PassengerVerified,
  PassengerVerifyLinkQuery,
  PassengerVerifyRequest,
  PassengerVerifyResponse,
  type PassengerVerifyStarted,
} from '../../shared/schemas/passenger-verify.ts';
import {
  type CodeCheck,
  countVerificationsSince,
  DEFAULT_PURPOSE,
  isEmailVerified,
  MAX_CODE_ATTEMPTS,
  MAX_WRONG_CODES_PER_DAY,
  normaliseCode,
  sendVerificationEmail,
  startVerification,
  TEST_PURPOSE,
  verifyByCode,
  verifyByLink,
} from '../../shared/services/email-verification.ts';
import { baseUrlFor } from '../base-url.ts';
import { callerTestMode } from '../middleware/auth.ts';
import { defineRoute, type RouteDef } from '../route.ts';

export const PASSENGER_VERIFY_PATH = '/api/public/v1/passenger-verify';
export const PASSENGER_VERIFY_LINK_PATH = `${PASSENGER_VERIFY_PATH}/link`;

export interface PassengerVerifyOptions {
  /** The e-mail check, as every booking path runs it (`configuredCheck`: EMAIL_MX_CHECK, EMAIL_DNS_SERVERS). */
  emailCheck: CheckEmailOptions;
  /** Requests (sends and code attempts) per caller (API key, else IP) per hour. Default 10. */
  limitPerHour?: number;
  /** Verification e-mails one address can be sent per hour, whoever asks. Default 5. */
  emailsPerAddressPerHour?: number;
}

const HOUR_MS = 3600_000;

function codeProblem(r: Extract<CodeCheck, { verified: false }>): string {
  switch (r.reason) {
    case 'wrong_code':
      return r.attemptsLeft > 0
        ? `is not correct; ${r.attemptsLeft} ${r.attemptsLeft === 1 ? 'attempt' : 'attempts'} left`
        : 'is not correct';
    case 'expired':
      return 'has expired; request a new code';
    case 'too_many_attempts':
      return `was entered wrongly ${MAX_CODE_ATTEMPTS} times; request a new code`;
    case 'no_verification':
      return 'does not match: no code was sent to this address; request one first';
    case 'too_many_today':
      return `was not checked: ${MAX_WRONG_CODES_PER_DAY} wrong codes have been entered for this address in the last 24 hours`;
  }
}

/** A per-address limit's 429 headers: the route limits' headers (already set), this policy appended. */
function addressLimitHeaders(
  res: Response,
  policy: string,
  limit: number,
  windowSeconds: number,
  retryAfter: number,
): Record<string, string> {
  const join = (name: string, add: string) => {
    const existing = res.getHeader(name);
    return existing ? `${String(existing)}, ${add}` : add;
  };
  return {
    'Retry-After': String(retryAfter),
    'RateLimit-Policy': join('RateLimit-Policy', `"${policy}";q=${limit};w=${windowSeconds}`),
    RateLimit: join('RateLimit', `"${policy}";r=0;t=${retryAfter}`),
  };
}

/** The per-address limit as a 429 with the route limits' headers, this policy appended. */
function tooManyForAddress(res: Response, limit: number, oldest: Date | null): AppError {
  const retryAfter = Math.max(1, Math.ceil(((oldest?.getTime() ?? Date.now()) + HOUR_MS - Date.now()) / 1000));
  return new AppError(
    'rate_limited',
    `At most ${limit} verification e-mails are sent to one address per hour; use the code already sent or retry later.`,
    [],
    addressLimitHeaders(res, 'per-address', limit, 3600, retryAfter),
  );
}

/**
 * Passenger e-mail verification (CONTRACT.md section 5):
 * - `POST /api/public/v1/passenger-verify` `{email}`: check the address (syntax, disposable,
 *   role, mail server), then e-mail a code and a link unless it is already verified.
 * - the same with `{email, code}`: verify by the code.
 * - `GET /api/public/v1/passenger-verify/link?token=…`: verify by the link (JSON). A browser
 *   opening it gets the website's page instead, which verifies only when the passenger
 *   presses Confirm (api/pages/verify-page.ts).
 */
export function passengerVerifyRoutes(opts: PassengerVerifyOptions): RouteDef[] {
  const limitPerHour = opts.limitPerHour ?? 10;
  const perAddress = opts.emailsPerAddressPerHour ?? 5;
  return [
    defineRoute({
      method: 'post',
      path: PASSENGER_VERIFY_PATH,
      idempotent: true,
      operationId: 'verifyPassengerEmail',
      summary: 'Check a passenger e-mail address and verify it with an e-mailed code or link',
      description:
        'With {email}: the address is checked (well-formed, not disposable, not a role address such as info@ or bookings@, and a domain that receives mail) and, unless it is already verified, a 6-digit code and a link are e-mailed; both are valid 30 minutes. With {email, code}: the code verifies the address (5 attempts per code; the latest e-mail’s code counts; after 20 wrong codes for an address in 24 hours no code is checked, 429 with Retry-After). Bookings with an unverified address are accepted but limited to 8 new bookings an hour (a repeat or a refused request uses none). ' +
        `Limited to ${limitPerHour} requests per hour per caller, and ${perAddress} verification e-mails per address per hour.`,
      tags: ['passengers'],
      auth: 'public',
      rateLimit: [{ name: 'passenger-verify', points: limitPerHour, durationSeconds: 3600 }],
      body: PassengerVerifyRequest,
      errors: ['email_not_accepted', 'rate_limited'],
      responses: {
        200: {
          description:
            '{email, accepted, verified, verificationSent} for a request with {email}; {email, verified: true} for one with a code',
          schema: PassengerVerifyResponse,
        },
      },
      handler: async ({ body, deps, caller, req, res }) => {
        // With a test key its e-mail is recorded, never sent, and listed to the key (and its
        // partner's other keys) by GET /api/public/v1/test/messages, code and link included: the
        // verification is the sandbox's own (TEST_PURPOSE), which never verifies an address
        // for live bookings, and it has no mail-server lookup, as a test-mode booking's address
        // gets none (the other rules apply in both).
        const testMode = callerTestMode(caller);
        const purpose = testMode ? TEST_PURPOSE : DEFAULT_PURPOSE;
        if (body.code !== undefined) {
          const code = normaliseCode(body.code);
          if (code === null) {
            throw new AppError('invalid_input', 'The code is the 6 digits from the verification e-mail.', [
              { field: '/code', problem: 'must be 6 digits' },
            ]);
          }
          const result = await verifyByCode(deps.db, body.email, code, { key: deps.config.dataEncryptionKey, purpose });
          if (!result.verified) {
            const problem = codeProblem(result);
            if (result.reason === 'too_many_today') {
              const retryAfter = result.retryAfterSeconds ?? 3600;
              throw new AppError(
                'rate_limited',
                `The code ${problem}; try again later.`,
                [{ field: '/code', problem }],
                addressLimitHeaders(res, 'wrong-codes', MAX_WRONG_CODES_PER_DAY, 86_400, retryAfter),
              );
            }
            throw new AppError('invalid_input', `The code ${problem}.`, [{ field: '/code', problem }]);
          }
          return { status: 200, body: { email: result.email, verified: true } satisfies PassengerVerified };
        }

        const check = await checkEmail(body.email, {
          ...opts.emailCheck,
          mx: mxCheckFor(opts.emailCheck.mx, testMode),
        });
        if (!check.accepted) {
          throw new AppError('email_not_accepted', EMAIL_PROBLEM_MESSAGES[check.problem], [
            { field: '/email', problem: check.problem },
          ]);
        }
        const email = check.email;
        if (await isEmailVerified(deps.db, email, { testMode })) {
          return {
            status: 200,
            body: { email, accepted: true, verified: true, verificationSent: false } satisfies PassengerVerifyStarted,
          };
        }
        const base = baseUrlFor(req, deps.config);
        await deps.db.transaction(async (trx) => {
          // Counted and started under one lock per address: requests for the same address in
          // parallel would otherwise each count the same few and all send.
          await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`passenger-verify:${mailboxKey(email)}`]);
          const recent = await countVerificationsSince(trx, email, new Date(Date.now() - HOUR_MS), { testMode });
          if (recent.count >= perAddress) throw tooManyForAddress(res, perAddress, recent.oldest);
          const started = await startVerification(trx, { email, key: deps.config.dataEncryptionKey, purpose });
          await sendVerificationEmail(trx, {
            email,
            code: started.code,
            link: `${base}${PASSENGER_VERIFY_LINK_PATH}?token=${started.linkToken}`,
            serviceName: deps.config.serviceName,
            testMode,
            // The key whose holder reads the recorded e-mail (a sandbox driver's token has none).
            ...(testMode && caller.kind === 'api_key' ? { apiKeyId: caller.key.id } : {}),
          });
        });
        return {
          status: 200,
          body: { email, accepted: true, verified: false, verificationSent: true } satisfies PassengerVerifyStarted,
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: PASSENGER_VERIFY_LINK_PATH,
      operationId: 'verifyPassengerEmailLink',
      summary: 'Verify a passenger e-mail address by the link in the verification e-mail',
      description:
        "The link in the verification e-mail. Send Accept: application/json to verify by this request: it answers {email, verified: true}, and opening it again answers the same; an unknown token, or one that expired unused, is 404. A request that takes HTML or */* (a browser, and most link checkers) gets the website's page instead (text/html, 200 or 404), which verifies only when the passenger presses Confirm, so a mail scanner opening the link confirms nothing; one that names neither is 400 invalid_input.",
      tags: ['passengers'],
      auth: 'public',
      query: PassengerVerifyLinkQuery,
      errors: ['not_found'],
      responses: { 200: { description: 'The address is verified', schema: PassengerVerified } },
      handler: async ({ query, deps, req }) => {
        // Verifies only for a caller that asks for JSON by name. A browser, and any client that
        // takes HTML or `*/*`, gets the website's page instead (api/pages/router.ts), which
        // verifies only when the passenger presses Confirm; one that names neither (a preview
        // bot asking for text/plain or an image, say) is refused here, not let verify.
        if (!/\bapplication\/json\b/i.test(req.get('accept') ?? '')) {
          throw new AppError('invalid_input', 'Open this link in a browser, or ask for application/json.', [
            { field: '/headers/accept', problem: 'must name application/json' },
          ]);
        }
        const result = await verifyByLink(deps.db, query.token, { key: deps.config.dataEncryptionKey });
        if (!result) {
          throw new AppError('not_found', 'This verification link is unknown or has expired; request a new one.');
        }
        return {
          status: 200,
          body: { email: normaliseEmail(result.email), verified: true } satisfies PassengerVerified,
        };
      },
    }),
  ];
}
