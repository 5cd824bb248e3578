import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Request } from 'express';
import * as z from 'zod';
import type { BookingRow } from '../../shared/db/bookings.ts';
import { FIELD_LIMITS } from '../../shared/domain/content-screen.ts';
import { normaliseEmail } from '../../shared/domain/email-acceptance.ts';
import { placeLabel } from '../../shared/domain/place-label.ts';
import { VEHICLE_SEATS, VEHICLE_TYPES, type VehicleType } from '../../shared/domain/tariffs/types.ts';
import {
  AppError,
  contentRejected,
  detailsText,
  type ErrorDetail,
  repointed,
  retryAfterField,
} from '../../shared/errors.ts';
import { type ApiKeyIdentity, assertMayBook } from '../../shared/services/api-keys.ts';
import {
  BOOKED_WITHOUT_EMAIL,
  type BookingCaller,
  type BookingView,
  bookPricedQuote,
  detailsDiffer,
  normalisePhone,
  type PaymentMethod,
  passengerStanding,
  priceUnlessRepeated,
  type QuoteRow,
  redeemQuote,
  repeatedBooking,
  samePassenger,
  viewOf,
} from '../../shared/services/bookings.ts';
import type { McpScope } from '../../shared/services/oauth.ts';
import {
  assertQuotedRide,
  createQuote,
  defaultVehicle,
  gbp,
  priceQuote,
  type Quote,
} from '../../shared/services/quotes.ts';
import type { ApiDeps } from '../deps.ts';
import { contentHash, screen } from '../routes/bookings.ts';
import { v1Body } from '../routes/quotes.ts';
import { scenarioHeader } from '../sandbox.ts';
import type { McpGrant } from './provider.ts';

/**
 * The MCP tools: `estimate_fare` (the v1 quote: same inputs, same `createQuote`), `get_service_info`
 * and `start_booking` (the v1 booking paths: `redeemQuote`, or the repeat guard with
 * `priceQuote` and `bookPricedQuote`, origin `mcp`, for the passenger whose e-mail the token was
 * issued for). Every failure is a tool result with `isError: true` whose text is the API's
 * error envelope `{"error": {code, message, details}}` with the same stable codes.
 */

export type ToolName = 'estimate_fare' | 'get_service_info' | 'start_booking';

/** The scope each tool needs: estimating and information, or booking. */
export const TOOL_SCOPES: Record<ToolName, McpScope> = {
  estimate_fare: 'fares:estimate',
  get_service_info: 'fares:estimate',
  start_booking: 'bookings:write',
};

export interface ToolContext {
  deps: ApiDeps;
  req: Request;
  /** The connected domain the request came to: links point back to it. */
  base: string;
  grant: McpGrant & { clientId: string };
  /** Count the call against the passenger's limits; throws 429 rate_limited. */
  limit(tool: ToolName): Promise<void>;
  /** Give back start_booking's count for a call that booked nothing new (a repeat, a refusal). Never throws. */
  giveBack(): Promise<void>;
  /**
   * The API key sent beside the token in the service's key header (X-…-AI-Key), if any: a test
   * key (`dtn_test_…`) makes the tools' quotes and bookings test-mode (sandbox), and attributes them to it.
   */
  apiKey?: ApiKeyIdentity | null;
}

const INSTRUCTIONS = [
  'Direct Taxi Network books licensed local taxis in the UK at the regulated council fare, with no commission: the whole fare is paid to the driver.',
  'Use estimate_fare to price a journey (nothing is booked), get_service_info for coverage, vehicles, payment and cancellation rules,',
  'and start_booking to book for the signed-in passenger. Before start_booking, always confirm pickup, dropoff, time, passengers and fare with the passenger.',
  'Errors are JSON {"error": {"code", "message", "details"}}: the message says what to change.',
].join(' ');

// ---------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------

const place = (what: string) =>
  z
    .string()
    .min(1)
    .max(FIELD_LIMITS.address)
    .regex(/\S/, 'must not be blank')
    .describe(
      `${what}: a UK address, full or partial postcode ("M1 1AE", "SW1A"), railway or Underground station ("Manchester Piccadilly", "MAN"), airport with terminal ("Heathrow T5", "LGW") or town ("Newport, Wales")`,
    );

const departAt = z.iso
  .datetime({ offset: true })
  .describe(
    'ISO 8601 date-time with Z or an offset, e.g. "2026-12-01T09:30:00Z". UK local rules (night rates) apply from it.',
  );

const vehicleType = z
  .enum(VEHICLE_TYPES)
  .describe(
    'saloon, estate, executive, luxury or 5seater (4 passengers), 6seater (6), 7seater (7), mpv (8), wav (wheelchair accessible, 4). Default: saloon, or the smallest vehicle that seats the party.',
  );

const passengers = z.number().int().min(1).max(8).describe('Passengers, 1 to 8. Default 1.');

const estimateInput = {
  pickup: place('Where the journey starts'),
  dropoff: place('Where it ends'),
  departAt: departAt
    .optional()
    .describe(
      'When the journey starts (ISO 8601, e.g. "2026-12-01T21:30:00Z"); default now. Night, weekend and bank-holiday rates apply automatically.',
    ),
  passengers: passengers.optional(),
  vehicleType: vehicleType.optional(),
  meetAndGreet: z
    .boolean()
    .optional()
    .describe('Driver meets the passenger inside the terminal, £25: charged only when the pickup is an airport.'),
  worldwide: z.boolean().optional().describe('true only for places outside the UK (airports abroad). Default false.'),
};

const placeOutput = z.object({
  query: z.string(),
  name: z.string(),
  kind: z.string(),
  lat: z.number(),
  lng: z.number(),
});

const quoteOutput = {
  quoteId: z.string().describe('Pass to start_booking within 24 hours to book at exactly this fare'),
  fareGBP: z.number().describe('The fixed fare in pounds, paid to the driver'),
  currency: z.literal('GBP'),
  distanceMiles: z.number(),
  durationMinutes: z.number(),
  vehicleType: z.string(),
  passengers: z.number(),
  departAt: z.string(),
  pickup: placeOutput,
  dropoff: placeOutput,
  appliedRules: z
    .array(z.object({ code: z.string(), description: z.string(), amountGBP: z.number() }))
    .describe('Itemised; sums exactly to fareGBP'),
  tariffSource: z.object({ kind: z.string(), authority: z.string(), tariff: z.string(), asOf: z.string() }),
  bookingUrl: z.string().describe('Web page where the passenger can book this quote themselves'),
  expiresAt: z.string(),
  warnings: z.array(z.string()),
};

const bookingInput = {
  quoteId: z
    .string()
    .max(64)
    .optional()
    .describe(
      'quoteId from estimate_fare: books that quote at its fixed fare (pickup, dropoff, time, passengers and vehicle come from the quote; any of them sent as well must agree with it). Without it, give pickup, dropoff and departAt.',
    ),
  pickup: place('Where the passenger is picked up').optional(),
  dropoff: place('Where they are going').optional(),
  departAt: departAt
    .optional()
    .describe('Pickup time (ISO 8601, e.g. "2026-12-01T09:30:00Z"); required without quoteId. Not in the past.'),
  passengers: passengers.optional(),
  vehicleType: vehicleType.optional(),
  passengerName: z
    .string()
    .min(1)
    .max(FIELD_LIMITS.name)
    .regex(/\S/, 'must not be blank')
    .describe("The passenger's name, for the driver"),
  passengerPhone: z
    .string()
    .min(7)
    .max(32)
    .describe(
      'A mobile number the driver can call, international format preferred ("+447700900123"); UK numbers as typed work too',
    ),
  passengerEmail: z
    .string()
    .max(254)
    .optional()
    .describe(
      "Not needed: the booking is for the e-mail the passenger signed in with (the token's), and its confirmation goes there. Sent, it must be that e-mail: to book for someone else, they sign in themselves.",
    ),
  paymentMethod: z
    .enum(['cash', 'card', 'pay_link'])
    .optional()
    .describe(
      "How the passenger pays the driver: cash (default), card (the driver's card reader) or pay_link (the driver's own payment link). We never take payment.",
    ),
  flightNumber: z
    .string()
    .max(FIELD_LIMITS.flightNumber)
    .optional()
    .describe('For airport pickups, e.g. "BA 123": the driver follows the flight'),
  notes: z
    .string()
    .max(FIELD_LIMITS.notes)
    .optional()
    .describe('Anything the driver should know: luggage, child seat, where to wait'),
  worldwide: z
    .boolean()
    .optional()
    .describe(
      'true only for places outside the UK (airports abroad), priced here; a quoteId keeps its quote. Default false.',
    ),
  meetAndGreet: z
    .boolean()
    .optional()
    .describe(
      'Driver meets the passenger inside the terminal, £25: charged only when the pickup is an airport (a warning says so otherwise); priced here; with a quoteId it must agree with the quote. Default false.',
    ),
};

const bookingOutput = {
  bookingReference: z.string().describe('e.g. DTN-7K3F9Q; give it to the passenger'),
  status: z.string(),
  fareGBP: z.number(),
  currency: z.literal('GBP'),
  pickupTime: z.string(),
  passengerEmail: z
    .string()
    .nullable()
    .describe(
      'Where the confirmation with the tracking link was sent; null for a booking of this quote made earlier without an e-mail (no confirmation: use trackingUrl and statusUrl, which carries its token)',
    ),
  trackingUrl: z.string().describe('Live status, driver details and cancellation; no sign-in needed'),
  payDriverUrl: z.string(),
  statusUrl: z.string(),
  repeat: z
    .boolean()
    .describe('true when an identical earlier request had already made this booking (nothing new was booked)'),
  pickup: z.string().describe('The pickup as it was resolved (confirm it with the passenger)'),
  dropoff: z.string().describe('The dropoff as it was resolved'),
  vehicleType: z.string().describe('The vehicle booked (chosen for the party when none was asked)'),
  passengers: z.number(),
  warnings: z.array(z.string()).describe('What the passenger should know (as estimate_fare says them)'),
};

const serviceInfoOutput = {
  service: z.string(),
  summary: z.string(),
  coverage: z.object({
    area: z.string(),
    places: z.string(),
    councilTariffs: z.array(z.string()),
  }),
  vehicleTypes: z.array(z.object({ type: z.string(), seats: z.number(), description: z.string() })),
  paymentMethods: z.array(z.object({ method: z.string(), description: z.string() })),
  fares: z.array(z.string()),
  booking: z.array(z.string()),
  cancellation: z.array(z.string()),
};

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

function ok(out: object): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(out) }],
    structuredContent: out as Record<string, unknown>,
  };
}

/**
 * Fields the shared services name as the HTTP API spells them, and the tool argument each is:
 * a detail points at an argument the assistant sent (`/quoteId`, not `/quote_id`).
 */
const ARGUMENT_OF_FIELD: Readonly<Record<string, string>> = { '/quote_id': '/quoteId' };

/**
 * An error's message as a tool result tells it: the arguments as the tools name them (the
 * services' messages name the HTTP fields and endpoint: "use its quote_id" from "POST
 * /api/public/v1/quote"), and a wait as seconds, not as a Retry-After header (a tool result
 * has no headers; it carries `retryAfterSeconds`).
 */
function toolMessage(err: AppError, retryAfterSeconds: number | undefined): string {
  let text = err.message.replaceAll('POST /api/public/v1/quote', 'estimate_fare').replace(/\bquote_id\b/g, 'quoteId');
  if (retryAfterSeconds !== undefined) {
    const wait = `${retryAfterSeconds} second${retryAfterSeconds === 1 ? '' : 's'} (retryAfterSeconds)`;
    text = text.replace(/the number of seconds in Retry-After/g, wait).replace(/\bRetry-After\b/g, 'retryAfterSeconds');
  }
  return text;
}

/** A refusal as a tool result: the API's envelope, as text (a structured error would fail the clients' output-schema check). */
export function errorResult(err: AppError): CallToolResult {
  const retry = retryAfterField(err);
  const { message, details } = repointed(
    toolMessage(err, retry.retryAfterSeconds),
    err.details,
    (field) => ARGUMENT_OF_FIELD[field] ?? field,
  );
  const error = { code: err.code, message, details, ...retry };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error }) }] };
}

async function run(
  ctx: ToolContext,
  tool: ToolName,
  scope: McpScope,
  fn: () => Promise<object>,
  /** The tool counts its own call (`start_booking`, which answers a repeat past its limit). */
  countsItself = false,
): Promise<CallToolResult> {
  try {
    if (!ctx.grant.scopes.includes(scope)) {
      throw new AppError(
        'forbidden',
        `${tool} needs the ${scope} scope, which this authorization does not include (it has: ${ctx.grant.scopes.join(', ') || 'none'}). Ask the passenger to connect again and allow it.`,
        [{ field: '/', problem: `requires scope ${scope}` }],
      );
    }
    if (!countsItself) await ctx.limit(tool);
    return ok(await fn());
  } catch (err) {
    if (err instanceof AppError) {
      ctx.req.log.info({ tool, code: err.code, client: ctx.grant.clientId }, 'mcp tool refused');
      return errorResult(err);
    }
    ctx.req.log.error({ err, tool }, 'mcp tool failed');
    return errorResult(
      new AppError('internal_error', 'Something went wrong on our side. Try again in a moment.', [], {}),
    );
  }
}

/**
 * Failures the SDK reports before a tool runs (arguments that do not match the input schema,
 * an unknown tool) are tool results too, with free text: they get the same envelope, with
 * `invalid_input` and a detail per schema problem. (McpServer builds them in one method.)
 */
function stableSdkErrors(server: McpServer): void {
  const target = server as unknown as { createToolError?: (message: string) => CallToolResult };
  if (typeof target.createToolError !== 'function') return;
  target.createToolError = (message: string) => {
    const text = message.replace(/^MCP error -?\d+: /, '');
    if (/^Tool \S+ (not found|disabled)/.test(text)) return errorResult(new AppError('not_found', text));
    if (/^Output validation error/.test(text)) {
      return errorResult(new AppError('internal_error', 'Something went wrong on our side. Try again in a moment.'));
    }
    const invalid = /^(?:Input validation error: )?Invalid arguments for tool \S+: ([\s\S]*)$/.exec(text);
    if (!invalid) return errorResult(new AppError('invalid_input', text));
    const details: ErrorDetail[] = (invalid[1] ?? '')
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const m = /^(.*) at ([\w.[\]]+)$/.exec(line);
        return m
          ? { field: `/${(m[2] ?? '').replace(/\[(\d+)\]/g, '.$1').replace(/\./g, '/')}`, problem: m[1] ?? line }
          : { field: '/', problem: line };
      });
    // Screened free text over its length (the schema's max is the screen's limit) is refused as
    // the screen refuses it, as the HTTP routes do; with any other fault, all are invalid_input.
    const overLong = details.map((d) =>
      SCREENED_ARGUMENTS.has(d.field)
        ? /^Too big: expected string to have <=(\d+) characters$/.exec(d.problem)?.[1]
        : undefined,
    );
    if (details.length > 0 && overLong.every((limit) => limit !== undefined)) {
      const screened = details.map((d, i) => ({ field: d.field, problem: `is longer than ${overLong[i]} characters` }));
      return errorResult(contentRejected(screened));
    }
    const summary = detailsText(details);
    return errorResult(new AppError('invalid_input', `The arguments are not valid: ${summary}.`, details));
  };
}

/** The tools' free-text arguments the content screen reads (`estimateFare`, `startBooking`). */
const SCREENED_ARGUMENTS = new Set(['/pickup', '/dropoff', '/passengerName', '/notes', '/flightNumber']);

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/** The v1 quote's body without its snake_case alias (assistants get one spelling). */
function quoteOut(q: Quote) {
  const { quote_id: _alias, ...out } = v1Body(q);
  return out;
}

/**
 * Quotes and bookings made through a token belong to no API key or partner, in live mode;
 * with an API key in the key header, to that key and its mode (a test key: the sandbox, where the
 * `X-Test-Scenario` header or `scenario:<name>` in the notes may ask for a scenario).
 */
function quoteCallerOf(ctx: ToolContext) {
  const key = ctx.apiKey;
  return key
    ? { apiKeyId: key.id, partnerId: key.partnerId, testMode: key.mode === 'test' }
    : { apiKeyId: null, partnerId: null, testMode: false };
}

function callerOf(ctx: ToolContext): BookingCaller {
  assertMayBook(ctx.apiKey);
  const qc = quoteCallerOf(ctx);
  // The repeat rule's scope (`contentHash`): the passenger and the mode, so a sandbox booking is
  // never the answer to the same ride asked live (nor a live one to a test key's). Not the key:
  // the passenger's ride asked again with another key beside the token (or none) is the same
  // ride, and booking it twice would send two taxis.
  const scope = qc.testMode ? `mcp:${ctx.grant.email}:test` : `mcp:${ctx.grant.email}`;
  return { ...qc, scope, testScenario: scenarioHeader(ctx.req, qc.testMode) };
}

async function estimateFare(ctx: ToolContext, a: z.infer<z.ZodObject<typeof estimateInput>>) {
  screen(ctx.req, [
    { pointer: '/pickup', kind: 'address', value: a.pickup },
    { pointer: '/dropoff', kind: 'address', value: a.dropoff },
  ]);
  const quote = await createQuote(
    ctx.deps,
    {
      pickup: a.pickup,
      dropoff: a.dropoff,
      departAt: a.departAt,
      passengers: a.passengers ?? 1,
      vehicleType: a.vehicleType,
      meetAndGreet: a.meetAndGreet ?? false,
      worldwide: a.worldwide ?? false,
    },
    quoteCallerOf(ctx),
    ctx.base,
  );
  return quoteOut(quote);
}

/**
 * A booking's answer: the view, and what was booked as resolved (places, vehicle, party, the
 * quote's warnings), read back from the booking and its quote, so an assistant booking in one
 * step can confirm them with the passenger as estimate_fare's answer would let it.
 */
async function bookingOut(
  db: ToolContext['deps']['db'],
  v: BookingView,
  /** This request's own warnings, when it was priced (also on a repeat: they speak of what it asked). */
  own?: readonly string[],
) {
  const booked = await db('bookings as b').leftJoin('quotes as q', 'q.id', 'b.quote_id').where('b.id', v.id).first<{
    pickup: { name: string; kind?: string };
    dropoff: { name: string; kind?: string };
    vehicle_type: string;
    passengers: number;
    warnings: string[] | null;
    passenger_email: string | null;
  }>('b.pickup', 'b.dropoff', 'b.vehicle_type', 'b.passengers', 'q.warnings', 'b.passenger_email');
  // The booking's own address, not the sign-in's: a quote this passenger (same name and phone)
  // booked earlier without an e-mail is returned as theirs, and had no confirmation to send.
  const email = booked?.passenger_email ?? null;
  return {
    ...bookingView(v, email),
    pickup: booked ? placeLabel(booked.pickup) : '',
    dropoff: booked ? placeLabel(booked.dropoff) : '',
    vehicleType: booked?.vehicle_type ?? '',
    passengers: booked?.passengers ?? 0,
    warnings: [...(own ?? booked?.warnings ?? []), ...(email === null ? [BOOKED_WITHOUT_EMAIL] : [])],
  };
}

function bookingView(v: BookingView, email: string | null) {
  return {
    bookingReference: v.reference,
    status: v.status,
    fareGBP: gbp(v.farePence),
    currency: 'GBP' as const,
    pickupTime: v.pickupTime.toISOString(),
    passengerEmail: email,
    trackingUrl: v.trackingUrl,
    payDriverUrl: v.payDriverUrl,
    statusUrl: v.statusUrl,
    repeat: !v.created,
  };
}

async function startBooking(ctx: ToolContext, a: z.infer<z.ZodObject<typeof bookingInput>>) {
  // Counted first, as every tool call is; past the limit, the call may still be a repeat of a
  // booking it made (an assistant whose answer was lost retries): that booking is answered, as
  // the v1 booking answers a repeat past the unconfirmed-address limit. Anything else is 429.
  const limited = await ctx.limit('start_booking').then(
    () => null,
    (err: unknown) => {
      if (err instanceof AppError && err.code === 'rate_limited') return err;
      throw err;
    },
  );
  if (limited) {
    const earlier = await earlierBookingOf(ctx, a).catch(() => undefined);
    if (!earlier) throw limited;
    return bookingOut(ctx.deps.db, viewOf(earlier, ctx.base, ctx.deps.config.dataEncryptionKey, false));
  }
  // Counted: only a new booking keeps the count (`giveBack`), so retries of a booking (the
  // assistant's answer lost) and refused calls never use up the passenger's hour.
  let out: Awaited<ReturnType<typeof book>>;
  try {
    out = await book(ctx, a);
  } catch (err) {
    await ctx.giveBack();
    throw err;
  }
  if (out.repeat) await ctx.giveBack();
  return out;
}

/** start_booking past its limit check: the booking made, or the one this call repeats. */
async function book(ctx: ToolContext, a: z.infer<z.ZodObject<typeof bookingInput>>) {
  screen(ctx.req, [
    { pointer: '/pickup', kind: 'address', value: a.pickup },
    { pointer: '/dropoff', kind: 'address', value: a.dropoff },
    { pointer: '/passengerName', kind: 'name', value: a.passengerName },
    { pointer: '/notes', kind: 'notes', value: a.notes },
    { pointer: '/flightNumber', kind: 'flightNumber', value: a.flightNumber },
  ]);
  const { deps, base } = ctx;
  const email = ctx.grant.email;
  // An assistant asking to book for another address would otherwise book for the token's,
  // believing it had not: refused, saying whose bookings a token makes.
  if (a.passengerEmail !== undefined && normaliseEmail(a.passengerEmail) !== normaliseEmail(email)) {
    throw new AppError(
      'invalid_input',
      `Bookings through this sign-in are for ${email}: leave passengerEmail out, or have the other passenger sign in themselves.`,
      [{ field: '/passengerEmail', problem: "is not the signed-in passenger's e-mail" }],
    );
  }
  const passenger = { name: a.passengerName, email, phone: normalisePhone(a.passengerPhone) };
  const paymentMethod: PaymentMethod = a.paymentMethod ?? 'cash';
  const caller = callerOf(ctx);
  const common = {
    origin: 'mcp' as const,
    passenger,
    paymentMethod,
    emailVerified: true,
    flightNumber: a.flightNumber,
    notes: a.notes,
    agent: ctx.grant.clientName,
    confirmByEmail: true,
  };
  if (a.quoteId !== undefined) {
    // Blocked passengers are refused as on every booking path (the token proves the e-mail);
    // the quote is read by the same query, so a redemption costs two round trips.
    const { quote } = await passengerStanding(deps.db, passenger, a.quoteId);
    // A ride argument sent beside the quote must agree with it, as on the v1 and instant
    // bookings: the quote's ride is booked, and an assistant that changed the dropoff or the
    // time since must not be told the ride it asked for is booked.
    if (quote) {
      await assertQuotedRide(deps, caller, base, quote, rideArguments(a));
    }
    const view = await redeemQuote(deps, { ...common, quoteId: a.quoteId, statedPickup: a.departAt }, caller, base, {
      quote: quote ?? null,
    });
    // A quote books once: its booking, cancelled since, is no booking to report as made (an
    // assistant reading only "repeat" would tell the passenger a taxi is coming). The ride
    // without the quote books anew, as a passenger who cancels and books again means it.
    if (!view.created && view.status === 'cancelled') {
      throw new AppError(
        'quote_already_redeemed',
        `This quote was booked as ${view.reference}, which has been cancelled; a quote books once. To book the ride again, ask estimate_fare for a new quote (or call start_booking with pickup, dropoff and departAt).`,
        [{ field: '/quoteId', problem: 'its booking was cancelled' }],
      );
    }
    return bookingOut(deps.db, view);
  }
  const missing = (['pickup', 'dropoff', 'departAt'] as const).filter((k) => a[k] === undefined);
  if (missing.length > 0) {
    throw new AppError(
      'invalid_input',
      `Give a quoteId from estimate_fare, or ${missing.join(', ')}.`,
      missing.map((k) => ({ field: `/${k}`, problem: 'is required without quoteId' })),
    );
  }
  const input = {
    pickup: a.pickup as string,
    dropoff: a.dropoff as string,
    departAt: new Date(a.departAt as string).toISOString(),
    passengers: a.passengers ?? 1,
    vehicleType: a.vehicleType as VehicleType | undefined,
  };
  const hash = pricedRequestHash(ctx, { ...a, ...input });
  // Priced while the passenger is checked, as v1 bookings are: the refusal of a blocked
  // passenger still answers first, and their price is dropped unused.
  const priced = priceQuote(
    deps,
    { ...input, meetAndGreet: a.meetAndGreet ?? false, worldwide: a.worldwide ?? false },
    caller,
    base,
  );
  priced.catch(() => {}); // awaited below, unless the passenger is refused first
  await passengerStanding(deps.db, passenger);
  const pricing = await priceUnlessRepeated(deps.db, hash, () => priced);
  if (pricing.repeat) return bookingOut(deps.db, viewOf(pricing.repeat, base, deps.config.dataEncryptionKey, false));
  const view = await bookPricedQuote(deps, pricing.priced, { ...common, contentHash: hash }, caller, base);
  // This request's warnings, also when the write found the booking it repeats (as v1 answers).
  return bookingOut(deps.db, view, pricing.priced.quote.warnings);
}

/**
 * The booking a start_booking call would answer as a repeat, without booking anything: the
 * passenger's booking of `quoteId` (as `redeemQuote` answers one), or the booking the same
 * priced request made in the last 15 minutes (the repeat guard, on the same content hash). Not
 * cancelled, either way.
 */
async function earlierBookingOf(
  ctx: ToolContext,
  a: z.infer<z.ZodObject<typeof bookingInput>>,
): Promise<BookingRow | undefined> {
  const { db } = ctx.deps;
  if (a.quoteId !== undefined) {
    // The quote's booking if redeeming it again would answer it: the same passenger (name,
    // phone, and the sign-in's e-mail unless it was booked without one), the same mode.
    const passenger = { name: a.passengerName, email: ctx.grant.email, phone: normalisePhone(a.passengerPhone) };
    const rows = await db<BookingRow>('bookings')
      .where({ quote_id: a.quoteId, test_mode: callerOf(ctx).testMode })
      .whereNot('status', 'cancelled');
    // …and the same details for the driver, else redeeming it again is refused (409), no repeat.
    const details = { paymentMethod: a.paymentMethod ?? 'cash', notes: a.notes, flightNumber: a.flightNumber };
    const row = rows.find((r) => samePassenger(r, passenger) && detailsDiffer(r, details).length === 0);
    // Not when the ride arguments say otherwise than the quote: that is no repeat of it.
    const quote = row?.quote_id ? await db<QuoteRow>('quotes').where({ id: row.quote_id }).first() : undefined;
    if (quote) await assertQuotedRide(ctx.deps, callerOf(ctx), ctx.base, quote, rideArguments(a));
    return row;
  }
  if (a.pickup === undefined || a.dropoff === undefined || a.departAt === undefined) return undefined;
  return repeatedBooking(
    db,
    pricedRequestHash(ctx, { ...a, pickup: a.pickup, dropoff: a.dropoff, departAt: a.departAt }),
  );
}

/** The ride arguments of a start_booking, to be checked against the quote it names. */
function rideArguments(a: z.infer<z.ZodObject<typeof bookingInput>>): Parameters<typeof assertQuotedRide>[4] {
  return {
    pickup: { field: '/pickup', value: a.pickup },
    dropoff: { field: '/dropoff', value: a.dropoff },
    departAt: { field: '/departAt', value: a.departAt },
    vehicleType: { field: '/vehicleType', value: a.vehicleType },
    passengers: { field: '/passengers', value: a.passengers },
    meetAndGreet: { field: '/meetAndGreet', value: a.meetAndGreet },
  };
}

/**
 * The 15-minute repeat rule of v1 bookings for a start_booking priced in one step: the same
 * normalised content (`contentHash`) and guard, the passenger being the signed-in one.
 */
function pricedRequestHash(
  ctx: ToolContext,
  a: z.infer<z.ZodObject<typeof bookingInput>> & { pickup: string; dropoff: string; departAt: string },
): Buffer {
  const passengers = a.passengers ?? 1;
  return contentHash(callerOf(ctx).scope, {
    pickup: a.pickup,
    dropoff: a.dropoff,
    departAt: new Date(a.departAt).toISOString(),
    name: a.passengerName,
    email: ctx.grant.email,
    phone: normalisePhone(a.passengerPhone),
    passengers,
    vehicleType: (a.vehicleType as VehicleType | undefined) ?? defaultVehicle(passengers),
    fare: null,
    method: a.paymentMethod ?? 'cash',
    flightNumber: a.flightNumber,
    notes: a.notes,
    // Only when asked: the content of a request without it hashes as before it was taken.
    ...(a.meetAndGreet ? { meetAndGreet: true } : {}),
  });
}

const VEHICLE_NOTES: Record<VehicleType, string> = {
  saloon: 'Standard car',
  estate: 'Car with a large boot for luggage',
  executive: 'Executive car (fare × the executive multiplier)',
  luxury: 'Luxury car (fare × the luxury multiplier)',
  '5seater': 'Car seating 4 passengers besides the driver',
  '6seater': 'People carrier for up to 6',
  '7seater': 'People carrier for up to 7',
  mpv: 'Minibus-style MPV for up to 8',
  wav: 'Wheelchair-accessible vehicle',
};

async function serviceInfo(ctx: ToolContext) {
  const { config, db } = ctx.deps;
  const authorities = (await db('tariff_tables').distinct('authority').orderBy('authority')).map(
    (r: { authority: string }) => r.authority,
  );
  const multipliers = Object.entries(config.pricing.classMultipliers)
    .map(([k, v]) => `${k} × ${v}`)
    .join(', ');
  return {
    service: config.serviceName,
    summary:
      'A zero-commission taxi network: passengers book licensed local drivers directly, the whole fare goes to the driver, and drivers pay a flat weekly software fee instead of a cut.',
    coverage: {
      area: 'The United Kingdom. Journeys to or from airports abroad only with worldwide: true.',
      places:
        'Full and partial postcodes, National Rail and London Underground stations (name or code), UK airports (name, IATA code or terminal), towns, and addresses containing a postcode or a town. Small misspellings are tolerated.',
      councilTariffs: authorities,
    },
    vehicleTypes: VEHICLE_TYPES.map((t) => ({ type: t, seats: VEHICLE_SEATS[t], description: VEHICLE_NOTES[t] })),
    paymentMethods: [
      { method: 'cash', description: 'Cash to the driver at the end of the journey (default).' },
      { method: 'card', description: "The driver's own card reader; only the card processor's fee applies." },
      { method: 'pay_link', description: "The driver's own payment link, shown on the pay-the-driver page." },
    ],
    fares: [
      "Fixed before booking: the regulated tariff of the council where the pickup is (or an approved driver's or partner's own rates).",
      'Night, weekend, bank-holiday, Christmas and New Year rates apply automatically from the departure time (UK time).',
      'Where a council publishes no figure, the documented default applies: £4.00 for the first tenth of a mile, then £3.00 a mile (night and bank holidays × 1.5, Christmas and New Year × 2); tariffSource and warnings say so.',
      `Airport meet and greet £25 (airport pickups only). Premium classes: ${multipliers || 'none'}.`,
      'A quote is valid for 24 hours and books at exactly its fare. No commission or booking fee is added; the fare is paid to the driver, never to us.',
    ],
    booking: [
      'start_booking books for the passenger signed in to this assistant: the confirmation, tracking link and pay-the-driver link are e-mailed to them.',
      `A driver is dispatched ${config.bookings.dispatchLeadMinutes} minutes before pickup (${Math.max(config.bookings.dispatchLeadMinutes, config.bookings.distanceLeadMinutes)} for journeys of ${config.dispatch.distanceHireMiles} miles or more; at once for sooner pickups): local licensed drivers first, then national network drivers for long journeys, then partner operators.`,
      'The same request repeated within 15 minutes returns the same booking: retries never book twice.',
    ],
    cancellation: [
      'Free until the passenger is on board; after that a booking cannot be cancelled.',
      'Cancel from the tracking link, or POST {"action": "cancel", "email": <passenger e-mail>} to the statusUrl of the booking.',
    ],
  };
}

/** One server per request (stateless Streamable HTTP): its tools act for `ctx.grant`. */
export function buildMcpServer(ctx: ToolContext): McpServer {
  const server = new McpServer(
    { name: 'direct-taxi-network', title: ctx.deps.config.serviceName, version: '1.0.0' },
    { instructions: INSTRUCTIONS },
  );
  stableSdkErrors(server);
  server.registerTool(
    'estimate_fare',
    {
      title: 'Estimate a taxi fare',
      description:
        "Price a UK taxi journey: a fixed fare in GBP on the local council's regulated tariff, itemised, with distance and duration. Night, weekend and bank-holiday rates apply from departAt. Nothing is booked; the quote is kept 24 hours, and start_booking with its quoteId books at exactly this fare. Needs scope fares:estimate.",
      inputSchema: estimateInput,
      outputSchema: quoteOutput,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    (args) => run(ctx, 'estimate_fare', 'fares:estimate', () => estimateFare(ctx, args)),
  );
  server.registerTool(
    'get_service_info',
    {
      title: 'How the taxi service works',
      description:
        'Where the service operates, vehicle types and seats, how the passenger pays the driver, how fares are set, and how booking, dispatch and cancellation work. Needs scope fares:estimate.',
      outputSchema: serviceInfoOutput,
      annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
    },
    () => run(ctx, 'get_service_info', 'fares:estimate', () => serviceInfo(ctx)),
  );
  server.registerTool(
    'start_booking',
    {
      title: 'Book a taxi',
      description:
        'Book a taxi for the signed-in passenger (the e-mail address they verified when connecting this assistant). Give quoteId from estimate_fare to book that fixed fare, or pickup, dropoff and departAt to price and book in one step. Confirm journey, time, passengers and fare with the passenger first. The passenger gets an e-mail with the booking, a tracking link (status, driver, free cancellation until on board) and the pay-the-driver link; the fare is paid to the driver. Repeating an identical request within 15 minutes returns the same booking (repeat: true), so retrying never books twice. Needs scope bookings:write.',
      inputSchema: bookingInput,
      outputSchema: bookingOutput,
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    (args) => run(ctx, 'start_booking', 'bookings:write', () => startBooking(ctx, args), true),
  );
  return server;
}

export const TOOL_NAMES: readonly ToolName[] = ['estimate_fare', 'get_service_info', 'start_booking'];

/**
 * The tools a JSON-RPC body calls (one per `tools/call` message, in order; an unknown tool name
 * is null), and whether it carries anything else.
 */
/**
 * The id of a single `tools/call` request whose `arguments` is present but not an object (a
 * string, an array, null), which the SDK would answer -32603 with its schema's JSON: the
 * router answers it -32602 Invalid params, in words. Null for anything else (batches included:
 * their messages are answered by the SDK).
 */
export function callWithArgumentsNotAnObject(body: unknown): string | number | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const msg = body as { method?: unknown; id?: unknown; params?: unknown };
  if (msg.method !== 'tools/call' || (typeof msg.id !== 'string' && typeof msg.id !== 'number')) return null;
  if (typeof msg.params !== 'object' || msg.params === null || !('arguments' in msg.params)) return null;
  const args = (msg.params as { arguments?: unknown }).arguments;
  return typeof args === 'object' && args !== null && !Array.isArray(args) ? null : msg.id;
}

export function toolCallsOf(body: unknown): { tools: Array<ToolName | null>; other: boolean } {
  const messages = Array.isArray(body) ? body : [body];
  const tools: Array<ToolName | null> = [];
  let other = false;
  for (const m of messages) {
    const msg = (m ?? {}) as { method?: unknown; params?: { name?: unknown } };
    if (msg.method !== 'tools/call') {
      other = true;
      continue;
    }
    const name = msg.params?.name;
    tools.push(
      typeof name === 'string' && (TOOL_NAMES as readonly string[]).includes(name) ? (name as ToolName) : null,
    );
  }
  return { tools, other };
}
