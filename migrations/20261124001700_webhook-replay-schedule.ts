import type { Knex } from 'knex';

/**
 * A replayed dead webhook delivery gets a fresh retry schedule:
 * - webhook_deliveries.schedule_start: the attempts already made when the current retry
 *   schedule began (0 for a new delivery; the attempt count at the replay for a replayed one).
 *   The fanout worker counts a schedule's attempts as `attempts - schedule_start`, so attempt
 *   numbers keep increasing across replays while each replay has the whole schedule.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.integer('schedule_start')
      .notNullable()
      .defaultTo(0)
      .comment('attempts made before the current retry schedule began (set by a replay)');
    t.check('schedule_start >= 0 and schedule_start <= attempts', [], 'webhook_deliveries_schedule_start_check');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropChecks(['webhook_deliveries_schedule_start_check']);
    t.dropColumn('schedule_start');
  });
}
