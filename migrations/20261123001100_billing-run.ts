import type { Knex } from 'knex';

/**
 * What the weekly invoice run reads, indexed by time so that a week is a range scan rather
 * than a pass over all history: completed rides (by the time they were completed), SMS sent,
 * and settlement records that carry a card processor's fee. Charging looks invoices up by state.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    "create index booking_status_history_completed_at on booking_status_history (at) include (booking_id) where status = 'completed'",
  );
  await knex.raw(
    "create index outbound_messages_sms_sent_at on outbound_messages (sent_at) include (driver_id, partner_id) where channel = 'sms' and state = 'sent'",
  );
  await knex.raw(
    'create index settlement_records_fee_created_at on settlement_records (created_at) where processor_fee_pence > 0',
  );
  await knex.raw("create index invoices_to_charge on invoices (week, id) where state in ('issued', 'charge_failed')");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index invoices_to_charge');
  await knex.raw('drop index settlement_records_fee_created_at');
  await knex.raw('drop index outbound_messages_sms_sent_at');
  await knex.raw('drop index booking_status_history_completed_at');
}
