import type { Knex } from 'knex';

/**
 * A licence is applied with once per mode: a sandbox application (a test key's) no longer takes
 * the licence number from the real driver's live application. Test and live are kept apart
 * everywhere else; here a test key could squat any driver's licence, and its 409 told anyone
 * whether a licence had applied.
 *
 * The unique constraint on (licensing_authority, licence_number) becomes a unique index that
 * includes `test_mode`. Built in the migration's transaction (drivers is small: one row a driver).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw("set local lock_timeout = '5s'");
  await knex.raw('alter table drivers drop constraint if exists drivers_licensing_authority_licence_number_unique');
  await knex.raw(
    'create unique index if not exists drivers_licence_per_mode on drivers (licensing_authority, licence_number, test_mode)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists drivers_licence_per_mode');
  await knex.raw(
    'alter table drivers add constraint drivers_licensing_authority_licence_number_unique unique (licensing_authority, licence_number)',
  );
}
