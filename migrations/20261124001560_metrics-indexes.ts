import type { Knex } from 'knex';

/**
 * `GET /metrics` reads the last 24 hours of dispatch offers (by tier and outcome) and of
 * webhook deliveries (by state) on a scrape (shared/metrics.ts): these indexes keep that a
 * range read of one day rather than a scan of every offer and delivery ever made.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index dispatch_offers_offered_at on dispatch_offers (offered_at)');
  await knex.raw('create index webhook_deliveries_created_at on webhook_deliveries (created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index dispatch_offers_offered_at');
  await knex.raw('drop index webhook_deliveries_created_at');
}
