import type { Config } from '../config.ts';
import type { Db } from '../db/knex.ts';
import type { Logger } from '../logger.ts';
import { createApiKey } from './api-keys.ts';
import { createOperator } from './operators.ts';
import { createPartner } from './partners.ts';

const DEMO_PARTNER = 'Demo Partner';
/** The demo operator of the operator pages (`/operator/login`); its password is generated and printed once. */
export const DEMO_OPERATOR_EMAIL = 'demo-operator@localhost';

/**
 * Demo data for `SEED_DEMO=1` (the README's start command): a demo partner, a test-mode
 * API key and a demo operator for the operator pages (`demo-operator@localhost`). Idempotent:
 * a second start finds them and creates nothing. Keys and passwords are stored hashed, so a key
 * or the operator's generated password is printed only when it is created (local use only).
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
  const operator = await db('operators').where({ email: DEMO_OPERATOR_EMAIL }).first('id');
  if (!operator) {
    const o = await createOperator(db, { email: DEMO_OPERATOR_EMAIL, name: 'Demo Operator', actor: 'seed' });
    created.operatorEmail = o.email;
    created.operatorPassword = o.password;
  }
  logger.info({ createdCount: Object.keys(created).length }, 'demo data seeded');
  return { created };
}
