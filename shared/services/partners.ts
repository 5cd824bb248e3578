import { randomBytes } from 'node:crypto';
import type { Config } from '../config.ts';
import { randomBase62, seal } from '../crypto.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { assertName } from '../domain/names.ts';
import type { VehicleType } from '../domain/tariffs/types.ts';
import { uuidv7 } from '../ids.ts';
import { checkEndpointUrl, endpointUrlRules } from '../net/public-address.ts';
import { createApiKey } from './api-keys.ts';
import { MAX_TRIAL_EXTENSION_DAYS } from './drivers.ts';
import { recordTrialLapse } from './trial-lapses.ts';

export interface CreatedPartner {
  id: string;
  apiKey: string;
  signingSecret: string;
  /** Standard Webhooks secret for status fanout; null until the partner has a webhook URL. */
  webhookSecret: string | null;
}

/** A Standard Webhooks secret: `whsec_` and base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * Create a partner with its first API key, its HMAC signing secret and, when a webhook URL
 * is given, its webhook endpoint. Secrets are returned once; only the key's hash and the
 * sealed secrets are stored. A name that is not one line of visible text of at most 100
 * characters (`nameProblem`, shared/domain/names.ts) throws `NameError`, and a webhook URL the
 * deployment does not accept (see `checkEndpointUrl`: not http(s), credentials in it, a
 * non-public address) `EndpointUrlError`, before anything is written.
 */
export async function createPartner(
  db: Db,
  config: Pick<Config, 'serviceCode' | 'dataEncryptionKey' | 'env' | 'webhooks'>,
  opts: {
    name: string;
    canSetFares?: boolean;
    dailyLimit?: number | null;
    webhookUrl?: string | null;
    /** A tier-3 operator: fulfils bookings with its own fleet of these classes, this many at once. */
    operator?: { fleetClasses: readonly VehicleType[]; fleetCapacity: number } | null;
    actor: string;
  },
): Promise<CreatedPartner> {
  assertName(opts.name);
  const webhookUrl = opts.webhookUrl ? checkEndpointUrl(opts.webhookUrl, endpointUrlRules(config)) : null;
  return db.transaction(async (trx) => {
    const id = uuidv7();
    const signingSecret = `${config.serviceCode}_sign_${randomBase62(40)}`;
    await trx('partners').insert({
      id,
      name: opts.name,
      can_set_fares: opts.canSetFares ?? false,
      daily_job_limit: opts.dailyLimit ?? null,
      signing_secret_sealed: seal(signingSecret, config.dataEncryptionKey),
      is_operator: opts.operator != null,
      fleet_classes: opts.operator ? [...opts.operator.fleetClasses] : [],
      fleet_capacity: opts.operator?.fleetCapacity ?? 0,
    });
    const key = await createApiKey(trx, {
      serviceCode: config.serviceCode,
      name: `${opts.name} (partner)`,
      partnerId: id,
    });
    let webhookSecret: string | null = null;
    if (webhookUrl) {
      webhookSecret = newWebhookSecret();
      await trx('webhook_endpoints').insert({
        id: uuidv7(),
        partner_id: id,
        url: webhookUrl,
        secret_sealed: seal(webhookSecret, config.dataEncryptionKey),
      });
    }
    await trx('audit_log').insert({
      actor: opts.actor,
      action: 'partner.create',
      subject_type: 'partner',
      subject_id: id,
      details: JSON.stringify({
        name: opts.name,
        canSetFares: opts.canSetFares ?? false,
        keyPrefix: key.prefix,
        operator: opts.operator ?? null,
      }),
    });
    return { id, apiKey: key.key, signingSecret, webhookSecret };
  });
}

/** A partner's free trial (SPEC.md 2.10) when none is set: this many days from its creation. */
export const PARTNER_TRIAL_DAYS = 30;

export interface PartnerListing {
  id: string;
  name: string;
  status: string;
  canSetFares: boolean;
  dailyLimit: number | null;
  isOperator: boolean;
  fleetClasses: string[];
  fleetCapacity: number;
  webhookUrl: string | null;
  createdAt: string;
  /** Its own trial end, else 30 days from creation. */
  trialEndsAt: string;
}

/** Partners, oldest first, with their webhook URL (never a secret). */
export async function listPartners(db: Queryable): Promise<PartnerListing[]> {
  const rows = await db('partners as p')
    .orderBy([{ column: 'p.created_at' }, { column: 'p.id' }])
    .select<
      Array<{
        id: string;
        name: string;
        status: string;
        can_set_fares: boolean;
        daily_job_limit: number | null;
        is_operator: boolean;
        fleet_classes: string[];
        fleet_capacity: number;
        created_at: Date;
        trial_end: Date;
        webhook_url: string | null;
      }>
    >(
      'p.id',
      'p.name',
      'p.status',
      'p.can_set_fares',
      'p.daily_job_limit',
      'p.is_operator',
      'p.fleet_classes',
      'p.fleet_capacity',
      'p.created_at',
      db.raw(`coalesce(p.trial_ends_at, p.created_at + interval '${PARTNER_TRIAL_DAYS} days') as trial_end`),
      db.raw(
        '(select e.url from webhook_endpoints e where e.partner_id = p.id and e.active order by e.created_at desc limit 1) as webhook_url',
      ),
    );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    status: r.status,
    canSetFares: r.can_set_fares,
    dailyLimit: r.daily_job_limit,
    isOperator: r.is_operator,
    fleetClasses: r.fleet_classes,
    fleetCapacity: r.fleet_capacity,
    webhookUrl: r.webhook_url,
    createdAt: r.created_at.toISOString(),
    trialEndsAt: r.trial_end.toISOString(),
  }));
}

/**
 * Extend a partner's free trial by `days` (1 to MAX_TRIAL_EXTENSION_DAYS): from its end (its own,
 * else 30 days from creation), or from now when it has ended. Null if unknown.
 */
export async function extendPartnerTrial(
  db: Db,
  id: string,
  days: number,
  actor: string,
): Promise<{ id: string; trialEndsAt: string } | null> {
  if (!Number.isInteger(days) || days < 1 || days > MAX_TRIAL_EXTENSION_DAYS) {
    throw new RangeError(`days must be a whole number from 1 to ${MAX_TRIAL_EXTENSION_DAYS}`);
  }
  return db.transaction(async (trx) => {
    // A trial that had ended starts again today: the time between is kept as a lapse, whose weeks stay billed.
    await recordTrialLapse(
      trx,
      { table: 'partners', id },
      `coalesce(trial_ends_at, created_at + interval '${PARTNER_TRIAL_DAYS} days')`,
    );
    const [row] = await trx('partners')
      .where({ id })
      .update({
        trial_ends_at: trx.raw(
          `greatest(coalesce(trial_ends_at, created_at + interval '${PARTNER_TRIAL_DAYS} days'), now()) + make_interval(days => ?)`,
          [days],
        ),
        updated_at: trx.fn.now(),
      })
      .returning<Array<{ trial_ends_at: Date }>>(['trial_ends_at']);
    if (!row) return null;
    const trialEndsAt = row.trial_ends_at.toISOString();
    await trx('audit_log').insert({
      actor,
      action: 'partner.trial_extend',
      subject_type: 'partner',
      subject_id: id,
      details: JSON.stringify({ days, trialEndsAt }),
    });
    return { id, trialEndsAt };
  });
}
