import type { Knex } from 'knex';

/**
 * Operator accounts for the operator pages (`/operator`):
 *
 * - operators: one row per person; the e-mail is stored lower-case and unique; the password as
 *   an scrypt hash with its own random salt and cost parameters in one string
 *   (`$scrypt$ln=15,r=8,p=1$<salt>$<hash>`, shared/services/operators.ts). A disabled operator
 *   cannot sign in and their sessions end.
 * - operator_sessions: a signed-in browser. The cookie carries 32 random bytes; only their
 *   SHA-256 is stored. Sessions expire 12 hours after sign-in.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('operators', (t) => {
    t.uuid('id').primary();
    t.text('email').notNullable().unique().comment('lower-case');
    t.text('name').notNullable();
    t.text('password_hash').notNullable().comment('$scrypt$ln=..,r=..,p=..$salt$hash (base64)');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('disabled_at', { useTz: true }).nullable();
    t.check('email = lower(email)', [], 'operators_email_lower_check');
  });

  await knex.schema.createTable('operator_sessions', (t) => {
    t.uuid('id').primary();
    t.uuid('operator_id').notNullable().references('operators.id').onDelete('CASCADE');
    t.specificType('token_hash', 'bytea').notNullable().unique().comment('sha256 of the session cookie');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['operator_id']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('operator_sessions');
  await knex.schema.dropTable('operators');
}
