import type { Knex } from 'knex';

/**
 * Settlement records: every payment event of a booking (cash received, card paid with the
 * processor's fee, payment link paid, refund, correction) is appended and never changed.
 * The database itself refuses UPDATE, DELETE and TRUNCATE; a correction is a new record
 * pointing at the one it corrects. A booking's payment state is derived from its records.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('settlement_records', (t) => {
    t.bigIncrements('id');
    t.uuid('booking_id').notNullable().references('bookings.id').onDelete('RESTRICT');
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('RESTRICT');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('RESTRICT');
    t.text('kind').notNullable();
    t.text('method').nullable();
    t.integer('amount_pence').notNullable().comment('positive received, negative refunded');
    t.integer('processor_fee_pence').notNullable().defaultTo(0);
    t.bigInteger('corrects_id').nullable().references('settlement_records.id');
    t.text('recorded_by').notNullable();
    t.text('note').nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check(
      "kind in ('cash_received','card_paid','pay_link_paid','bank_transfer_received','refund','correction','void')",
      [],
      'settlement_records_kind_check',
    );
    t.check('processor_fee_pence >= 0', [], 'settlement_records_fee_check');
    t.index(['booking_id']);
    t.index(['driver_id', 'created_at']);
  });
  await knex.raw(`
    create function settlement_records_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'settlement_records is append-only: % is not allowed', tg_op
        using errcode = 'insufficient_privilege';
    end $$;
  `);
  await knex.raw(`
    create trigger settlement_records_no_update_delete
      before update or delete on settlement_records
      for each row execute function settlement_records_append_only();
  `);
  await knex.raw(`
    create trigger settlement_records_no_truncate
      before truncate on settlement_records
      for each statement execute function settlement_records_append_only();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('settlement_records');
  await knex.raw('drop function settlement_records_append_only()');
}
