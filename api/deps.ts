import type { Redis } from 'ioredis';
import type { Config } from '../shared/config.ts';
import type { Db } from '../shared/db/knex.ts';
import type { Logger } from '../shared/logger.ts';
import type { Metrics } from '../shared/metrics.ts';
import type { Queues } from '../shared/queues/connection.ts';
import type { PricingClient } from '../shared/services/pricing-client.ts';

/** What the HTTP layer needs; `buildApp(deps)` takes it so tests mount the app without listen(). */
export interface ApiDeps {
  config: Config;
  db: Db;
  redis: Redis;
  queues: Queues;
  logger: Logger;
  pricing: PricingClient;
  metrics: Metrics;
  /** Migrations this build expects, for /readyz. */
  expectedMigrations: readonly string[];
}
