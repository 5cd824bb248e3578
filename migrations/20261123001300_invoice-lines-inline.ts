import type { Knex } from 'knex';

/**
 * An invoice's lines move into the invoice row (`lines`, a JSON array of
 * `{kind, description, quantity, unit_pence, amount_pence}`): an invoice is issued once and
 * never changed, so it is one document. The weekly run then writes one row per owner instead
 * of a row per line plus a foreign-key check on each (a third of its time over 100,000 drivers).
 * Existing lines are carried over.
 */
const KINDS = "'subscription_fee','sms','card_processing','external_job_fee'";

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table invoices add column lines jsonb not null default '[]'`);
  await knex.raw(`
    update invoices i
       set lines = l.lines
      from (select invoice_id,
                   jsonb_agg(jsonb_build_object('kind', kind, 'description', description, 'quantity', quantity,
                                                'unit_pence', unit_pence, 'amount_pence', amount_pence) order by id) as lines
              from invoice_lines group by invoice_id) l
     where l.invoice_id = i.id`);
  await knex.raw(`alter table invoices add constraint invoices_lines_check check (jsonb_typeof(lines) = 'array')`);
  await knex.schema.dropTable('invoice_lines');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.createTable('invoice_lines', (t) => {
    t.bigIncrements('id');
    t.uuid('invoice_id').notNullable().references('invoices.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.text('description').notNullable();
    t.integer('quantity').notNullable().defaultTo(1);
    t.integer('unit_pence').notNullable();
    t.integer('amount_pence').notNullable();
    t.check(`kind in (${KINDS})`, [], 'invoice_lines_kind_check');
    t.index(['invoice_id']);
  });
  await knex.raw(`
    insert into invoice_lines (invoice_id, kind, description, quantity, unit_pence, amount_pence)
    select i.id, l.kind, l.description, l.quantity, l.unit_pence, l.amount_pence
      from invoices i
     cross join lateral jsonb_to_recordset(i.lines)
           as l(kind text, description text, quantity int, unit_pence int, amount_pence int)`);
  await knex.raw('alter table invoices drop constraint invoices_lines_check');
  await knex.raw('alter table invoices drop column lines');
}
