import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertManyIf, type KeyedRowInsert } from '../shared/db/atomic.ts';
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
});
