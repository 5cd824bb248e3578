import type { Knex } from 'knex';

/**
 * The weeks a driver's or partner operator's free trial did not cover. A trial extended after
 * it ended starts again from the day it is extended (`extendDriverTrial`, `extendPartnerTrial`),
 * and `trial_ends_at` then holds only the new end: the time between the old end and the
 * extension is kept here, so a week that started in it is still billed as one after the trial
 * (CONTRACT.md section 8: the fee applies when "the week starts after the trial has ended"),
 * however late the week's billing run comes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('trial_lapses', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('CASCADE');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('CASCADE');
    t.timestamp('starts_at', { useTz: true }).notNullable();
    t.timestamp('ends_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check('(driver_id is null) <> (partner_id is null)', [], 'trial_lapses_owner_check');
    t.check('starts_at < ends_at', [], 'trial_lapses_span_check');
    t.index(['driver_id']);
    t.index(['partner_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('trial_lapses');
}
