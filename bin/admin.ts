import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type LevelWithSilent, pino } from 'pino';
import type { Config } from '../shared/config.ts';
import { createDb, type Db } from '../shared/db/knex.ts';
import { type BillingWeek, parseWeek } from '../shared/domain/billing/week.ts';
import { isWellFormedEmail, mailboxKey } from '../shared/domain/email-acceptance.ts';
import { nameProblem } from '../shared/domain/names.ts';
import { referenceForMessage } from '../shared/domain/reference.ts';
import { VEHICLE_TYPES, type VehicleType } from '../shared/domain/tariffs/types.ts';
import { AppError } from '../shared/errors.ts';
import { defaultGazetteer } from '../shared/geo/gazetteer.ts';
import { configOrExit } from '../shared/lifecycle.ts';
import { REDACT_PATHS } from '../shared/logger.ts';
import { checkEndpointUrl, EndpointUrlError, endpointUrlRules } from '../shared/net/public-address.ts';
import { issueApiKey, listApiKeys, revokeApiKeyAs } from '../shared/services/api-keys.ts';
import {
  InvoiceStateError,
  invoicesCsv,
  listInvoices,
  previewInvoices,
  runBilling,
  settleInvoice,
} from '../shared/services/billing.ts';
import { bookingHistory } from '../shared/services/booking-history.ts';
import { cancelBooking, cancellableBookingsOf, normalisePhone } from '../shared/services/bookings.ts';
import {
  approveDriver,
  DRIVER_STATUSES,
  DriverNotSuspendableError,
  type DriverStatus,
  extendDriverTrial,
  listDrivers,
  MAX_TRIAL_EXTENSION_DAYS,
  rejectDriver,
  suspendDriver,
} from '../shared/services/drivers.ts';
import { createOperator, disableOperator, listOperators, OperatorInputError } from '../shared/services/operators.ts';
import { reinstatePartner, suspendPartner } from '../shared/services/partner-suspension.ts';
import { createPartner, extendPartnerTrial } from '../shared/services/partners.ts';
import {
  type RateCardInput,
  type RateCardOwner,
  RateCardOwnerNotFound,
  removeRateCard,
  setRateCard,
} from '../shared/services/rate-cards.ts';
import {
  OPERATOR_SETTLEMENT_KINDS,
  type OperatorSettlementKind,
  recordSettlement,
  SettlementError,
} from '../shared/services/settlement.ts';
import { ADAPTER_NAMES, createSupplier, SupplierInputError } from '../shared/services/suppliers.ts';
import { importTariffTables, parseTariffFile } from '../shared/services/tariff-store.ts';
import {
  type EndpointOwner,
  listDeadDeliveries,
  replayDelivery,
  rotateWebhookSecret,
  setWebhookEndpoint,
  WebhookConflictError,
  WebhookNotFoundError,
} from '../shared/services/webhooks.ts';

/**
 * The operator CLI (CONTRACT.md section 9): `npm run admin -- <command>`. Prints one JSON
 * document on stdout; on error prints `{"error": {code, message}}` on stderr and exits 1.
 */
class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Ctx {
  db: Db;
  config: Config;
  actor: string;
}

type Options = Record<string, { type: 'string' | 'boolean' }>;
interface Command {
  usage: string;
  options: Options;
  positionals?: number;
  run(values: Record<string, string | boolean | undefined>, positionals: string[], ctx: Ctx): Promise<unknown>;
}

/** Output that is not JSON (a CSV export): printed as it is. */
class RawOutput {
  constructor(readonly text: string) {}
}

function weekArg(values: Record<string, unknown>): BillingWeek {
  const week = parseWeek(required(values, 'week'));
  if (!week) throw new CliError('invalid_input', '--week must be an ISO week such as 2026-W47');
  return week;
}

/** `--amount 12.50` (or `-3.00` where a negative is allowed) as pence. */
function penceArg(value: unknown, name: string, allowNegative = false): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value).trim();
  if (!(allowNegative ? /^-?\d{1,6}(\.\d{1,2})?$/ : /^\d{1,6}(\.\d{1,2})?$/).test(text)) {
    throw new CliError('invalid_input', `--${name} must be an amount in GBP, such as 12.50`);
  }
  return Math.round(Number(text) * 100);
}

/** `--driver ID | --partner ID`: whose rate card. */
function rateCardOwner(v: Record<string, unknown>): RateCardOwner {
  if ((v.driver === undefined) === (v.partner === undefined)) {
    throw new CliError('invalid_input', 'give exactly one of --driver or --partner');
  }
  return v.driver !== undefined
    ? { driverId: uuidArg(String(v.driver), '--driver') }
    : { partnerId: uuidArg(String(v.partner), '--partner') };
}

/**
 * `--fixed "MAN>M1=45.00,LHR<>SW1A=70"`: fixed prices between places named by postcode district or
 * IATA code; `>` one way, `<>` both ways. A quote matches a route by its places' district or
 * airport code, so a code the gazetteer does not know as one (a typo, or a sector such as SW1,
 * whose places are in SW1A, SW1E...) would never match, and is refused; so is a price of £0.
 */
function fixedRoutes(text: string): NonNullable<RateCardInput['fixedRoutes']> {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const m = /^([A-Za-z0-9]{2,8})\s*(<>|>)\s*([A-Za-z0-9]{2,8})\s*=\s*(\d{1,4}(?:\.\d{1,2})?)$/.exec(part);
      if (!m) throw new CliError('invalid_input', `--fixed: "${part}" is not FROM>TO=GBP or FROM<>TO=GBP`);
      const from = (m[1] as string).toUpperCase();
      const to = (m[3] as string).toUpperCase();
      for (const code of [from, to]) {
        if (!fixedRoutePlace(code)) {
          throw new CliError(
            'invalid_input',
            `--fixed: "${code}" is not a postcode district or airport code the geocoder knows (a district such as SW1A or M1, or an IATA code such as LHR)`,
          );
        }
      }
      const pricePence = Math.round(Number(m[4]) * 100);
      if (pricePence < 1) throw new CliError('invalid_input', `--fixed: "${part}" has no price; give one above £0`);
      return { from, to, pricePence, ...(m[2] === '<>' ? { bidirectional: true } : {}) };
    });
}

/** A fixed-route place a quote can match (`placeKeys` in the tariff engine): a postcode district or an airport's IATA code. */
function fixedRoutePlace(code: string): boolean {
  const gazetteer = defaultGazetteer();
  if (gazetteer.district(code)) return true;
  const airport = gazetteer.geocodeSync(`${code} airport`, { worldwide: true });
  return airport.ok && airport.place.iata === code;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.trim() === '') throw new CliError('invalid_input', `--${name} is required`);
  return v.trim();
}

/**
 * `--name N` of a partner or key: required, and the services' rule for names (`nameProblem`,
 * shared/domain/names.ts, as the operator pages check it): one line of visible text of at most
 * 100 characters, no control characters, line breaks or invisible formatting (bidi overrides).
 */
function nameArg(values: Record<string, unknown>, name = 'name'): string {
  const v = required(values, name);
  const problem = nameProblem(v);
  if (problem !== null) throw new CliError('invalid_input', `--${name} ${problem}`);
  return v;
}

/** An invoice decision, its refusals as CLI errors (`not_found`, `conflict`: the codes of CONTRACT.md section 1). */
async function invoiceAction<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof InvoiceStateError) throw new CliError(err.code, err.message);
    throw err;
  }
}

/** `--note`, trimmed and bounded; null when absent or blank. */
function noteArg(v: Record<string, unknown>): string | null {
  const note = typeof v.note === 'string' ? v.note.trim().slice(0, 500) : '';
  return note === '' ? null : note;
}

function uuidArg(value: string | undefined, what: string): string {
  if (!value || !UUID.test(value)) throw new CliError('invalid_input', `${what} must be an id (UUID)`);
  return value.toLowerCase();
}

/**
 * The contact of `block` and `unblock`: exactly one of --email or --phone, as the bookings'
 * block check matches it: an e-mail by its mailbox (`mailboxKey`: canonical domain, no `+tag`,
 * no dots at Gmail, googlemail.com as gmail.com), a phone in E.164 (`normalisePhone`).
 */
function contactArg(v: Record<string, unknown>): { kind: 'email' | 'phone'; value: string } {
  const email = typeof v.email === 'string' ? v.email.trim().toLowerCase() : null;
  const phone = typeof v.phone === 'string' ? v.phone : null;
  if ((email === null) === (phone === null))
    throw new CliError('invalid_input', 'give exactly one of --email or --phone');
  if (email !== null) {
    // By the bookings' own rules: a spelling no booking can carry (`<a@b.com>`, `mailto:…`, a
    // trailing dot or comma, as pasted from a mail client) would be blocked and match nobody.
    if (!isWellFormedEmail(email))
      throw new CliError(
        'invalid_input',
        '--email must be an e-mail address as a booking gives it, such as name@example.com (no <>, quotes, mailto: or trailing punctuation)',
      );
    return { kind: 'email', value: mailboxKey(email) };
  }
  try {
    return { kind: 'phone', value: normalisePhone(phone as string) };
  } catch {
    throw new CliError('invalid_input', '--phone must be a mobile number such as +447700900123');
  }
}

/** `--daily-limit`: jobs a partner may send in a day. */
const DAILY_LIMIT_MAX = 1_000_000;
/** `--fleet-capacity`: vehicles in a tier-3 operator's fleet. */
const FLEET_CAPACITY_MAX = 100_000;

/**
 * A whole number from 1 to `max`: the domain's bound, never more than its column holds (2147483647
 * for an `integer`; for a bigint id, the integers JavaScript holds exactly).
 */
function positiveInt(value: unknown, name: string, max: number): number | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || !/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max) {
    throw new CliError('invalid_input', `--${name} must be a whole number from 1 to ${max}`);
  }
  return Number(value);
}

/**
 * `--webhook-url U` / `--url U`: a webhook endpoint this deployment accepts (http or https, https
 * only in production; no credentials; not a private, loopback or link-local address unless
 * WEBHOOK_ALLOW_PRIVATE_NETWORKS), normalised. A refused URL is `invalid_input`.
 */
function webhookUrlArg(value: unknown, name: string, config: Config): string | null {
  if (value === undefined) return null;
  try {
    return checkEndpointUrl(String(value), endpointUrlRules(config));
  } catch (err) {
    if (err instanceof EndpointUrlError) throw new CliError('invalid_input', `--${name} ${err.problem}`);
    throw err;
  }
}

/** `--operator --fleet-classes saloon,mpv --fleet-capacity N`: a tier-3 operator's fleet. */
function operatorFleet(v: Record<string, unknown>): { fleetClasses: VehicleType[]; fleetCapacity: number } | null {
  if (v.operator !== true) {
    if (v['fleet-classes'] !== undefined || v['fleet-capacity'] !== undefined)
      throw new CliError('invalid_input', '--fleet-classes and --fleet-capacity need --operator');
    return null;
  }
  const classes = String(v['fleet-classes'] ?? '')
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  const unknown = classes.filter((c) => !(VEHICLE_TYPES as readonly string[]).includes(c));
  if (classes.length === 0 || unknown.length > 0) {
    throw new CliError('invalid_input', `--fleet-classes must list vehicle classes from: ${VEHICLE_TYPES.join(', ')}`);
  }
  const capacity = positiveInt(v['fleet-capacity'], 'fleet-capacity', FLEET_CAPACITY_MAX);
  if (capacity === null) throw new CliError('invalid_input', '--fleet-capacity is required with --operator');
  return { fleetClasses: classes as VehicleType[], fleetCapacity: capacity };
}

/** `--partner ID | --supplier ID`: whose webhook endpoint. */
function endpointOwner(v: Record<string, unknown>): EndpointOwner {
  if ((v.partner === undefined) === (v.supplier === undefined)) {
    throw new CliError('invalid_input', 'give exactly one of --partner or --supplier');
  }
  return v.partner !== undefined
    ? { partnerId: uuidArg(String(v.partner), '--partner') }
    : { supplierId: uuidArg(String(v.supplier), '--supplier') };
}

/** Webhook service errors as CLI errors. */
async function webhookAction<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof WebhookNotFoundError) throw new CliError('not_found', err.message);
    if (err instanceof WebhookConflictError) throw new CliError('conflict', err.message);
    if (err instanceof EndpointUrlError) throw new CliError('invalid_input', err.message);
    throw err;
  }
}

export const COMMANDS: Record<string, Command> = {
  'operator create': {
    usage: 'operator create --email E [--name N]',
    options: { email: { type: 'string' }, name: { type: 'string' } },
    run: async (v, _p, ctx) => {
      try {
        const created = await createOperator(ctx.db, {
          email: required(v, 'email'),
          name: typeof v.name === 'string' ? v.name : undefined,
          actor: ctx.actor,
        });
        // The password is shown this once: only its scrypt hash is stored.
        return { id: created.id, email: created.email, password: created.password };
      } catch (err) {
        if (err instanceof OperatorInputError) throw new CliError('invalid_input', err.message);
        throw err;
      }
    },
  },
  'operator list': {
    usage: 'operator list',
    options: {},
    run: (_v, _p, ctx) => listOperators(ctx.db),
  },
  'operator disable': {
    usage: 'operator disable ID',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      const disabled = await disableOperator(ctx.db, id, ctx.actor);
      if (!disabled) throw new CliError('not_found', `no operator ${id}`);
      return disabled;
    },
  },
  'partner create': {
    usage:
      'partner create --name N [--can-set-fares] [--daily-limit N] [--webhook-url U] [--operator --fleet-classes saloon,mpv --fleet-capacity N]',
    options: {
      name: { type: 'string' },
      'can-set-fares': { type: 'boolean' },
      'daily-limit': { type: 'string' },
      'webhook-url': { type: 'string' },
      operator: { type: 'boolean' },
      'fleet-classes': { type: 'string' },
      'fleet-capacity': { type: 'string' },
    },
    run: (v, _p, ctx) =>
      createPartner(ctx.db, ctx.config, {
        name: nameArg(v),
        canSetFares: v['can-set-fares'] === true,
        dailyLimit: positiveInt(v['daily-limit'], 'daily-limit', DAILY_LIMIT_MAX),
        webhookUrl: webhookUrlArg(v['webhook-url'], 'webhook-url', ctx.config),
        operator: operatorFleet(v),
        actor: ctx.actor,
      }),
  },
  'partner suspend': {
    usage: 'partner suspend ID [--release-jobs] [--reason TEXT]',
    options: { 'release-jobs': { type: 'boolean' }, reason: { type: 'string' } },
    positionals: 1,
    run: async (v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      const suspended = await suspendPartner(ctx.db, id, ctx.actor, {
        releaseJobs: v['release-jobs'] === true,
        ...(typeof v.reason === 'string' && v.reason.trim() !== '' ? { reason: v.reason.trim() } : {}),
      });
      if (!suspended) throw new CliError('not_found', `no partner ${id}`);
      return suspended;
    },
  },
  'partner reinstate': {
    usage: 'partner reinstate ID',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      const reinstated = await reinstatePartner(ctx.db, id, ctx.actor);
      if (!reinstated) throw new CliError('not_found', `no partner ${id}`);
      return reinstated;
    },
  },
  'supplier create': {
    usage: `supplier create --slug S --adapter ${ADAPTER_NAMES.join('|')} [--external-platform] [--job-fee GBP] [--webhook-url U]`,
    options: {
      slug: { type: 'string' },
      adapter: { type: 'string' },
      'external-platform': { type: 'boolean' },
      'job-fee': { type: 'string' },
      'webhook-url': { type: 'string' },
    },
    run: async (v, _p, ctx) => {
      const fee = v['job-fee'];
      if (fee !== undefined && (typeof fee !== 'string' || !/^\d{1,4}(\.\d{1,2})?$/.test(fee.trim()))) {
        throw new CliError('invalid_input', '--job-fee must be an amount in GBP, such as 1.50');
      }
      try {
        const s = await createSupplier(ctx.db, ctx.config, {
          slug: required(v, 'slug'),
          adapter: required(v, 'adapter'),
          externalPlatform: v['external-platform'] === true,
          jobFeePence: fee === undefined ? 0 : Math.round(Number(String(fee).trim()) * 100),
          webhookUrl: webhookUrlArg(v['webhook-url'], 'webhook-url', ctx.config),
          actor: ctx.actor,
        });
        return { id: s.id, slug: s.slug, secret: s.secret, webhookSecret: s.webhookSecret };
      } catch (err) {
        if (err instanceof SupplierInputError) throw new CliError('invalid_input', err.message);
        throw err;
      }
    },
  },
  'key create': {
    usage: 'key create --name N [--partner ID] [--test]',
    options: { name: { type: 'string' }, partner: { type: 'string' }, test: { type: 'boolean' } },
    run: async (v, _p, ctx) => {
      const partnerId = v.partner === undefined ? null : uuidArg(String(v.partner), '--partner');
      const created = await issueApiKey(ctx.db, {
        serviceCode: ctx.config.serviceCode,
        name: nameArg(v),
        partnerId,
        mode: v.test === true ? 'test' : 'live',
        actor: ctx.actor,
      });
      if (!created) throw new CliError('not_found', `no partner ${partnerId}`);
      return created;
    },
  },
  'key list': {
    usage: 'key list',
    options: {},
    run: async (_v, _p, ctx) =>
      (await listApiKeys(ctx.db)).map(({ id, prefix, name, createdAt, revokedAt, mode, partnerId, lastUsedAt }) => ({
        id,
        prefix,
        name,
        createdAt,
        revokedAt,
        mode,
        partnerId,
        lastUsedAt,
      })),
  },
  'key revoke': {
    usage: 'key revoke ID',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      const revoked = await revokeApiKeyAs(ctx.db, id, ctx.actor);
      if (!revoked) throw new CliError('not_found', `no API key ${id}`);
      return revoked;
    },
  },
  'driver list': {
    usage: `driver list [--status ${DRIVER_STATUSES.join('|')}]`,
    options: { status: { type: 'string' } },
    run: async (v, _p, ctx) => {
      const status = v.status === undefined ? undefined : String(v.status);
      if (status !== undefined && !(DRIVER_STATUSES as readonly string[]).includes(status)) {
        throw new CliError('invalid_input', `--status must be one of ${DRIVER_STATUSES.join(', ')}`);
      }
      return (await listDrivers(ctx.db, status ? { status: status as DriverStatus } : {})).map((d) => ({
        id: d.id,
        name: d.name,
        phone: d.phone,
        email: d.email,
        status: d.status,
        licensingAuthority: d.licensingAuthority,
        licenceNumber: d.licenceNumber,
        licenceExpiry: d.licenceExpiry,
        homeCity: d.homeCity,
        vehicleClass: d.vehicleClass,
        createdAt: d.createdAt,
        approvedAt: d.approvedAt,
        trialEndsAt: d.trialEndsAt,
      }));
    },
  },
  'driver approve': {
    usage: 'driver approve ID',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      const approved = await approveDriver(ctx.db, id, ctx.actor);
      if (!approved) throw new CliError('not_found', `no driver ${id}`);
      return approved;
    },
  },
  'driver reject': {
    usage: 'driver reject ID',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      const rejected = await rejectDriver(ctx.db, id, ctx.actor);
      if (!rejected) throw new CliError('not_found', `no driver ${id}`);
      return rejected;
    },
  },
  'driver suspend': {
    usage: 'driver suspend ID',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const id = uuidArg(p[0], 'ID');
      // Suspension takes an approved driver off the network (suspending one again repeats it);
      // an application is answered with `driver reject`, and a rejected driver has nothing to
      // suspend (checked by the service under the driver's row lock).
      try {
        const suspended = await suspendDriver(ctx.db, id, ctx.actor);
        if (!suspended) throw new CliError('not_found', `no driver ${id}`);
        return suspended;
      } catch (err) {
        if (!(err instanceof DriverNotSuspendableError)) throw err;
        throw new CliError(
          'conflict',
          err.status === 'pending_approval'
            ? `${err.message.replace(' (reject the application instead)', '')} (use driver reject to turn down an application)`
            : err.message,
        );
      }
    },
  },
  'trial extend': {
    usage: 'trial extend --driver ID | --partner ID --days N',
    options: { driver: { type: 'string' }, partner: { type: 'string' }, days: { type: 'string' } },
    run: async (v, _p, ctx) => {
      if ((v.driver === undefined) === (v.partner === undefined)) {
        throw new CliError('invalid_input', 'give exactly one of --driver or --partner');
      }
      const days = positiveInt(required(v, 'days'), 'days', MAX_TRIAL_EXTENSION_DAYS) as number;
      if (v.driver !== undefined) {
        const id = uuidArg(String(v.driver), '--driver');
        const extended = await extendDriverTrial(ctx.db, id, days, ctx.actor);
        if (!extended) throw new CliError('not_found', `no driver ${id}`);
        return extended;
      }
      // A partner's trial is 30 days from its creation (SPEC.md 2.10) unless already set; the
      // extension runs from its end, or from now when it has ended.
      const id = uuidArg(String(v.partner), '--partner');
      const extended = await extendPartnerTrial(ctx.db, id, days, ctx.actor);
      if (!extended) throw new CliError('not_found', `no partner ${id}`);
      return extended;
    },
  },
  block: {
    usage: 'block --email E | --phone P [--reason R] [--cancel-open]',
    options: {
      email: { type: 'string' },
      phone: { type: 'string' },
      reason: { type: 'string' },
      'cancel-open': { type: 'boolean' },
    },
    run: async (v, _p, ctx) => {
      const { kind, value } = contactArg(v);
      await ctx
        .db('blocked_contacts')
        .insert({ kind, value, reason: typeof v.reason === 'string' ? v.reason : null })
        .onConflict(['kind', 'value'])
        .ignore();
      await ctx.db('audit_log').insert({
        actor: ctx.actor,
        action: 'contact.block',
        subject_type: 'blocked_contact',
        subject_id: `${kind}:${value}`,
      });
      // A block stops new bookings; the contact's open ones are listed, and cancelled only when
      // asked (`--cancel-open`): a block for abuse may come with hoax rides already booked, but
      // a passenger blocked for another reason may still be owed the ride they booked.
      const open = await cancellableBookingsOf(ctx.db, { kind, value });
      const cancelled: string[] = [];
      if (v['cancel-open'] === true) {
        for (const b of open) {
          try {
            // The same cancellation as the passenger's: the driver or partner holding it is told.
            await cancelBooking(ctx.db, b.id, 'Cancelled by an operator: the passenger is blocked.', ctx.actor);
            cancelled.push(b.reference);
          } catch (err) {
            // On board since it was read: that ride goes on; the rest are still cancelled.
            if (!(err instanceof AppError && err.code === 'cannot_cancel')) throw err;
          }
        }
      }
      return {
        blocked: { kind, value },
        openBookings: open
          .filter((b) => !cancelled.includes(b.reference))
          .map((b) => ({ reference: b.reference, status: b.status, pickupTime: b.pickup_time.toISOString() })),
        cancelled,
      };
    },
  },
  unblock: {
    usage: 'unblock --email E | --phone P',
    options: { email: { type: 'string' }, phone: { type: 'string' } },
    run: async (v, _p, ctx) => {
      const { kind, value } = contactArg(v);
      const removed = await ctx.db('blocked_contacts').where({ kind, value }).delete();
      await ctx.db('audit_log').insert({
        actor: ctx.actor,
        action: 'contact.unblock',
        subject_type: 'blocked_contact',
        subject_id: `${kind}:${value}`,
      });
      // `wasBlocked: false` when there was nothing to lift (a typo, or lifted already).
      return { unblocked: { kind, value }, wasBlocked: removed > 0 };
    },
  },
  'ratecard set': {
    usage:
      'ratecard set --driver ID | --partner ID --per-mile GBP --minimum GBP [--flag-fall GBP] [--fixed "MAN>M1=45.00,LHR<>SW1A=70"]',
    options: {
      driver: { type: 'string' },
      partner: { type: 'string' },
      'per-mile': { type: 'string' },
      minimum: { type: 'string' },
      'flag-fall': { type: 'string' },
      fixed: { type: 'string' },
    },
    run: async (v, _p, ctx) => {
      const input: RateCardInput = {
        perMilePence: penceArg(required(v, 'per-mile'), 'per-mile') as number,
        minimumPence: penceArg(required(v, 'minimum'), 'minimum') as number,
        ...(v['flag-fall'] !== undefined ? { flagFallPence: penceArg(v['flag-fall'], 'flag-fall') as number } : {}),
        ...(typeof v.fixed === 'string' ? { fixedRoutes: fixedRoutes(v.fixed) } : {}),
      };
      if (input.perMilePence === 0 && input.minimumPence === 0 && !input.flagFallPence) {
        throw new CliError(
          'invalid_input',
          '--per-mile 0 with --minimum 0 (and no --flag-fall) prices every ride at £0: give a per-mile price or a minimum fare',
        );
      }
      try {
        return await setRateCard(ctx.db, rateCardOwner(v), input, ctx.actor);
      } catch (err) {
        if (err instanceof RateCardOwnerNotFound) throw new CliError('not_found', err.message);
        throw err;
      }
    },
  },
  'ratecard remove': {
    usage: 'ratecard remove --driver ID | --partner ID',
    options: { driver: { type: 'string' }, partner: { type: 'string' } },
    run: async (v, _p, ctx) => {
      const owner = rateCardOwner(v);
      if (await removeRateCard(ctx.db, owner, ctx.actor)) return { removed: true };
      const [table, id] = 'driverId' in owner ? ['driver', owner.driverId] : ['partner', owner.partnerId];
      const known = await ctx.db(`${table}s`).where({ id }).first('id');
      throw new CliError('not_found', known ? `${table} ${id} has no approved rate card` : `no ${table} ${id}`);
    },
  },
  'settlement record': {
    usage: `settlement record --booking REF --kind ${OPERATOR_SETTLEMENT_KINDS.join('|')} [--amount GBP] [--fee GBP] [--corrects ID] [--note TEXT]`,
    options: {
      booking: { type: 'string' },
      kind: { type: 'string' },
      amount: { type: 'string' },
      fee: { type: 'string' },
      corrects: { type: 'string' },
      note: { type: 'string' },
    },
    run: async (v, _p, ctx) => {
      const kind = required(v, 'kind');
      if (!(OPERATOR_SETTLEMENT_KINDS as readonly string[]).includes(kind)) {
        throw new CliError('invalid_input', `--kind must be one of ${OPERATOR_SETTLEMENT_KINDS.join(', ')}`);
      }
      // A settlement record's id (a bigint): any whole number JavaScript holds exactly.
      const corrects =
        v.corrects === undefined ? undefined : positiveInt(v.corrects, 'corrects', Number.MAX_SAFE_INTEGER);
      try {
        return await recordSettlement(
          ctx.db,
          {
            reference: required(v, 'booking'),
            kind: kind as OperatorSettlementKind,
            amountPence: penceArg(v.amount, 'amount', kind === 'correction') ?? 0,
            // A correction's fee is a signed change too: a fee entered wrongly (3.00 for 0.30) is taken back.
            ...(v.fee !== undefined
              ? { processorFeePence: penceArg(v.fee, 'fee', kind === 'correction') as number }
              : {}),
            ...(corrects != null ? { correctsId: corrects } : {}),
            ...(typeof v.note === 'string' ? { note: v.note.slice(0, 500) } : {}),
          },
          ctx.actor,
          ctx.config.bookings.referencePrefix,
        );
      } catch (err) {
        if (err instanceof SettlementError) throw new CliError(err.code, err.message);
        throw err;
      }
    },
  },
  'booking history': {
    usage: 'booking history REF',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const history = await bookingHistory(ctx.db, p[0] ?? '', ctx.config.bookings.referencePrefix);
      if (!history) throw new CliError('booking_not_found', `no booking ${referenceForMessage(p[0] ?? '')}`);
      return history;
    },
  },
  'billing run': {
    usage: 'billing run --week YYYY-Www [--dry-run]',
    options: { week: { type: 'string' }, 'dry-run': { type: 'boolean' } },
    run: async (v, _p, ctx) => {
      const week = weekArg(v);
      // Issued invoices are never changed: billing a week before it has ended would bill part of it for good.
      if (v['dry-run'] !== true && week.end.getTime() > Date.now()) {
        throw new CliError(
          'invalid_input',
          `${week.week} ends ${week.end.toISOString()}; it can be billed once it has ended (--dry-run shows it so far)`,
        );
      }
      if (v['dry-run'] === true) {
        return { week: week.week, dryRun: true, invoices: await previewInvoices(ctx.db, week) };
      }
      const { issued } = await runBilling(ctx.db, week, ctx.actor);
      const invoices = await listInvoices(ctx.db, week.week);
      return { week: week.week, issued, alreadyIssued: invoices.length - issued, invoices };
    },
  },
  'billing export': {
    usage: 'billing export --week YYYY-Www',
    options: { week: { type: 'string' } },
    run: async (v, _p, ctx) => new RawOutput(invoicesCsv(await listInvoices(ctx.db, weekArg(v).week))),
  },
  'billing mark-paid': {
    usage: 'billing mark-paid ID [--note N]',
    options: { note: { type: 'string' } },
    positionals: 1,
    run: (v, p, ctx) => invoiceAction(() => settleInvoice(ctx.db, uuidArg(p[0], 'ID'), 'paid', ctx.actor, noteArg(v))),
  },
  'billing void': {
    usage: 'billing void ID --note N',
    options: { note: { type: 'string' } },
    positionals: 1,
    run: (v, p, ctx) => {
      const note = noteArg(v);
      if (!note) throw new CliError('invalid_input', '--note is required: say why the invoice is not owed');
      return invoiceAction(() => settleInvoice(ctx.db, uuidArg(p[0], 'ID'), 'void', ctx.actor, note));
    },
  },
  'webhooks dead': {
    usage: 'webhooks dead',
    options: {},
    run: (_v, _p, ctx) => listDeadDeliveries(ctx.db),
  },
  'webhooks replay': {
    usage: 'webhooks replay ID',
    options: {},
    positionals: 1,
    run: (_v, p, ctx) => webhookAction(() => replayDelivery(ctx.db, uuidArg(p[0], 'ID'), ctx.actor)),
  },
  'webhook set': {
    usage: 'webhook set --partner ID | --supplier ID --url U',
    options: { partner: { type: 'string' }, supplier: { type: 'string' }, url: { type: 'string' } },
    run: (v, _p, ctx) => {
      const owner = endpointOwner(v);
      const url = webhookUrlArg(required(v, 'url'), 'url', ctx.config) as string;
      return webhookAction(() => setWebhookEndpoint(ctx.db, ctx.config, owner, url, ctx.actor));
    },
  },
  'webhook rotate': {
    usage:
      'webhook rotate --partner ID | --supplier ID [--overlap-hours 24] [--force: rotate again while the last overlap is open, ending it now]',
    options: {
      partner: { type: 'string' },
      supplier: { type: 'string' },
      'overlap-hours': { type: 'string' },
      force: { type: 'boolean' },
    },
    run: (v, _p, ctx) => {
      const owner = endpointOwner(v);
      const raw = v['overlap-hours'];
      if (raw !== undefined && (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) > 24 * 30)) {
        throw new CliError('invalid_input', '--overlap-hours must be a whole number from 0 to 720');
      }
      const hours = raw === undefined ? 24 : Number(raw);
      return webhookAction(() =>
        rotateWebhookSecret(ctx.db, ctx.config, owner, hours, ctx.actor, { force: v.force === true }),
      );
    },
  },
  'tariff import': {
    usage: 'tariff import FILE',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      // Relative to where the operator ran `npm run admin` (npm runs scripts in the package root
      // and says where it was started in INIT_CWD), or to this process's own directory.
      const file = path.resolve(process.env.INIT_CWD ?? process.cwd(), p[0] as string);
      let json: unknown;
      try {
        json = JSON.parse(fs.readFileSync(file, 'utf8'));
      } catch (err) {
        throw new CliError('invalid_input', `cannot read ${file}: ${(err as Error).message}`);
      }
      let tables: ReturnType<typeof parseTariffFile>;
      try {
        tables = parseTariffFile(json);
      } catch (err) {
        throw new CliError('invalid_input', `${file} is not a tariff table: ${(err as Error).message}`);
      }
      const result = await importTariffTables(ctx.db, tables, ctx.actor);
      for (const t of result.imported) {
        await ctx.db('audit_log').insert({
          actor: ctx.actor,
          action: 'tariff.import',
          subject_type: 'tariff_table',
          subject_id: String(t.id),
          details: JSON.stringify({ authorityId: t.authorityId, effectiveFrom: t.effectiveFrom, file }),
        });
      }
      return {
        imported: result.imported.map((t) => ({
          id: t.id,
          authorityId: t.authorityId,
          authority: t.table.authority,
          effectiveFrom: t.effectiveFrom,
        })),
        unchanged: result.unchanged,
      };
    },
  },
  'tariff list': {
    usage: 'tariff list',
    options: {},
    run: async (_v, _p, ctx) =>
      (
        await ctx
          .db('tariff_tables')
          .orderBy([{ column: 'authority_id' }, { column: 'effective_from', order: 'desc' }])
          .select(
            'id',
            'authority_id',
            'authority',
            'effective_from',
            'imported_by',
            'imported_at',
            ctx.db.raw('"table"->>\'completeness\' as completeness'),
          )
      ).map((r) => ({
        id: r.id,
        authorityId: r.authority_id,
        authority: r.authority,
        effectiveFrom: r.effective_from,
        completeness: r.completeness,
        importedBy: r.imported_by,
        importedAt: (r.imported_at as Date).toISOString(),
      })),
  },
};

function usage(): string {
  return `usage: npm run admin -- <command>\n${Object.values(COMMANDS)
    .map((c) => `  ${c.usage}`)
    .join('\n')}`;
}

/** Connection failures (Node's and Postgres's own codes): the database is down, unreachable or refuses the login; not a bug. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  '57P01', // admin_shutdown
  '57P03', // cannot_connect_now (starting up or shutting down)
  '53300', // too_many_connections
  '3D000', // the database named in DATABASE_URL does not exist
  '28000', // invalid_authorization_specification
  '28P01', // invalid_password
]);

/**
 * The CLI's log (knex's pool warnings, the detail of an unexpected error): on stderr, never
 * stdout (which carries the one JSON document), and silent unless ADMIN_LOG_LEVEL asks for it,
 * so stderr carries only the JSON error. The detail can hold SQL and personal data.
 */
function cliLogger() {
  const level = (process.env.ADMIN_LOG_LEVEL ?? 'silent') as LevelWithSilent;
  return pino(
    {
      name: 'dtn-admin',
      level: pino.levels.values[level] !== undefined || level === 'silent' ? level : 'error',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    },
    pino.destination({ dest: 2, sync: true }),
  );
}

/** What an error that is not a CliError prints: no SQL, no stack, no values (they are in the log). */
function unexpected(err: unknown): CliError {
  const e = err as { code?: unknown; name?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if ((code && UNREACHABLE.has(code)) || e?.name === 'KnexTimeoutError') {
    return new CliError(
      'service_unavailable',
      `cannot reach the database${code ? ` (${code})` : ''}: check DATABASE_URL and that Postgres is running, then retry`,
    );
  }
  // A table or schema the command needs is missing: the database was not migrated (or the
  // command points at another schema than the service's).
  if (code === '42P01' || code === '3F000') {
    return new CliError(
      'service_unavailable',
      `the database is not migrated (database error ${code}): run npm run migrate with the same DATABASE_URL and DATABASE_SCHEMA, then retry`,
    );
  }
  return new CliError(
    'internal_error',
    `unexpected error${code && /^[0-9A-Z]{5}$/.test(code) ? ` (database error ${code})` : ''}; nothing was printed about it here: run again with ADMIN_LOG_LEVEL=error for the detail on stderr, and check the logs`,
  );
}

async function main(argv: string[]): Promise<number> {
  const two = `${argv[0]} ${argv[1]}`;
  // Own keys only: "constructor" or "toString" would otherwise find Object's methods.
  const known = (n: string | undefined): n is string => n !== undefined && Object.hasOwn(COMMANDS, n);
  const name = known(two) ? two : known(argv[0]) ? argv[0] : null;
  if (!name || argv.includes('--help')) {
    if (argv.includes('--help')) {
      // One JSON document on stdout, as every command answers (CONTRACT.md section 9), its lines readable.
      process.stdout.write(`${JSON.stringify({ usage: usage().split('\n') }, null, 2)}\n`);
      return 0;
    }
    // No command or an unknown one: JSON on stderr with the usage, exit 1 as every error (CONTRACT.md section 9).
    const message = argv.length === 0 ? 'no command given' : `unknown command "${argv.slice(0, 2).join(' ')}"`;
    process.stderr.write(`${JSON.stringify({ error: { code: 'invalid_input', message, usage: usage() } })}\n`);
    return 1;
  }
  const command = COMMANDS[name] as Command;
  const config = await configOrExit({ json: true });
  const logger = cliLogger();
  const db = createDb(config, { appName: 'dtn-admin', poolMax: 2, logger });
  try {
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({
        args: negativeValuesJoined(argv.slice(name.split(' ').length), command.options),
        options: command.options,
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new CliError('invalid_input', `${(err as Error).message}\nusage: ${command.usage}`);
    }
    if (parsed.positionals.length !== (command.positionals ?? 0)) {
      throw new CliError('invalid_input', `usage: ${command.usage}`);
    }
    const actor = `cli:${process.env.DTN_OPERATOR ?? os.userInfo().username}`;
    const result = await command.run(
      parsed.values as Record<string, string | boolean | undefined>,
      parsed.positionals,
      {
        db,
        config,
        actor,
      },
    );
    process.stdout.write(result instanceof RawOutput ? result.text : `${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof CliError)) logger.error({ err, command: name }, 'admin command failed');
    const { code, message } = err instanceof CliError ? err : unexpected(err);
    process.stderr.write(`${JSON.stringify({ error: { code, message } })}\n`);
    return 1;
  } finally {
    await db.destroy().catch(() => {});
  }
}

/**
 * `--fee -2.70` read as `--fee=-2.70`: a value option followed by a negative number takes it
 * (parseArgs would call it an ambiguous option), so a signed amount may be written either way.
 */
function negativeValuesJoined(args: string[], options: Command['options']): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const next = args[i + 1];
    const option = arg.startsWith('--') && !arg.includes('=') ? options?.[arg.slice(2)] : undefined;
    if (option?.type === 'string' && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

process.exitCode = await main(process.argv.slice(2));
