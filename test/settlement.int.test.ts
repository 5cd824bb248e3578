import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSettlement } from '../shared/services/settlement.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * Settlement records from operators and finance: append-only payment events on a booking
 * (payments, refunds, corrections pointing at what they correct, voids) and the payment state
 * derived from them; through the real CLI and against the database's own refusal to edit.
 */
let env: TestEnv;
/** The driver who drove the test bookings (a payment is taken by whoever holds the job). */
let driverId: string;
beforeAll(async () => {
  env = await createTestEnv();
  driverId = (await approvedDriver(env.rt.db)).id;
});
afterAll(async () => {
  await env?.cleanup();
});

const admin = (...args: string[]) => runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'finance-test' });

const record = (input: Parameters<typeof recordSettlement>[1]) =>
  recordSettlement(env.rt.db, input, 'test', env.config.bookings.referencePrefix);

async function booking(
  farePence: number,
  opts: { reference?: string; status?: string; driver?: boolean } = {},
): Promise<{ id: string; reference: string }> {
  const id = randomUUID();
  const reference = opts.reference ?? `DTN-${randomBytes(3).toString('hex').toUpperCase()}`;
  await env.rt.db('bookings').insert({
    id,
    reference,
    origin: 'api',
    status: opts.status ?? 'completed',
    driver_id: opts.driver === false ? null : driverId,
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
    const rest = await record({ reference: b.reference, kind: 'card_paid', amountPence: 1500, processorFeePence: 26 });
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
    const fixed = await record({
      reference: b.reference,
      kind: 'correction',
      amountPence: 500,
      correctsId: refunded.id,
      note: 'refund reversed',
    });
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
    const v = await record({ reference: b.reference, kind: 'void', amountPence: 0, note: 'no-show' });
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
      [['--booking', 'DTN-NOPE00', '--kind', 'cash_received', '--amount', '1'], 'booking_not_found'],
      // A card fee over the amount paid (5 typed for 0.05), refused as the driver app refuses it.
      [['--booking', b.reference, '--kind', 'card_paid', '--amount', '1', '--fee', '5'], 'invalid_input'],
    ];
    for (const [args, code] of cases) {
      const r = await admin('settlement', 'record', ...args);
      expect(r.code, args.join(' ')).toBe(1);
      const { error } = JSON.parse(r.stderr);
      expect(error.code, args.join(' ')).toBe(code);
      expect(error.message, args.join(' ')).not.toMatch(/insert into|select |out of range for type/i);
    }
    // An id no column holds: refused naming the option, not passed to the database.
    const corrects = await admin(
      'settlement',
      'record',
      '--booking',
      b.reference,
      '--kind',
      'correction',
      '--amount=-1.00',
      '--corrects',
      '99999999999999999999',
    );
    expect(JSON.parse(corrects.stderr).error).toMatchObject({
      code: 'invalid_input',
      message: expect.stringContaining('--corrects'),
    });
    const n = await env.rt.db('settlement_records').where({ booking_id: b.id }).count({ n: '*' }).first();
    expect(Number(n?.n)).toBe(0);
  });

  // found in a billing probe: a correction could give a cash payment a card fee, or a card payment one over what was paid
  it("corrects only a card payment's processor fee, to no more than the amount paid", async () => {
    const cashRide = await booking(1000);
    const cash = await record({ reference: cashRide.reference, kind: 'cash_received', amountPence: 1000 });
    await expect(
      record({
        reference: cashRide.reference,
        kind: 'correction',
        amountPence: 0,
        processorFeePence: 400,
        correctsId: cash.id,
      }),
    ).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining('cash received') });

    const cardRide = await booking(1000);
    const card = await record({
      reference: cardRide.reference,
      kind: 'card_paid',
      amountPence: 1000,
      processorFeePence: 20,
    });
    const fix = (processorFeePence: number, amountPence = 0) =>
      record({
        reference: cardRide.reference,
        kind: 'correction',
        amountPence,
        processorFeePence,
        correctsId: card.id,
      });
    await expect(fix(50_000)).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringContaining('more than the amount paid (£10.00)'),
    });
    // up to the amount paid, with an amount correction counted in
    await expect(fix(990, -10)).rejects.toMatchObject({ code: 'invalid_input' });
    expect(await fix(30)).toMatchObject({ kind: 'correction', processorFeeGBP: 0.3 });
    // a correction is corrected through the payment it corrects
    const second = await fix(-10);
    await expect(
      record({
        reference: cardRide.reference,
        kind: 'correction',
        amountPence: 0,
        processorFeePence: 5,
        correctsId: second.id,
      }),
    ).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining("only a card payment's") });
    // found in review: a correction of the amount alone could leave the fee above what was paid
    await expect(fix(0, -990)).rejects.toMatchObject({
      code: 'invalid_input',
      message: expect.stringContaining('more than the amount paid'),
    });
    const fees = await env.rt
      .db('settlement_records')
      .whereIn('booking_id', [cashRide.id, cardRide.id])
      .sum({ n: 'processor_fee_pence' })
      .first();
    expect(Number(fees?.n)).toBe(40);
  });

  // found in a probe: refunds were not capped, so £246 was refunded against £49.20 paid, six at once or one by one
  it('refunds no more than the payments net of refunds, even when refunds are sent together; corrections keep a sign', async () => {
    const ride = await booking(4920);
    const paid = await record({ reference: ride.reference, kind: 'card_paid', amountPence: 4920 });
    const six = await Promise.allSettled(
      Array.from({ length: 6 }, () => record({ reference: ride.reference, kind: 'refund', amountPence: 4920 })),
    );
    expect(six.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of six.filter((x) => x.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({
        code: 'invalid_input',
        message: expect.stringContaining('net of refunds (£0.00)'),
      });
    }
    const net = await env.rt.db('settlement_records').where({ booking_id: ride.id }).sum({ n: 'amount_pence' }).first();
    expect(Number(net?.n)).toBe(0);
    // Nor through the CLI, one at a time.
    const cli = await admin(
      'settlement',
      'record',
      '--booking',
      ride.reference,
      '--kind',
      'refund',
      '--amount',
      '10.00',
    );
    expect(cli.code).toBe(1);
    expect(JSON.parse(cli.stderr).error.code).toBe('invalid_input');
    // A correction takes a payment to no less than nothing, a refund to no more.
    await expect(
      record({ reference: ride.reference, kind: 'correction', amountPence: -5000, correctsId: paid.id }),
    ).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining('past nothing') });
  });

  it('reads a booking reference as the API does: any case, I/L/O for 1/1/0, without prefix or hyphen', async () => {
    const code = `1${randomBytes(2).toString('hex').toUpperCase()}0`;
    const b = await booking(1000, { reference: `DTN-${code}` });
    await env.rt
      .db('settlement_records')
      .insert({ booking_id: b.id, kind: 'cash_received', amount_pence: 1000, recorded_by: 'test' });
    const typed = `i${code.slice(1, 5).toLowerCase()}o`;
    for (const ref of [`dtn-${typed}`, typed, `DTN${code}`, ` ${code.toLowerCase()} `]) {
      const r = await admin('settlement', 'record', '--booking', ref, '--kind', 'refund', '--amount', '0.01');
      expect(r.code, `${ref}: ${r.stderr}`).toBe(0);
      expect(JSON.parse(r.stdout).bookingReference).toBe(b.reference);
    }
    await expect(record({ reference: 'not a reference', kind: 'void', amountPence: 0 })).rejects.toMatchObject({
      code: 'booking_not_found',
    });
  });

  it('refuses a payment on a booking no driver or operator holds; refunds, voids and corrections still apply', async () => {
    const b = await booking(2000, { status: 'no_driver_available', driver: false });
    for (const kind of ['cash_received', 'card_paid', 'pay_link_paid', 'bank_transfer_received']) {
      const r = await admin('settlement', 'record', '--booking', b.reference, '--kind', kind, '--amount', '20');
      expect(r.code, kind).toBe(1);
      expect(JSON.parse(r.stderr).error, kind).toMatchObject({
        code: 'conflict',
        message: expect.stringContaining('no driver available'),
      });
    }
    // A payment taken while a driver held it, before it was handed back: still refundable.
    await env.rt
      .db('settlement_records')
      .insert({ booking_id: b.id, kind: 'cash_received', amount_pence: 2000, recorded_by: 'test' });
    const refund = await record({ reference: b.reference, kind: 'refund', amountPence: 500 });
    const corrected = await record({
      reference: b.reference,
      kind: 'correction',
      amountPence: 500,
      correctsId: refund.id,
    });
    expect(corrected).toMatchObject({ correctsId: refund.id, amountGBP: 5 });
    expect((await record({ reference: b.reference, kind: 'void', amountPence: 0 })).paymentState).toBe('void');
  });
});
