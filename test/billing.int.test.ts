import { randomBytes, randomUUID } from 'node:crypto';
import { type Job, UnrecoverableError } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BillingWeek, parseWeek, weekBefore } from '../shared/domain/billing/week.ts';
import { londonTime } from '../shared/domain/tariffs/london-time.ts';
import { builtinPaymentProvider, type PaymentProvider } from '../shared/providers/payments.ts';
import {
  chargeInvoices,
  type Invoice,
  issueInvoices,
  listInvoices,
  previewInvoices,
} from '../shared/services/billing.ts';
import { registerWeeklyBilling, runWeeklyBilling, WEEKLY_BILLING_SCHEDULER } from '../workers/billing/billing-jobs.ts';
import type { WorkerContext } from '../workers/context.ts';
import { startRoles } from '../workers/runner.ts';
import { createTestEnv, eventually, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * Weekly billing (SPEC.md 2.10, CONTRACT.md section 8) against real Postgres and Redis: the
 * rides, messages and settlement records are written as the services write them, then billed
 * through the real CLI process, the billing worker and its job scheduler.
 */
let env: TestEnv;
let week: BillingWeek;
const DAY = 86_400_000;

beforeAll(async () => {
  env = await createTestEnv();
  // The week that ended most recently: trials and extensions are relative to now.
  week = parseWeek(weekBefore(Date.now())) as BillingWeek;
});
afterAll(async () => {
  await env?.cleanup();
});

const db = () => env.rt.db;
const admin = (...args: string[]) => runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'finance-test' });
const inWeek = (hours: number) => new Date(week.start.getTime() + hours * 3_600_000);

let seq = 0;
async function driver(name: string, trialEndsAt: Date | null, testMode = false): Promise<string> {
  seq += 1;
  const id = randomUUID();
  await db()('drivers').insert({
    id,
    name,
    phone: `+4477009${String(seq).padStart(5, '0')}`,
    email: `driver${seq}@example.com`,
    status: 'approved',
    licensing_authority: 'Leeds',
    licence_number: `BILL-${seq}-${randomBytes(3).toString('hex')}`,
    licence_expiry: '2030-01-01',
    home_city: 'Leeds',
    home_lat: 53.8,
    home_lng: -1.55,
    operating_radius_miles: 20,
    approved_at: trialEndsAt ? new Date(trialEndsAt.getTime() - 90 * DAY) : new Date(),
    trial_ends_at: trialEndsAt,
    test_mode: testMode,
  });
  return id;
}

async function partner(name: string, createdAt: Date): Promise<string> {
  const id = randomUUID();
  await db()('partners').insert({
    id,
    name,
    signing_secret_sealed: 'x',
    is_operator: true,
    fleet_classes: ['saloon'],
    fleet_capacity: 5,
    created_at: createdAt,
    updated_at: createdAt,
  });
  return id;
}

/** A ride completed at `completedAt` by a driver (or a partner operator's fleet). */
async function ride(
  holder: { driverId?: string; partnerId?: string },
  farePence: number,
  completedAt: Date,
  opts: { testMode?: boolean; status?: string } = {},
): Promise<string> {
  const id = randomUUID();
  const status = opts.status ?? 'completed';
  await db()('bookings').insert({
    id,
    reference: `DTN-${randomBytes(4).toString('hex').toUpperCase()}`,
    origin: 'api',
    status,
    passenger_name: 'Pat Passenger',
    pickup: JSON.stringify({ name: 'Leeds', lat: 53.79, lng: -1.54 }),
    dropoff: JSON.stringify({ name: 'Bradford', lat: 53.79, lng: -1.75 }),
    pickup_time: new Date(completedAt.getTime() - 3_600_000),
    fare_pence: farePence,
    tracking_token_hash: randomBytes(32),
    driver_id: holder.driverId ?? null,
    operator_partner_id: holder.partnerId ?? null,
    status_seq: 2,
    test_mode: opts.testMode ?? false,
  });
  await db()('booking_status_history').insert([
    { booking_id: id, seq: 1, status: 'pending', at: new Date(completedAt.getTime() - 7_200_000) },
    { booking_id: id, seq: 2, status, at: completedAt },
  ]);
  return id;
}

async function sms(
  driverId: string,
  sentAt: Date,
  opts: { channel?: string; state?: string; testMode?: boolean; purpose?: string } = {},
) {
  await db()('outbound_messages').insert({
    id: randomUUID(),
    channel: opts.channel ?? 'sms',
    recipient: '+447700900001',
    body: 'Job card',
    purpose: opts.purpose ?? 'job_card',
    driver_id: driverId,
    state: opts.state ?? 'sent',
    sent_at: sentAt,
    created_at: sentAt,
    test_mode: opts.testMode ?? false,
  });
}

async function cardPayment(bookingId: string, driverId: string, feePence: number, at: Date) {
  await db()('settlement_records').insert({
    booking_id: bookingId,
    driver_id: driverId,
    kind: 'card_paid',
    method: 'card',
    amount_pence: 3000,
    processor_fee_pence: feePence,
    recorded_by: `driver:${driverId}`,
    created_at: at,
  });
}

const byOwner = (list: Invoice[], id: string): Invoice => {
  const found = list.find((i) => i.owner.id === id);
  if (!found) throw new Error(`no invoice for ${id}`);
  return found;
};

const ids: Record<string, string> = {};

describe('weekly billing', () => {
  beforeAll(async () => {
    const longAgo = new Date(week.start.getTime() - 200 * DAY);
    // The £500 threshold, outside the trial: the fee only strictly above £500.
    ids.over = await driver('Olu Over', longAgo);
    await ride({ driverId: ids.over }, 30_000, inWeek(10));
    const card = await ride({ driverId: ids.over }, 20_001, inWeek(50));
    ids.at = await driver('Ada At', longAgo);
    await ride({ driverId: ids.at }, 50_000, inWeek(20));
    ids.under = await driver('Uma Under', longAgo);
    await ride({ driverId: ids.under }, 49_999, inWeek(30));

    // Pass-through lines for Olu: 3 SMS in the week (WhatsApp, failed, test-mode and other
    // weeks' SMS are not billed, nor the approval SMS that carried the driver's token: only
    // messages about jobs are a pass-through), two card fees, one external-platform job fee.
    await sms(ids.over, inWeek(1));
    await sms(ids.over, inWeek(2));
    await sms(ids.over, inWeek(167));
    await sms(ids.over, new Date(week.start.getTime() - 1000));
    await sms(ids.over, week.end);
    await sms(ids.over, inWeek(3), { channel: 'whatsapp' });
    await sms(ids.over, inWeek(4), { state: 'failed' });
    await sms(ids.over, inWeek(5), { testMode: true });
    await sms(ids.over, inWeek(6), { purpose: 'driver_token' });
    await cardPayment(card, ids.over, 45, inWeek(50));
    await cardPayment(card, ids.over, 30, inWeek(51));
    const supplierId = randomUUID();
    await db()('suppliers').insert({
      id: supplierId,
      slug: `ext-${randomBytes(3).toString('hex')}`,
      adapter: 'hmac',
      secret_sealed: 'x',
      external_platform: true,
      job_fee_pence: 150,
    });
    await db()('partner_jobs').insert({
      id: randomUUID(),
      supplier_id: supplierId,
      job_ref: 'EXT-1',
      booking_id: card,
      last_action: 'new',
      content_hash: randomBytes(32),
      payload: JSON.stringify({}),
      job_fee_pence: 150,
    });
    // Not Olu's earnings: a test-mode ride, a ride of the week before, one completed exactly
    // at the week's end, and one still on board.
    await ride({ driverId: ids.over }, 100_000, inWeek(60), { testMode: true });
    await ride({ driverId: ids.over }, 100_000, new Date(week.start.getTime() - 1000));
    await ride({ driverId: ids.over }, 100_000, week.end);
    await ride({ driverId: ids.over }, 100_000, inWeek(70), { status: 'passenger_on_board' });

    // Trials (90 days for drivers): inside, straddling (ends during the week), and ended
    // exactly when the week starts.
    ids.inside = await driver('Ines Inside', new Date(week.end.getTime() + 30 * DAY));
    await ride({ driverId: ids.inside }, 60_000, inWeek(12));
    ids.straddle = await driver('Sam Straddle', inWeek(24));
    await ride({ driverId: ids.straddle }, 60_000, inWeek(100));
    ids.ended = await driver('Eve Ended', week.start);
    await ride({ driverId: ids.ended }, 60_000, inWeek(12));
    // Extended later in this test from the CLI.
    ids.extended = await driver('Xavi Extended', new Date(week.start.getTime() - 10 * DAY));
    await ride({ driverId: ids.extended }, 60_000, inWeek(12));

    // Partner operators (30-day trial from creation, unless set): inside and after.
    ids.newPartner = await partner('New Fleet', new Date(week.start.getTime() - 29 * DAY));
    await ride({ partnerId: ids.newPartner }, 70_000, inWeek(40));
    ids.oldPartner = await partner('Old Fleet', new Date(week.start.getTime() - 31 * DAY));
    await ride({ partnerId: ids.oldPartner }, 70_000, inWeek(40));

    // A card fee entered wrongly (£3.00 for £0.30), corrected by a signed fee change: the week
    // passes through what the corrections leave (£0.30), on 1 card payment.
    ids.corrected = await driver('Cora Corrected', longAgo);
    const typo = await ride({ driverId: ids.corrected }, 10_000, inWeek(80));
    // A reference the CLI reads (this file's rides have made-up ones).
    await db()('bookings').where({ id: typo }).update({ reference: 'DTN-C0RR3C' });
    await cardPayment(typo, ids.corrected, 300, inWeek(80));
    const paid = await db()('settlement_records').where({ booking_id: typo, kind: 'card_paid' }).first('id');
    await db()('settlement_records').insert({
      booking_id: typo,
      driver_id: ids.corrected,
      kind: 'correction',
      amount_pence: 0,
      processor_fee_pence: -270,
      corrects_id: paid.id,
      recorded_by: 'finance-test',
      created_at: inWeek(81),
    });
    ids.correctedBooking = typo;
    ids.correctedRecord = String(paid.id);

    // A test-mode driver is never billed; a driver with only SMS gets an invoice for them.
    ids.sandbox = await driver('Tess Sandbox', longAgo, true);
    await ride({ driverId: ids.sandbox }, 90_000, inWeek(12));
    ids.smsOnly = await driver('Simi SmsOnly', longAgo);
    await sms(ids.smsOnly, inWeek(6));
    await sms(ids.smsOnly, inWeek(7));
  });

  it('dry-run prints the invoices with exact lines and writes nothing', async () => {
    const r = await admin('billing', 'run', '--week', week.week, '--dry-run');
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    const corrected = byOwner(out.invoices, ids.corrected as string);
    expect(corrected.lines).toEqual([
      {
        kind: 'card_processing',
        description: 'Card processing fees on 1 card payment (pass-through)',
        quantity: 1,
        unitGBP: 0.3,
        amountGBP: 0.3,
      },
    ]);
    expect(corrected.totalGBP).toBe(0.3);
    // From the CLI: a fee correction takes back no more than what is left of the record's fee (£0.30).
    const ref = (await db()('bookings').where({ id: ids.correctedBooking }).first('reference')).reference as string;
    const correct = (...fee: string[]) =>
      admin(
        'settlement',
        'record',
        '--booking',
        ref,
        '--kind',
        'correction',
        '--corrects',
        ids.correctedRecord as string,
        ...(fee.length === 1 ? [`--fee=${fee[0]}`] : fee),
      );
    const tooMuch = await correct('-0.40');
    // found in a probe: "--fee -0.40" (the value as its own word) was refused as an ambiguous option
    const spaced = await correct('--fee', '-0.40');
    expect(JSON.parse(spaced.stderr.trim()).error.message).toContain('takes back more than record');
    expect(tooMuch.code).toBe(1);
    expect(JSON.parse(tooMuch.stderr.trim()).error).toMatchObject({ code: 'invalid_input' });
    expect(JSON.parse(tooMuch.stderr.trim()).error.message).toContain('takes back more than record');
    // Taken back to nothing, written now (after the week): the week's invoice is as it was.
    const rest = await correct('-0.30');
    expect(rest.code, rest.stderr).toBe(0);
    expect(JSON.parse(rest.stdout)).toMatchObject({ kind: 'correction', processorFeeGBP: -0.3 });
    expect(out.week).toBe(week.week);
    expect(out.dryRun).toBe(true);
    const over = byOwner(out.invoices, ids.over as string);
    expect(over).toMatchObject({
      id: null,
      state: 'would_issue',
      owner: { kind: 'driver', id: ids.over, name: 'Olu Over' },
      earningsGBP: 500.01,
      completedRides: 2,
      totalGBP: 22.31,
      periodStart: week.start.toISOString(),
      periodEnd: week.end.toISOString(),
    });
    expect(over.lines).toEqual([
      {
        kind: 'subscription_fee',
        description: 'Weekly software fee (earnings above £500)',
        quantity: 1,
        unitGBP: 20,
        amountGBP: 20,
      },
      { kind: 'sms', description: 'SMS messages at £0.02 each', quantity: 3, unitGBP: 0.02, amountGBP: 0.06 },
      {
        kind: 'card_processing',
        description: 'Card processing fees on 2 card payments (pass-through)',
        quantity: 1,
        unitGBP: 0.75,
        amountGBP: 0.75,
      },
      {
        kind: 'external_job_fee',
        description: 'External job platform fees on 1 job',
        quantity: 1,
        unitGBP: 1.5,
        amountGBP: 1.5,
      },
    ]);
    expect(Number((await db()('invoices').count({ n: '*' }).first())?.n)).toBe(0);
  });

  it('charges the fee only above £500 and only for weeks that start after the trial', async () => {
    const r = await admin('billing', 'run', '--week', week.week, '--dry-run');
    const invoices = JSON.parse(r.stdout).invoices as Invoice[];
    const total = (key: string) => byOwner(invoices, ids[key] as string).totalGBP;
    expect(byOwner(invoices, ids.at as string).earningsGBP).toBe(500);
    expect(total('at')).toBe(0);
    expect(byOwner(invoices, ids.under as string).earningsGBP).toBe(499.99);
    expect(total('under')).toBe(0);
    expect(total('inside')).toBe(0);
    expect(total('straddle')).toBe(0);
    expect(total('ended')).toBe(20);
    expect(total('extended')).toBe(20);
    expect(total('newPartner')).toBe(0);
    expect(total('oldPartner')).toBe(20);
    expect(byOwner(invoices, ids.oldPartner as string)).toMatchObject({
      owner: { kind: 'partner', name: 'Old Fleet' },
    });
    expect(total('smsOnly')).toBe(0.04);
    expect(invoices.find((i) => i.owner.id === ids.sandbox)).toBeUndefined();
  });

  // found in a billing probe: extending a trial that had ended waived the weeks not yet billed since it ended
  it('an extension of a trial that had ended starts it again today: the weeks that started since it ended stay billed', async () => {
    const before = Date.now();
    for (const [flag, id] of [
      ['--driver', ids.extended],
      ['--partner', ids.oldPartner],
    ] as const) {
      const r = await admin('trial', 'extend', flag, id as string, '--days', '30');
      expect(r.code, r.stderr).toBe(0);
      expect(Date.parse(JSON.parse(r.stdout).trialEndsAt)).toBeGreaterThanOrEqual(before + 30 * DAY - 1000);
    }
    const r = await admin('billing', 'run', '--week', week.week, '--dry-run');
    const invoices = JSON.parse(r.stdout).invoices;
    expect(byOwner(invoices, ids.extended as string).totalGBP).toBe(20);
    expect(byOwner(invoices, ids.oldPartner as string).totalGBP).toBe(20);
    // the time between is kept: from the old end to the extension
    const lapses = await db()('trial_lapses')
      .where({ driver_id: ids.extended })
      .orWhere({ partner_id: ids.oldPartner })
      .select('starts_at', 'ends_at');
    expect(lapses).toHaveLength(2);
    for (const l of lapses) {
      expect(l.starts_at.getTime()).toBeLessThan(week.start.getTime());
      expect(l.ends_at.getTime()).toBeGreaterThanOrEqual(before - 1000);
    }
    // found in review: a driver with no recorded trial end (approved 200 days ago) recorded no lapse
    const legacy = await driver('Lee Legacy', null);
    await db()('drivers')
      .where({ id: legacy })
      .update({ approved_at: new Date(Date.now() - 200 * DAY) });
    expect((await admin('trial', 'extend', '--driver', legacy, '--days', '10')).code).toBe(0);
    const legacyLapse = await db()('trial_lapses').where({ driver_id: legacy }).first('starts_at');
    expect(Math.abs(legacyLapse.starts_at.getTime() - (Date.now() - 110 * DAY))).toBeLessThan(60_000);
    // extended again while it runs: it runs on, and no lapse is added
    const again = await admin('trial', 'extend', '--driver', ids.extended as string, '--days', '5');
    expect(again.code, again.stderr).toBe(0);
    const n = await db()('trial_lapses').where({ driver_id: ids.extended }).count({ n: '*' }).first();
    expect(Number(n?.n)).toBe(1);
  });

  it('two runs of the same week make one invoice each; a rerun changes nothing already issued', async () => {
    const first = await admin('billing', 'run', '--week', week.week);
    expect(first.code, first.stderr).toBe(0);
    const one = JSON.parse(first.stdout);
    expect(one.issued).toBe(11);
    expect(one.alreadyIssued).toBe(0);
    const over = byOwner(one.invoices, ids.over as string);
    expect(over).toMatchObject({ id: expect.any(String), state: 'issued', totalGBP: 22.31 });
    expect(byOwner(one.invoices, ids.at as string)).toMatchObject({ state: 'paid', totalGBP: 0, lines: [] });
    const countLines = async () =>
      Number((await db()('invoices').select(db().raw('sum(jsonb_array_length(lines))::int as n')).first())?.n);
    const linesBefore = await countLines();

    // A ride reported late for an invoiced driver, and a newly active driver, before the rerun.
    await ride({ driverId: ids.at }, 10_000, inWeek(90));
    ids.late = await driver('Lee Late', new Date(week.start.getTime() - 200 * DAY));
    await ride({ driverId: ids.late }, 80_000, inWeek(90));

    const second = JSON.parse((await admin('billing', 'run', '--week', week.week)).stdout);
    expect(second.issued).toBe(1);
    expect(second.alreadyIssued).toBe(11);
    expect(byOwner(second.invoices, ids.at as string)).toMatchObject({ totalGBP: 0, earningsGBP: 500 });
    expect(byOwner(second.invoices, ids.late as string)).toMatchObject({ totalGBP: 20, earningsGBP: 800 });
    expect(byOwner(second.invoices, ids.over as string)).toEqual(over);
    // A dry run now shows the invoices as issued, not as the week adds up since (Ada's late ride
    // would make her week £600 and a fee): what a run would do is leave them as they are.
    const dry = JSON.parse((await admin('billing', 'run', '--week', week.week, '--dry-run')).stdout);
    const issuedAt = byOwner(second.invoices, ids.at as string);
    expect(byOwner(dry.invoices, ids.at as string)).toMatchObject({
      id: issuedAt.id,
      state: 'already_issued',
      totalGBP: 0,
      earningsGBP: 500,
      lines: [],
    });
    expect(byOwner(dry.invoices, ids.over as string)).toMatchObject({
      id: over.id,
      state: 'already_issued',
      totalGBP: over.totalGBP,
      lines: over.lines,
    });
    // An owner invoiced whose rides no longer count (corrected since: here, marked test-mode) is
    // still shown: the invoice stands.
    const overRides = db()('bookings').where({ driver_id: ids.over });
    const overTexts = db()('outbound_messages').where({ driver_id: ids.over, test_mode: false });
    const texts = await overTexts.clone().pluck('id');
    await overRides.clone().update({ test_mode: true });
    await db()('outbound_messages').whereIn('id', texts).update({ test_mode: true });
    try {
      const corrected = JSON.parse((await admin('billing', 'run', '--week', week.week, '--dry-run')).stdout);
      expect(byOwner(corrected.invoices, ids.over as string)).toMatchObject({
        id: over.id,
        state: 'already_issued',
        totalGBP: over.totalGBP,
      });
    } finally {
      await overRides.clone().update({ test_mode: false });
      await db()('outbound_messages').whereIn('id', texts).update({ test_mode: false });
    }
    // Two runs at the same moment still make one invoice per driver.
    const racing = await Promise.all([issueInvoices(db(), week), issueInvoices(db(), week)]);
    expect(racing.map((x) => x.issued)).toEqual([0, 0]);
    const perOwner = await db()('invoices')
      .where({ week: week.week })
      .groupByRaw('coalesce(driver_id, partner_id)')
      .select(db().raw('count(*)::int as n'));
    expect(perOwner).toHaveLength(12);
    expect(perOwner.every((p) => p.n === 1)).toBe(true);
    // Lee's one line (the fee) is the only one added.
    expect(await countLines()).toBe(linesBefore + 1);
  });

  it('the billing worker charges issued invoices through the provider (built in: due)', async () => {
    // The CLI runs queued charge-invoices jobs in the outbox; the relay and the billing role run them.
    const running = startRoles(['billing', 'outbox-relay'], env.rt);
    try {
      await eventually(async () => {
        const open = await db()('invoices').where({ week: week.week, state: 'issued' }).count({ n: '*' }).first();
        return Number(open?.n) === 0;
      });
      const invoices = await listInvoices(db(), week.week);
      expect(byOwner(invoices, ids.over as string)).toMatchObject({ state: 'due', chargeAttempts: 1 });
      expect(byOwner(invoices, ids.late as string)).toMatchObject({ state: 'due', chargeAttempts: 1 });
      expect(byOwner(invoices, ids.at as string)).toMatchObject({ state: 'paid', chargeAttempts: 0 });
      // Each driver charged is e-mailed the invoice once, with its lines, total and how to pay it;
      // one owing nothing (Ada, paid without a charge) is not.
      const over = byOwner(invoices, ids.over as string);
      const mails = await db()('outbound_messages').where({ purpose: 'invoice', driver_id: ids.over });
      expect(mails).toHaveLength(1);
      const overDriver = await db()('drivers').where({ id: ids.over }).first('email');
      expect(mails[0]).toMatchObject({ channel: 'email', recipient: overDriver.email });
      expect(mails[0].subject).toBe(`Your Direct Taxi Network invoice for ${week.week}: £22.31`);
      expect(mails[0].body).toContain('- Weekly software fee (earnings above £500): £20.00');
      expect(mails[0].body).toContain('- Card processing fees on 2 card payments (pass-through): £0.75');
      expect(mails[0].body).toContain('Total: £22.31');
      expect(mails[0].body).toContain(`quoting ${over.id}`);
      expect(await db()('outbound_messages').where({ purpose: 'invoice', driver_id: ids.at })).toHaveLength(0);

      // The weekly scheduler is registered with its pattern and time zone, and its next run
      // is due at a Monday 02:00 in London.
      const scheduler = await eventually(() => env.rt.queues.billing.getJobScheduler(WEEKLY_BILLING_SCHEDULER));
      expect(scheduler).toMatchObject({ pattern: '0 2 * * 1', tz: 'Europe/London', name: 'run-weekly-billing' });
      const next = londonTime(scheduler.next as number);
      expect([next.weekday, next.minutes]).toEqual([0, 120]);
      // Registering again (every billing worker does at start) keeps one scheduler, and leaves
      // its pending run alone: replacing it would drop a run that fell due while no worker ran.
      const pending = async () =>
        (await env.rt.queues.billing.getDelayed())
          .filter((j) => j.name === 'run-weekly-billing')
          .map((j) => [j.id, j.timestamp]);
      const before = await pending();
      expect(before).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 20));
      expect(await registerWeeklyBilling(env.rt.queues.billing)).toEqual({ registered: false, overdue: null });
      expect(await env.rt.queues.billing.getJobSchedulersCount()).toBe(1);
      expect(await pending()).toEqual(before);
    } finally {
      await running.close();
    }
  });

  it('a run for a week that does not exist fails for good, not retried for hours', async () => {
    const job = { opts: {}, timestamp: Date.now() } as unknown as Job;
    const run = runWeeklyBilling({ week: '2025-W53' }, { ...env.rt, payments: builtinPaymentProvider() }, job);
    await expect(run).rejects.toThrow(UnrecoverableError);
    await expect(run).rejects.toThrow(/not a billing week: 2025-W53/);
  });

  it('a changed schedule whose run is overdue queues that run on its own before it is replaced', async () => {
    const queue = env.rt.queues.billing;
    await queue.upsertJobScheduler(
      WEEKLY_BILLING_SCHEDULER,
      { pattern: '0 3 * * 1', tz: 'Europe/London' },
      { name: 'run-weekly-billing', data: {} },
    );
    const old = await queue.getJobScheduler(WEEKLY_BILLING_SCHEDULER);
    const dueAt = old?.next as number;
    // A billing worker starting a minute after that run fell due, with the schedule changed meanwhile.
    const registered = await registerWeeklyBilling(queue, dueAt + 60_000);
    expect(registered).toEqual({ registered: true, overdue: weekBefore(dueAt) });
    const job = await queue.getJob(`weekly-billing-${weekBefore(dueAt)}`);
    expect(job?.data).toEqual({ week: weekBefore(dueAt) });
    await job?.remove();
    expect(await queue.getJobScheduler(WEEKLY_BILLING_SCHEDULER)).toMatchObject({ pattern: '0 2 * * 1' });
    expect(await queue.getJobSchedulersCount()).toBe(1);
  });

  it('a failed charge is recorded, visible and retried until it succeeds', async () => {
    const failing = await driver('Fay Failing', new Date(week.start.getTime() - 200 * DAY));
    const next = parseWeek(weekBefore(week.end.getTime() + 7 * DAY)) as BillingWeek;
    await ride({ driverId: failing }, 60_000, new Date(next.start.getTime() + 3_600_000));
    let calls = 0;
    const flaky: PaymentProvider = {
      name: 'flaky',
      async charge(charges) {
        calls += 1;
        return charges.map((c) =>
          calls === 1 ? { invoiceId: c.invoiceId, error: 'card declined' } : { invoiceId: c.invoiceId, state: 'paid' },
        );
      },
    };
    // The scheduled job, as BullMQ hands it over: due at Monday 02:00 after `next` ended.
    const job = { opts: { prevMillis: next.end.getTime() + 2 * 3_600_000 }, timestamp: Date.now() } as unknown as Job;
    const ctx: WorkerContext = { ...env.rt, payments: flaky };
    // Olu's SMS and ride at the very end of the last week belong to this one: two invoices.
    await expect(runWeeklyBilling({}, ctx, job)).rejects.toThrow(/2 invoice charge\(s\) failed/);
    expect(byOwner(await listInvoices(db(), next.week), failing)).toMatchObject({
      owner: { id: failing },
      state: 'charge_failed',
      chargeAttempts: 1,
      lastChargeError: 'card declined',
      totalGBP: 20,
    });
    const csv = await admin('billing', 'export', '--week', next.week);
    expect(csv.stdout).toContain(',charge_failed,1,card declined,');

    // BullMQ's retry runs the job again: nothing is issued twice, the charge goes through.
    const retried = (await runWeeklyBilling({}, ctx, job)) as { issued: number; charged: number };
    expect(retried).toMatchObject({ week: next.week, issued: 0, charged: 2 });
    expect(byOwner(await listInvoices(db(), next.week), failing)).toMatchObject({
      state: 'paid',
      chargeAttempts: 2,
      lastChargeError: null,
    });
    // Nothing left to charge.
    expect(await chargeInvoices(db(), flaky)).toEqual({ charged: 0, failed: 0 });
  });

  it('exports a week as CSV for finance', async () => {
    const r = await admin('billing', 'export', '--week', week.week);
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.trimEnd().split('\r\n');
    expect(rows[0]).toBe(
      'invoice_id,week,owner_kind,owner_id,owner_name,period_start,period_end,completed_rides,earnings_gbp,' +
        'subscription_fee_gbp,sms_count,sms_gbp,card_processing_gbp,external_job_fee_gbp,total_gbp,state,' +
        'charge_attempts,last_charge_error,issued_at',
    );
    expect(rows).toHaveLength(13);
    const over = rows.find((row) => row.includes(ids.over as string))?.split(',');
    expect(over?.slice(1, 17)).toEqual([
      week.week,
      'driver',
      ids.over,
      'Olu Over',
      week.start.toISOString(),
      week.end.toISOString(),
      '2',
      '500.01',
      '20.00',
      '3',
      '0.06',
      '0.75',
      '1.50',
      '22.31',
      'due',
      '1',
    ]);
  });

  it('finance marks a due invoice paid, or voids one, from the CLI, recorded in the audit log', async () => {
    const invoices = await listInvoices(db(), week.week);
    const over = byOwner(invoices, ids.over as string);
    const late = byOwner(invoices, ids.late as string);
    expect([over.state, late.state]).toEqual(['due', 'due']);

    const paid = await admin('billing', 'mark-paid', over.id as string, '--note', 'bank transfer 2026-11-20');
    expect(paid.code, paid.stderr).toBe(0);
    expect(JSON.parse(paid.stdout)).toEqual({
      id: over.id,
      week: week.week,
      state: 'paid',
      previousState: 'due',
      changed: true,
    });
    // The same decision again changes nothing; a paid invoice cannot be voided.
    const again = await admin('billing', 'mark-paid', over.id as string);
    expect(JSON.parse(again.stdout)).toMatchObject({ state: 'paid', changed: false });
    const voidPaid = await admin('billing', 'void', over.id as string, '--note', 'oops');
    expect(voidPaid.code).toBe(1);
    expect(JSON.parse(voidPaid.stderr)).toMatchObject({ error: { code: 'conflict' } });

    // Voiding needs a reason.
    const noReason = await admin('billing', 'void', late.id as string);
    expect(noReason.code).toBe(1);
    expect(JSON.parse(noReason.stderr)).toMatchObject({ error: { code: 'invalid_input' } });
    const voided = await admin('billing', 'void', late.id as string, '--note', 'billed in error');
    expect(JSON.parse(voided.stdout)).toMatchObject({ state: 'void', previousState: 'due', changed: true });
    const unknown = await admin('billing', 'mark-paid', '00000000-0000-4000-8000-000000000000');
    expect(JSON.parse(unknown.stderr)).toMatchObject({ error: { code: 'not_found' } });

    expect(byOwner(await listInvoices(db(), week.week), ids.over as string).state).toBe('paid');
    const audit = await db()('audit_log')
      .whereIn('subject_id', [over.id, late.id])
      .whereIn('action', ['invoice.paid', 'invoice.void'])
      .orderBy('id')
      .select('actor', 'action', 'details');
    expect(audit).toEqual([
      {
        actor: 'cli:finance-test',
        action: 'invoice.paid',
        details: { week: week.week, previousState: 'due', note: 'bank transfer 2026-11-20' },
      },
      {
        actor: 'cli:finance-test',
        action: 'invoice.void',
        details: { week: week.week, previousState: 'due', note: 'billed in error' },
      },
    ]);
  });

  it('takes a driver without a recorded trial end as in trial for 90 days from approval', async () => {
    const earlier = parseWeek(weekBefore(week.start)) as BillingWeek;
    const fresh = await driver('Nia NoTrial', null);
    await db()('drivers').where({ id: fresh }).update({ approved_at: new Date() });
    const veteran = await driver('Vic NoTrial', null);
    await db()('drivers')
      .where({ id: veteran })
      .update({ approved_at: new Date(earlier.start.getTime() - 200 * DAY) });
    for (const id of [fresh, veteran])
      await ride({ driverId: id }, 60_000, new Date(earlier.start.getTime() + 3_600_000));
    const preview = await previewInvoices(db(), earlier);
    expect(byOwner(preview, fresh).totalGBP).toBe(0);
    expect(byOwner(preview, veteran).totalGBP).toBe(20);
  });

  it('refuses a malformed week, and a real run of a week that has not ended', async () => {
    const current = parseWeek(weekBefore(Date.now() + 7 * DAY)) as BillingWeek;
    const early = await admin('billing', 'run', '--week', current.week);
    expect(early.code).toBe(1);
    expect(JSON.parse(early.stderr).error).toMatchObject({
      code: 'invalid_input',
      message: expect.stringMatching(/ended/),
    });
    for (const bad of ['2026-47', '2027-W53']) {
      const r = await admin('billing', 'run', '--week', bad);
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stderr).error).toMatchObject({ code: 'invalid_input' });
    }
  });
});
