import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Db, Queryable, Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import type { BillingWeek } from '../domain/billing/week.ts';
import type { Logger } from '../logger.ts';
import type { ChargeOutcome, PaymentProvider } from '../providers/payments.ts';
import { DRIVER_TRIAL_DAYS } from './drivers.ts';
import { queueMessage } from './messages.ts';
import { PARTNER_TRIAL_DAYS } from './partners.ts';

/**
 * Weekly billing (SPEC.md 2.10, CONTRACT.md section 8). Per driver, and per partner operator
 * that fulfils rides itself, for one billing week:
 * - earnings: the fares of their rides completed in the week (by the time the ride was
 *   completed), never collected by us;
 * - the flat £20 fee when earnings are strictly above £500 and the week starts after the trial
 *   has ended (drivers: 90 days from approval; partners: 30 days from creation; both as
 *   extended by an administrator);
 * - pass-through costs, always: SMS sent for them at £0.02 each, card processors' fees from
 *   their settlement records, and the external job platform's fee for each of their completed
 *   rides that came from it.
 * Whoever had any of these in the week gets exactly one invoice for it, whatever the number of
 * runs: the run's invoice insert skips owners already invoiced for the week (a unique index
 * decides); each invoice carries its lines (a JSON array, written once with it). An
 * invoice with nothing to pay is issued as `paid`; the others are `issued`, then charged
 * through the payment provider (`due` or `paid`, or `charge_failed` and retried).
 * Test-mode rides, messages and drivers never appear in billing.
 */
export const WEEKLY_FEE_PENCE = 2000;
export const FEE_THRESHOLD_PENCE = 50_000;
export const SMS_UNIT_PENCE = 2;

/**
 * What a week's invoices are made of, as CTEs over one `period` row, up to each owner's totals. Each source is a
 * range scan on its time index (migrations/20261123001100_billing-run.ts); owners are keyed
 * by `owner_id` (a driver's or a partner's id: UUIDs do not collide).
 */
const TOTALS = `
period as (select ?::timestamptz as s, ?::timestamptz as e, ?::text as week),
rides as (
  select coalesce(b.driver_id, b.operator_partner_id) as owner_id, b.driver_id is null as is_partner,
         coalesce(sum(b.fare_pence), 0)::bigint as earnings, count(*)::int as rides,
         coalesce(sum(pj.job_fee_pence), 0)::bigint as ext_fees, count(pj.booking_id)::int as ext_jobs
    from booking_status_history h
    join bookings b on b.id = h.booking_id
    -- One fee row per booking, whatever the number of job rows that name it (never two earnings).
    left join (select booking_id, sum(job_fee_pence) as job_fee_pence
                 from partner_jobs where job_fee_pence > 0 and booking_id is not null
                group by booking_id) pj on pj.booking_id = b.id
   where h.status = 'completed' and h.at >= ?::timestamptz and h.at < ?::timestamptz
     and not b.test_mode and (b.driver_id is not null or b.operator_partner_id is not null)
   group by 1, 2
),
sms as (
  select coalesce(m.driver_id, m.partner_id) as owner_id, m.driver_id is null as is_partner, count(*)::int as sms
    from outbound_messages m
   where m.channel = 'sms' and m.state = 'sent' and m.sent_at >= ?::timestamptz and m.sent_at < ?::timestamptz
     -- Only SMS about jobs are a pass-through (SPEC.md 2.10): job cards, job cancellations and
     -- changes, and tier-3 operator alerts; our own account messages (the approval with the
     -- driver's token) are not.
     and m.purpose in ('job_card', 'job_cancelled', 'job_changed', 'operator_alert')
     and not m.test_mode and (m.driver_id is not null or m.partner_id is not null)
   group by 1, 2
),
fees as (
  select coalesce(r.driver_id, r.partner_id) as owner_id, r.driver_id is null as is_partner,
         -- A correction's fee is signed (a fee entered wrongly taken back); a week is never
         -- credited below nothing for it.
         greatest(sum(r.processor_fee_pence), 0)::bigint as card_fees,
         count(*) filter (where r.kind = 'card_paid')::int as card_payments
    from settlement_records r
   where r.processor_fee_pence <> 0 and r.created_at >= ?::timestamptz and r.created_at < ?::timestamptz
     and (r.driver_id is not null or r.partner_id is not null)
     and not exists (select 1 from bookings tb where tb.id = r.booking_id and tb.test_mode)
   group by 1, 2
),
totals as (
  select owner_id, is_partner,
         sum(earnings)::bigint as earnings, sum(rides)::int as rides, sum(sms)::int as sms,
         sum(card_fees)::bigint as card_fees, sum(card_payments)::int as card_payments,
         sum(ext_fees)::bigint as ext_fees, sum(ext_jobs)::int as ext_jobs
    from (select owner_id, is_partner, earnings, rides, 0 as sms, 0::bigint as card_fees, 0 as card_payments, ext_fees, ext_jobs from rides
          union all
          select owner_id, is_partner, 0, 0, sms, 0, 0, 0, 0 from sms
          union all
          select owner_id, is_partner, 0, 0, 0, card_fees, card_payments, 0, 0 from fees) a
   group by 1, 2
)`;

/**
 * Fee and total per owner, from a relation with `totals`' columns: the trial (drivers: their
 * `trial_ends_at`; partners: theirs, else 30 days from creation; a week that started while the
 * trial had lapsed, before it was extended again, is after it: `trial_lapses`) and the £500
 * threshold decide the fee. Needs the `period` CTE.
 */
const PRICING = (source: string) => `
priced as (
  select t.*,
         case when t.is_partner then null else t.owner_id end as driver_id,
         case when t.is_partner then t.owner_id end as partner_id,
         coalesce(d.name, p.name) as owner_name,
         (t.earnings > ${FEE_THRESHOLD_PENCE}
           and (period.s >= case when t.is_partner
                                 then coalesce(p.trial_ends_at, p.created_at + interval '${PARTNER_TRIAL_DAYS} days')
                                 -- A driver without a recorded trial end: 90 days from approval, else none billed.
                                 else coalesce(d.trial_ends_at, d.approved_at + interval '${DRIVER_TRIAL_DAYS} days', 'infinity'::timestamptz)
                            end
                -- or the week started while the trial had lapsed, before it was extended again
                or exists (select 1 from trial_lapses l
                             where (case when t.is_partner then l.partner_id else l.driver_id end) = t.owner_id
                               and period.s >= l.starts_at and period.s < l.ends_at))
         ) as fee_due
    from period, ${source} t
    left join drivers d on d.id = t.owner_id and not t.is_partner
    left join partners p on p.id = t.owner_id and t.is_partner
   where not coalesce(d.test_mode, false)
),
charged as (
  select pr.*, (case when pr.fee_due then ${WEEKLY_FEE_PENCE} else 0 end
                + pr.sms * ${SMS_UNIT_PENCE} + pr.card_fees + pr.ext_fees)::bigint as total_pence
    from priced pr
)`;

/** One invoice line as JSON, when its amount is above zero (else an empty array). */
const line = (kind: string, description: string, quantity: string, unit: string, amount: string) => `
  case when (${amount}) > 0 then jsonb_build_array(jsonb_build_object(
    'kind', '${kind}', 'description', ${description}, 'quantity', ${quantity},
    'unit_pence', ${unit}, 'amount_pence', ${amount})) else '[]'::jsonb end`;

/**
 * An owner's invoice lines, in order, as the JSON array stored on the invoice (`c` is a row
 * with `charged`'s columns): the fee, SMS, card processing, external job fees; only those with
 * an amount.
 */
const LINES_JSON = `(${[
  line(
    'subscription_fee',
    "'Weekly software fee (earnings above £500)'",
    '1',
    `${WEEKLY_FEE_PENCE}`,
    `case when c.fee_due then ${WEEKLY_FEE_PENCE} else 0 end`,
  ),
  line('sms', "'SMS messages at £0.02 each'", 'c.sms', `${SMS_UNIT_PENCE}`, `c.sms * ${SMS_UNIT_PENCE}`),
  line(
    'card_processing',
    "format('Card processing fees on %s card payment%s (pass-through)', c.card_payments, case when c.card_payments = 1 then '' else 's' end)",
    '1',
    'c.card_fees',
    'c.card_fees',
  ),
  line(
    'external_job_fee',
    "format('External job platform fees on %s job%s', c.ext_jobs, case when c.ext_jobs = 1 then '' else 's' end)",
    '1',
    'c.ext_fees',
    'c.ext_fees',
  ),
].join(' ||')})`;

/**
 * The period's bounds are repeated as parameters in each source's own condition (not only read
 * from the `period` row) so that the planner sees them and estimates the week's rows: with the
 * bounds hidden in a CTE it guessed a tenth of the rows and chose index lookups per ride.
 */
const periodBindings = (w: BillingWeek): Knex.RawBinding[] => [
  w.start,
  w.end,
  w.week,
  ...Array(3).fill([w.start, w.end]).flat(),
];

export interface InvoiceLine {
  kind: 'subscription_fee' | 'sms' | 'card_processing' | 'external_job_fee';
  description: string;
  quantity: number;
  unitGBP: number;
  amountGBP: number;
}

export interface Invoice {
  /** null in a dry run (nothing written). */
  id: string | null;
  week: string;
  owner: { kind: 'driver' | 'partner'; id: string; name: string | null };
  periodStart: string;
  periodEnd: string;
  earningsGBP: number;
  completedRides: number;
  totalGBP: number;
  /** `would_issue` or `already_issued` in a dry run. */
  state: string;
  chargeAttempts: number;
  lastChargeError: string | null;
  issuedAt: string | null;
  lines: InvoiceLine[];
}

const gbp = (pence: number | string) => Number(pence) / 100;

interface LineRow {
  kind: InvoiceLine['kind'];
  description: string;
  quantity: number;
  unit_pence: number | string;
  amount_pence: number | string;
}

const toLines = (rows: LineRow[] | null): InvoiceLine[] =>
  (rows ?? []).map((l) => ({
    kind: l.kind,
    description: l.description,
    quantity: Number(l.quantity),
    unitGBP: gbp(l.unit_pence),
    amountGBP: gbp(l.amount_pence),
  }));

interface OwnerRow {
  driver_id: string | null;
  partner_id: string | null;
  owner_name: string | null;
}

interface PreviewRow extends OwnerRow {
  earnings: string;
  rides: number;
  total_pence: string;
  lines: LineRow[] | null;
  /** The week's invoice already issued to the owner, if any: shown as it was issued. */
  issued: {
    id: string;
    earnings_pence: number;
    completed_rides: number;
    total_pence: number;
    charge_attempts: number;
    last_charge_error: string | null;
    issued_at: string;
    lines: LineRow[] | null;
  } | null;
}

interface InvoiceRow extends OwnerRow {
  id: string;
  week: string;
  period_start: Date;
  period_end: Date;
  earnings_pence: number;
  completed_rides: number;
  total_pence: number;
  state: string;
  charge_attempts: number;
  last_charge_error: string | null;
  issued_at: Date;
  lines: LineRow[] | null;
}

function owner(row: OwnerRow) {
  return row.driver_id
    ? { kind: 'driver' as const, id: row.driver_id, name: row.owner_name }
    : { kind: 'partner' as const, id: row.partner_id as string, name: row.owner_name };
}

/** An issued invoice (`i`) as `previewInvoices` shows it. */
const ISSUED_JSON = `jsonb_build_object('id', i.id, 'earnings_pence', i.earnings_pence,
  'completed_rides', i.completed_rides, 'total_pence', i.total_pence, 'charge_attempts', i.charge_attempts,
  'last_charge_error', i.last_charge_error, 'issued_at', i.issued_at, 'lines', i.lines)`;

/**
 * What a run of the week would issue, without writing anything (`billing run --dry-run`). An
 * owner already invoiced for the week is shown with that invoice as issued (`already_issued`,
 * its id, figures and lines): a run leaves it exactly as it is, whatever the week's rides add up
 * to now (a fare corrected since, say).
 */
export async function previewInvoices(db: Queryable, w: BillingWeek): Promise<Invoice[]> {
  const { rows } = await db.raw(
    `with ${TOTALS},
     ${PRICING('totals')}
     select c.driver_id, c.partner_id, c.owner_name, c.earnings, c.rides, c.total_pence,
            ${LINES_JSON} as lines,
            (select ${ISSUED_JSON}
               from invoices i, period
              where i.week = period.week and coalesce(i.driver_id, i.partner_id) = c.owner_id
              limit 1) as issued
       from charged c
     union all
     -- Invoiced for the week, with nothing to charge any more (rides corrected since): the
     -- invoice stands, so the preview shows it.
     select i.driver_id, i.partner_id, coalesce(d.name, p.name), 0::bigint, 0, 0::bigint, '[]'::jsonb, ${ISSUED_JSON}
       from invoices i
       join period on i.week = period.week
       left join drivers d on d.id = i.driver_id
       left join partners p on p.id = i.partner_id
      where not exists (select 1 from charged c where c.owner_id = coalesce(i.driver_id, i.partner_id))
      order by owner_name, driver_id, partner_id`,
    periodBindings(w),
  );
  return (rows as PreviewRow[]).map((r) => {
    const i = r.issued;
    return {
      id: i?.id ?? null,
      week: w.week,
      owner: owner(r),
      periodStart: w.start.toISOString(),
      periodEnd: w.end.toISOString(),
      earningsGBP: gbp(i ? i.earnings_pence : r.earnings),
      completedRides: Number(i ? i.completed_rides : r.rides),
      totalGBP: gbp(i ? i.total_pence : r.total_pence),
      state: i ? 'already_issued' : 'would_issue',
      chargeAttempts: i?.charge_attempts ?? 0,
      lastChargeError: i?.last_charge_error ?? null,
      issuedAt: i ? new Date(i.issued_at).toISOString() : null,
      lines: toLines(i ? i.lines : r.lines),
    };
  });
}

/**
 * Issue the week's invoices: owners already invoiced for the week are left exactly as they
 * are; each new invoice is written with its lines. Two statements in one transaction: the
 * week's totals are computed into a temporary table first, because
 * `CREATE TABLE AS` may run in parallel where a data-modifying statement may not (on two cores
 * this halves the aggregation), and the table's statistics then give the insert a good plan.
 */
export async function issueInvoices(db: Queryable, w: BillingWeek): Promise<{ issued: number; lines: number }> {
  const run = async (trx: Knex.Transaction) => {
    const table = `billing_run_${randomBytes(6).toString('hex')}`;
    await trx.raw(
      `create temporary table ${table} on commit drop as with ${TOTALS} select * from totals`,
      periodBindings(w),
    );
    await trx.raw(`analyze ${table}`);
    const { rows } = await trx.raw(
      `with period as (select ?::timestamptz as s, ?::timestamptz as e, ?::text as week),
       ${PRICING(table)},
       ins as (
         insert into invoices (id, driver_id, partner_id, week, period_start, period_end,
                               earnings_pence, completed_rides, total_pence, state, charged_at, lines)
         select gen_random_uuid(), c.driver_id, c.partner_id, period.week, period.s, period.e,
                c.earnings, c.rides, c.total_pence,
                case when c.total_pence = 0 then 'paid' else 'issued' end,
                case when c.total_pence = 0 then now() end,
                ${LINES_JSON}
           from period, charged c
         on conflict do nothing
         returning jsonb_array_length(lines) as n
       )
       select count(*)::int as issued, coalesce(sum(n), 0)::int as lines from ins`,
      [w.start, w.end, w.week],
    );
    await trx.raw(`drop table ${table}`);
    const row = rows[0] as { issued: number; lines: number };
    return { issued: row.issued, lines: row.lines };
  };
  // Inside the caller's transaction this is a savepoint; the table goes with it either way.
  return db.transaction(run);
}

/**
 * A billing run for a week (the weekly scheduler and `billing run`): issue the invoices and, in
 * the same transaction, queue their charging in the billing worker.
 */
export async function runBilling(db: Db, w: BillingWeek, actor: string): Promise<{ issued: number; lines: number }> {
  return db.transaction(async (trx) => {
    const result = await issueInvoices(trx, w);
    await enqueueJob(trx, 'charge-invoices', { week: w.week });
    await trx('audit_log').insert({
      actor,
      action: 'billing.run',
      subject_type: 'billing_week',
      subject_id: w.week,
      details: JSON.stringify(result),
    });
    return result;
  });
}

/** The invoices issued for a week, with their lines, ordered by owner name. */
export async function listInvoices(db: Queryable, week: string): Promise<Invoice[]> {
  const { rows } = await db.raw(
    `select i.*, coalesce(d.name, p.name) as owner_name
       from invoices i
       left join drivers d on d.id = i.driver_id
       left join partners p on p.id = i.partner_id
      where i.week = ?
      order by owner_name, i.id`,
    [week],
  );
  return (rows as InvoiceRow[]).map(invoiceFromRow);
}

function invoiceFromRow(r: InvoiceRow): Invoice {
  return {
    id: r.id,
    week: r.week,
    owner: owner(r),
    periodStart: r.period_start.toISOString(),
    periodEnd: r.period_end.toISOString(),
    earningsGBP: gbp(r.earnings_pence),
    completedRides: Number(r.completed_rides),
    totalGBP: gbp(r.total_pence),
    state: r.state,
    chargeAttempts: Number(r.charge_attempts),
    lastChargeError: r.last_charge_error,
    issuedAt: r.issued_at.toISOString(),
    lines: toLines(r.lines),
  };
}

const CSV_COLUMNS = [
  'invoice_id',
  'week',
  'owner_kind',
  'owner_id',
  'owner_name',
  'period_start',
  'period_end',
  'completed_rides',
  'earnings_gbp',
  'subscription_fee_gbp',
  'sms_count',
  'sms_gbp',
  'card_processing_gbp',
  'external_job_fee_gbp',
  'total_gbp',
  'state',
  'charge_attempts',
  'last_charge_error',
  'issued_at',
] as const;

/** One CSV field (RFC 4180), with spreadsheet formula injection defused. */
function csvField(value: string | number | null): string {
  if (value === null) return '';
  let s = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** A week's invoices as CSV for finance: one row per invoice, a column per kind of line. */
export function invoicesCsv(invoices: readonly Invoice[]): string {
  const money = (n: number) => n.toFixed(2);
  const out = [CSV_COLUMNS.join(',')];
  for (const inv of invoices) {
    const line = (kind: InvoiceLine['kind']) => inv.lines.find((l) => l.kind === kind);
    const row: Record<(typeof CSV_COLUMNS)[number], string | number | null> = {
      invoice_id: inv.id,
      week: inv.week,
      owner_kind: inv.owner.kind,
      owner_id: inv.owner.id,
      owner_name: inv.owner.name,
      period_start: inv.periodStart,
      period_end: inv.periodEnd,
      completed_rides: inv.completedRides,
      earnings_gbp: money(inv.earningsGBP),
      subscription_fee_gbp: money(line('subscription_fee')?.amountGBP ?? 0),
      sms_count: line('sms')?.quantity ?? 0,
      sms_gbp: money(line('sms')?.amountGBP ?? 0),
      card_processing_gbp: money(line('card_processing')?.amountGBP ?? 0),
      external_job_fee_gbp: money(line('external_job_fee')?.amountGBP ?? 0),
      total_gbp: money(inv.totalGBP),
      state: inv.state,
      charge_attempts: inv.chargeAttempts,
      last_charge_error: inv.lastChargeError,
      issued_at: inv.issuedAt,
    };
    out.push(CSV_COLUMNS.map((c) => csvField(row[c])).join(','));
  }
  return `${out.join('\r\n')}\r\n`;
}

export interface ChargeSummary {
  charged: number;
  failed: number;
}

export class InvoiceStateError extends Error {
  constructor(
    readonly code: 'not_found' | 'conflict',
    message: string,
  ) {
    super(message);
    this.name = 'InvoiceStateError';
  }
}

/** From which states finance may settle an invoice by hand. */
const SETTLEABLE_FROM: Readonly<Record<'paid' | 'void', readonly string[]>> = {
  // Paid outside the provider (a bank transfer finance reconciled), whatever charging did.
  paid: ['issued', 'due', 'charge_failed'],
  // Not owed after all (billed in error): never one already paid.
  void: ['issued', 'due', 'charge_failed'],
};

/**
 * Finance records what happened to an invoice outside the payment provider: `paid` (money
 * received and reconciled) or `void` (not owed). The built-in provider leaves an invoice with
 * money on it `due` for finance to reconcile, and this is how it is reconciled: the driver
 * dashboard then shows the week as paid. Recorded in the audit log with the state it left and
 * the note. The same decision again changes nothing (`changed: false`); a paid invoice cannot
 * be voided nor a void one paid (409 `conflict`).
 */
export async function settleInvoice(
  db: Db,
  invoiceId: string,
  to: 'paid' | 'void',
  actor: string,
  note: string | null,
): Promise<{ id: string; week: string; state: 'paid' | 'void'; previousState: string; changed: boolean }> {
  return db.transaction(async (trx) => {
    const row = await trx('invoices')
      .where({ id: invoiceId })
      .forUpdate()
      .first<{ id: string; week: string; state: string } | undefined>('id', 'week', 'state');
    if (!row) throw new InvoiceStateError('not_found', `no invoice ${invoiceId}`);
    if (row.state === to) return { id: row.id, week: row.week, state: to, previousState: row.state, changed: false };
    if (!SETTLEABLE_FROM[to].includes(row.state)) {
      throw new InvoiceStateError('conflict', `invoice ${row.id} is ${row.state}; it cannot be marked ${to}`);
    }
    await trx('invoices').where({ id: row.id }).update({ state: to });
    await trx('audit_log').insert({
      actor,
      action: `invoice.${to}`,
      subject_type: 'invoice',
      subject_id: row.id,
      details: JSON.stringify({ week: row.week, previousState: row.state, note }),
    });
    return { id: row.id, week: row.week, state: to, previousState: row.state, changed: true };
  });
}

const LONDON_DAY = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  weekday: 'short',
  day: 'numeric',
  month: 'short',
  year: 'numeric',
});

/**
 * A driver's invoice e-mail (the weekly software fee and pass-through costs, the total, and how
 * it is paid), queued in the charging transaction so it is sent once with the state it reports.
 * Partner operators have no e-mail address on record: their invoices are read from the CLI.
 */
async function queueInvoiceEmails(trx: Tx, invoiceIds: readonly string[], serviceName: string): Promise<void> {
  const rows = await trx('invoices as i')
    .join('drivers as d', 'd.id', 'i.driver_id')
    .whereIn('i.id', invoiceIds)
    .select<
      Array<{
        id: string;
        week: string;
        state: string;
        total_pence: number;
        lines: Array<{ description: string; amount_pence: number }>;
        period_start: Date;
        period_end: Date;
        driver_id: string;
        name: string;
        email: string;
      }>
    >(
      'i.id',
      'i.week',
      'i.state',
      'i.total_pence',
      'i.lines',
      'i.period_start',
      'i.period_end',
      'd.id as driver_id',
      'd.name',
      'd.email',
    );
  const pounds = (p: number) => `£${(p / 100).toFixed(2)}`;
  for (const r of rows) {
    const lastDay = new Date(r.period_end.getTime() - 1);
    await queueMessage(trx, {
      channel: 'email',
      recipient: r.email,
      subject: `Your ${serviceName} invoice for ${r.week}: ${pounds(r.total_pence)}`,
      body: [
        `Hello ${r.name},`,
        '',
        `Your invoice for ${r.week} (${LONDON_DAY.format(r.period_start)} to ${LONDON_DAY.format(lastDay)}, UK time):`,
        ...r.lines.map((l) => `- ${l.description}: ${pounds(l.amount_pence)}`),
        `Total: ${pounds(r.total_pence)}`,
        '',
        r.state === 'paid'
          ? 'It has been charged: nothing more to do.'
          : `Please pay it by bank transfer or standing order, quoting ${r.id}. Your dashboard shows the week as paid once it arrives.`,
        '',
        `${serviceName} takes no commission on your fares: this is all you pay for the week.`,
      ].join('\n'),
      purpose: 'invoice',
      driverId: r.driver_id,
    });
  }
}

/**
 * Charge every invoice that is `issued` or `charge_failed` (of one week, or of all weeks),
 * in batches through the payment provider. Each batch is locked (`skip locked`, so two workers
 * share the work), charged, and its outcomes recorded with the attempt count and the last
 * error. Providers are called with the invoice id as their idempotency key: a worker killed
 * between the charge and the commit charges the same invoice again, which the provider must
 * recognise. Invoices that fail stay `charge_failed` for the next attempt; the caller (the
 * billing worker) retries with backoff while any remain.
 */
export async function chargeInvoices(
  db: Db,
  provider: PaymentProvider,
  opts: {
    week?: string;
    batchSize?: number;
    logger?: Logger;
    /** E-mail each driver their invoice once it is charged or due (`invoiceEmail`), signed with this name. */
    notify?: { serviceName: string };
  } = {},
): Promise<ChargeSummary> {
  const batchSize = opts.batchSize ?? 500;
  const summary: ChargeSummary = { charged: 0, failed: 0 };
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const done = await db.transaction(async (trx) => {
      const q = trx('invoices')
        .whereIn('state', ['issued', 'charge_failed'])
        .andWhere('total_pence', '>', 0)
        .andWhere('id', '>', after)
        .orderBy('id')
        .limit(batchSize)
        .forUpdate()
        .skipLocked();
      if (opts.week) q.andWhere('week', opts.week);
      const rows = await q.select<
        Array<{ id: string; driver_id: string | null; partner_id: string | null; week: string; total_pence: number }>
      >('id', 'driver_id', 'partner_id', 'week', 'total_pence');
      const last = rows.at(-1);
      if (!last) return true;
      after = last.id;
      let outcomes: ChargeOutcome[];
      try {
        outcomes = await provider.charge(
          rows.map((r) => ({
            invoiceId: r.id,
            owner: r.driver_id ? { kind: 'driver', id: r.driver_id } : { kind: 'partner', id: r.partner_id as string },
            week: r.week,
            totalPence: r.total_pence,
          })),
        );
      } catch (err) {
        outcomes = rows.map((r) => ({
          invoiceId: r.id,
          error: `provider ${provider.name}: ${(err as Error).message}`,
        }));
      }
      const byId = new Map(outcomes.map((o) => [o.invoiceId, o]));
      const ids: string[] = [];
      const states: string[] = [];
      const errors: Array<string | null> = [];
      for (const r of rows) {
        const o = byId.get(r.id) ?? { invoiceId: r.id, error: `provider ${provider.name} gave no outcome` };
        ids.push(r.id);
        if ('error' in o) {
          states.push('charge_failed');
          errors.push(o.error.slice(0, 500));
          summary.failed += 1;
        } else {
          states.push(o.state);
          errors.push(null);
          summary.charged += 1;
        }
      }
      await trx.raw(
        `update invoices i
            set state = v.state,
                charge_attempts = i.charge_attempts + 1,
                last_charge_error = v.error,
                charged_at = case when v.state = 'charge_failed' then i.charged_at else now() end
           from unnest(?::uuid[], ?::text[], ?::text[]) as v(id, state, error)
          where i.id = v.id`,
        [ids, states, errors as string[]],
      );
      if (opts.notify) {
        // Told once, with the charge that settles the invoice's state: a failed charge is tried
        // again, and its driver hears of it when it is charged or due.
        const told = ids.filter((_, i) => states[i] === 'due' || states[i] === 'paid');
        if (told.length > 0) await queueInvoiceEmails(trx, told, opts.notify.serviceName);
      }
      return rows.length < batchSize;
    });
    if (done) break;
  }
  if (summary.charged + summary.failed > 0) opts.logger?.info({ ...summary, week: opts.week }, 'invoices charged');
  return summary;
}
