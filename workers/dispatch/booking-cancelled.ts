import type { BookingRow } from '../../shared/db/bookings.ts';
import type { JobPayload } from '../../shared/queues/registry.ts';
import { queueDriverText } from '../../shared/services/messages.ts';
import type { WorkerContext } from '../context.ts';

/**
 * A cancellation reaches whoever holds the job: live offers are withdrawn, and every driver
 * who was offered or assigned the booking is texted that it is cancelled, by SMS and WhatsApp
 * as job cards are (`queueDriverText`; once: the
 * message id is the job's idempotency, and offers already withdrawn are not told again).
 */
export async function bookingCancelled(payload: JobPayload<'booking-cancelled'>, ctx: WorkerContext): Promise<void> {
  await ctx.db.transaction(async (trx) => {
    const booking = await trx<BookingRow>('bookings').where({ id: payload.bookingId }).forUpdate().first();
    if (booking?.status !== 'cancelled') return;
    const withdrawn = await trx('dispatch_offers')
      .where({ booking_id: booking.id, state: 'offered' })
      .update({ state: 'withdrawn', responded_at: trx.fn.now() })
      .returning<{ driver_id: string | null }[]>('driver_id');
    const driverIds = new Set(withdrawn.map((o) => o.driver_id).filter((d): d is string => d !== null));
    if (booking.driver_id) driverIds.add(booking.driver_id);
    if (driverIds.size === 0) return;
    const told = await trx('outbound_messages')
      .where({ booking_id: booking.id, purpose: 'job_cancelled' })
      .pluck<string[]>('driver_id');
    const drivers = await trx('drivers')
      .whereIn(
        'id',
        [...driverIds].filter((id) => !told.includes(id)),
      )
      .select<Array<{ id: string; phone: string }>>('id', 'phone');
    // Who cancelled, as the history records it: the passenger (website, API, MCP), or the
    // partner or supplier that booked it (a job's cancel).
    const cancel = await trx('booking_status_history')
      .where({ booking_id: booking.id, status: 'cancelled' })
      .orderBy('seq', 'desc')
      .first<{ actor: string } | undefined>('actor');
    const by =
      cancel?.actor.startsWith('partner:') || cancel?.actor.startsWith('supplier:')
        ? 'by the booking partner'
        : cancel?.actor === 'passenger'
          ? 'by the passenger'
          : '';
    for (const d of drivers) {
      await queueDriverText(trx, {
        recipient: d.phone,
        body: `Direct Taxi Network: job ${booking.reference} has been cancelled${by ? ` ${by}` : ''}. No action needed.`,
        purpose: 'job_cancelled',
        bookingId: booking.id,
        driverId: d.id,
        testMode: booking.test_mode,
      });
    }
  });
}
