import type { Knex } from 'knex';

/**
 * OAuth 2.1 for the MCP tool server (`/mcp`), with this service as its own authorization server:
 *
 * - oauth_clients: dynamically registered clients (RFC 7591). A confidential client's secret is
 *   stored as its SHA-256 only; the registration response is the one time it is shown.
 * - oauth_authorizations: one authorization request each, from the authorization page's first
 *   step to its code. The page's request token and the browser cookie it is bound to are stored
 *   hashed (CSRF binding); the passenger's e-mail, once verified by a one-time code; the
 *   decision; and the authorization code, hashed, single use. Every token issued from a code
 *   belongs to its authorization (the token family that a replayed refresh token revokes).
 * - oauth_tokens: access and refresh tokens, hashed; bound to a client, the verified passenger
 *   e-mail, scopes and the resource (RFC 8707) they were issued for.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('oauth_clients', (t) => {
    t.text('client_id').primary();
    t.specificType('client_secret_hash', 'bytea').nullable().comment('sha256 of the secret; null for public clients');
    t.timestamp('client_secret_expires_at', { useTz: true }).nullable();
    t.text('client_name').nullable();
    t.jsonb('metadata').notNullable().comment('the registered client metadata (RFC 7591), without the secret');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('oauth_authorizations', (t) => {
    t.uuid('id').primary();
    t.text('client_id').notNullable().references('oauth_clients.client_id').onDelete('CASCADE');
    t.specificType('request_hash', 'bytea').notNullable().unique().comment("sha256 of the page's request token");
    t.specificType('browser_hash', 'bytea').notNullable().comment('sha256 of the browser-binding cookie');
    t.text('redirect_uri').notNullable();
    t.specificType('scopes', 'text[]').notNullable();
    t.text('state').nullable();
    t.text('code_challenge').notNullable().comment('PKCE S256');
    t.text('resource').notNullable().comment('RFC 8707 resource the tokens are bound to');
    t.text('email').nullable().comment('lower-case; the passenger, once they entered it');
    t.uuid('verification_id').nullable().comment('email_verifications row of the code sent');
    t.timestamp('email_verified_at', { useTz: true }).nullable();
    t.text('decision').nullable();
    t.timestamp('decided_at', { useTz: true }).nullable();
    t.specificType('code_hash', 'bytea').nullable().unique().comment('sha256 of the authorization code');
    t.timestamp('code_expires_at', { useTz: true }).nullable();
    t.timestamp('code_used_at', { useTz: true }).nullable();
    t.timestamp('expires_at', { useTz: true }).notNullable().comment('the request, until decided');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("decision in ('approved', 'denied')", [], 'oauth_authorizations_decision_check');
    t.index(['expires_at']);
  });

  await knex.schema.createTable('oauth_tokens', (t) => {
    t.uuid('id').primary();
    t.uuid('authorization_id').notNullable().references('oauth_authorizations.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.specificType('token_hash', 'bytea').notNullable().unique().comment('sha256 of the token');
    t.text('client_id').notNullable().references('oauth_clients.client_id').onDelete('CASCADE');
    t.text('email').notNullable();
    t.specificType('scopes', 'text[]').notNullable();
    t.text('resource').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('rotated_at', { useTz: true }).nullable().comment('refresh token exchanged for a new pair');
    t.timestamp('revoked_at', { useTz: true }).nullable();
    t.index(['authorization_id']);
    t.index(['expires_at']);
    t.check("kind in ('access', 'refresh')", [], 'oauth_tokens_kind_check');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('oauth_tokens');
  await knex.schema.dropTable('oauth_authorizations');
  await knex.schema.dropTable('oauth_clients');
}
