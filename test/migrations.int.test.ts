import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { up as backfillMailboxKeys } from '../migrations/20261128000300_verification-mailbox-key-backfill.ts';
import { knownMigrations } from '../shared/db/knex.ts';
import { mailboxKey } from '../shared/domain/email-acceptance.ts';
import { createTestEnv, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv({ migrate: false });
});
afterAll(async () => {
  await env?.cleanup();
});

const tables = async () =>
  (
    await env.rt.db.raw<{ rows: Array<{ tablename: string }> }>(
      'select tablename from pg_tables where schemaname = ? order by 1',
      [env.config.databaseSchema],
    )
  ).rows.map((r) => r.tablename);

const DOMAIN_TABLES = [
  'api_keys',
  'audit_log',
  'blocked_contacts',
  'booking_status_history',
  'bookings',
  'dispatch_offers',
  'drivers',
  'email_verifications',
  'idempotency_keys',
  'invoices',
  'operator_sessions',
  'operators',
  'outbound_messages',
  'outbox',
  'partner_jobs',
  'partners',
  'quotes',
  'rate_cards',
  'settlement_records',
  'suppliers',
  'tariff_tables',
  'vehicles',
  'webhook_deliveries',
  'webhook_delivery_attempts',
  'webhook_endpoints',
];

describe('migrations', () => {
  it('run up, down and up again cleanly through the CLI', async () => {
    const up = await runTs('bin/migrate.ts', ['latest'], env.childEnv);
    expect(up.code, up.stderr).toBe(0);
    expect(JSON.parse(up.stdout).applied).toEqual(await knownMigrations());
    expect(await tables()).toEqual(expect.arrayContaining(DOMAIN_TABLES));

    const down = await runTs('bin/migrate.ts', ['rollback-all'], env.childEnv);
    expect(down.code, down.stderr).toBe(0);
    expect(await tables()).toEqual(['knex_migrations', 'knex_migrations_lock']);
    const fns = await env.rt.db.raw<{ rows: unknown[] }>(
      'select proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace where nspname = ?',
      [env.config.databaseSchema],
    );
    expect(fns.rows).toEqual([]);

    const again = await runTs('bin/migrate.ts', ['latest'], env.childEnv);
    expect(again.code, again.stderr).toBe(0);
    expect(await tables()).toEqual(expect.arrayContaining(DOMAIN_TABLES));
    const status = await runTs('bin/migrate.ts', ['status'], env.childEnv);
    expect(JSON.parse(status.stdout).pending).toEqual([]);
  });

  it('gives verifications written before mailbox_key existed the mailbox key mailboxKey gives, and leaves the rest', async () => {
    const db = env.rt.db;
    const emails = [
      'ada+t1@gmail.com',
      'a.d.a@googlemail.com',
      'grace.hopper+work@example.org',
      '+tagged@example.org',
      'plain@example.co.uk',
      'x+y+z@sub.example.com',
    ];
    const rows = emails.map((email, n) => ({
      id: uuidv7(),
      email,
      code_hash: Buffer.alloc(32),
      link_token_hash: Buffer.alloc(32, 100 + n),
      purpose: 'passenger',
      expires_at: new Date(Date.now() + 60_000),
    }));
    await db('email_verifications').insert(rows);
    const keyed = { ...rows[0], id: uuidv7(), link_token_hash: Buffer.alloc(32, 99), mailbox_key: 'kept@example.org' };
    await db('email_verifications').insert(keyed);
    await backfillMailboxKeys(db);
    await backfillMailboxKeys(db); // again: nothing changes
    const got = await db('email_verifications')
      .whereIn('id', [...rows.map((r) => r.id), keyed.id])
      .select('id', 'email', 'mailbox_key');
    for (const r of rows) expect(got.find((g) => g.id === r.id)?.mailbox_key, r.email).toBe(mailboxKey(r.email));
    expect(got.find((g) => g.id === keyed.id)?.mailbox_key).toBe('kept@example.org');
    await db('email_verifications')
      .whereIn('id', [...rows.map((r) => r.id), keyed.id])
      .delete();
  });

  it('makes settlement records append-only in the database itself', async () => {
    const db = env.rt.db;
    const bookingId = uuidv7();
    await db('bookings').insert({
      id: bookingId,
      reference: 'DTN-7K3F9Q',
      origin: 'api',
      passenger_name: 'Ada',
      pickup: JSON.stringify({ name: 'A' }),
      dropoff: JSON.stringify({ name: 'B' }),
      pickup_time: new Date(),
      fare_pence: 1250,
      tracking_token_hash: Buffer.alloc(32, 1),
    });
    const [rec] = await db('settlement_records')
      .insert({ booking_id: bookingId, kind: 'cash_received', method: 'cash', amount_pence: 1250, recorded_by: 'test' })
      .returning('id');
    await expect(db('settlement_records').where({ id: rec.id }).update({ amount_pence: 1 })).rejects.toThrow(
      /append-only/,
    );
    await expect(db('settlement_records').where({ id: rec.id }).delete()).rejects.toThrow(/append-only/);
    await expect(db.raw('truncate settlement_records')).rejects.toThrow(/append-only/);
    // A correction is a new record pointing at the old one.
    await db('settlement_records').insert({
      booking_id: bookingId,
      kind: 'correction',
      amount_pence: -250,
      corrects_id: rec.id,
      recorded_by: 'test',
    });
    const rows = await db('settlement_records').where({ booking_id: bookingId }).orderBy('id');
    expect(rows.map((r) => r.amount_pence)).toEqual([1250, -250]);
  });

  it('enforces the domain rules it declares', async () => {
    const db = env.rt.db;
    const base = {
      origin: 'api',
      passenger_name: 'Ada',
      pickup: '{}',
      dropoff: '{}',
      pickup_time: new Date(),
    };
    await expect(
      db('bookings').insert({
        ...base,
        id: uuidv7(),
        reference: 'DTN-AAAAA1',
        origin: 'fax',
        tracking_token_hash: Buffer.alloc(32, 2),
      }),
    ).rejects.toThrow(/bookings_origin_check/);
    await expect(
      db('bookings').insert({
        ...base,
        id: uuidv7(),
        reference: 'DTN-AAAAA2',
        passengers: 9,
        tracking_token_hash: Buffer.alloc(32, 3),
      }),
    ).rejects.toThrow(/bookings_passengers_check/);
    await expect(
      db('bookings').insert({
        ...base,
        id: uuidv7(),
        reference: 'DTN-7K3F9Q',
        tracking_token_hash: Buffer.alloc(32, 4),
      }),
    ).rejects.toThrow(/bookings_reference_unique/);
  });
});
