import type { Knex } from 'knex';

/**
 * Verification e-mails are counted per mailbox, not per address as typed.
 *
 * The cap of e-mails an address is sent an hour (passenger-verify, the MCP sign-in) counted
 * rows by `email`, the address in canonical form. That form keeps `+tag`s (and Gmail's dots),
 * which are one inbox: `anna+1@…`, `anna+2@…` each had their own allowance, all delivered to
 * Anna. `mailbox_key` is `mailboxKey(email)` (shared/domain/email-acceptance.ts), the form the
 * unconfirmed-address booking limit and blocks already use; the cap counts by it.
 *
 * Rows written before this have none and are not counted: verifications last 30 minutes and
 * the cap looks back one hour, so that is at most an hour's allowance once, at deployment.
 *
 * Built without CONCURRENTLY, as every migration here, and in the migration's transaction,
 * which holds the ALTER's lock (reads included) until the index is built. On a large live
 * table, add the column and build the index by hand first (`create index concurrently
 * email_verifications_mailbox_recent on email_verifications (mailbox_key, created_at)`): this
 * migration then skips both (`if not exists`).
 */
export async function up(knex: Knex): Promise<void> {
  // Every booking reads this table (the passenger's standing): waiting long for the ALTER's
  // lock would hold them all behind it, so the migration fails instead and is run again.
  await knex.raw("set local lock_timeout = '5s'");
  await knex.raw('alter table email_verifications add column if not exists mailbox_key text');
  await knex.raw(
    'create index if not exists email_verifications_mailbox_recent on email_verifications (mailbox_key, created_at)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index email_verifications_mailbox_recent');
  await knex.raw('alter table email_verifications drop column mailbox_key');
}
