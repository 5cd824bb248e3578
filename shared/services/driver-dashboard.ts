import type { Queryable } from '../db/knex.ts';
import { gbp } from './quotes.ts';

/**
 * The driver dashboard (SPEC.md 2.10, CONTRACT.md sections 6 and 8): per billing week
 * (Monday 00:00 to Sunday 24:00 Europe/London, keyed by ISO week "2026-W47") the driver's
 * earnings, completed rides and dead mileage, the week's invoice with its lines and whether
 * it is paid; totals over every week; the end of the free trial.
 *
 * - A ride counts in the week of its completion: the first `completed` entry of the booking's
 *   status history, for bookings the driver holds whose status is `completed`.
 * - Earnings are the fares of those rides (the fixed fare, whatever was collected).
 * - Dead miles are those the booking recorded when the driver accepted the offer (position at
 *   acceptance to the pickup, straight line × 1.3: `roadMiles` in shared/services/dispatch.ts).
 * - `paid`: the week's invoice is `paid`, or there is nothing to pay on it: it totals £0 or is
 *   `void`. A week with no invoice yet (this week, and the last until its Monday run) is not
 *   paid: its fee may still be due. A sandbox (test-mode) driver is never billed, so every
 *   week of theirs is paid.
 *
 * Everything comes from one statement: weeks of rides and weeks of invoices are joined by
 * week, each invoice carries its lines, totals are window sums over every week, and only
 * the latest `DASHBOARD_WEEKS` weeks with rides or an invoice are returned.
 */
export const DASHBOARD_WEEKS = 12;

export interface DashboardInvoiceLine {
  kind: string;
  description: string;
  quantity: number;
  unitGBP: number;
  amountGBP: number;
}

export interface DashboardWeek {
  week: string;
  earningsGBP: number;
  completedRides: number;
  deadMiles: number;
  invoice: null | { id: string; state: string; totalGBP: number; lines: DashboardInvoiceLine[] };
  paid: boolean;
}

export interface DriverDashboard {
  weeks: DashboardWeek[];
  totals: { paidWeeks: number; earningsGBP: number; completedRides: number; deadMiles: number };
  trialEndsAt: string | null;
}

interface WeekRow {
  week: string;
  earnings_pence: number;
  completed_rides: number;
  dead_miles: number;
  invoice_id: string | null;
  invoice_state: string | null;
  invoice_total_pence: number | null;
  lines: Array<{ kind: string; description: string; quantity: number; unit_pence: number; amount_pence: number }>;
  paid: boolean;
  total_paid_weeks: number;
  total_earnings_pence: number;
  total_rides: number;
  total_dead_miles: number;
}

const WEEKS_SQL = `
with rides as (
  select b.fare_pence, b.dead_miles, c.completed_at
  from bookings b
  join lateral (
    select min(h.at) as completed_at
    from booking_status_history h
    where h.booking_id = b.id and h.status = 'completed'
  ) c on c.completed_at is not null
  where b.driver_id = :driverId and b.status = 'completed'
),
ride_weeks as (
  select to_char(completed_at at time zone 'Europe/London', 'IYYY-"W"IW') as week,
         coalesce(sum(fare_pence), 0)::bigint as earnings_pence,
         count(*)::int as completed_rides,
         coalesce(sum(dead_miles), 0)::float8 as dead_miles
  from rides
  group by 1
),
invoice_weeks as (
  select i.week, i.id, i.state, i.total_pence,
         i.lines
  from invoices i
  where i.driver_id = :driverId
),
weeks as (
  select coalesce(r.week, i.week) as week,
         coalesce(r.earnings_pence, 0) as earnings_pence,
         coalesce(r.completed_rides, 0) as completed_rides,
         coalesce(r.dead_miles, 0) as dead_miles,
         i.id as invoice_id, i.state as invoice_state, i.total_pence as invoice_total_pence,
         coalesce(i.lines, '[]'::jsonb) as lines,
         -- a sandbox driver is never billed: nothing is, or will be, due
         ((i.id is not null and (i.state in ('paid', 'void') or i.total_pence = 0))
          or (select test_mode from drivers where id = :driverId)) as paid
  from ride_weeks r
  full join invoice_weeks i on i.week = r.week
)
select w.*,
       (count(*) filter (where w.paid) over ())::int as total_paid_weeks,
       (sum(w.earnings_pence) over ())::bigint as total_earnings_pence,
       (sum(w.completed_rides) over ())::int as total_rides,
       (sum(w.dead_miles) over ())::float8 as total_dead_miles
from weeks w
order by w.week desc
limit :limit`;

const miles = (m: number): number => Math.round(m * 10) / 10;

/** The dashboard of one driver (see the module comment for the definitions). */
export async function driverDashboard(db: Queryable, driverId: string): Promise<DriverDashboard> {
  const [result, driver] = await Promise.all([
    db.raw<{ rows: WeekRow[] }>(WEEKS_SQL, { driverId, limit: DASHBOARD_WEEKS }),
    db('drivers').where({ id: driverId }).first<{ trial_ends_at: Date | null } | undefined>('trial_ends_at'),
  ]);
  const rows = result.rows;
  const first = rows[0];
  return {
    weeks: rows.map((r) => ({
      week: r.week,
      earningsGBP: gbp(Number(r.earnings_pence)),
      completedRides: r.completed_rides,
      deadMiles: miles(r.dead_miles),
      invoice:
        r.invoice_id === null
          ? null
          : {
              id: r.invoice_id,
              state: r.invoice_state as string,
              totalGBP: gbp(r.invoice_total_pence ?? 0),
              lines: r.lines.map((l) => ({
                kind: l.kind,
                description: l.description,
                quantity: l.quantity,
                unitGBP: gbp(l.unit_pence),
                amountGBP: gbp(l.amount_pence),
              })),
            },
      paid: r.paid,
    })),
    totals: {
      paidWeeks: first?.total_paid_weeks ?? 0,
      earningsGBP: gbp(Number(first?.total_earnings_pence ?? 0)),
      completedRides: first?.total_rides ?? 0,
      deadMiles: miles(first?.total_dead_miles ?? 0),
    },
    trialEndsAt: driver?.trial_ends_at?.toISOString() ?? null,
  };
}
