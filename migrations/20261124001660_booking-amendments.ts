import type { Knex } from 'knex';

/**
 * booking_amendments: one row per accepted amendment of a booking (a partner's or supplier's
 * `amend`, or a `new` repeated with other content), in the transaction that changed it: who
 * amended it, when, the fare before and after, and which fields changed. Journey fields keep
 * their old and new values; passenger contact fields and notes are named only (their values
 * stay where they are now, on the booking, so no copies of personal data pile up here).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('booking_amendments', (t) => {
    t.uuid('id').primary();
    t.uuid('booking_id').notNullable().references('bookings.id').onDelete('CASCADE');
    t.uuid('partner_job_id').nullable().references('partner_jobs.id').onDelete('SET NULL');
    t.text('actor').notNullable();
    t.integer('fare_pence_before').notNullable();
    t.integer('fare_pence_after').notNullable();
    t.jsonb('changes').notNullable().comment('[{field, from?, to?}]: from/to only for journey fields');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['booking_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('booking_amendments');
}
