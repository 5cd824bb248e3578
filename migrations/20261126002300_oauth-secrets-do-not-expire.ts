import type { Knex } from 'knex';

/**
 * Confidential OAuth clients' secrets no longer expire (api/mcp/router.ts registers them with
 * `client_secret_expires_at: 0`): there is no endpoint to rotate a secret (RFC 7592), and the
 * SDK's default of 30 days stranded every passenger's refresh token when it ran out. Clients
 * registered before keep the expiry they were given, in the column `authenticateClient` checks
 * and in the metadata the SDK's handlers read; both are cleared here, so the rule is the same
 * for every client. `down` leaves them: an expiry cannot be given back to a secret after the fact.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `update oauth_clients
        set client_secret_expires_at = null,
            metadata = jsonb_set(metadata, '{client_secret_expires_at}', '0')
      where client_secret_expires_at is not null or (metadata->>'client_secret_expires_at')::bigint > 0`,
  );
}

export async function down(): Promise<void> {
  // See above.
}
