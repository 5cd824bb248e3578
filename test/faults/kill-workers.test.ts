import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWeek, weekOf } from '../../shared/domain/billing/week.ts';
import type { WorkerRole } from '../../shared/queues/registry.ts';
import { previewInvoices } from '../../shared/services/billing.ts';
import type { CreatedPartner } from '../../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../../shared/services/tariff-store.ts';
import { ROLE_CONCURRENCY } from '../../workers/roles.ts';
import type { TestDriver } from '../helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from '../helpers/env.ts';
import {
  completeRides,
  expectDispatchedOnce,
  FAULT_ENV,
  kill9,
  liveDrivers,
  offline,
  type Proc,
  partnerBurst,
  partnerWithWebhook,
  type Row,
  smtpStandIn,
  startWorkers,
  stopProc,
  twilioStandIn,
  webhookReceiver,
} from './support.ts';

/**
 * kill -9 of each worker role in the middle of its work, under a burst of bookings, then a
 * restart: every booking is dispatched once (one offer), every job card reaches the Twilio
 * stand-in once per channel, every status webhook reaches the partner's receiver (verified with
 * `standardwebhooks`), and the weekly billing run issues one invoice per owner. Each role runs in
 * its own process, as in the Procfile (pricing too, never killed here); the API runs in this
 * process.
 */
const ROLES = ['pricing', 'outbox-relay', 'dispatch', 'notify', 'fanout', 'billing'] as const;
type Role = (typeof ROLES)[number] & WorkerRole;

let env: TestEnv;
let api: Served;
let twilio: Awaited<ReturnType<typeof twilioStandIn>>;
let smtp: Awaited<ReturnType<typeof smtpStandIn>>;
let hooks: Awaited<ReturnType<typeof webhookReceiver>>;
let partner: CreatedPartner;
let childEnv: NodeJS.ProcessEnv;
const procs = new Map<Role, Proc>();
const drivers = new Map<string, TestDriver>();
let onMap: TestDriver[] = [];
/** Every booking of every burst: the fanout and billing checks cover them all. */
const allRefs: string[] = [];

const BURST = 30;

async function restart(role: Role, failpoints?: string): Promise<Proc> {
  const proc = await startWorkers(role, childEnv, failpoints);
  procs.set(role, proc);
  return proc;
}

async function killRole(role: Role): Promise<void> {
  const proc = procs.get(role);
  if (proc) await kill9(proc);
  procs.delete(role);
}

/** Fresh drivers for a burst (the previous burst's drivers go off the map, their jobs in hand). */
async function freshDrivers(): Promise<void> {
  await offline(api.url, onMap);
  onMap = await liveDrivers(env.rt.db, api.url, 4);
  for (const d of onMap) drivers.set(d.id, d);
}

const jobCardsSent = () => twilio.sent.filter((m) => /DTN-/.test(m.body)).length;

/** Every message queued so far has been sent (the drivers' tokens, earlier bursts' job cards). */
const quiet = () =>
  eventually(async () => {
    const [row] = await env.rt.db('outbound_messages').whereNot({ state: 'sent' }).count<Row[]>('* as n');
    return Number(row?.n) === 0;
  }, 60_000);

beforeAll(async () => {
  twilio = await twilioStandIn();
  smtp = await smtpStandIn();
  hooks = await webhookReceiver();
  env = await createTestEnv({
    env: {
      TWILIO_API_BASE_URL: twilio.url,
      TWILIO_ACCOUNT_SID: 'AC22222222222222222222222222222222',
      TWILIO_AUTH_TOKEN: 'fault-token',
      SMTP_URL: smtp.url,
      ...FAULT_ENV,
    },
  });
  childEnv = { ...env.childEnv, WEBHOOK_RETRY_BASE_MS: '200' };
  // Partner jobs are priced for their route (the partner's own fare is kept).
  await syncBuiltInTariffs(env.rt.db);
  api = await serve(await appFor(env));
  partner = await partnerWithWebhook(env, hooks.url, hooks.secrets);
  await Promise.all(ROLES.map((role) => restart(role)));
}, 120_000);

afterAll(async () => {
  await Promise.all([...procs.values()].map((p) => stopProc(p)));
  await api?.close();
  await twilio?.stop();
  await smtp?.stop();
  await hooks?.stop();
  await env?.cleanup();
});

describe('kill -9 of a worker role mid-work, then a restart', () => {
  it('outbox-relay: killed between adding jobs to BullMQ and marking its rows, mid-burst', async () => {
    await freshDrivers();
    await killRole('outbox-relay');
    // The relay kills itself at the worst moment of its third pass: jobs added, rows not marked.
    const crashing = await restart('outbox-relay', 'outbox-after-enqueue@3');
    const refs = await partnerBurst(api.url, partner, 'RELAY', BURST);
    allRefs.push(...refs);
    const died = await crashing.exited;
    expect(died.signal, died.stderr).toBe('SIGKILL');
    await restart('outbox-relay');
    await expectDispatchedOnce(env.rt.db, refs, twilio.sent, drivers);
    const [left] = await env.rt.db('outbox').whereNull('relayed_at').count<Row[]>('* as n');
    expect(Number(left?.n)).toBe(0);
  });

  it('dispatch: killed right after its tenth offer committed, with other steps in flight', async () => {
    await freshDrivers();
    await killRole('dispatch');
    const crashing = await restart('dispatch', 'dispatch-after-offer@10');
    const refs = await partnerBurst(api.url, partner, 'DISPATCH', BURST);
    allRefs.push(...refs);
    const died = await crashing.exited;
    expect(died.signal, died.stderr).toBe('SIGKILL');
    await restart('dispatch');
    await expectDispatchedOnce(env.rt.db, refs, twilio.sent, drivers);
  });

  it('notify: killed with every send slot waiting on Twilio, after some job cards went', async () => {
    await freshDrivers();
    await quiet();
    const before = jobCardsSent();
    const burst = partnerBurst(api.url, partner, 'NOTIFY', BURST);
    await eventually(async () => jobCardsSent() >= before + 6, 60_000);
    // From now on the stand-in takes requests but does not answer: once every one of the
    // worker's slots waits on it, no send is between Twilio accepting it and our commit.
    twilio.hold();
    await eventually(async () => twilio.held() >= ROLE_CONCURRENCY.notify, 60_000);
    await killRole('notify');
    // The held requests' connections died with the worker: they were never accepted.
    twilio.release();
    const refs = await burst;
    allRefs.push(...refs);
    await restart('notify');
    await expectDispatchedOnce(env.rt.db, refs, twilio.sent, drivers);
  });

  it('fanout: killed with webhook requests in flight while rides progress, every webhook then delivered', async () => {
    await freshDrivers();
    const refs = await partnerBurst(api.url, partner, 'FANOUT', BURST);
    allRefs.push(...refs);
    await expectDispatchedOnce(env.rt.db, refs, twilio.sent, drivers);
    const before = hooks.delivered.length;
    // 30 rides accepted and driven to completion: five more statuses each, each a webhook.
    const rides = completeRides(api.url, env.rt.db, refs, drivers);
    await eventually(async () => hooks.delivered.length >= before + 20, 60_000);
    hooks.hold();
    // As many in flight as one endpoint is allowed (WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT, 4): the
    // slots the kill leaves leased are freed when their lease (30 s) runs out.
    await eventually(async () => hooks.held() >= 4, 60_000);
    await killRole('fanout');
    hooks.release();
    await rides;
    await restart('fanout');

    // Every delivery of every booking (all bursts) ends delivered; an attempt the kill cut
    // short is retried when its lease (a minute) runs out.
    const ids = (await env.rt.db('bookings').whereIn('reference', allRefs).pluck('id')) as string[];
    expect(ids).toHaveLength(allRefs.length);
    await eventually(async () => {
      const [row] = await env.rt
        .db('webhook_deliveries')
        .whereIn('booking_id', ids)
        .whereNot({ state: 'delivered' })
        .count<Row[]>('* as n');
      return Number(row?.n) === 0;
    }, 150_000);
    const deliveries = await env.rt.db('webhook_deliveries').whereIn('booking_id', ids).select<Row[]>('*');
    const received = new Set(hooks.delivered.map((d) => d.id));
    for (const d of deliveries) expect(received.has(d.message_id), `webhook ${d.message_id} received`).toBe(true);
    expect(hooks.delivered.every((d) => d.verified)).toBe(true);
    // One delivery per status change of each booking (the first status, `pending`, is the
    // partner's own answer to its request, not a webhook).
    const history = await env.rt.db('booking_status_history').whereIn('booking_id', ids).where('seq', '>', 1);
    const key = (bookingId: string, seq: number) => `${bookingId}:${seq}`;
    expect(deliveries.map((d) => key(d.booking_id, d.sequence)).sort()).toEqual(
      history.map((h) => key(h.booking_id, h.seq)).sort(),
    );
    // Every ride of this burst reached `completed`, and its partner heard it.
    const completed = hooks.delivered
      .map((d) => JSON.parse(d.body) as { data: { bookingReference: string; status: string } })
      .filter((e) => e.data.status === 'completed')
      .map((e) => e.data.bookingReference);
    expect(new Set(completed)).toEqual(new Set(refs));
  }, 300_000);

  it('billing: killed after issuing the week’s invoices and before charging them; the rerun issues nothing twice', async () => {
    const week = parseWeek(weekOf(new Date()));
    if (!week) throw new Error('no billing week');
    const expected = await previewInvoices(env.rt.db, week);
    // The rides completed above and the drivers' SMS: one invoice per driver with activity.
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.every((i) => i.state === 'would_issue')).toBe(true);
    await killRole('billing');
    const crashing = await restart('billing', 'billing-after-issue');
    await env.rt.queues.billing.add('run-weekly-billing', { week: week.week }, { jobId: 'fault-billing-run' });
    const died = await crashing.exited;
    expect(died.signal, died.stderr).toBe('SIGKILL');
    const issued = await env.rt.db('invoices').where({ week: week.week });
    expect(issued).toHaveLength(expected.length);
    expect(issued.some((i) => i.state === 'issued')).toBe(true); // not yet charged

    // Restarted, the worker finds the run stalled and runs it again: nothing issued twice, and
    // the invoices are charged.
    await restart('billing');
    await eventually(async () => (await env.rt.queues.billing.getJob('fault-billing-run'))?.finishedOn, 60_000);
    const job = await env.rt.queues.billing.getJob('fault-billing-run');
    expect(await job?.getState()).toBe('completed');
    expect(job?.returnvalue).toMatchObject({ week: week.week, issued: 0 });
    // And a second run of the same week changes nothing.
    await env.rt.queues.billing.add('run-weekly-billing', { week: week.week }, { jobId: 'fault-billing-rerun' });
    await eventually(async () => (await env.rt.queues.billing.getJob('fault-billing-rerun'))?.finishedOn, 60_000);
    const invoices = await env.rt.db('invoices').where({ week: week.week }).select<Row[]>('*');
    const ownerOf = (i: Row) => (i.driver_id ? `driver:${i.driver_id}` : `partner:${i.partner_id}`);
    expect(invoices.map(ownerOf).sort()).toEqual(expected.map((i) => `${i.owner.kind}:${i.owner.id}`).sort());
    expect(new Set(invoices.map(ownerOf)).size).toBe(invoices.length);
    for (const i of invoices) {
      expect(i.state, `invoice of ${ownerOf(i)}`).not.toBe('issued');
      expect(i.charge_attempts).toBeLessThanOrEqual(1);
    }
  });
});
