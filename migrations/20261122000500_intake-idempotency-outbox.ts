import type { Knex } from 'knex';

/**
 * - partner_jobs: jobs that arrive from partners (unique on partner and jobRef) and from
 *   suppliers (unique on supplier and their reference), each tied to the booking it made.
 * - idempotency_keys: the `Idempotency-Key` header's memory (24 h), with the stored response
 *   replayed byte for byte.
 * - outbox: jobs written in the same transaction as the domain change that implies them.
 *   The relay moves each row into BullMQ with job id `outbox-<id>`; an insert wakes it
 *   through NOTIFY on channel `outbox_<schema>`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('partner_jobs', (t) => {
    t.uuid('id').primary();
    t.uuid('partner_id').nullable().references('partners.id').onDelete('RESTRICT');
    t.uuid('supplier_id').nullable().references('suppliers.id').onDelete('RESTRICT');
    t.text('job_ref').notNullable();
    t.uuid('booking_id').nullable().references('bookings.id').onDelete('RESTRICT');
    t.text('last_action').notNullable();
    t.specificType('content_hash', 'bytea')
      .notNullable()
      .comment('normalised job content, to tell a replay from an amendment');
    t.jsonb('payload').notNullable();
    t.integer('job_fee_pence').notNullable().defaultTo(0).comment('external platform fee, billed to the driver');
    t.timestamps(true, true);
    t.check('(partner_id is null) <> (supplier_id is null)', [], 'partner_jobs_source_check');
    t.check("last_action in ('new','amend','cancel')", [], 'partner_jobs_action_check');
  });
  await knex.raw(
    'create unique index partner_jobs_partner_ref on partner_jobs (partner_id, job_ref) where partner_id is not null',
  );
  await knex.raw(
    'create unique index partner_jobs_supplier_ref on partner_jobs (supplier_id, job_ref) where supplier_id is not null',
  );

  await knex.schema.createTable('idempotency_keys', (t) => {
    t.bigIncrements('id');
    t.text('scope').notNullable().comment('api key id, else client IP');
    t.text('key').notNullable();
    t.text('method').notNullable();
    t.text('path').notNullable();
    t.specificType('request_hash', 'bytea').notNullable();
    t.text('state').notNullable().defaultTo('in_progress');
    t.integer('response_status').nullable();
    t.jsonb('response_headers').nullable();
    t.specificType('response_body', 'bytea').nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.unique(['scope', 'key']);
    t.check("state in ('in_progress','completed')", [], 'idempotency_keys_state_check');
    t.index(['expires_at']);
  });

  await knex.schema.createTable('outbox', (t) => {
    t.bigIncrements('id');
    t.text('queue').notNullable();
    t.text('job_name').notNullable();
    t.jsonb('payload').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('run_at', { useTz: true }).nullable().comment('null: at once; else a delayed job');
    t.text('job_id').nullable().comment('deterministic BullMQ job id; default outbox-<id>');
    t.timestamp('relayed_at', { useTz: true }).nullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error').nullable();
  });
  await knex.raw('create index outbox_unrelayed on outbox (id) where relayed_at is null');
  await knex.raw(`
    create function outbox_notify() returns trigger language plpgsql as $$
    begin
      perform pg_notify('outbox_' || tg_table_schema, '');
      return null;
    end $$;
  `);
  await knex.raw(`
    create trigger outbox_notify_insert after insert on outbox
      for each statement execute function outbox_notify();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('outbox');
  await knex.raw('drop function outbox_notify()');
  await knex.schema.dropTable('idempotency_keys');
  await knex.schema.dropTable('partner_jobs');
}
