import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../shared/db/knex.ts';
import { rawNamed } from '../shared/db/prepared.ts';
import { passengerStanding } from '../shared/services/bookings.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';

/**
 * Hot statements run prepared (`rawNamed`): parsed and planned once per connection, and still
 * working when a migration changes the rows they return, which makes Postgres refuse a
 * prepared statement ("cached plan must not change result type"). One connection, so every
 * call meets the statement prepared before.
 */
let env: TestEnv;
let db: Db;

beforeAll(async () => {
  env = await createTestEnv();
  db = createDb(env.config, { poolMax: 1 });
});
afterAll(async () => {
  await db?.destroy();
  await env?.cleanup();
});

const preparedLike = async (prefix: string) =>
  (
    await db.raw<{ rows: { name: string }[] }>('select name from pg_prepared_statements where statement like ?', [
      `${prefix}%`,
    ])
  ).rows;

describe('rawNamed', () => {
  it('prepares a statement once and keeps answering after a migration adds a column to what it returns', async () => {
    await db.raw('create table notes (id int primary key, body text)');
    await db('notes').insert({ id: 1, body: 'a' });
    const sql = 'select n.* from notes n where id = ?';
    expect((await rawNamed<{ rows: unknown[] }>(db, sql, [1])).rows).toEqual([{ id: 1, body: 'a' }]);
    expect((await rawNamed<{ rows: unknown[] }>(db, sql, [1])).rows).toEqual([{ id: 1, body: 'a' }]);
    const [prepared, ...more] = await preparedLike('select n.* from notes');
    expect(prepared?.name).toMatch(/^dtn_[0-9a-f]{24}$/);
    expect(more).toEqual([]);

    await db.raw('alter table notes add column author text');
    // The hazard: the statement as prepared is refused now.
    await expect(db.raw(sql, [1]).options({ name: prepared?.name })).rejects.toThrow(/must not change result type/);
    // rawNamed prepares it again under a new name and answers with the new column.
    expect((await rawNamed<{ rows: unknown[] }>(db, sql, [1])).rows).toEqual([{ id: 1, body: 'a', author: null }]);
    expect((await preparedLike('select n.* from notes')).map((p) => p.name)).not.toEqual([prepared?.name]);
  });

  it('runs unnamed inside a transaction', async () => {
    const sql = 'select 42 as answer_in_a_transaction';
    await db.transaction(async (trx) => {
      expect((await rawNamed<{ rows: unknown[] }>(trx, sql, [])).rows).toEqual([{ answer_in_a_transaction: 42 }]);
    });
    expect(await preparedLike('select 42 as answer_in_a_transaction')).toEqual([]);
  });

  it('keeps the passenger standing read (it names the quote columns it reads) working across a column added to quotes', async () => {
    const standing = () =>
      passengerStanding(db, { name: 'Ada', email: 'ada@example.org', phone: '+447700900123' }, uuidv7());
    expect(await standing()).toEqual({ emailVerified: false, quote: null });
    await db.raw('alter table quotes add column promo_code text');
    expect(await standing()).toEqual({ emailVerified: false, quote: null });
  });
});
