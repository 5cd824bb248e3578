import type { Knex } from 'knex';

/**
 * A sandbox verification e-mail is read with the test key that asked for it.
 *
 * passenger-verify with a test key records its e-mail (code and link) instead of sending it,
 * but the sandbox's `GET /api/public/v1/test/messages` lists the messages of a key's test
 * bookings, and a verification e-mail has no booking: nobody could read it, so the sandbox's
 * verify-by-code and verify-by-link could not be completed. `outbound_messages.api_key_id` is the
 * test key that asked for such a booking-less message; the key, and the other keys of its
 * partner, read it there.
 *
 * - Test-mode rows only (`outbound_messages_api_key_test_only`): a live message never carries a
 *   key, so a live verification e-mail (whose text is kept only until it is delivered) can never
 *   be listed to anyone.
 * - The partial index holds only those rows (a test key's reads, and the foreign key's check
 *   when a key is deleted), so the table's other messages do not pay for it.
 * - Both constraints are NOT VALID: the column is new, so every existing row is null and holds
 *   them; validating would read the whole table while the ALTER's lock holds every booking's
 *   message insert behind it. New and updated rows are checked.
 * - The index is built without CONCURRENTLY, as every migration here, in the migration's
 *   transaction: building it reads the whole table while the ALTER's lock holds every message
 *   insert (and the notify worker's reads) behind it. On a large live table, add the column and
 *   build the index by hand first (`alter table outbound_messages add column api_key_id uuid`,
 *   then `create index concurrently outbound_messages_test_api_key on outbound_messages
 *   (api_key_id, created_at) where api_key_id is not null`): this migration then skips both
 *   (`if not exists`) and adds only the NOT VALID constraints, which read nothing.
 */
export async function up(knex: Knex): Promise<void> {
  // Every booking writes this table (its confirmation, job cards): waiting long for the ALTER's
  // lock would hold them all behind it, so the migration fails instead and is run again.
  await knex.raw("set local lock_timeout = '5s'");
  await knex.raw('alter table outbound_messages add column if not exists api_key_id uuid');
  await knex.raw(
    `alter table outbound_messages add constraint outbound_messages_api_key_id_foreign
       foreign key (api_key_id) references api_keys (id) on delete set null not valid`,
  );
  await knex.raw(
    `alter table outbound_messages add constraint outbound_messages_api_key_test_only
       check (api_key_id is null or test_mode) not valid`,
  );
  await knex.raw(
    `create index if not exists outbound_messages_test_api_key on outbound_messages (api_key_id, created_at)
       where api_key_id is not null`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists outbound_messages_test_api_key');
  // Its constraints go with it.
  await knex.raw('alter table outbound_messages drop column api_key_id');
}
