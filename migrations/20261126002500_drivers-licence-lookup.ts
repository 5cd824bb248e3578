import type { Knex } from 'knex';

/**
 * A driver's application looks for another driver with the same licence, the licensing
 * authority compared without case (`applyDriver` in shared/services/drivers.ts:
 * `lower(licensing_authority) = ? and licence_number = ?`). The unique index on
 * (licensing_authority, licence_number) cannot serve that comparison, so every application
 * read the whole drivers table (about 10 ms at 100,000 drivers, growing with the fleet). This
 * index serves it. Not unique: rows written before the case-blind check may differ only in
 * case, and the application's advisory lock already serialises the check and the insert.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index drivers_licence_lookup on drivers (lower(licensing_authority), licence_number)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index drivers_licence_lookup');
}
