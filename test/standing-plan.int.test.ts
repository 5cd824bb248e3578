import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { passengerStanding, STANDING_SQL } from '../shared/services/bookings.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';

/**
 * Every booking reads its passenger's standing (block, verified e-mail, the quote to redeem)
 * with one statement per batch of bookings. Its cost must not grow with the tables: each asked
 * row is an index probe, never a scan of every verification or quote ever stored. The planner
 * guesses 100 rows for any JSON batch, which once made it answer `verified` with a hashed
 * subplan over the whole verifications table on every read.
 */
let env: TestEnv;

const VERIFICATIONS = 6_000;
const QUOTES = 6_000;

beforeAll(async () => {
  env = await createTestEnv();
  const db = env.rt.db;
  // Thousands of rows, a sixth of the addresses confirmed, as a few weeks of bookings leave them.
  await db.raw(
    `insert into email_verifications (id, email, code_hash, link_token_hash, expires_at, verified_at)
     select gen_random_uuid(), 'rider-' || g || '@example.org', '\\x00', sha256(g::text::bytea), now() + interval '1 day',
            case when g % 6 = 0 then now() end
     from generate_series(1, ?) g`,
    [VERIFICATIONS],
  );
  await db.raw(
    `insert into quotes (id, expires_at, pickup, dropoff, depart_at, vehicle_type, passengers, distance_miles,
                         duration_minutes, fare_pence, tariff_source, base_url)
     select gen_random_uuid(), now() + interval '1 day', '{"name":"Leeds"}', '{"name":"York"}', now() + interval '2 days',
            'saloon', 1, 24, 40, 5200, '{"kind":"council"}', 'http://localhost:3000'
     from generate_series(1, ?) g`,
    [QUOTES],
  );
  await db.raw('analyze email_verifications');
  await db.raw('analyze quotes');
});
afterAll(async () => {
  await env?.cleanup();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Subplan Name'?: string;
  Plans?: PlanNode[];
}

const nodesOf = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodesOf)];

describe('passenger standing read', () => {
  it('reads the standing by index probes, never a scan of the verifications or quotes tables', async () => {
    const db = env.rt.db;
    const [someQuote] = await db('quotes').limit(1).pluck('id');
    const batch = Array.from({ length: 40 }, (_, i) => ({
      i,
      phone: `+4477009${String(i).padStart(5, '0')}`,
      email: `rider-${i * 7 + 1}@example.org`,
      quote: i % 2 === 0 ? someQuote : null,
    }));
    const explained = await db.raw<{ rows: { 'QUERY PLAN': { Plan: PlanNode }[] }[] }>(
      `explain (format json) ${STANDING_SQL}`,
      [JSON.stringify(batch)],
    );
    const plan = explained.rows[0]?.['QUERY PLAN'][0]?.Plan as PlanNode;
    const nodes = nodesOf(plan);
    const scanned = nodes
      .filter(
        (n) => n['Node Type'] === 'Seq Scan' && ['email_verifications', 'quotes'].includes(n['Relation Name'] ?? ''),
      )
      .map((n) => n['Relation Name']);
    expect(scanned).toEqual([]);
    expect(nodes.filter((n) => n['Subplan Name']?.startsWith('hashed'))).toEqual([]);
    // And the probes find what is there.
    expect(nodes.some((n) => n['Relation Name'] === 'email_verifications')).toBe(true);
    expect(nodes.some((n) => n['Relation Name'] === 'quotes')).toBe(true);
  });

  it('answers verified for a confirmed address only, and finds the quote asked for', async () => {
    const db = env.rt.db;
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
});
