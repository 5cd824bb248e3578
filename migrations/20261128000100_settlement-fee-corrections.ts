import type { Knex } from 'knex';

/**
 * A correction's processor fee is a signed change: a card fee entered wrongly (£3.00 for
 * £0.30) is taken back by a correction with a negative fee, so the weekly invoice passes
 * through what the driver's card processor charged, not the typo (SPEC.md 2.10: pass-through
 * only). Every other record's fee stays not negative. The service bounds a correction so a
 * record's fee with its corrections never goes below nothing (`recordSettlement`).
 *
 * Swapping a CHECK constraint takes the table's ACCESS EXCLUSIVE lock for the migration's
 * transaction while the existing rows are checked (the new rule only allows more, so they all
 * pass); the wait for that lock is bounded (lock_timeout).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw("set local lock_timeout = '5s'");
  await knex.raw('alter table settlement_records drop constraint settlement_records_fee_check');
  await knex.raw(
    "alter table settlement_records add constraint settlement_records_fee_check check (processor_fee_pence >= 0 or kind = 'correction')",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table settlement_records drop constraint settlement_records_fee_check');
  await knex.raw(
    // NOT VALID: fee corrections already written stay (the table is append-only).
    'alter table settlement_records add constraint settlement_records_fee_check check (processor_fee_pence >= 0) not valid',
  );
}
