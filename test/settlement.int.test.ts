import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSettlement } from '../shared/services/settlement.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * Settlement records from operators and finance: append-only payment events on a booking
 * (payments, refunds, corrections pointing at what they correct, voids) and the payment state
 * derived from them; through the real CLI and against the database's own refusal to edit.
 */
let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(async () => {
  await env?.cleanup();
});

const admin = (...args: string[]) => runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'finance-test' });

async function booking(farePence: number): Promise<{ id: string; reference: string }> {
  const id = randomUUID();
  const reference = `DTN-${randomBytes(3).toString('hex').toUpperCase()}`;
  await env.rt.db('bookings').insert({
    id,
    reference,
    origin: 'api',
    status: 'completed',
    passenger_name: 'Pat Passenger',
    pickup: JSON.stringify({ name: 'Leeds', lat: 53.79, lng: -1.54 }),
    dropoff: JSON.stringify({ name: 'Bradford', lat: 53.79, lng: -1.75 }),
    pickup_time: new Date(),
    fare_pence: farePence,
    tracking_token_hash: randomBytes(32),
  });
  return { id, reference };
}

describe('settlement records', () => {
  it('appends payments, refunds and corrections, and derives the payment state from them', async () => {
    const b = await booking(2500);
    const part = await admin(
      'settlement',
      'record',
      '--booking',
      b.reference.toLowerCase(),
      '--kind',
      'cash_received',
      '--amount',
      '10.00',
    );
    expect(part.code, part.stderr).toBe(0);
    expect(JSON.parse(part.stdout)).toMatchObject({
      bookingReference: b.reference,
      kind: 'cash_received',
      amountGBP: 10,
      paymentState: 'due',
    });
    const rest = await recordSettlement(
      env.rt.db,
      { reference: b.reference, kind: 'card_paid', amountPence: 1500, processorFeePence: 26 },
      'test',
    );
    expect(rest).toMatchObject({ paymentState: 'paid', processorFeeGBP: 0.26 });

    const refund = await admin(
      'settlement',
      'record',
      '--booking',
      b.reference,
      '--kind',
      'refund',
      '--amount',
      '5',
      '--note',
      'late pickup',
    );
    expect(refund.code, refund.stderr).toBe(0);
    const refunded = JSON.parse(refund.stdout);
    expect(refunded).toMatchObject({ kind: 'refund', amountGBP: -5, paymentState: 'due' });

    // The refund was a mistake: a correction that reverses it, pointing at it.
    const fixed = await recordSettlement(
      env.rt.db,
      {
        reference: b.reference,
        kind: 'correction',
        amountPence: 500,
        correctsId: refunded.id,
        note: 'refund reversed',
      },
      'test',
    );
    expect(fixed).toMatchObject({ correctsId: refunded.id, amountGBP: 5, paymentState: 'paid' });

    const rows = await env.rt.db('settlement_records').where({ booking_id: b.id }).orderBy('id');
    expect(rows.map((r) => [r.kind, r.amount_pence, r.corrects_id === null ? null : Number(r.corrects_id)])).toEqual([
      ['cash_received', 1000, null],
      ['card_paid', 1500, null],
      ['refund', -500, null],
      ['correction', 500, refunded.id],
    ]);
    expect(rows[2]).toMatchObject({ recorded_by: 'cli:finance-test', note: 'late pickup' });
    // Never edited in place: the database refuses.
    await expect(
      env.rt.db('settlement_records').where({ id: refunded.id }).update({ amount_pence: 0 }),
    ).rejects.toThrow(/append-only/);
  });

  it('a void makes the booking owe nothing', async () => {
    const b = await booking(1800);
    const v = await recordSettlement(
      env.rt.db,
      { reference: b.reference, kind: 'void', amountPence: 0, note: 'no-show' },
      'test',
    );
    expect(v.paymentState).toBe('void');
  });

  it('refuses what is not a settlement, naming the problem', async () => {
    const b = await booking(1000);
    const other = await booking(1000);
    const [rec] = await env.rt
      .db('settlement_records')
      .insert({ booking_id: other.id, kind: 'cash_received', amount_pence: 1000, recorded_by: 'test' })
      .returning('id');
    const cases: Array<[string[], string]> = [
      [['--booking', b.reference, '--kind', 'tip', '--amount', '1'], 'invalid_input'],
      [['--booking', b.reference, '--kind', 'cash_received', '--amount', '-1'], 'invalid_input'],
      [['--booking', b.reference, '--kind', 'cash_received'], 'invalid_input'],
      [['--booking', b.reference, '--kind', 'cash_received', '--amount', '5', '--fee', '0.20'], 'invalid_input'],
      [['--booking', b.reference, '--kind', 'correction', '--amount', '1'], 'invalid_input'],
      [['--booking', b.reference, '--kind', 'correction', '--amount', '1', '--corrects', String(rec.id)], 'not_found'],
      [['--booking', 'DTN-NOPE00', '--kind', 'cash_received', '--amount', '1'], 'not_found'],
    ];
    for (const [args, code] of cases) {
      const r = await admin('settlement', 'record', ...args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(JSON.parse(r.stderr).error.code, args.join(' ')).toBe(code);
    }
    const n = await env.rt.db('settlement_records').where({ booking_id: b.id }).count({ n: '*' }).first();
    expect(Number(n?.n)).toBe(0);
  });
});
