import type { Knex } from 'knex';

/**
 * Outbound webhooks (Standard Webhooks signing): endpoints owned by a partner or supplier,
 * with secret rotation (the previous secret keeps signing until `previous_secret_expires_at`);
 * one delivery per event, carrying the booking's sequence number; every attempt logged.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.uuid('id').primary();
    t.uuid('partner_id').nullable().references('partners.id').onDelete('CASCADE');
    t.uuid('supplier_id').nullable().references('suppliers.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.text('secret_sealed').notNullable().comment('whsec_ secret, sealed');
    t.text('previous_secret_sealed').nullable();
    t.timestamp('previous_secret_expires_at', { useTz: true }).nullable();
    t.boolean('active').notNullable().defaultTo(true);
    t.timestamps(true, true);
    t.check('(partner_id is null) <> (supplier_id is null)', [], 'webhook_endpoints_owner_check');
  });

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary();
    t.uuid('endpoint_id').notNullable().references('webhook_endpoints.id').onDelete('CASCADE');
    t.uuid('booking_id').nullable().references('bookings.id').onDelete('CASCADE');
    t.text('event_type').notNullable();
    t.integer('sequence').nullable();
    t.text('message_id').notNullable().unique().comment('webhook-id header, stable across retries');
    t.jsonb('payload').notNullable();
    t.text('state').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('next_attempt_at', { useTz: true }).nullable();
    t.timestamp('delivered_at', { useTz: true }).nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("state in ('pending','delivered','dead')", [], 'webhook_deliveries_state_check');
    t.unique(['endpoint_id', 'booking_id', 'sequence']);
    t.index(['state']);
  });

  await knex.schema.createTable('webhook_delivery_attempts', (t) => {
    t.bigIncrements('id');
    t.uuid('delivery_id').notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.integer('attempt').notNullable();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('status_code').nullable();
    t.integer('latency_ms').nullable();
    t.text('error').nullable();
    t.unique(['delivery_id', 'attempt']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('webhook_delivery_attempts');
  await knex.schema.dropTable('webhook_deliveries');
  await knex.schema.dropTable('webhook_endpoints');
}
