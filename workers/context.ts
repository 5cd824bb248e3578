import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.ts';
import type { Db } from '../shared/db/knex.ts';
import type { Logger } from '../shared/logger.ts';
import type { Mailer } from '../shared/providers/mailer.ts';
import type { PaymentProvider } from '../shared/providers/payments.ts';
import type { SmsSender } from '../shared/providers/sms.ts';
import type { Queues } from '../shared/queues/connection.ts';
import type { Pricer } from '../shared/services/pricer.ts';

/** What a job handler may use. Handlers get ids in their payload and reload from Postgres. */
export interface WorkerContext {
  config: Config;
  db: Db;
  /** The shared Redis connection (live presence index, events). */
  redis: Redis;
  logger: Logger;
  queues: Queues;
  mailer: Mailer;
  sms: SmsSender;
  /** Charges weekly invoices (the built-in provider records them as due). */
  payments: PaymentProvider;
  /** The pricing engine (loads its data on first use). */
  pricer(): Pricer;
}
