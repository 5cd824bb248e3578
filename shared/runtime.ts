import type { Redis } from 'ioredis';
import type { Config } from './config.ts';
import { createDb, type Db } from './db/knex.ts';
import { defaultGazetteer } from './geo/gazetteer.ts';
import { createRouteEstimator } from './geo/route-estimate.ts';
import { createLogger, type Logger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { createMailer, type Mailer } from './providers/mailer.ts';
import { createGoogleMapProvider } from './providers/map-provider.ts';
import { builtinPaymentProvider, type PaymentProvider } from './providers/payments.ts';
import { createTwilioSender, type SmsSender } from './providers/sms.ts';
import { closeQueues, createQueues, createRedis, type Queues } from './queues/connection.ts';
import { createPricer, type Pricer } from './services/pricer.ts';
import { createPricingClient, type PricingClient } from './services/pricing-client.ts';
import { createTariffStore } from './services/tariff-store.ts';

/**
 * The connections one process holds, created once from config and closed once. Workers get a
 * separate, patient Redis connection; everything else shares the fail-fast producer one.
 */
export interface Runtime {
  config: Config;
  logger: Logger;
  db: Db;
  redis: Redis;
  queues: Queues;
  workerRedis(): Redis;
  mailer: Mailer;
  sms: SmsSender;
  /** Charges weekly invoices (the built-in provider records them as due for finance). */
  payments: PaymentProvider;
  /** Request and reply to the pricing worker (API side). */
  pricing: PricingClient;
  /** The pricing engine with its data loaded (pricing worker side); built on first use. */
  pricer(): Pricer;
  /** This process's Prometheus metrics (shared/metrics.ts). */
  metrics: Metrics;
  close(): Promise<void>;
}

export function createRuntime(config: Config, name: string, opts: { logger?: Logger } = {}): Runtime {
  const logger = opts.logger ?? createLogger({ level: config.logLevel, name, apiKeyHeader: config.apiKeyHeader });
  const db = createDb(config, { appName: `dtn-${name}`, logger, poolMax: config.databasePoolMax });
  const redis = createRedis(config, 'producer', name);
  const queues = createQueues(redis, config.queuePrefix);
  const mailer = createMailer(config);
  const sms = createTwilioSender(config.twilio);
  let worker: Redis | null = null;
  let events: Redis | null = null;
  const pricing = createPricingClient(
    queues.pricing,
    () => {
      events ??= createRedis(config, 'worker', `${name}-events`);
      return events;
    },
    config.queuePrefix,
    config.pricing.timeoutMs,
  );
  let pricer: Pricer | null = null;
  return {
    config,
    logger,
    db,
    redis,
    queues,
    mailer,
    sms,
    payments: builtinPaymentProvider(),
    pricing,
    metrics: createMetrics(),
    pricer() {
      pricer ??= createPricer({
        db,
        config,
        geocoder: defaultGazetteer(),
        router: createRouteEstimator(),
        tariffs: createTariffStore(db),
        // Used only for quotes made through a driver who stored their own map-provider key.
        mapProvider: createGoogleMapProvider({ baseUrl: config.pricing.mapProviderBaseUrl }),
      });
      return pricer;
    },
    workerRedis() {
      worker ??= createRedis(config, 'worker', `${name}-worker`);
      return worker;
    },
    async close() {
      await pricing.close().catch(() => {});
      await closeQueues(queues).catch(() => {});
      mailer.close();
      // quit() waits for a reply; on a connection that is down, disconnect instead of hanging.
      const end = (r: Redis | null) => (r === null ? undefined : r.status === 'ready' ? r.quit() : r.disconnect());
      await Promise.allSettled([end(redis), end(worker), end(events)]);
      await db.destroy();
    },
  };
}
