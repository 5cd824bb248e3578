import { appendStatus, type BookingRow } from '../../shared/db/bookings.ts';
import type { JobPayload } from '../../shared/queues/registry.ts';
import type { WorkerContext } from '../context.ts';

/**
 * The dispatch step a booking's outbox job starts: a `pending` booking becomes `dispatching`,
 * recorded in its history. Matching drivers and making offers are the next steps of this
 * role (the dispatch work); a booking cancelled or already past pending is left alone, so a
 * repeated job changes nothing.
 */
export async function dispatchBooking(payload: JobPayload<'dispatch-booking'>, ctx: WorkerContext): Promise<void> {
  await ctx.db.transaction(async (trx) => {
    const booking = await trx<BookingRow>('bookings')
      .where({ id: payload.bookingId })
      .forUpdate()
      .first('id', 'status');
    if (booking?.status !== 'pending') return;
    await appendStatus(trx, booking.id, 'dispatching', 'dispatch');
  });
}
