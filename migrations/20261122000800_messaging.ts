import type { Knex } from 'knex';

/**
 * - email_verifications: one-time codes and link tokens for passenger e-mails (hashed).
 * - outbound_messages: every e-mail, SMS and WhatsApp we send, so sends are idempotent
 *   (the notify worker sends a row once), SMS can be billed (SPEC 2.10) and test-mode
 *   messages can be shown instead of sent.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('email_verifications', (t) => {
    t.uuid('id').primary();
    t.text('email').notNullable().comment('lower-case');
    t.specificType('code_hash', 'bytea').notNullable();
    t.specificType('link_token_hash', 'bytea').notNullable().unique();
    t.text('purpose').notNullable().defaultTo('passenger');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('verified_at', { useTz: true }).nullable();
    t.index(['email', 'created_at']);
  });

  await knex.schema.createTable('outbound_messages', (t) => {
    t.uuid('id').primary();
    t.text('channel').notNullable();
    t.text('recipient').notNullable();
    t.text('subject').nullable();
    t.text('body').notNullable();
    t.text('html').nullable();
    t.text('purpose').notNullable().comment('job_card, confirmation, verification, ...');
    t.uuid('booking_id').nullable().references('bookings.id').onDelete('SET NULL');
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('SET NULL');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('SET NULL');
    t.text('state').notNullable().defaultTo('queued');
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('provider_id').nullable().comment('Twilio message SID or SMTP message id');
    t.text('last_error').nullable();
    t.boolean('test_mode').notNullable().defaultTo(false);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('sent_at', { useTz: true }).nullable();
    t.check("channel in ('email','sms','whatsapp')", [], 'outbound_messages_channel_check');
    t.check("state in ('queued','sent','failed','recorded')", [], 'outbound_messages_state_check');
    t.index(['driver_id', 'channel', 'sent_at']);
    t.index(['booking_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('outbound_messages');
  await knex.schema.dropTable('email_verifications');
}
