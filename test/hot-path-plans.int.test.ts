import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../shared/db/knex.ts';
import { OUTBOX_MAX_ATTEMPTS } from '../shared/db/outbox.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { passengerStanding, REDEEM_MANY_GUARD, STANDING_SQL } from '../shared/services/bookings.ts';
import { jobLoad, rescueStrandedBookings } from '../shared/services/dispatch.ts';
import { jobFeed } from '../shared/services/driver-jobs.ts';
import { applyDriver } from '../shared/services/drivers.ts';
import { queueStatusFanout } from '../shared/services/webhooks.ts';
import type { WorkerContext } from '../workers/context.ts';
import { deliverInSlot } from '../workers/fanout/deliver-webhook.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * Statements on hot or growing paths must cost the same whatever the tables hold: each is an
 * index probe, never a scan of every booking, quote, verification, partner job, offer or
 * delivery ever stored. Checked on tables of thousands of rows spread as a few weeks of
 * traffic leave them (most bookings finished, most deliveries delivered), with the plans of the
 * statements the code really sends: captured from knex's query events where the code builds
 * them, the exported text where it is a constant. The planner guesses 100 rows for any JSON
 * set, which is how the standing read and the redemption guard came to hash whole tables.
 */
let env: TestEnv;
let db: Db;
let api: Served;

const ROWS = 6_000;
const PARTNERS = 40;
let partnerIds: string[] = [];
let operatorIds: string[] = [];
let bookingId = '';
let deliveredId = '';
let pendingId = '';

beforeAll(async () => {
  env = await createTestEnv();
  db = env.rt.db;
  // Thousands of rows, a sixth of the addresses confirmed, as a few weeks of bookings leave them.
  await db.raw(
    `insert into email_verifications (id, email, code_hash, link_token_hash, expires_at, verified_at)
     select gen_random_uuid(), 'rider-' || g || '@example.org', '\\x00', sha256(g::text::bytea), now() + interval '1 day',
            case when g % 6 = 0 then now() end
     from generate_series(1, ?) g`,
    [ROWS],
  );
  await db.raw(
    `insert into quotes (id, expires_at, pickup, dropoff, depart_at, vehicle_type, passengers, distance_miles,
                         duration_minutes, fare_pence, tariff_source, base_url)
     select gen_random_uuid(), now() + interval '1 day', '{"name":"Leeds"}', '{"name":"York"}', now() + interval '2 days',
            'saloon', 1, 24, 40, 5200, '{"kind":"council"}', 'http://localhost:3000'
     from generate_series(1, ?) g`,
    [ROWS],
  );
  // Partners, a quarter of them operators; bookings spread over them, nine in ten finished.
  partnerIds = Array.from({ length: PARTNERS }, () => uuidv7());
  await db('partners').insert(
    partnerIds.map((id, i) => ({
      id,
      name: `Partner ${i}`,
      signing_secret_sealed: 'sealed',
      is_operator: i % 4 === 0,
    })),
  );
  operatorIds = partnerIds.filter((_, i) => i % 4 === 0);
  await db.raw(
    `insert into bookings (id, reference, origin, status, passenger_name, pickup, dropoff, pickup_time, tracking_token_hash,
                           partner_id, operator_partner_id, api_key_id, test_mode)
     select gen_random_uuid(), 'DTN-' || lpad(g::text, 6, '0'), 'partner',
            case when g % 10 = 0 then 'driver_assigned' else (array['completed', 'cancelled'])[1 + g % 2] end,
            'Rider ' || g, '{"name":"Leeds","lat":53.8,"lng":-1.5}', '{"name":"York","lat":53.9,"lng":-1.1}',
            now() - make_interval(hours => g), sha256(('b' || g)::bytea),
            (?::uuid[])[1 + g % ?], case when g % 3 = 0 then (?::uuid[])[1 + g % ?] end, null, g % 20 = 0
     from generate_series(1, ?) g`,
    [partnerIds, PARTNERS, operatorIds, operatorIds.length, ROWS],
  );
  await db.raw(
    `insert into partner_jobs (id, job_ref, last_action, content_hash, payload, partner_id, booking_id)
     select gen_random_uuid(), 'JOB-' || b.reference, 'new', sha256(b.reference::bytea), '{}', b.partner_id, b.id
     from bookings b`,
  );
  await db.raw(
    `insert into dispatch_offers (id, booking_id, tier, attempt, state, partner_id, expires_at)
     select gen_random_uuid(), b.id, 3, 1, case when b.status = 'driver_assigned' then 'accepted' else 'expired' end,
            b.operator_partner_id, b.pickup_time
     from bookings b where b.operator_partner_id is not null`,
  );
  const endpoint = uuidv7();
  await db('webhook_endpoints').insert({
    id: endpoint,
    url: 'https://partner.example.org/hooks',
    secret_sealed: 'sealed',
    partner_id: partnerIds[1],
  });
  // Deliveries, all delivered when the statistics are taken...
  await db.raw(
    `insert into webhook_deliveries (id, endpoint_id, booking_id, event_type, sequence, message_id, payload, state)
     select gen_random_uuid(), ?, b.id, 'booking.status', 1, 'msg_' || b.id, '{}', 'delivered' from bookings b`,
    [endpoint],
  );
  // A fleet: thousands of drivers, each with their own licence.
  await db.raw(
    `insert into drivers (id, name, phone, email, status, licensing_authority, licence_number, licence_expiry,
                          home_city, home_lat, home_lng, operating_radius_miles)
     select gen_random_uuid(), 'Driver ' || g, '+4477009' || lpad(g::text, 5, '0'), 'driver-' || g || '@example.org',
            'approved', 'Council ' || (g % 40), 'PH-' || g, '2030-01-01', 'Leeds', 53.8, -1.55, 20
       from generate_series(1, 6000) g`,
  );
  // The outbox: a week of relayed rows (kept for audit), as the relay's housekeeping leaves it.
  await db.raw(
    `insert into outbox (queue, job_name, payload, job_id, created_at, relayed_at)
     select 'notify', 'send-message', '{}', 'message-' || g, now() - make_interval(mins => g), now() - make_interval(mins => g)
     from generate_series(1, ?) g`,
    [ROWS],
  );
  for (const table of [
    'outbox',
    'email_verifications',
    'quotes',
    'partners',
    'bookings',
    'partner_jobs',
    'dispatch_offers',
    'drivers',
  ])
    await db.raw('analyze ??', [table]);
  await db.raw('analyze webhook_deliveries');
  // A relay keeping up: a few rows written a moment ago, not moved yet. And old rows naming a
  // queue this build does not know (never relayed), and old rows the relay set aside (BullMQ
  // refused them every time): none holds the rescue of lost jobs back.
  await db.raw(
    `insert into outbox (queue, job_name, payload, job_id, created_at)
     select case when g % 2 = 0 then 'retired' else 'notify' end, 'send-message', '{}', 'message-new-' || g,
            case when g % 2 = 0 then now() - interval '1 day' else now() end
     from generate_series(1, 20) g`,
  );
  await db.raw(
    `insert into outbox (queue, job_name, payload, job_id, created_at, attempts, last_error)
     select 'notify', 'send-message', '{}', (90000 + g)::text, now() - interval '1 day', ?, 'Custom Id cannot be integers'
     from generate_series(1, 5) g`,
    [OUTBOX_MAX_ATTEMPTS],
  );
  // ...then an endpoint goes down: thousands pending that the statistics do not know of.
  await db.raw(
    `insert into webhook_deliveries (id, endpoint_id, booking_id, event_type, sequence, message_id, payload, state)
     select gen_random_uuid(), ?, b.id, 'booking.status', 2, 'msg2_' || b.id, '{}', 'pending' from bookings b`,
    [endpoint],
  );
  bookingId = (await db('bookings').where('partner_id', partnerIds[1]).first('id')).id;
  deliveredId = (await db('webhook_deliveries').where('state', 'delivered').first('id')).id;
  pendingId = (await db('webhook_deliveries').where('state', 'pending').first('id')).id;
  api = await serve(await appFor(env));
});
afterAll(async () => {
  await api?.close();
  await env?.cleanup();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Subplan Name'?: string;
  Plans?: PlanNode[];
}

const nodesOf = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodesOf)];

/**
 * The planner's settings at Postgres's defaults, whatever the server is configured with: the
 * plans are compared, and a server tuned otherwise (a higher random_page_cost, say) may rightly
 * prefer another plan for these few thousand rows.
 */
const PLANNER_DEFAULTS: Record<string, string> = {
  seq_page_cost: '1',
  random_page_cost: '4',
  cpu_tuple_cost: '0.01',
  cpu_index_tuple_cost: '0.005',
  cpu_operator_cost: '0.0025',
  effective_cache_size: "'4GB'",
  work_mem: "'4MB'",
  enable_seqscan: 'on',
  enable_indexscan: 'on',
  enable_bitmapscan: 'on',
  enable_hashjoin: 'on',
  enable_nestloop: 'on',
  enable_mergejoin: 'on',
  plan_cache_mode: 'auto',
};

/** The plan of a statement written with knex's `?` placeholders (EXPLAIN only: nothing runs). */
async function planOf(sql: string, bindings: readonly unknown[]): Promise<PlanNode[]> {
  return db.transaction(async (trx) => {
    for (const [name, value] of Object.entries(PLANNER_DEFAULTS)) await trx.raw(`set local ${name} = ${value}`);
    const explained = await trx.raw<{ rows: { 'QUERY PLAN': { Plan: PlanNode }[] }[] }>(
      `explain (format json, verbose) ${sql}`,
      bindings as never,
    );
    return nodesOf(explained.rows[0]?.['QUERY PLAN'][0]?.Plan as PlanNode);
  });
}

/** The statements `run` sends, as knex reports them (`$n` placeholders turned back into `?`). */
async function captured(run: () => Promise<unknown>): Promise<{ sql: string; bindings: unknown[] }[]> {
  const seen: { sql: string; bindings: unknown[] }[] = [];
  const watch = (q: { sql: string; bindings?: unknown[] }) => {
    seen.push({ sql: q.sql.replace(/\$\d+/g, '?'), bindings: q.bindings ?? [] });
  };
  db.on('query', watch);
  try {
    await run();
  } finally {
    db.off('query', watch);
  }
  return seen;
}

const BIG = [
  'bookings',
  'quotes',
  'email_verifications',
  'partner_jobs',
  'dispatch_offers',
  'webhook_deliveries',
  'drivers',
  'outbox',
];

/** The big tables a plan reads whole: sequential scans, and any hashed subplan. */
function wholeTableReads(nodes: PlanNode[]): string[] {
  return [
    ...nodes
      .filter((n) => n['Node Type'] === 'Seq Scan' && BIG.includes(n['Relation Name'] ?? ''))
      .map((n) => `seq scan of ${n['Relation Name']}`),
    // A hashed subplan reads its whole input once to build the hash, by whatever scan: the plan
    // names it only where it is used ("hashed SubPlan 2" in a node's output or filter).
    ...nodes.flatMap((n) => {
      const { Plans: _children, ...own } = n;
      return JSON.stringify(own).match(/hashed SubPlan \d+/g) ?? [];
    }),
  ];
}

async function plansOfStatements(
  run: () => Promise<unknown>,
  about: RegExp,
): Promise<{ sql: string; nodes: PlanNode[] }[]> {
  const statements = (await captured(run)).filter((s) => about.test(s.sql) && !/^(begin|commit|rollback)/i.test(s.sql));
  expect(statements.length).toBeGreaterThan(0);
  return Promise.all(statements.map(async (s) => ({ sql: s.sql, nodes: await planOf(s.sql, s.bindings) })));
}

describe('hot-path statements read by index, whatever the tables hold', () => {
  it('reads the standing by index probes, never a scan of the verifications or quotes tables', async () => {
    const [someQuote] = await db('quotes').limit(1).pluck('id');
    const batch = Array.from({ length: 40 }, (_, i) => ({
      i,
      phone: `+4477009${String(i).padStart(5, '0')}`,
      email: `rider-${i * 7 + 1}@example.org`,
      quote: i % 2 === 0 ? someQuote : null,
    }));
    const nodes = await planOf(STANDING_SQL, [JSON.stringify(batch)]);
    expect(wholeTableReads(nodes)).toEqual([]);
    // And the probes are there.
    expect(nodes.some((n) => n['Relation Name'] === 'email_verifications')).toBe(true);
    expect(nodes.some((n) => n['Relation Name'] === 'quotes')).toBe(true);
  });

  it('answers verified for a confirmed address only, and finds the quote asked for', async () => {
    const [quoteId] = await db('quotes').limit(1).pluck('id');
    const [confirmed, unconfirmed, unknown] = await Promise.all([
      passengerStanding(db, { name: 'Ria', email: 'Rider-6@example.org', phone: '+447700900301' }, quoteId),
      passengerStanding(db, { name: 'Sol', email: 'rider-7@example.org', phone: '+447700900302' }),
      passengerStanding(db, { name: 'Tam', email: 'nobody@example.org', phone: '+447700900303' }, uuidv7()),
    ]);
    expect(confirmed).toMatchObject({ emailVerified: true, quote: { id: quoteId, fare_pence: 5200 } });
    expect(unconfirmed).toEqual({ emailVerified: false });
    expect(unknown).toEqual({ emailVerified: false, quote: null });
  });

  it('redeems a batch of quotes by their primary key', async () => {
    const ids = await db('quotes').orderByRaw('random()').limit(40).pluck('id');
    const nodes = await planOf(REDEEM_MANY_GUARD, [ids]);
    expect(wholeTableReads(nodes)).toEqual([]);
    expect(nodes.some((n) => n['Index Name'] === 'quotes_pkey')).toBe(true);
  });

  it("finds a booking's partner job for its status webhook by index", async () => {
    const plans = await plansOfStatements(
      () =>
        db
          .transaction(async (trx) => {
            await queueStatusFanout(trx, bookingId, 'driver_assigned', 3);
            throw new Error('roll back');
          })
          .catch((err: Error) => {
            if (err.message !== 'roll back') throw err;
          }),
      /from "partner_jobs"/,
    );
    for (const p of plans) expect(wholeTableReads(p.nodes), p.sql).toEqual([]);
  });

  it("reads an operator's and a partner's job feed and an operator's load by index", async () => {
    const operator = operatorIds[1] as string;
    const feed = await plansOfStatements(
      () => jobFeed(db, { kind: 'partner', id: operator, testMode: false }),
      /from "(bookings|dispatch_offers)"/,
    );
    for (const p of feed) expect(wholeTableReads(p.nodes), p.sql).toEqual([]);
    const load = await plansOfStatements(
      () =>
        db
          .transaction(async (trx) => {
            await jobLoad(trx, 'partner', operatorIds);
          })
          .then(() => undefined),
      /from bookings/,
    );
    for (const p of load) expect(wholeTableReads(p.nodes), p.sql).toEqual([]);
  });

  it('looks for lost dispatch jobs by index, not through every booking and offer ever made', async () => {
    let relayBehind: unknown;
    const plans = await plansOfStatements(
      async () => ({ relayBehind } = await rescueStrandedBookings({ db, queues: env.rt.queues, config: env.config })),
      /from "?(bookings|dispatch_offers|outbox)"?/,
    );
    // Neither the fresh rows, nor those of an unknown queue, nor those set aside count as a relay behind: it looked.
    expect(relayBehind).toBeNull();
    expect(plans).toHaveLength(7);
    for (const p of plans) expect(wholeTableReads(p.nodes), p.sql).toEqual([]);
    // Whether the relay is behind: a probe of the partial index of rows still to move, not a
    // read of a week of relayed rows.
    const outbox = plans.filter((p) => /from "outbox"/.test(p.sql));
    expect(outbox).toHaveLength(1);
    const reads = outbox[0]?.nodes.filter((n) => n['Relation Name'] === 'outbox') ?? [];
    expect(reads.map((n) => n['Index Name'])).toEqual(['outbox_unrelayed']);
  });

  it('claims a webhook delivery by its primary key, however many are pending', async () => {
    const ctx = { db } as unknown as WorkerContext;
    const plans = await plansOfStatements(
      // The attempt itself (its endpoint slot taken): the claim is the statement under test.
      () => deliverInSlot(deliveredId, ctx),
      /update "webhook_deliveries"/,
    );
    for (const p of plans) {
      expect(wholeTableReads(p.nodes), p.sql).toEqual([]);
      const reads = p.nodes.filter(
        (n) => n['Relation Name'] === 'webhook_deliveries' && n['Node Type'] !== 'ModifyTable',
      );
      expect(reads.map((n) => n['Index Name'])).toEqual(['webhook_deliveries_pkey']);
    }
    // The pending one is still pending: the delivered one's claim touched nothing.
    expect(await db('webhook_deliveries').where({ id: pendingId }).first('state', 'attempts')).toEqual({
      state: 'pending',
      attempts: 0,
    });
  });

  it("looks an application's licence up by index, not through the whole fleet", async () => {
    const plans = await plansOfStatements(
      () =>
        applyDriver(
          db,
          {
            name: 'Lena Licence',
            phone: '+447700955555',
            email: 'lena.licence@example.org',
            licensingAuthority: 'Leeds City Council',
            licenceNumber: 'PH-LOOKUP-1',
            licenceExpiry: '2030-01-01',
            vehicle: {
              make: 'Toyota',
              model: 'Prius',
              colour: 'Silver',
              registration: 'LK70 ABC',
              class: 'saloon',
              seats: 4,
              wheelchairAccessible: false,
            },
            homeCity: 'Leeds',
            operatingRadiusMiles: 20,
          },
          { actor: 'test' },
        ),
      /^select .* from "drivers"/,
    );
    // By the index on the lower-cased authority: the unique index (authority as written, then
    // licence) can only be read whole for it, with the licence as a filter.
    expect(
      plans.map((p) => p.nodes.filter((n) => n['Relation Name'] === 'drivers').map((n) => n['Index Name'])),
    ).toEqual([['drivers_licence_lookup']]);
  });

  it("reads a sandbox key's recorded messages from its own test bookings, not from every booking", async () => {
    const key = await createApiKey(db, { serviceCode: 'dtn', name: 'sandbox', partnerId: partnerIds[2], mode: 'test' });
    const plans = await plansOfStatements(async () => {
      const res = await fetch(`${api.url}/api/public/v1/test/messages`, {
        headers: { [env.config.apiKeyHeader]: key.key },
      });
      expect(res.status).toBe(200);
    }, /from "outbound_messages"/);
    for (const p of plans) expect(wholeTableReads(p.nodes), p.sql).toEqual([]);
  });
});
