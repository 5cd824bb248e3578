import type { Knex } from 'knex';

/**
 * Weekly invoices (one per driver or partner per ISO week, whatever the number of runs)
 * and their lines: the flat fee and pass-through costs only. Amounts in pence.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('invoices', (t) => {
    t.uuid('id').primary();
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('RESTRICT');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('RESTRICT');
    t.text('week').notNullable().comment('ISO week, YYYY-Www');
    t.timestamp('period_start', { useTz: true }).notNullable();
    t.timestamp('period_end', { useTz: true }).notNullable();
    t.integer('earnings_pence').notNullable().defaultTo(0);
    t.integer('completed_rides').notNullable().defaultTo(0);
    t.integer('total_pence').notNullable().defaultTo(0);
    t.text('state').notNullable().defaultTo('issued');
    t.integer('charge_attempts').notNullable().defaultTo(0);
    t.text('last_charge_error').nullable();
    t.timestamp('issued_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('charged_at', { useTz: true }).nullable();
    t.check("week ~ '^[0-9]{4}-W[0-9]{2}$'", [], 'invoices_week_check');
    t.check("state in ('issued','due','paid','charge_failed','void')", [], 'invoices_state_check');
    t.check('(driver_id is null) <> (partner_id is null)', [], 'invoices_owner_check');
  });
  await knex.raw('create unique index invoices_driver_week on invoices (driver_id, week) where driver_id is not null');
  await knex.raw(
    'create unique index invoices_partner_week on invoices (partner_id, week) where partner_id is not null',
  );

  await knex.schema.createTable('invoice_lines', (t) => {
    t.bigIncrements('id');
    t.uuid('invoice_id').notNullable().references('invoices.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.text('description').notNullable();
    t.integer('quantity').notNullable().defaultTo(1);
    t.integer('unit_pence').notNullable();
    t.integer('amount_pence').notNullable();
    t.check("kind in ('subscription_fee','sms','card_processing','external_job_fee')", [], 'invoice_lines_kind_check');
    t.index(['invoice_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('invoice_lines');
  await knex.schema.dropTable('invoices');
}
