import type { Knex } from 'knex';

/**
 * When the next dispatch try of a booking nobody was free for is due.
 *
 * A booking that found no driver in any tier is `no_driver_available`, and dispatch tries
 * again every `DISPATCH_RETRY_MINUTES` until pickup, each try a delayed job in Redis whose id
 * carries its minute (`dispatch-<id>-retry-<minute>`). A Redis that lost its data lost that
 * job, and with it every try after it: nothing in Postgres said a try was due, so the check
 * for lost dispatch jobs (`rescueStrandedBookings`) could not tell a lost try from none.
 *
 * - bookings.dispatch_retry_at: the time of the try queued last (null: none queued, such as
 *   when the next would come after pickup). Written in the transaction that queues the try,
 *   so the row and the outbox job agree; read only for `no_driver_available` bookings, by the
 *   (status, pickup_time) index.
 * - A nullable column without a default: no rewrite of the table.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table bookings add column dispatch_retry_at timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table bookings drop column dispatch_retry_at');
}
