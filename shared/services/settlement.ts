import type { Db } from '../db/knex.ts';
import { type PaymentState, paymentState } from '../domain/payment-state.ts';
import { referenceForMessage } from '../domain/reference.ts';
import { bookingReferenceFor } from './booking-history.ts';

/**
 * Settlement records written by operators and finance (the driver app writes the payment that
 * completes a ride). Records are append-only (the database refuses UPDATE, DELETE and TRUNCATE):
 * a mistake is answered by a new record, a `correction` pointing at the one it corrects, or a
 * `refund`, or a `void` when the fare is not owed at all. The booking's payment state is derived
 * from all its records.
 */
export const OPERATOR_SETTLEMENT_KINDS = [
  'cash_received',
  'card_paid',
  'pay_link_paid',
  'bank_transfer_received',
  'account_charged',
  'refund',
  'correction',
  'void',
] as const;
export type OperatorSettlementKind = (typeof OPERATOR_SETTLEMENT_KINDS)[number];

const METHOD: Partial<Record<OperatorSettlementKind, string>> = {
  cash_received: 'cash',
  card_paid: 'card',
  pay_link_paid: 'pay_link',
  bank_transfer_received: 'bank_transfer',
  account_charged: 'account',
};

export class SettlementError extends Error {
  constructor(
    readonly code: 'invalid_input' | 'not_found' | 'booking_not_found' | 'conflict',
    message: string,
  ) {
    super(message);
  }
}

export interface NewSettlement {
  reference: string;
  kind: OperatorSettlementKind;
  /** Pence received (payments), refunded (refund: a positive figure, stored negative), or the signed change (correction). */
  amountPence: number;
  processorFeePence?: number;
  correctsId?: number;
  note?: string;
}

export interface RecordedSettlement {
  id: number;
  bookingReference: string;
  kind: OperatorSettlementKind;
  amountGBP: number;
  processorFeeGBP: number;
  correctsId: number | null;
  paymentState: PaymentState;
}

/**
 * Append a settlement record to a booking (held by its driver or operator) and answer its new
 * payment state. The reference is read as the API reads one (`bookingReferenceFor`: any case,
 * I/L/O for 1/1/0, the prefix or its hyphen left out); `prefix` is the configured one.
 */
export async function recordSettlement(
  db: Db,
  input: NewSettlement,
  actor: string,
  prefix: string,
): Promise<RecordedSettlement> {
  const fee = input.processorFeePence ?? 0;
  // A correction's fee is a signed change (a fee entered wrongly is taken back, to no less than
  // nothing: checked below against the record it corrects); any other record's is not negative.
  if (!Number.isInteger(input.amountPence) || !Number.isInteger(fee) || (fee < 0 && input.kind !== 'correction')) {
    throw new SettlementError('invalid_input', 'amounts must be whole pence and the fee not negative');
  }
  if (input.kind === 'void' ? input.amountPence !== 0 : input.kind !== 'correction' && input.amountPence <= 0) {
    throw new SettlementError(
      'invalid_input',
      input.kind === 'void' ? 'a void carries no amount' : `a ${input.kind} needs an amount above zero`,
    );
  }
  if (input.kind === 'correction' && (input.correctsId === undefined || (input.amountPence === 0 && fee === 0))) {
    throw new SettlementError(
      'invalid_input',
      'a correction names the record it corrects and a non-zero change (of the amount, the fee or both)',
    );
  }
  if (fee > 0 && input.kind !== 'card_paid' && input.kind !== 'correction') {
    throw new SettlementError('invalid_input', 'only card payments (or their corrections) carry a processor fee');
  }
  // As the driver app refuses it (`reportProgress`): the fee is passed through to the driver's
  // week and the record cannot be changed afterwards, so a fee over the amount paid is a typo.
  if (input.kind === 'card_paid' && fee > input.amountPence) {
    throw new SettlementError(
      'invalid_input',
      `the card processing fee (£${(fee / 100).toFixed(2)}) cannot be more than the amount paid (£${(input.amountPence / 100).toFixed(2)})`,
    );
  }
  const reference = bookingReferenceFor(input.reference, prefix);
  if (!reference) throw new SettlementError('booking_not_found', `no booking ${referenceForMessage(input.reference)}`);
  return db.transaction(async (trx) => {
    // Lock the booking so concurrent records see each other when the state is derived.
    const booking = await trx('bookings').where({ reference }).forUpdate().first<
      | {
          id: string;
          reference: string;
          status: string;
          fare_pence: number | null;
          driver_id: string | null;
          operator_partner_id: string | null;
        }
      | undefined
    >('id', 'reference', 'status', 'fare_pence', 'driver_id', 'operator_partner_id');
    if (!booking) throw new SettlementError('booking_not_found', `no booking ${reference}`);
    // A payment is taken by whoever drove the ride (the driver app records it when the driver
    // completes the job): a booking no driver or operator holds (never assigned, or given back,
    // as with no_driver_available) had no one to pay. Refunds, corrections and voids still apply.
    if (METHOD[input.kind] && !booking.driver_id && !booking.operator_partner_id) {
      throw new SettlementError(
        'conflict',
        `${booking.reference} is ${booking.status.replace(/_/g, ' ')} and no driver or operator holds it: there is no payment to record`,
      );
    }
    const gbp = (pence: number) => `£${(pence / 100).toFixed(2)}`;
    if (input.correctsId !== undefined) {
      const target = await trx('settlement_records')
        .where({ id: input.correctsId })
        .first<{ booking_id: string; kind: string; amount_pence: number } | undefined>(
          'booking_id',
          'kind',
          'amount_pence',
        );
      if (!target || target.booking_id !== booking.id) {
        throw new SettlementError('not_found', `no settlement record ${input.correctsId} on ${booking.reference}`);
      }
      // Only a card payment carries a fee (cash, e-mail and WhatsApp bookings carry no charge:
      // SPEC.md section 2.10), so only its fee is corrected: on the payment itself.
      if (fee !== 0 && target.kind !== 'card_paid') {
        throw new SettlementError(
          'invalid_input',
          `record ${input.correctsId} is a ${target.kind.replace(/_/g, ' ')}: only a card payment's processor fee can be corrected`,
        );
      }
      // The record with its corrections so far, and with this one.
      const sums = await trx('settlement_records')
        .where({ id: input.correctsId })
        .orWhere({ corrects_id: input.correctsId })
        .select<Array<{ fee: string | number; amount: string | number }>>(
          trx.raw('coalesce(sum(processor_fee_pence), 0) as fee, coalesce(sum(amount_pence), 0) as amount'),
        );
      const feeLeft = Number(sums[0]?.fee ?? 0);
      const amount = Number(sums[0]?.amount ?? 0) + input.amountPence;
      // An amount keeps its sign: a payment corrected to no less than nothing, a refund to no
      // more (a correction past that would be a refund, or a payment, of its own).
      if (target.amount_pence >= 0 ? amount < 0 : amount > 0) {
        throw new SettlementError(
          'invalid_input',
          `the correction (${gbp(input.amountPence)}) takes record ${input.correctsId} past nothing (${gbp(amount - input.amountPence)} with its corrections so far)`,
        );
      }
      // A card payment's fee: no less than nothing, and no more than the amount paid, as when
      // a card payment is recorded (after a change of the amount as after one of the fee).
      if (target.kind === 'card_paid' && (fee !== 0 || input.amountPence !== 0)) {
        if (feeLeft + fee < 0) {
          throw new SettlementError(
            'invalid_input',
            `the fee correction (${gbp(fee)}) takes back more than record ${input.correctsId}'s fee (${gbp(feeLeft)})`,
          );
        }
        if (feeLeft + fee > amount) {
          throw new SettlementError(
            'invalid_input',
            `the card processing fee would be ${gbp(feeLeft + fee)}, more than the amount paid (${gbp(amount)})`,
          );
        }
      }
    }
    // A refund gives back no more than the booking's payments, net of refunds and corrections so
    // far (under the booking's lock, so refunds sent together are counted one after another).
    if (input.kind === 'refund') {
      const net = await trx('settlement_records')
        .where({ booking_id: booking.id })
        .first<{ paid: string | number }>(trx.raw('coalesce(sum(amount_pence), 0) as paid'));
      const paid = Number(net?.paid ?? 0);
      if (input.amountPence > paid) {
        throw new SettlementError(
          'invalid_input',
          `the refund (${gbp(input.amountPence)}) is more than ${booking.reference}'s payments net of refunds (${gbp(paid)})`,
        );
      }
    }
    const [row] = await trx('settlement_records')
      .insert({
        booking_id: booking.id,
        driver_id: booking.driver_id,
        partner_id: booking.driver_id ? null : booking.operator_partner_id,
        kind: input.kind,
        method: METHOD[input.kind] ?? null,
        amount_pence: input.kind === 'refund' ? -input.amountPence : input.amountPence,
        processor_fee_pence: fee,
        corrects_id: input.correctsId ?? null,
        recorded_by: actor,
        note: input.note ?? null,
      })
      .returning<Array<{ id: string | number; amount_pence: number }>>(['id', 'amount_pence']);
    if (!row) throw new Error('settlement insert returned no row');
    await trx('audit_log').insert({
      actor,
      action: 'settlement.record',
      subject_type: 'booking',
      subject_id: booking.id,
      details: JSON.stringify({ recordId: Number(row.id), kind: input.kind, amountPence: row.amount_pence }),
    });
    const records = await trx('settlement_records')
      .where({ booking_id: booking.id })
      .select<Array<{ kind: string; amount_pence: number }>>('kind', 'amount_pence');
    return {
      id: Number(row.id),
      bookingReference: booking.reference,
      kind: input.kind,
      amountGBP: row.amount_pence / 100,
      processorFeeGBP: fee / 100,
      correctsId: input.correctsId ?? null,
      paymentState: paymentState(booking, records),
    };
  });
}
