import type { Knex } from 'knex';

/**
 * Indexes for lookups on hot or growing paths that were scans of the whole table, found by
 * reading the plans of the statements on populated tables (test/hot-path-plans.int.test.ts
 * holds each one to an index probe):
 *
 * - partner_jobs (booking_id): the job reference a partner's status webhook carries, read on
 *   every status change of a booking that has webhook endpoints, while its row is locked
 *   (shared/services/webhooks.ts). Was a scan of every partner job: 3 ms at 32,000.
 * - bookings (operator_partner_id, status) and (partner_id, pickup_time) for the open ones:
 *   an operator's or partner's job feed (its jobs in hand, and the jobs it submitted that are
 *   not finished) and the dispatcher's count of an operator's jobs. Was a scan of every
 *   booking on each feed read: 25-39 ms at 80,000.
 * - dispatch_offers (partner_id, state): an operator's open offers (its feed, and its load at
 *   each dispatch step). Was a read of the whole (driver_id, state) index.
 * - webhook_deliveries: the (state) index made Postgres claim a delivery by walking every
 *   pending one rather than by its primary key, whenever pending ones were rarer in its
 *   statistics than on the table (an endpoint down since the last ANALYZE): 4 ms a claim at
 *   36,000 pending, for each of them. It goes; the dead-letter list (operators' replay CLI
 *   and page) gets a partial index of its own, in the order it is read.
 * - bookings (api_key_id) and (partner_id) for test-mode bookings: a sandbox key's recorded
 *   messages. Was a scan of every booking, live ones included: 20-29 ms at 80,000. Partial,
 *   so live bookings do not pay for it.
 *
 * Built without CONCURRENTLY, as every migration here: on a large live table, build them by
 * hand with CREATE INDEX CONCURRENTLY under the same names first (this migration then skips
 * them, `if not exists`), and drop the state index with DROP INDEX CONCURRENTLY: a plain drop
 * locks webhook_deliveries against reads until the migration's transaction commits, which is
 * why it comes last here.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index if not exists partner_jobs_booking_id on partner_jobs (booking_id)');
  await knex.raw(
    'create index if not exists bookings_operator_status on bookings (operator_partner_id, status) where operator_partner_id is not null',
  );
  await knex.raw(
    `create index if not exists bookings_partner_open on bookings (partner_id, pickup_time)
       where partner_id is not null and status not in ('completed', 'cancelled')`,
  );
  await knex.raw(
    'create index if not exists dispatch_offers_partner_state on dispatch_offers (partner_id, state) where partner_id is not null',
  );
  await knex.raw(
    `create index if not exists webhook_deliveries_dead on webhook_deliveries (created_at) where state = 'dead'`,
  );
  await knex.raw('create index if not exists bookings_test_api_key on bookings (api_key_id) where test_mode');
  await knex.raw('create index if not exists bookings_test_partner on bookings (partner_id) where test_mode');
  // Last: dropping an index locks its table against reads until the migration commits.
  await knex.raw('drop index if exists webhook_deliveries_state_index');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists bookings_test_partner');
  await knex.raw('drop index if exists bookings_test_api_key');
  await knex.raw('drop index if exists webhook_deliveries_dead');
  await knex.raw('create index webhook_deliveries_state_index on webhook_deliveries (state)');
  await knex.raw('drop index if exists dispatch_offers_partner_state');
  await knex.raw('drop index if exists bookings_partner_open');
  await knex.raw('drop index if exists bookings_operator_status');
  await knex.raw('drop index if exists partner_jobs_booking_id');
}
