import type { Knex } from 'knex';

/**
 * The driver a tier-3 partner operator puts on a booking it holds.
 *
 * An operator's drivers are not ours (no `drivers` row), so `bookings.driver_id` stays null
 * and the passenger's lookup, the tracking page, the pay page and the booker's webhooks showed
 * no driver at all: the name and vehicle the operator sent with `driver_assigned` were kept
 * only in the history entry's details. They are now kept on the booking too, written in the
 * transaction that gives the operator the job (so the `booking.status` event queued there
 * carries them), replaced when the operator names another driver, and cleared when it hands
 * the job back. Only a booking an operator holds may have one.
 *
 * Adding the column is a catalogue change. The check is added NOT VALID, so adding it does not
 * read the whole table under the migration's lock: it holds for every row written from now on,
 * and every existing row satisfies it already (the column is new, so null everywhere).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `alter table bookings
       add column operator_driver jsonb,
       add constraint bookings_operator_driver_check
         check (operator_driver is null
                or (operator_partner_id is not null and jsonb_typeof(operator_driver) = 'object'))
         not valid`,
  );
  await knex.raw(
    `comment on column bookings.operator_driver is
       'the holding operator''s driver: {name, phone?, licensingAuthority?, vehicle?{make, model, colour, registration}}'`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table bookings drop constraint bookings_operator_driver_check');
  await knex.raw('alter table bookings drop column operator_driver');
}
