import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { Config } from '../config.ts';
import { randomBase62, seal } from '../crypto.ts';
import type { Db } from '../db/knex.ts';
import type { VehicleType } from '../domain/tariffs/types.ts';
import { createApiKey } from './api-keys.ts';

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
 * sealed secrets are stored.
 */
export async function createPartner(
  db: Db,
  config: Pick<Config, 'serviceCode' | 'dataEncryptionKey'>,
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
    if (opts.webhookUrl) {
      webhookSecret = newWebhookSecret();
      await trx('webhook_endpoints').insert({
        id: uuidv7(),
        partner_id: id,
        url: opts.webhookUrl,
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
