import type { Knex } from 'knex';

/**
 * Tariffs are data with effective dates: each row is one authority's table in force from
 * `effective_from`; a quote uses, per authority, the latest table in force at its departure.
 * Operators import new tables with `npm run admin -- tariff import FILE`.
 * Rate cards are an approved driver's or partner's own rates, which replace the council tariff
 * for quotes made through them.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('tariff_tables', (t) => {
    t.bigIncrements('id');
    t.text('authority_id').notNullable();
    t.text('authority').notNullable();
    t.specificType('local_authority_codes', 'text[]').notNullable();
    t.date('effective_from').notNullable();
    t.jsonb('table').notNullable().comment('TariffTable (shared/domain/tariffs/table.ts)');
    t.text('imported_by').notNullable();
    t.timestamp('imported_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['authority_id', 'effective_from']);
  });

  await knex.schema.createTable('rate_cards', (t) => {
    t.uuid('id').primary();
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('CASCADE');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('CASCADE');
    t.jsonb('card').notNullable().comment('RateCard (shared/domain/tariffs/types.ts)');
    t.timestamp('approved_at', { useTz: true }).nullable().comment('only approved cards are used');
    t.text('approved_by').nullable();
    t.timestamps(true, true);
    t.check('(driver_id is null) <> (partner_id is null)', [], 'rate_cards_owner_check');
  });
  await knex.raw('create unique index rate_cards_driver on rate_cards (driver_id) where driver_id is not null');
  await knex.raw('create unique index rate_cards_partner on rate_cards (partner_id) where partner_id is not null');

  await knex.schema.alterTable('quotes', (t) => {
    t.bigInteger('tariff_table_id').nullable().references('tariff_tables.id').onDelete('RESTRICT');
    t.uuid('rate_card_id').nullable().references('rate_cards.id').onDelete('RESTRICT');
    t.jsonb('request').notNullable().defaultTo('{}').comment('the inputs as received, for support');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('quotes', (t) => {
    t.dropColumn('request');
    t.dropColumn('rate_card_id');
    t.dropColumn('tariff_table_id');
  });
  await knex.schema.dropTable('rate_cards');
  await knex.schema.dropTable('tariff_tables');
}
