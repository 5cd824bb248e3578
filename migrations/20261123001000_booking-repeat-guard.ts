import type { Knex } from 'knex';

/**
 * The 15-minute repeat rule for instant and v1 bookings, as one row per normalised request:
 * a booking is written only by the statement that inserts (or takes over an expired) guard
 * row, so identical requests racing each other make exactly one booking without a lock held
 * across round trips. The relay's housekeeping removes expired rows. The bookings index that
 * served the old lookup (content hash and time) goes: every booking insert paid for it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('booking_repeat_guard', (t) => {
    t.specificType('content_hash', 'bytea').primary();
    t.uuid('booking_id').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.index(['expires_at']);
  });
  await knex.schema.alterTable('bookings', (t) => t.dropIndex(['content_hash', 'created_at']));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('bookings', (t) => t.index(['content_hash', 'created_at']));
  await knex.schema.dropTable('booking_repeat_guard');
}
