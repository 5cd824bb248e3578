import type { Config } from '../config.ts';
import type { Db } from '../db/knex.ts';
import type { Logger } from '../logger.ts';
import { createApiKey } from './api-keys.ts';
import { createPartner } from './partners.ts';

const DEMO_PARTNER = 'Demo Partner';

/**
 * Demo data for `SEED_DEMO=1` (the README's start command): a demo partner and a test-mode
 * API key. Idempotent: a second start finds them and creates nothing. Keys are stored
 * hashed, so a key is printed only when it is created.
 */
export async function seedDemo(db: Db, config: Config, logger: Logger): Promise<{ created: Record<string, string> }> {
  const created: Record<string, string> = {};
  const partner = await db('partners').where({ name: DEMO_PARTNER }).first<{ id: string } | undefined>('id');
  if (!partner) {
    const p = await createPartner(db, config, { name: DEMO_PARTNER, canSetFares: true, actor: 'seed' });
    created.partnerId = p.id;
    created.partnerApiKey = p.apiKey;
    created.partnerSigningSecret = p.signingSecret;
  }
  const demoKey = await db('api_keys').where({ name: 'demo' }).whereNull('revoked_at').first('id');
  if (!demoKey) {
    const k = await createApiKey(db, { serviceCode: config.serviceCode, name: 'demo', mode: 'test' });
    created.demoApiKey = k.key;
  }
  logger.info({ createdCount: Object.keys(created).length }, 'demo data seeded');
  return { created };
}
