import type { Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';

/**
 * Withdraw the open offers a driver or partner operator has on `locked` (bookings the caller
 * has locked, in id order) and queue the next dispatch step of each booking still
 * dispatching, at once rather than when the offer would have run out. Used when a driver or a
 * partner is suspended; `tag` names the step's job (`dispatch-{booking}-{tag}-{time}`).
 * Returns the bookings offered elsewhere.
 */
export async function withdrawOpenOffers<B extends { id: string; status: string }>(
  trx: Tx,
  holder: { column: 'driver_id' | 'partner_id'; id: string },
  locked: readonly B[],
  now: Date,
  tag: string,
): Promise<B[]> {
  if (locked.length === 0) return [];
  const withdrawn = await trx('dispatch_offers')
    .whereIn(
      'booking_id',
      locked.map((b) => b.id),
    )
    .where({ [holder.column]: holder.id, state: 'offered' })
    .update({ state: 'withdrawn', responded_at: now })
    .returning<{ booking_id: string }[]>('booking_id');
  const withdrawnFrom = new Set(withdrawn.map((o) => o.booking_id));
  const offered = locked.filter((b) => withdrawnFrom.has(b.id) && b.status === 'dispatching');
  for (const b of offered) {
    await enqueueJob(
      trx,
      'dispatch-booking',
      { bookingId: b.id },
      { jobId: `dispatch-${b.id}-${tag}-${now.getTime()}` },
    );
  }
  return offered;
}
