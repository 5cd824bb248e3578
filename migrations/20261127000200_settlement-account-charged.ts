import type { Knex } from 'knex';

/**
 * A settlement record of kind `account_charged`: a ride booked on a partner's account
 * (`payment_method` `account`), completed and charged to that account. The driver reports it
 * when completing the job, as they report cash or card; the passenger owes nothing, so the
 * booking's payment state is `paid` (the partner settles with the driver on its own terms).
 * Until now a driver could report only cash, card or a payment link, and recorded an account
 * ride as cash.
 *
 * Swapping a CHECK constraint takes the table's ACCESS EXCLUSIVE lock briefly; the check of
 * existing rows is skipped (NOT VALID, then VALIDATE, which takes a weaker lock).
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
    `alter table settlement_records add constraint settlement_records_kind_check check (kind in (${list(KINDS)})) not valid`,
  );
  await knex.raw('alter table settlement_records validate constraint settlement_records_kind_check');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table settlement_records drop constraint settlement_records_kind_check');
  await knex.raw(
    `alter table settlement_records add constraint settlement_records_kind_check check (kind in (${list(KINDS_BEFORE)})) not valid`,
  );
}
