import type { Knex } from 'knex';

/**
 * Sandbox (test mode) and the driver simulator:
 * - drivers.simulated: a driver of the simulator's fleet (the `simulator` worker role drives it
 *   through the driver API). A simulated driver is always a test-mode driver, so dispatch never
 *   offers it a live booking.
 * - bookings.test_scenario: the scenario a test-mode booking asked for (X-Test-Scenario header or
 *   `scenario:<name>` in its notes), acted on by the simulator and the fanout worker.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('drivers', (t) => {
    t.boolean('simulated').notNullable().defaultTo(false);
    t.check('not simulated or test_mode', [], 'drivers_simulated_test_mode_check');
  });
  await knex.schema.alterTable('bookings', (t) => {
    t.text('test_scenario');
    t.check(
      "test_scenario is null or (test_mode and test_scenario in ('no_driver','driver_declines_then_accepts','driver_cancels','partner_webhook_fails_twice'))",
      [],
      'bookings_test_scenario_check',
    );
  });
  await knex.raw('create index drivers_simulated on drivers (licence_number) where simulated');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists drivers_simulated');
  await knex.schema.alterTable('bookings', (t) => {
    t.dropChecks(['bookings_test_scenario_check']);
    t.dropColumn('test_scenario');
  });
  await knex.schema.alterTable('drivers', (t) => {
    t.dropChecks(['drivers_simulated_test_mode_check']);
    t.dropColumn('simulated');
  });
}
