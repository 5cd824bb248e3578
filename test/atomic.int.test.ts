import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertAllIf, insertManyIf, type KeyedRowInsert } from '../shared/db/atomic.ts';
import type { Db } from '../shared/db/knex.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';

/**
 * `insertManyIf` writes many units (each a key and its rows, over several tables) in one
 * statement, only the units whose key the guard returns. A table's rows travel as one JSON
 * array and their keys as a parallel array matched by position, so a unit's rows must land
 * with their own values whatever the keys look like and however many rows each unit has.
 */
let env: TestEnv;
let db: Db;

beforeAll(async () => {
  env = await createTestEnv({ migrate: false });
  db = env.rt.db;
  await db.raw('create table units (key text primary key, label text not null, colour text)');
  await db.raw(
    `create table parts (id serial primary key, unit text not null, n int not null, data jsonb, note text not null default 'plain')`,
  );
  await db.raw(
    'create table stamps (key text primary key, a timestamptz, b timestamptz, c timestamptz, h bytea, data jsonb)',
  );
});
afterAll(async () => {
  await env?.cleanup();
});

// Keys that a text array literal must quote: commas, quotes, backslashes, braces, spaces, the word NULL.
const KEYS = ['a,b', 'c"d', 'e\\f', '{g}', 'h i', 'NULL', 'ünï', 'plain'];

// Sorted in JS, not by Postgres, whose collation orders punctuation differently.
const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
const byUnit = (a: { unit: string; n: number }, b: { unit: string; n: number }) =>
  a.unit === b.unit ? a.n - b.n : a.unit < b.unit ? -1 : 1;

describe('insertManyIf', () => {
  it('writes the rows of the units its guard lets through, each row with its own values, and nothing of the others', async () => {
    const allowed = KEYS.filter((_, i) => i % 3 !== 1);
    const inserts: KeyedRowInsert[] = [];
    KEYS.forEach((key, i) => {
      inserts.push({ table: 'units', key, row: { key, label: `unit ${i}` } });
      // 0, 1 or 2 parts per unit, so positions differ between the tables.
      for (let n = 0; n < i % 3; n++) inserts.push({ table: 'parts', key, row: { unit: key, n, data: { i, n } } });
      // A second shape of row for the same table (a column more) goes as its own group.
      if (i % 2 === 0) inserts.push({ table: 'parts', key, row: { unit: key, n: 9, data: null, note: `odd ${i}` } });
    });
    const passed = await insertManyIf(
      db,
      { sql: 'select k as key, ? as colour from unnest(?::text[]) k', bindings: ['blue', allowed] },
      inserts,
    );
    expect([...passed].sort()).toEqual([...allowed].sort());

    const units = await db('units').select('key', 'label', 'colour');
    expect(units.sort(byKey)).toEqual(
      allowed.map((key) => ({ key, label: `unit ${KEYS.indexOf(key)}`, colour: null })).sort(byKey),
    );
    const parts = await db('parts').select('unit', 'n', 'data', 'note');
    const expected = allowed.flatMap((key) => {
      const i = KEYS.indexOf(key);
      return [
        ...Array.from({ length: i % 3 }, (_, n) => ({ unit: key, n, data: { i, n }, note: 'plain' })),
        ...(i % 2 === 0 ? [{ unit: key, n: 9, data: null, note: `odd ${i}` }] : []),
      ];
    });
    expect(parts.sort(byUnit)).toEqual(expected.sort(byUnit));
  });

  it("copies a unit's columns from its own guard row", async () => {
    await db('units').delete();
    const keys = ['x,1', 'y"2', 'z\\3'];
    const passed = await insertManyIf(
      db,
      {
        sql: `select k as key, 'colour of ' || k as colour from unnest(?::text[]) k`,
        bindings: [keys],
      },
      keys.map((key) => ({ table: 'units', key, row: { key, label: `label ${key}` }, fromGuard: ['colour'] })),
    );
    expect(passed.size).toBe(3);
    expect((await db('units').select('key', 'label', 'colour')).sort(byKey)).toEqual(
      keys.map((key) => ({ key, label: `label ${key}`, colour: `colour of ${key}` })).sort(byKey),
    );
  });

  it('stores dates to the millisecond (the same instant repeated, or different ones), bytes as bytea, an invalid date as null', async () => {
    const t1 = new Date('2026-11-26T08:15:30.123Z');
    const t2 = new Date('2026-12-01T23:59:59.999Z');
    const rows = [
      { key: 'k1', a: t1, b: new Date(t1.getTime()), c: t2, h: Buffer.from([0, 1, 254, 255]), data: { at: t2 } },
      { key: 'k2', a: t2, b: t1, c: new Date(Number.NaN), h: Buffer.alloc(0), data: { list: [t1] } },
    ];
    const passed = await insertManyIf(
      db,
      { sql: 'select k as key from unnest(?::text[]) k', bindings: [['k1', 'k2']] },
      rows.map((row) => ({ table: 'stamps', key: row.key, row })),
    );
    expect(passed.size).toBe(2);
    // And one row on its own, through insertAllIf.
    await insertAllIf(db, null, [{ table: 'stamps', row: { key: 'k3', a: t2, b: t2, c: t1, h: Buffer.from('hi') } }]);
    const stored = await db('stamps').orderBy('key').select('key', 'a', 'b', 'c', 'h', 'data');
    expect(stored).toEqual([
      { key: 'k1', a: t1, b: t1, c: t2, h: Buffer.from([0, 1, 254, 255]), data: { at: t2.toISOString() } },
      { key: 'k2', a: t2, b: t1, c: null, h: Buffer.alloc(0), data: { list: [t1.toISOString()] } },
      { key: 'k3', a: t2, b: t2, c: t1, h: Buffer.from('hi'), data: null },
    ]);
    // The rows handed in are not changed.
    expect(rows[0]?.a).toBe(t1);
    expect(Buffer.isBuffer(rows[0]?.h)).toBe(true);
  });
});
