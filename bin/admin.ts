import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Config } from '../shared/config.ts';
import { createDb, type Db } from '../shared/db/knex.ts';
import { type BillingWeek, parseWeek } from '../shared/domain/billing/week.ts';
import { mailboxKey } from '../shared/domain/email-acceptance.ts';
import { VEHICLE_TYPES, type VehicleType } from '../shared/domain/tariffs/types.ts';
import { configOrExit } from '../shared/lifecycle.ts';
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
import { normalisePhone } from '../shared/services/bookings.ts';
import {
  approveDriver,
  DRIVER_STATUSES,
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
 * `--fixed "MAN>M1=45.00,LHR<>SW1=70"`: fixed prices between places named by postcode district or
 * IATA code; `>` one way, `<>` both ways.
 */
function fixedRoutes(text: string): NonNullable<RateCardInput['fixedRoutes']> {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const m = /^([A-Za-z0-9]{2,8})\s*(<>|>)\s*([A-Za-z0-9]{2,8})\s*=\s*(\d{1,4}(?:\.\d{1,2})?)$/.exec(part);
      if (!m) throw new CliError('invalid_input', `--fixed: "${part}" is not FROM>TO=GBP or FROM<>TO=GBP`);
      return {
        from: (m[1] as string).toUpperCase(),
        to: (m[3] as string).toUpperCase(),
        pricePence: Math.round(Number(m[4]) * 100),
        ...(m[2] === '<>' ? { bidirectional: true } : {}),
      };
    });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function required(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.trim() === '') throw new CliError('invalid_input', `--${name} is required`);
  return v.trim();
}

/** An invoice decision, its refusals as CLI errors (`invoice_not_found`, `conflict`). */
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
    if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email))
      throw new CliError('invalid_input', '--email must be an e-mail address');
    return { kind: 'email', value: mailboxKey(email) };
  }
  try {
    return { kind: 'phone', value: normalisePhone(phone as string) };
  } catch {
    throw new CliError('invalid_input', '--phone must be a mobile number such as +447700900123');
  }
}

function positiveInt(value: unknown, name: string): number | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || !/^\d+$/.test(value) || Number(value) < 1) {
    throw new CliError('invalid_input', `--${name} must be a whole number of at least 1`);
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
  const capacity = positiveInt(v['fleet-capacity'], 'fleet-capacity');
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
        name: required(v, 'name'),
        canSetFares: v['can-set-fares'] === true,
        dailyLimit: positiveInt(v['daily-limit'], 'daily-limit'),
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
        name: required(v, 'name'),
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
      const suspended = await suspendDriver(ctx.db, id, ctx.actor);
      if (!suspended) throw new CliError('not_found', `no driver ${id}`);
      return suspended;
    },
  },
  'trial extend': {
    usage: 'trial extend --driver ID | --partner ID --days N',
    options: { driver: { type: 'string' }, partner: { type: 'string' }, days: { type: 'string' } },
    run: async (v, _p, ctx) => {
      if ((v.driver === undefined) === (v.partner === undefined)) {
        throw new CliError('invalid_input', 'give exactly one of --driver or --partner');
      }
      const days = positiveInt(required(v, 'days'), 'days') as number;
      if (days > MAX_TRIAL_EXTENSION_DAYS) {
        throw new CliError('invalid_input', `--days must be at most ${MAX_TRIAL_EXTENSION_DAYS}`);
      }
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
    usage: 'block --email E | --phone P [--reason R]',
    options: { email: { type: 'string' }, phone: { type: 'string' }, reason: { type: 'string' } },
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
      return { blocked: { kind, value } };
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
      'ratecard set --driver ID | --partner ID --per-mile GBP --minimum GBP [--flag-fall GBP] [--fixed "MAN>M1=45.00,LHR<>SW1=70"]',
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
    run: async (v, _p, ctx) => ({ removed: await removeRateCard(ctx.db, rateCardOwner(v), ctx.actor) }),
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
      const corrects = v.corrects === undefined ? undefined : positiveInt(v.corrects, 'corrects');
      try {
        return await recordSettlement(
          ctx.db,
          {
            reference: required(v, 'booking'),
            kind: kind as OperatorSettlementKind,
            amountPence: penceArg(v.amount, 'amount', kind === 'correction') ?? 0,
            ...(v.fee !== undefined ? { processorFeePence: penceArg(v.fee, 'fee') as number } : {}),
            ...(corrects != null ? { correctsId: corrects } : {}),
            ...(typeof v.note === 'string' ? { note: v.note.slice(0, 500) } : {}),
          },
          ctx.actor,
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
      const history = await bookingHistory(ctx.db, p[0] ?? '');
      if (!history) throw new CliError('booking_not_found', `no booking ${p[0] ?? ''}`);
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
    usage: 'webhook rotate --partner ID | --supplier ID [--overlap-hours 24]',
    options: { partner: { type: 'string' }, supplier: { type: 'string' }, 'overlap-hours': { type: 'string' } },
    run: (v, _p, ctx) => {
      const owner = endpointOwner(v);
      const raw = v['overlap-hours'];
      if (raw !== undefined && (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) > 24 * 30)) {
        throw new CliError('invalid_input', '--overlap-hours must be a whole number from 0 to 720');
      }
      const hours = raw === undefined ? 24 : Number(raw);
      return webhookAction(() => rotateWebhookSecret(ctx.db, ctx.config, owner, hours, ctx.actor));
    },
  },
  'tariff import': {
    usage: 'tariff import FILE',
    options: {},
    positionals: 1,
    run: async (_v, p, ctx) => {
      const file = p[0] as string;
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

async function main(argv: string[]): Promise<number> {
  const two = `${argv[0]} ${argv[1]}`;
  const name = COMMANDS[two] ? two : argv[0] !== undefined && COMMANDS[argv[0]] ? argv[0] : null;
  if (!name || argv.includes('--help')) {
    const unknown = argv.length > 0 && !argv.includes('--help');
    (unknown ? process.stderr : process.stdout).write(
      unknown
        ? `${JSON.stringify({ error: { code: 'invalid_input', message: `unknown command "${argv.slice(0, 2).join(' ')}"`, usage: usage() } })}\n`
        : `${usage()}\n`,
    );
    return unknown ? 1 : 0;
  }
  const command = COMMANDS[name] as Command;
  const config = await configOrExit({ json: true });
  const db = createDb(config, { appName: 'dtn-admin', poolMax: 2 });
  try {
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({
        args: argv.slice(name.split(' ').length),
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
    const code = err instanceof CliError ? err.code : 'internal_error';
    const message = err instanceof CliError ? err.message : `unexpected error: ${(err as Error).message}`;
    process.stderr.write(`${JSON.stringify({ error: { code, message } })}\n`);
    return 1;
  } finally {
    await db.destroy();
  }
}

process.exitCode = await main(process.argv.slice(2));
