/**
 * A booking's payment state, derived from its settlement records (append-only, never
 * changed): `void` when a record voids it, or when it was cancelled with nothing kept; `paid`
 * once the records add up to the fare (and something was paid); `due` otherwise. The booking
 * lookup and the pay-the-driver page both answer with it.
 */
export type PaymentState = 'due' | 'paid' | 'void';

/**
 * How a passenger pays the driver (CONTRACT.md section 0's spellings map to these): the
 * `bookings.payment_method` column's check constraint holds it to them.
 */
export const PAYMENT_METHODS = ['cash', 'card', 'pay_link', 'bank_transfer', 'account'] as const;
export type PaymentMethod = (typeof PAYMENT_METHODS)[number];

export function paymentState(
  booking: { status: string; fare_pence: number | null },
  records: ReadonlyArray<{ kind: string; amount_pence: number }>,
): PaymentState {
  const paid = records.reduce((s, r) => s + r.amount_pence, 0);
  return records.some((r) => r.kind === 'void') || (booking.status === 'cancelled' && paid <= 0)
    ? 'void'
    : paid >= (booking.fare_pence ?? 0) && paid > 0
      ? 'paid'
      : 'due';
}
