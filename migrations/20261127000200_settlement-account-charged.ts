import type { Knex } from 'knex';

/**
 * A settlement record of kind `account_charged`: a ride booked on a partner's account
 * (`payment_method` `account`), completed and charged to that account. The driver reports it
 * when completing the job, as they report cash or card; the passenger owes nothing, so the
 * booking's payment state is `paid` (the partner settles with the driver on its own terms).
 * Until now a driver could report only cash, card or a payment link, and recorded an account
 * ride as cash.
 *
 * Swapping a CHECK constraint takes the table's ACCESS EXCLUSIVE lock for the migration's
 * transaction, while the existing rows are checked (the new list only adds a kind, so they all
 * pass); the wait for that lock is bounded (lock_timeout) rather than holding writers behind it.
 */
const KINDS_BEFORE = [
  'cash_received',
  'card_paid',
  'pay_link_paid',
  'bank_transfer_received',
  'refund',
  'correction',
  'void',
];
const KINDS = [...KINDS_BEFORE, 'account_charged'];
const list = (kinds: string[]) => kinds.map((k) => `'${k}'`).join(',');

export async function up(knex: Knex): Promise<void> {
  await knex.raw("set local lock_timeout = '5s'");
  await knex.raw('alter table settlement_records drop constraint settlement_records_kind_check');
  await knex.raw(
    `alter table settlement_records add constraint settlement_records_kind_check check (kind in (${list(KINDS)}))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table settlement_records drop constraint settlement_records_kind_check');
  await knex.raw(
    // NOT VALID: account_charged records already written stay (the table is append-only).
    `alter table settlement_records add constraint settlement_records_kind_check check (kind in (${list(KINDS_BEFORE)})) not valid`,
  );
}
