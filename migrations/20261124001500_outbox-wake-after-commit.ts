import type { Knex } from 'knex';

/**
 * The outbox insert no longer fires NOTIFY from a trigger. A NOTIFY in the writing transaction
 * holds Postgres's global notify lock until that transaction's commit is flushed, so every
 * transaction that wrote the outbox (every booking) committed one after another. The writers'
 * pools now send the NOTIFY after the commit instead (`wakeRelayAfterOutboxCommits` in
 * shared/db/outbox.ts); the relay LISTENs on the same channel as before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('drop trigger if exists outbox_notify_insert on outbox');
  await knex.raw('drop function if exists outbox_notify()');
}

export async function down(knex: Knex): Promise<void> {
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
