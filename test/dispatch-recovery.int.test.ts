import { randomBytes } from 'node:crypto';
import { UnrecoverableError, Worker } from 'bullmq';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { appendStatus } from '../shared/db/bookings.ts';
import { OUTBOX_MAX_ATTEMPTS } from '../shared/db/outbox.ts';
import { QUEUE_NAMES } from '../shared/queues/registry.ts';
import {
  jobLoad,
  rescueStrandedBookings,
  STRANDED_AFTER_MS,
  STRANDED_PICKUP_PAST_MS,
} from '../shared/services/dispatch.ts';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { insertOfferedBooking } from './helpers/bookings.ts';
import { capturingLogger } from './helpers/captured-log.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, deleteKeys, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { startTwilioStub } from './helpers/twilio-stub.ts';

/**
 * Dispatch when the booking says, whatever happened to its jobs. A booking's dispatch job lives
 * in Redis until pickup minus the lead time. When Redis loses it (a restart without
 * persistence, a failover to an empty replica), the booking would wait in `pending` for ever:
 * the dispatch role looks for such bookings at start and every minute
 * (`rescueStrandedBookings`) and queues their job again. And a job that comes too early (a
 * partner moved the pickup later) waits for the new time. But not while the outbox relay is
 * behind: a job still waiting in the outbox is not lost. Real HTTP bookings and partner jobs,
 * the real outbox relay, dispatch and notify workers (a local Twilio stand-in), jobs removed
 * from or promoted in the real queue.
 */
let env: TestEnv;
let api: Served;
let roles: RunningRoles;
let dispatchRole: RunningRoles | null = null;
let twilio: Awaited<ReturnType<typeof startTwilioStub>>;
let seq = 0;

beforeAll(async () => {
  twilio = await startTwilioStub();
  env = await createTestEnv({
    env: {
      RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
      QUOTE_LIMIT_PER_HOUR: '100000',
      TWILIO_API_BASE_URL: twilio.url,
      TWILIO_ACCOUNT_SID: 'AC22222222222222222222222222222222',
      TWILIO_AUTH_TOKEN: 'secret-token',
    },
  });
  await syncBuiltInTariffs(env.rt.db);
  // No dispatch worker yet: each test decides when one runs.
  roles = startRoles(['pricing', 'outbox-relay'], env.rt);
  api = await serve(await appFor(env));
});
// A test that starts the dispatch role leaves it to this, so a failed test does not leave it running.
afterEach(async () => {
  await dispatchRole?.close();
  dispatchRole = null;
});
afterAll(async () => {
  await roles?.close();
  await api?.close();
  await twilio?.close();
  await env?.cleanup();
});

/** A v1 booking through HTTP, picked up `minutes` from now; its id once its dispatch job is in the queue. */
const book = (minutes: number) => bookTo('Manchester Airport', minutes);

/** The same, to `dropoff` (London Euston: a distance hire, with the longer lead). */
async function bookTo(dropoff: string, minutes: number): Promise<string> {
  const id = await place(dropoff, minutes);
  await eventually(() => env.rt.queues.dispatch.getJob(`dispatch-${id}`));
  return id;
}

/** A v1 booking through HTTP, made and committed (its dispatch job in the outbox, relayed or not). */
async function place(dropoff: string, minutes: number): Promise<string> {
  seq += 1;
  const res = await fetch(`${api.url}/api/public/v1/booking`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      pickup: 'Manchester Piccadilly',
      dropoff,
      departAt: new Date(Date.now() + minutes * 60_000).toISOString(),
      passengerName: `Stranded Passenger ${seq}`,
      passengerEmail: `stranded${seq}@example.org`,
      passengerPhone: '+447700900321',
    }),
  });
  const body = (await res.json()) as { bookingReference: string };
  expect(res.status, JSON.stringify(body)).toBe(201);
  const { id } = await env.rt.db('bookings').where({ reference: body.bookingReference }).first('id');
  return id as string;
}

/** What Redis losing its data does to one booking: its dispatch job is gone. */
async function loseJob(bookingId: string): Promise<void> {
  await env.rt.queues.dispatch.remove(`dispatch-${bookingId}`);
  expect(await env.rt.queues.dispatch.getJob(`dispatch-${bookingId}`)).toBeUndefined();
}

/** As if the booking had been made `minutes` ago (a booking made inside the lead time is due at once). */
async function madeAgo(id: string, minutes: number): Promise<void> {
  await env.rt
    .db('bookings')
    .where({ id })
    .update({ created_at: new Date(Date.now() - minutes * 60_000) });
}

/** Rows that the rescue found: every id it queued for a booking or offer. */
const forRow = (requeued: string[], id: string) => requeued.filter((j) => j.includes(id));

/**
 * Until the relay has moved every row of the queues it takes. Before a rescue dated ahead
 * (`now` later than the clock): to it, a row written a moment ago has already waited past its
 * threshold, and a relay behind holds the rescue back.
 */
const relayed = () =>
  eventually(
    async () =>
      !(await env.rt
        .db('outbox')
        .whereNull('relayed_at')
        .whereIn('queue', QUEUE_NAMES)
        .where('attempts', '<', OUTBOX_MAX_ATTEMPTS)
        .first('id')),
  );

const statusOf = async (id: string) => (await env.rt.db('bookings').where({ id }).first('status')).status as string;
const historyOf = async (id: string) =>
  (await env.rt.db('booking_status_history').where({ booking_id: id }).orderBy('seq').pluck('status')) as string[];

describe('bookings whose dispatch job was lost', () => {
  it('queues the job of a booking past its dispatch time again, once, and the dispatch worker started later dispatches it', async () => {
    // Pickup in 10 minutes: inside the 30-minute lead time, so it is due as soon as it is made.
    const lost = await book(10);
    const kept = await book(10);
    await loseJob(lost);

    // Until STRANDED_AFTER_MS after it was made it is left alone: its job may be on its way.
    const made = (await env.rt.db('bookings').where({ id: lost }).first('created_at')).created_at as Date;
    const early = await rescueStrandedBookings(env.rt, new Date(made.getTime() + STRANDED_AFTER_MS - 1_000));
    expect(forRow(early.requeued, lost)).toEqual([]);

    await madeAgo(lost, 3);
    await madeAgo(kept, 3);
    const { requeued, errors } = await rescueStrandedBookings(env.rt);
    expect(errors).toEqual([]);
    expect(forRow(requeued, lost)).toEqual([`dispatch-${lost}`]);
    // The other booking's job is still waiting for a worker: a busy worker is not a lost job.
    expect(forRow(requeued, kept)).toEqual([]);
    expect(await (await env.rt.queues.dispatch.getJob(`dispatch-${lost}`))?.getState()).toBe('waiting');

    // Found again on the next pass, but its job is there now: nothing added.
    expect(forRow((await rescueStrandedBookings(env.rt)).requeued, lost)).toEqual([]);

    dispatchRole = startRoles(['dispatch'], env.rt);
    // No driver is online: dispatch starts, finds nobody and schedules a retry, once.
    for (const id of [lost, kept]) {
      await eventually(async () => ((await statusOf(id)) === 'no_driver_available' ? true : null));
      expect(await historyOf(id)).toEqual(['pending', 'dispatching', 'no_driver_available']);
    }
  });

  it('e-mails operators once a booking, however often it comes back to no_driver_available', async () => {
    dispatchRole = startRoles(['dispatch'], env.rt);
    const id = await book(20);
    await eventually(async () => ((await statusOf(id)) === 'no_driver_available' ? true : null));
    // A retry offered it and the offer lapsed (as far as the booking knows): dispatching again,
    // and the next step finds nobody again.
    await env.rt.db.transaction((trx) => appendStatus(trx, id, 'dispatching', 'test'));
    await env.rt.queues.dispatch.add('dispatch-booking', { bookingId: id }, { jobId: `dispatch-${id}-again` });
    await eventually(async () => ((await historyOf(id)).length === 5 ? true : null));
    expect(await historyOf(id)).toEqual([
      'pending',
      'dispatching',
      'no_driver_available',
      'dispatching',
      'no_driver_available',
    ]);
    const alerts = await env.rt.db('outbound_messages').where({ booking_id: id, purpose: 'operator_alert' });
    expect(alerts).toHaveLength(1);
  });

  it('is done by the dispatch role when it starts, after the dispatch queue lost everything, with no call from anyone', async () => {
    const id = await book(5);
    // Every key of the dispatch queue gone, as a Redis that lost its data would leave it.
    await deleteKeys(env.config.redisUrl, `${env.config.queuePrefix}:dispatch:*`);
    expect(await env.rt.queues.dispatch.getJob(`dispatch-${id}`)).toBeUndefined();
    await madeAgo(id, 3);
    dispatchRole = startRoles(['dispatch'], env.rt);
    await eventually(async () => ((await statusOf(id)) === 'no_driver_available' ? true : null));
    expect(await historyOf(id)).toEqual(['pending', 'dispatching', 'no_driver_available']);
  });

  it('queues one more job, once, when the dispatch job failed for good', async () => {
    const id = await book(10);
    // A worker that refuses the job outright (as a bug would): it fails with no retry left.
    const connection = env.rt.workerRedis().duplicate();
    const refusing = new Worker(
      'dispatch',
      async () => {
        throw new UnrecoverableError('refused by the test');
      },
      { connection, prefix: env.config.queuePrefix },
    );
    try {
      await eventually(async () =>
        (await (await env.rt.queues.dispatch.getJob(`dispatch-${id}`))?.getState()) === 'failed' ? true : null,
      );
    } finally {
      await refusing.close();
      await connection.quit();
    }
    expect(await statusOf(id)).toBe('pending');
    await madeAgo(id, 3);

    expect(forRow((await rescueStrandedBookings(env.rt)).requeued, id)).toEqual([`dispatch-${id}-rescue`]);
    // Once: a job that fails again is not queued every minute.
    expect(forRow((await rescueStrandedBookings(env.rt)).requeued, id)).toEqual([]);
    dispatchRole = startRoles(['dispatch'], env.rt);
    await eventually(async () => ((await statusOf(id)) === 'no_driver_available' ? true : null));
  });

  it('leaves bookings not yet due, long past pickup, or changed a moment ago', async () => {
    const later = await book(3 * 60); // dispatch in 2.5 hours: its delayed job is not missed yet
    await loseJob(later);
    await madeAgo(later, 3);
    // Written without a job, as if Redis lost it: pickup long past, and one dispatching that
    // changed a moment ago (its next step may be on its way).
    const base = {
      origin: 'api',
      passenger_name: 'Ada Lovelace',
      passengers: 1,
      vehicle_type: 'saloon',
      pickup: JSON.stringify({ name: 'Manchester Piccadilly', lat: 53.4774, lng: -2.2309 }),
      dropoff: JSON.stringify({ name: 'Manchester Airport', lat: 53.3588, lng: -2.2727 }),
      fare_pence: 4200,
    };
    const stale = uuidv7();
    const dispatching = uuidv7();
    await env.rt.db('bookings').insert([
      {
        ...base,
        id: stale,
        reference: 'DTN-STALE1',
        tracking_token_hash: randomBytes(32),
        status: 'pending',
        pickup_time: new Date(Date.now() - STRANDED_PICKUP_PAST_MS - 60_000),
        created_at: new Date(Date.now() - 3 * STRANDED_PICKUP_PAST_MS),
      },
      {
        ...base,
        id: dispatching,
        reference: 'DTN-DISP01',
        tracking_token_hash: randomBytes(32),
        status: 'dispatching',
        pickup_time: new Date(Date.now() + 10 * 60_000),
      },
    ]);
    const { requeued } = await rescueStrandedBookings(env.rt);
    for (const id of [later, stale, dispatching]) {
      expect(forRow(requeued, id)).toEqual([]);
      expect(await env.rt.queues.dispatch.getJob(`dispatch-${id}`)).toBeUndefined();
    }
    // The later booking is found once its dispatch time has passed by STRANDED_AFTER_MS.
    const due = new Date(Date.now() + 150 * 60_000 + STRANDED_AFTER_MS + 60_000);
    await relayed();
    expect(forRow((await rescueStrandedBookings(env.rt, due)).requeued, later)).toEqual([`dispatch-${later}`]);
    await env.rt.queues.dispatch.remove(`dispatch-${later}`);
  });

  it('finds a distance hire by its longer lead time, and leaves a local ride picked up as late', async () => {
    // Picked up in 100 minutes: a distance hire is due (2-hour lead), a local ride is not (30).
    const far = await bookTo('London Euston', 100);
    const local = await bookTo('Manchester Airport', 100);
    for (const id of [far, local]) {
      await loseJob(id);
      await madeAgo(id, 3);
    }
    const { requeued, errors } = await rescueStrandedBookings(env.rt);
    expect(errors).toEqual([]);
    expect(forRow(requeued, far)).toEqual([`dispatch-${far}`]);
    expect(forRow(requeued, local)).toEqual([]);
    for (const id of [far, local]) await env.rt.queues.dispatch.remove(`dispatch-${id}`);
  });

  it("queues an expired offer's lost time-out again, so dispatch moves on from it", async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Quiet Operator', actor: 'test' });
    // An offer to an operator that expired 3 minutes ago: its time-out job should have run.
    const live = await insertOfferedBooking(env.rt.db, 'DTN-LOST01', { partnerId: partner.id }, -3);
    // The same, still inside its time (expires in 10 minutes): nothing is missing yet.
    const current = await insertOfferedBooking(env.rt.db, 'DTN-LOST02', { partnerId: partner.id }, 10);
    // And one the time-out job is waiting for (a busy worker): left alone.
    const waiting = await insertOfferedBooking(env.rt.db, 'DTN-LOST03', { partnerId: partner.id }, -3);
    await env.rt.queues.dispatch.add(
      'offer-expired',
      { offerId: waiting.offerId },
      { jobId: `offer-expired-${waiting.offerId}` },
    );

    const { requeued } = await rescueStrandedBookings(env.rt);
    expect(forRow(requeued, live.offerId)).toEqual([`offer-expired-${live.offerId}`]);
    for (const b of [live, current, waiting]) expect(forRow(requeued, b.id)).toEqual([]);
    expect(forRow(requeued, current.offerId)).toEqual([]);
    expect(forRow(requeued, waiting.offerId)).toEqual([]);
    dispatchRole = startRoles(['dispatch'], env.rt);
    for (const b of [live, waiting]) {
      await eventually(async () =>
        (await env.rt.db('dispatch_offers').where({ id: b.offerId }).first('state')).state === 'expired' ? true : null,
      );
    }
    expect((await env.rt.db('dispatch_offers').where({ id: current.offerId }).first('state')).state).toBe('offered');
  });

  it("queues a lost cancellation again, so an offered operator's offer is withdrawn and an assigned driver is texted, once", async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Cancelled Operator', actor: 'test' });
    const driver = await approvedDriver(env.rt.db);
    // Cancelled 3 minutes ago, and the cancellation's job lost: one with an open offer, one
    // with an assigned driver never told.
    const offered = await insertOfferedBooking(env.rt.db, 'DTN-CANC01', { partnerId: partner.id }, 10);
    const assigned = await insertOfferedBooking(env.rt.db, 'DTN-CANC02', { driverId: driver.id }, 10);
    await env.rt.db('dispatch_offers').where({ id: assigned.offerId }).update({ state: 'accepted' });
    await env.rt.db('bookings').where({ id: assigned.id }).update({ driver_id: driver.id });
    // And one cancelled a moment ago: its job may be on its way.
    const fresh = await insertOfferedBooking(env.rt.db, 'DTN-CANC03', { partnerId: partner.id }, 10);
    const ago = new Date(Date.now() - 3 * 60_000);
    for (const b of [offered, assigned]) {
      await env.rt.db('bookings').where({ id: b.id }).update({ status: 'cancelled', updated_at: ago });
    }
    // Cancelled by the partner that booked it (a job's cancel): the driver is told so.
    await env.rt.db('booking_status_history').insert({
      booking_id: assigned.id,
      seq: 90,
      status: 'cancelled',
      actor: `partner:${partner.id}`,
      details: {},
      at: ago,
    });
    await env.rt.db('bookings').where({ id: fresh.id }).update({ status: 'cancelled', updated_at: new Date() });

    const { requeued, errors } = await rescueStrandedBookings(env.rt);
    expect(errors).toEqual([]);
    expect(forRow(requeued, offered.id)).toEqual([`cancelled-${offered.id}`]);
    expect(forRow(requeued, assigned.id)).toEqual([`cancelled-${assigned.id}`]);
    expect(forRow(requeued, fresh.id)).toEqual([]);

    dispatchRole = startRoles(['dispatch'], env.rt);
    await eventually(async () =>
      (await env.rt.db('dispatch_offers').where({ id: offered.offerId }).first('state')).state === 'withdrawn'
        ? true
        : null,
    );
    const told = await eventually(async () => {
      const rows = await env.rt.db('outbound_messages').where({ booking_id: assigned.id, purpose: 'job_cancelled' });
      return rows.length > 1 ? rows : null;
    });
    expect(told.map((m) => [m.driver_id, m.channel]).sort()).toEqual([
      [driver.id, 'sms'],
      [driver.id, 'whatsapp'],
    ]);
    expect(told[0]?.body).toBe(
      'Direct Taxi Network: job DTN-CANC02 has been cancelled by the booking partner. No action needed.',
    );
    // Done: nothing to find on the next pass.
    const again = await rescueStrandedBookings(env.rt);
    expect(forRow(again.requeued, offered.id)).toEqual([]);
    expect(forRow(again.requeued, assigned.id)).toEqual([]);
  });

  it("does not count an offer past its time towards a driver's jobs, even while its time-out is missing", async () => {
    const stale = await approvedDriver(env.rt.db);
    const live = await approvedDriver(env.rt.db);
    await insertOfferedBooking(env.rt.db, 'DTN-LOAD01', { driverId: stale.id }, -3);
    await insertOfferedBooking(env.rt.db, 'DTN-LOAD02', { driverId: live.id }, 10);
    const load = await env.rt.db.transaction((trx) => jobLoad(trx, 'driver', [stale.id, live.id]));
    expect(load.get(stale.id) ?? 0).toBe(0);
    expect(load.get(live.id)).toBe(1);
  });

  it('queues the next step of a booking left dispatching with no live offer (a decline whose next step was lost)', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Declining Operator', actor: 'test' });
    const b = await insertOfferedBooking(env.rt.db, 'DTN-DECL01', { partnerId: partner.id }, 10);
    // Declined 3 minutes ago; the step that should have followed never ran.
    const at = new Date(Date.now() - 3 * 60_000);
    await env.rt.db('dispatch_offers').where({ id: b.offerId }).update({ state: 'declined', responded_at: at });
    await env.rt.db('bookings').where({ id: b.id }).update({ updated_at: at });
    // One declined a moment ago: its next step may be on its way.
    const fresh = await insertOfferedBooking(env.rt.db, 'DTN-DECL02', { partnerId: partner.id }, 10);
    await env.rt
      .db('dispatch_offers')
      .where({ id: fresh.offerId })
      .update({ state: 'declined', responded_at: new Date() });

    const first = await rescueStrandedBookings(env.rt);
    const added = forRow(first.requeued, b.id);
    expect(added).toHaveLength(1);
    expect(added[0]).toMatch(new RegExp(`^dispatch-${b.id}-rescue-\\d+-1$`));
    expect(forRow(first.requeued, fresh.id)).toEqual([]);
    // The same state found again: its job is there, nothing added.
    expect(forRow((await rescueStrandedBookings(env.rt)).requeued, b.id)).toEqual([]);

    dispatchRole = startRoles(['dispatch'], env.rt);
    // Nobody else to ask (the operator declined; no driver is online).
    await eventually(async () => ((await statusOf(b.id)) === 'no_driver_available' ? true : null));
  });
  it("queues a lost retry of a booking nobody was free for under the retry's own id, so the tries stay one chain", async () => {
    dispatchRole = startRoles(['dispatch'], env.rt);
    // Pickup in 20 minutes, due at once; nobody is online: a try every 5 minutes until pickup.
    const id = await book(20);
    // And one picked up in 3 minutes: its next try would come after pickup, so none is due.
    const soon = await book(3);
    const retryOf = async (b: string) =>
      (await env.rt.db('bookings').where({ id: b }).first('dispatch_retry_at')).dispatch_retry_at as Date | null;
    const retryJob = (b: string, at: Date) => `dispatch-${b}-retry-${Math.floor(at.getTime() / 60_000)}`;
    for (const b of [id, soon]) {
      await eventually(async () => ((await statusOf(b)) === 'no_driver_available' ? true : null));
    }
    expect(await retryOf(soon)).toBeNull();
    const first = await retryOf(id);
    expect(first?.getTime()).toBeGreaterThan(Date.now() + 3 * 60_000);
    expect(await (await eventually(() => env.rt.queues.dispatch.getJob(retryJob(id, first as Date))))?.getState()).toBe(
      'delayed',
    );
    await dispatchRole.close();
    dispatchRole = null;

    // Redis lost the try, and its time passed 3 minutes ago (the row as the step wrote it then).
    await env.rt.queues.dispatch.remove(retryJob(id, first as Date));
    const due = new Date(Date.now() - 3 * 60_000);
    await env.rt.db('bookings').where({ id }).update({ dispatch_retry_at: due });
    // Not before its time is STRANDED_AFTER_MS past: the try may be on its way.
    const early = await rescueStrandedBookings(env.rt, new Date(due.getTime() + STRANDED_AFTER_MS - 1_000));
    expect(forRow(early.requeued, id)).toEqual([]);
    const { requeued, errors } = await rescueStrandedBookings(env.rt);
    expect(errors).toEqual([]);
    expect(forRow(requeued, id)).toEqual([retryJob(id, due)]);
    expect(forRow(requeued, soon)).toEqual([]);
    // Found again, its job is there: nothing added.
    expect(forRow((await rescueStrandedBookings(env.rt)).requeued, id)).toEqual([]);

    // The try runs, finds nobody again and queues the next one: one chain, one operator alert.
    dispatchRole = startRoles(['dispatch'], env.rt);
    await eventually(async () => (((await retryOf(id))?.getTime() ?? 0) > Date.now() ? true : null));
    const next = (await retryOf(id)) as Date;
    expect(await (await eventually(() => env.rt.queues.dispatch.getJob(retryJob(id, next))))?.getState()).toBe(
      'delayed',
    );
    expect(await statusOf(id)).toBe('no_driver_available');
    expect(await historyOf(id)).toEqual(['pending', 'dispatching', 'no_driver_available']);
    const alerts = await env.rt
      .db('outbound_messages')
      .where({ booking_id: id, purpose: 'operator_alert' })
      .count<{ n: string }[]>('* as n');
    expect(Number(alerts[0]?.n)).toBe(1);
    // Nothing overdue now.
    expect(forRow((await rescueStrandedBookings(env.rt)).requeued, id)).toEqual([]);
  });
});

describe('a dispatch job that comes too early', () => {
  it('waits for the new time when a partner moved the pickup later, instead of dispatching at the old one', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Moving Partner', actor: 'test' });
    const send = async (pickupTime: string, action?: string) => {
      const res = await fetch(`${api.url}/api/public/v1/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${partner.apiKey}` },
        body: JSON.stringify({
          jobRef: 'MOVE-1',
          ...(action ? { action } : {}),
          pickup: 'Manchester Piccadilly',
          dropoff: 'Manchester Airport',
          pickupTime,
          passengerName: 'Ada Lovelace',
          passengerPhone: '07700 900123',
        }),
      });
      const body = (await res.json()) as { results: { bookingReference: string; outcome: string }[] };
      expect([200, 201], JSON.stringify(body)).toContain(res.status);
      return body.results[0] as { bookingReference: string; outcome: string };
    };
    // Pickup in 2 hours: dispatch at 1.5 hours. Then the flight is late: pickup in 5 hours.
    const created = await send(new Date(Date.now() + 2 * 3600_000).toISOString());
    const { id } = await env.rt.db('bookings').where({ reference: created.bookingReference }).first('id');
    const original = await eventually(() => env.rt.queues.dispatch.getJob(`dispatch-${id}`));
    expect(await original.getState()).toBe('delayed');
    const newPickup = new Date(Date.now() + 5 * 3600_000);
    expect((await send(newPickup.toISOString(), 'amend')).outcome).toBe('amended');

    // The old job's time comes (promoted: run now) with the dispatch worker running.
    dispatchRole = startRoles(['dispatch'], env.rt);
    await original.promote();
    await eventually(async () => ((await original.getState()) === 'completed' ? true : null));
    // Not dispatched: still pending, and a job waits for pickup minus the lead time.
    expect(await statusOf(id)).toBe('pending');
    expect(await historyOf(id)).toEqual(['pending']);
    const pickup = (await env.rt.db('bookings').where({ id }).first('pickup_time')).pickup_time as Date;
    const dispatchAt = pickup.getTime() - env.config.bookings.dispatchLeadMinutes * 60_000;
    const deferred = await eventually(() => env.rt.queues.dispatch.getJob(`dispatch-${id}-at-${dispatchAt}`));
    expect(await deferred.getState()).toBe('delayed');
    expect(deferred.timestamp + deferred.delay).toBeGreaterThan(dispatchAt - 5_000);
    expect(deferred.timestamp + deferred.delay).toBeLessThan(dispatchAt + 5_000);
    // Run early again (promoted), it dispatches nothing either: still pending. (Its id is then
    // spent; the check for lost jobs queues one 2 minutes after the dispatch time.)
    await deferred.promote();
    await eventually(async () => ((await deferred.getState()) === 'completed' ? true : null));
    expect(await statusOf(id)).toBe('pending');
    const due = new Date(dispatchAt + STRANDED_AFTER_MS + 1_000);
    await relayed();
    expect((await rescueStrandedBookings(env.rt, due)).requeued).toContain(`dispatch-${id}-rescue`);
  });
});

describe('with the outbox relay behind', () => {
  const presence = async (token: string, available: boolean) => {
    const res = await fetch(`${api.url}/api/public/v1/driver/presence`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      // At Manchester Piccadilly, where the bookings are picked up.
      body: JSON.stringify({ available, lat: 53.4774, lng: -2.2309 }),
    });
    expect(res.status, await res.text()).toBe(200);
  };
  const BEHIND = /outbox relay is behind/;

  it('rescues nothing while a dispatch job waits unrelayed; the relay back, the booking is offered once and its job cards sent', async () => {
    const driver = await approvedDriver(env.rt.db);
    await presence(driver.token, true);
    // The relay stops: the roles run again without it.
    await roles.close();
    roles = startRoles(['pricing'], env.rt);
    try {
      // Picked up in 10 minutes (due at once), made 3 minutes ago, and its dispatch job written
      // as long ago: never moved to Redis, as if the relay had been down all that time.
      const id = await place('Manchester Airport', 10);
      await madeAgo(id, 3);
      const row = await env.rt
        .db('outbox')
        .where({ job_id: `dispatch-${id}` })
        .whereNull('relayed_at')
        .first('id');
      expect(row).toBeDefined();
      await env.rt
        .db('outbox')
        .where({ id: row.id })
        .update({ created_at: new Date(Date.now() - 3 * 60_000) });
      expect(await env.rt.queues.dispatch.getJob(`dispatch-${id}`)).toBeUndefined();

      // Not a lost job, a job still on its way: the rescue does nothing, and says why.
      const { requeued, errors, relayBehind } = await rescueStrandedBookings(env.rt);
      expect(errors).toEqual([]);
      expect(forRow(requeued, id)).toEqual([]);
      expect(relayBehind).toMatchObject({ outboxId: row.id, queue: 'dispatch', jobName: 'dispatch-booking' });

      // The dispatch role runs the same check as it starts: it warns, naming the row, and queues nothing.
      const log = capturingLogger();
      dispatchRole = startRoles(['dispatch'], { ...env.rt, logger: log.logger });
      const warning = await eventually(async () => log.lines.find((l) => BEHIND.test(String(l.msg))));
      expect(warning).toMatchObject({ level: 40, workerRole: 'dispatch', outboxId: row.id, queue: 'dispatch' });
      expect(warning.waitingSeconds).toBeGreaterThanOrEqual(180);
      expect(await env.rt.queues.dispatch.getJob(`dispatch-${id}`)).toBeUndefined();
      expect(await env.rt.db('dispatch_offers').where({ booking_id: id })).toEqual([]);
      expect(await statusOf(id)).toBe('pending');

      // The relay back (and the notify role, for the job cards): the booking's own job dispatches it.
      await roles.close();
      roles = startRoles(['pricing', 'outbox-relay', 'notify'], env.rt);
      const offer = await eventually(() => env.rt.db('dispatch_offers').where({ booking_id: id }).first());
      expect(offer).toMatchObject({ driver_id: driver.id, state: 'offered' });
      const cards = await eventually(async () => {
        const rows = await env.rt.db('outbound_messages').where({ booking_id: id, purpose: 'job_card' });
        return rows.length === 2 && rows.every((m) => m.state === 'sent') ? rows : null;
      });
      expect(cards.map((m) => [m.driver_id, m.channel]).sort()).toEqual([
        [driver.id, 'sms'],
        [driver.id, 'whatsapp'],
      ]);
      const { reference } = await env.rt.db('bookings').where({ id }).first('reference');
      expect(twilio.requests.filter((r) => r.form.Body?.includes(reference))).toHaveLength(2);
      // Sent while the offer was open: the driver can still take it. And one offer, to them.
      const offers = await env.rt.db('dispatch_offers').where({ booking_id: id });
      expect(offers.map((o) => [o.driver_id, o.state])).toEqual([[driver.id, 'offered']]);
      expect(await historyOf(id)).toEqual(['pending', 'dispatching']);
      // Nothing in the log about lost jobs: none was.
      expect(log.lines.filter((l) => /missing from the queue/.test(String(l.msg)))).toEqual([]);
    } finally {
      await presence(driver.token, false);
      await dispatchRole?.close();
      dispatchRole = null;
      await roles.close();
      roles = startRoles(['pricing', 'outbox-relay'], env.rt);
    }
  });

  /**
   * A lost dispatch job is queued again beside an unrelayed outbox row written a day ago that
   * no relay of this build will move: the row must not switch the rescue off for good.
   */
  const rescuedBeside = async (row: Record<string, unknown>) => {
    const [waiting] = await env.rt
      .db('outbox')
      .insert({ ...row, created_at: new Date(Date.now() - 24 * 3600_000) })
      .returning<{ id: number }[]>('id');
    try {
      const lost = await book(10);
      await loseJob(lost);
      await madeAgo(lost, 3);
      await relayed();
      const { requeued, errors, relayBehind } = await rescueStrandedBookings(env.rt);
      expect(errors).toEqual([]);
      expect(relayBehind).toBeNull();
      expect(forRow(requeued, lost)).toEqual([`dispatch-${lost}`]);
      await env.rt.queues.dispatch.remove(`dispatch-${lost}`);
      return await env.rt.db('outbox').where({ id: waiting?.id }).first('relayed_at', 'attempts');
    } finally {
      await env.rt.db('outbox').where({ id: waiting?.id }).delete();
    }
  };

  it('is not held back by rows no relay of this build takes (a queue it does not know)', async () => {
    // Written by a release since rolled back, naming a queue this build has no worker for: it
    // waits unrelayed for ever (the relay reports it hourly).
    await rescuedBeside({
      queue: 'retired',
      job_name: 'retired-job',
      payload: JSON.stringify({}),
      job_id: 'retired-1',
    });
  });

  it('is not held back by a row the relay has set aside (BullMQ refused it every time)', async () => {
    // A job id BullMQ refuses (all digits), failed OUTBOX_MAX_ATTEMPTS times: the relay no
    // longer takes it, and logged it when it set it aside.
    const row = await rescuedBeside({
      queue: 'notify',
      job_name: 'send-message',
      payload: JSON.stringify({ messageId: uuidv7() }),
      job_id: '12345',
      attempts: OUTBOX_MAX_ATTEMPTS,
      last_error: 'Custom Id cannot be integers',
    });
    expect(row).toEqual({ relayed_at: null, attempts: OUTBOX_MAX_ATTEMPTS });
  });
});
