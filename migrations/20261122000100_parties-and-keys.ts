import type { Knex } from 'knex';

/**
 * Who talks to us: partners (submit jobs, may also fulfil as tier-3 operators), suppliers
 * (inbound webhooks), API keys (stored as SHA-256 hashes with a visible prefix), the
 * operator block list and the audit log.
 *
 * Secrets we must be able to use again (HMAC signing secrets) are sealed with
 * DATA_ENCRYPTION_KEY (AES-256-GCM, see shared/crypto.ts), never stored in clear.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('partners', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.boolean('can_set_fares').notNullable().defaultTo(false);
    t.integer('daily_job_limit').nullable().comment('null: the configured default');
    t.text('signing_secret_sealed').notNullable().comment('HMAC secret for x-signature, sealed');
    t.boolean('is_operator').notNullable().defaultTo(false).comment('fulfils bookings as tier 3');
    t.specificType('fleet_classes', 'text[]').notNullable().defaultTo('{}');
    t.integer('fleet_capacity').notNullable().defaultTo(0);
    t.timestamp('trial_ends_at', { useTz: true }).nullable();
    t.text('status').notNullable().defaultTo('active');
    t.timestamps(true, true);
    t.check("status in ('active','suspended')", [], 'partners_status_check');
  });

  await knex.schema.createTable('suppliers', (t) => {
    t.uuid('id').primary();
    t.text('slug').notNullable().unique();
    t.text('adapter').notNullable();
    t.text('secret_sealed').notNullable();
    t.boolean('external_platform').notNullable().defaultTo(false);
    t.integer('job_fee_pence').notNullable().defaultTo(0);
    t.boolean('active').notNullable().defaultTo(true);
    t.timestamps(true, true);
    t.check("slug ~ '^[a-z0-9][a-z0-9-]{0,39}$'", [], 'suppliers_slug_check');
    t.check('job_fee_pence >= 0', [], 'suppliers_job_fee_check');
  });

  await knex.schema.createTable('api_keys', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.text('prefix').notNullable().comment('first characters of the key, shown to operators');
    t.specificType('key_hash', 'bytea').notNullable().unique().comment('SHA-256 of the whole key');
    t.text('mode').notNullable().defaultTo('live');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('RESTRICT');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true }).nullable();
    t.timestamp('last_used_at', { useTz: true }).nullable();
    t.check("mode in ('live','test')", [], 'api_keys_mode_check');
    t.index(['partner_id']);
  });

  await knex.schema.createTable('blocked_contacts', (t) => {
    t.bigIncrements('id');
    t.text('kind').notNullable();
    t.text('value').notNullable().comment('normalised: lower-case e-mail, E.164 phone');
    t.text('reason').nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['kind', 'value']);
    t.check("kind in ('email','phone')", [], 'blocked_contacts_kind_check');
  });

  await knex.schema.createTable('audit_log', (t) => {
    t.bigIncrements('id');
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('actor').notNullable().comment('cli:<user>, key:<prefix>, driver:<id>, system');
    t.text('action').notNullable();
    t.text('subject_type').notNullable();
    t.text('subject_id').nullable();
    t.jsonb('details').notNullable().defaultTo('{}');
    t.index(['subject_type', 'subject_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('audit_log');
  await knex.schema.dropTable('blocked_contacts');
  await knex.schema.dropTable('api_keys');
  await knex.schema.dropTable('suppliers');
  await knex.schema.dropTable('partners');
}
