import { publishBookingEvent } from '../../shared/services/booking-events.ts';
import type { WorkerContext } from '../context.ts';

/** Wake the tracking streams of a booking after a status change has committed (a hint: streams re-read history). */
export async function announceStatus(ctx: Pick<WorkerContext, 'redis' | 'config'>, bookingId: string): Promise<void> {
  await publishBookingEvent(ctx.redis, ctx.config.queuePrefix, bookingId);
}
