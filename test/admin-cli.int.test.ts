import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unseal } from '../shared/crypto.ts';
import { verifyPassword } from '../shared/services/operators.ts';
import { createPartner } from '../shared/services/partners.ts';
import { insertOfferedBooking } from './helpers/bookings.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/** The operator CLI (CONTRACT.md section 9) as an operator runs it: a real process, JSON out. */
let env: TestEnv;
let http: Served;

beforeAll(async () => {
  env = await createTestEnv();
  http = await serve(await appFor(env));
});
afterAll(async () => {
  await http?.close();
  await env?.cleanup();
});

const admin = (...args: string[]) => runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'ops-test' }, 90_000);
/** Each a process of its own, three at a time; answered in the order given. */
async function adminAll(list: string[][]): Promise<Array<Awaited<ReturnType<typeof admin>>>> {
  const out: Array<Awaited<ReturnType<typeof admin>>> = [];
  let next = 0;
  await Promise.all(
    [1, 2, 3].map(async () => {
      for (let i = next++; i < list.length; i = next++) out[i] = await admin(...(list[i] as string[]));
    }),
  );
  return out;
}
/** The one JSON error on stderr of a run that failed with exit 1 and printed nothing on stdout. */
function refused(r: Awaited<ReturnType<typeof admin>>, what: string): { code: string; message: string } {
  expect(r.code, `${what}: ${r.stdout}${r.stderr}`).toBe(1);
  expect(r.stdout, what).toBe('');
  const lines = r.stderr.trim().split('\n');
  expect(lines, what).toHaveLength(1);
  return JSON.parse(lines[0] as string).error;
}
const whoami = (key: string) => fetch(`${http.url}/api/public/v1/whoami`, { headers: { 'x-api-key': key } });

describe('admin CLI', () => {
  it('answers --help with one JSON document, and a command named like an Object method as unknown', async () => {
    const [help, proto] = await adminAll([['--help'], ['constructor']]);
    expect(help?.code, help?.stderr).toBe(0);
    const usage = (JSON.parse(help?.stdout ?? '') as { usage: string[] }).usage;
    expect(usage.some((line) => line.includes('partner create'))).toBe(true);
    // Against a schema never migrated: what to do, not internal_error.
    const unmigrated = await runTs('bin/admin.ts', ['key', 'list'], {
      ...env.childEnv,
      DATABASE_SCHEMA: 'never_migrated_schema',
    });
    expect(unmigrated.code).toBe(1);
    expect(JSON.parse(unmigrated.stderr.trim()).error).toMatchObject({ code: 'service_unavailable' });
    expect(JSON.parse(unmigrated.stderr.trim()).error.message).toContain('run npm run migrate');
    expect(proto?.code).toBe(1);
    expect(proto?.stdout).toBe('');
    expect(JSON.parse(proto?.stderr.trim() ?? '').error).toMatchObject({
      code: 'invalid_input',
      message: 'unknown command "constructor"',
    });
  }, 90_000);

  it('creates a partner and prints its key and secrets once', async () => {
    const r = await admin(
      'partner',
      'create',
      '--name',
      'Acme Transfers',
      '--can-set-fares',
      '--daily-limit',
      '500',
      '--webhook-url',
      'https://acme.example/hooks/dtn',
    );
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      apiKey: expect.stringMatching(/^dtn_live_[0-9A-Za-z]{32}$/),
      signingSecret: expect.stringMatching(/^dtn_sign_[0-9A-Za-z]{40}$/),
      webhookSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const partner = await env.rt.db('partners').where({ id: out.id }).first();
    expect(partner).toMatchObject({ name: 'Acme Transfers', can_set_fares: true, daily_job_limit: 500 });
    // Secrets are sealed at rest, and open to the service's key.
    expect(partner.signing_secret_sealed).not.toContain(out.signingSecret);
    expect(unseal(partner.signing_secret_sealed, env.config.dataEncryptionKey)).toBe(out.signingSecret);
    const endpoint = await env.rt.db('webhook_endpoints').where({ partner_id: out.id }).first();
    expect(endpoint.url).toBe('https://acme.example/hooks/dtn');
    expect(unseal(endpoint.secret_sealed, env.config.dataEncryptionKey)).toBe(out.webhookSecret);
    // The partner's key works at once, and says whose it is.
    const res = await whoami(out.apiKey);
    expect(await res.json()).toMatchObject({ authenticated: true, key: { partnerId: out.id } });
    const audit = await env.rt.db('audit_log').where({ subject_id: out.id }).first();
    expect(audit).toMatchObject({ actor: 'cli:ops-test', action: 'partner.create' });
    expect(JSON.stringify(audit.details)).not.toContain(out.apiKey);
  });

  it('creates a tier-3 operator with its fleet', async () => {
    const r = await admin(
      'partner',
      'create',
      '--name',
      'Fleet Co',
      '--operator',
      '--fleet-classes',
      'saloon, mpv',
      '--fleet-capacity',
      '12',
    );
    expect(r.code, r.stderr).toBe(0);
    const partner = await env.rt
      .db('partners')
      .where({ id: JSON.parse(r.stdout).id })
      .first();
    expect(partner).toMatchObject({ is_operator: true, fleet_classes: ['saloon', 'mpv'], fleet_capacity: 12 });
  });

  it('creates, lists and revokes API keys', async () => {
    const created = JSON.parse((await admin('key', 'create', '--name', 'agent one')).stdout);
    expect(created).toEqual({
      id: expect.any(String),
      key: expect.stringMatching(/^dtn_live_/),
      prefix: created.key.slice(0, 14),
    });
    expect((await whoami(created.key)).status).toBe(200);

    const test = JSON.parse((await admin('key', 'create', '--name', 'sandbox', '--test')).stdout);
    expect(test.key).toMatch(/^dtn_test_/);

    const listed = JSON.parse((await admin('key', 'list')).stdout) as Array<Record<string, unknown>>;
    const mine = listed.find((k) => k.id === created.id);
    expect(mine).toMatchObject({
      id: created.id,
      prefix: created.prefix,
      name: 'agent one',
      revokedAt: null,
      createdAt: expect.any(String),
    });
    expect(JSON.stringify(listed)).not.toContain(created.key);

    const revoked = await admin('key', 'revoke', created.id);
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toEqual({ id: created.id, revokedAt: expect.any(String) });
    expect((await whoami(created.key)).status).toBe(401);
    const relisted = JSON.parse((await admin('key', 'list')).stdout) as Array<Record<string, unknown>>;
    expect(relisted.find((k) => k.id === created.id)?.revokedAt).toEqual(expect.any(String));

    // Revoking it again answers the same (its first revocation time) and writes no second audit entry.
    const again = await admin('key', 'revoke', created.id);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual(JSON.parse(revoked.stdout));
    const audits = await env.rt.db('audit_log').where({ subject_id: created.id, action: 'key.revoke' });
    expect(audits.map((a) => a.actor)).toEqual(['cli:ops-test']);
  });

  it('creates operators with a generated password shown once, lists and disables them', async () => {
    const r = await admin('operator', 'create', '--email', ' Night.Shift@Example.org ', '--name', 'Night Shift');
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      email: 'night.shift@example.org',
      password: expect.stringMatching(/^[0-9A-Za-z]{24}$/),
    });
    const row = await env.rt.db('operators').where({ id: out.id }).first();
    expect(row).toMatchObject({ email: 'night.shift@example.org', name: 'Night Shift', disabled_at: null });
    // Only an scrypt hash with its own salt is stored, and it matches the password printed.
    expect(row.password_hash).toMatch(/^\$scrypt\$ln=15,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    expect(row.password_hash).not.toContain(out.password);
    expect(await verifyPassword(out.password, row.password_hash)).toBe(true);
    expect(await verifyPassword(`${out.password}x`, row.password_hash)).toBe(false);
    const audit = await env.rt.db('audit_log').where({ subject_id: out.id, action: 'operator.create' }).first();
    expect(audit.actor).toBe('cli:ops-test');
    expect(JSON.stringify(audit.details)).not.toContain(out.password);

    // One account per address, whatever its case.
    const again = await admin('operator', 'create', '--email', 'NIGHT.SHIFT@example.org');
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stderr).error.code).toBe('invalid_input');

    const listed = JSON.parse((await admin('operator', 'list')).stdout) as Array<Record<string, unknown>>;
    expect(listed.find((o) => o.id === out.id)).toEqual({
      id: out.id,
      email: 'night.shift@example.org',
      name: 'Night Shift',
      createdAt: expect.any(String),
      disabledAt: null,
    });
    expect(JSON.stringify(listed)).not.toContain('scrypt');

    const disabled = await admin('operator', 'disable', out.id);
    expect(disabled.code, disabled.stderr).toBe(0);
    expect(JSON.parse(disabled.stdout)).toEqual({ id: out.id, disabledAt: expect.any(String) });
    expect((await env.rt.db('operators').where({ id: out.id }).first()).disabled_at).not.toBeNull();

    for (const args of [
      ['operator', 'create', '--email', 'not-an-address'],
      ['operator', 'disable', '00000000-0000-7000-8000-000000000000'],
    ]) {
      const bad = await admin(...args);
      expect(bad.code, args.join(' ')).toBe(1);
      expect(bad.stdout).toBe('');
      expect(JSON.parse(bad.stderr.trim()).error.code, args.join(' ')).toMatch(/^(invalid_input|not_found)$/);
    }
    // Six CLI processes: more than the default time on a busy machine.
  }, 90_000);

  it('gives the jobs of a suspended driver back to dispatch, and leaves a ride under way', async () => {
    const driver = await approvedDriver(env.rt.db);
    const db = env.rt.db;
    // One job offered, one accepted and on the way, one with the passenger on board.
    const offered = await insertOfferedBooking(db, 'DTN-SUSP01', { driverId: driver.id });
    const assigned = await insertOfferedBooking(db, 'DTN-SUSP02', { driverId: driver.id });
    await db('dispatch_offers').where({ id: assigned.offerId }).update({ state: 'accepted' });
    await db('bookings').where({ id: assigned.id }).update({ status: 'driver_en_route', driver_id: driver.id });
    const riding = await insertOfferedBooking(db, 'DTN-SUSP03', { driverId: driver.id });
    await db('dispatch_offers').where({ id: riding.offerId }).update({ state: 'accepted' });
    await db('bookings').where({ id: riding.id }).update({ status: 'passenger_on_board', driver_id: driver.id });

    const r = await admin('driver', 'suspend', driver.id);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ id: driver.id, status: 'suspended', ridesInProgress: ['DTN-SUSP03'] });
    expect([...out.jobsHandedBack].sort()).toEqual(['DTN-SUSP01', 'DTN-SUSP02']);

    expect((await db('dispatch_offers').where({ id: offered.offerId }).first('state')).state).toBe('withdrawn');
    expect(await db('bookings').where({ id: assigned.id }).first('status', 'driver_id')).toEqual({
      status: 'dispatching',
      driver_id: null,
    });
    const last = await db('booking_status_history').where({ booking_id: assigned.id }).orderBy('seq', 'desc').first();
    expect(last).toMatchObject({ status: 'dispatching', details: { handedBack: true } });
    expect(await db('bookings').where({ id: riding.id }).first('status', 'driver_id')).toEqual({
      status: 'passenger_on_board',
      driver_id: driver.id,
    });
    // Both are offered again at once.
    for (const b of [offered, assigned]) {
      expect(await db('outbox').where('job_id', 'like', `dispatch-${b.id}-released-%`).first()).toBeDefined();
    }
    // The driver, who may be on the way, is told the job taken back is no longer theirs (by SMS
    // and WhatsApp, as a job card); the open offer and the ride under way need no message.
    const told = await db('outbound_messages')
      .where({ driver_id: driver.id, purpose: 'job_taken_back' })
      .select('booking_id', 'channel', 'body');
    expect(told.map((m) => [m.booking_id, m.channel]).sort()).toEqual(
      [
        [assigned.id, 'sms'],
        [assigned.id, 'whatsapp'],
      ].sort(),
    );
    expect(told[0]?.body).toContain('job DTN-SUSP02 has been taken back from you (driver suspended by an operator)');
  });

  it('suspends a partner operator: offers withdrawn, held jobs kept or taken back on request, rides under way left; reinstates it', async () => {
    const db = env.rt.db;
    const ref = (s: string) => `${env.config.bookings.referencePrefix}-${s}`;
    const partner = await createPartner(db, env.config, {
      name: 'Paused Cars',
      webhookUrl: 'https://paused.example/hooks',
      operator: { fleetClasses: ['saloon'], fleetCapacity: 5 },
      actor: 'test',
    });
    const offered = await insertOfferedBooking(db, ref('PZZ001'), { partnerId: partner.id });
    const assigned = await insertOfferedBooking(db, ref('PZZ002'), { partnerId: partner.id });
    await db('dispatch_offers').where({ id: assigned.offerId }).update({ state: 'accepted' });
    await db('bookings')
      .where({ id: assigned.id })
      .update({ status: 'driver_en_route', operator_partner_id: partner.id, operator_driver: { name: 'Pat Driver' } });
    // A ride it booked for its own customer and fulfils itself.
    const own = await insertOfferedBooking(db, ref('PZZ004'), { partnerId: partner.id });
    await db('dispatch_offers').where({ id: own.offerId }).update({ state: 'accepted' });
    await db('bookings')
      .where({ id: own.id })
      .update({ status: 'driver_assigned', partner_id: partner.id, operator_partner_id: partner.id });
    const riding = await insertOfferedBooking(db, ref('PZZ003'), { partnerId: partner.id });
    await db('dispatch_offers').where({ id: riding.offerId }).update({ state: 'accepted' });
    await db('bookings')
      .where({ id: riding.id })
      .update({ status: 'passenger_on_board', operator_partner_id: partner.id });

    // Without --release-jobs: the open offer is withdrawn and offered again, the held job stays.
    const first = await admin('partner', 'suspend', partner.id);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({
      id: partner.id,
      status: 'suspended',
      offersWithdrawn: [ref('PZZ001')],
      jobsHandedBack: [],
      jobsKept: [ref('PZZ002'), ref('PZZ004')],
      ridesInProgress: [ref('PZZ003')],
    });
    expect((await db('partners').where({ id: partner.id }).first('status')).status).toBe('suspended');
    expect((await db('dispatch_offers').where({ id: offered.offerId }).first('state')).state).toBe('withdrawn');
    expect(await db('outbox').where('job_id', 'like', `dispatch-${offered.id}-partner-suspended-%`)).toHaveLength(1);
    expect(await db('bookings').where({ id: assigned.id }).first('status', 'operator_partner_id')).toEqual({
      status: 'driver_en_route',
      operator_partner_id: partner.id,
    });
    // The suspended operator cannot take a new job.
    await db('dispatch_offers').where({ id: offered.offerId }).update({ state: 'offered' });
    const accept = await fetch(`${http.url}/api/public/v1/jobs/${ref('PZZ001')}/accept`, {
      method: 'POST',
      headers: { authorization: `Bearer ${partner.apiKey}` },
    });
    expect(accept.status).toBe(403);
    await db('dispatch_offers').where({ id: offered.offerId }).update({ state: 'withdrawn' });
    // Nor make a booking with its key (its intake is refused the same way).
    const book = (path: string, body: unknown) =>
      fetch(`${http.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${partner.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const redeem = {
      quote_id: '00000000-0000-4000-8000-000000000000',
      passenger_name: 'Ada Lovelace',
      passenger_email: 'ada@example.com',
      passenger_phone: '+447700900123',
    };
    const refused = await book('/api/public/v1/booking', redeem);
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'forbidden',
      message: expect.stringContaining('suspended'),
    });
    const instant = await book('/api/public/bookings/instant', {
      pickup_address: 'Manchester Piccadilly',
      dropoff_address: 'Manchester Airport',
      passenger_name: 'Ada Lovelace',
      passenger_phone_whatsapp: '+447700900123',
      passenger_count: 1,
    });
    expect(instant.status).toBe(403);
    expect(((await instant.json()) as { error: { code: string } }).error.code).toBe('forbidden');

    // With --release-jobs: the held job goes back to dispatch, and the operator is told.
    const second = await admin(
      'partner',
      'suspend',
      partner.id,
      '--release-jobs',
      '--reason',
      'drivers not turning up',
    );
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({
      jobsHandedBack: [ref('PZZ002')],
      jobsKept: [ref('PZZ004')],
      ridesInProgress: [ref('PZZ003')],
    });
    expect(
      await db('bookings').where({ id: assigned.id }).first('status', 'operator_partner_id', 'operator_driver'),
    ).toEqual({ status: 'dispatching', operator_partner_id: null, operator_driver: null });
    const last = await db('booking_status_history').where({ booking_id: assigned.id }).orderBy('seq', 'desc').first();
    expect(last).toMatchObject({
      status: 'dispatching',
      details: { handedBack: true, reason: 'partner suspended by an operator: drivers not turning up' },
    });
    const told = await db('webhook_deliveries as w')
      .join('webhook_endpoints as e', 'e.id', 'w.endpoint_id')
      .where({ 'w.booking_id': assigned.id, 'e.partner_id': partner.id })
      .select('w.payload');
    expect(told.map((t) => t.payload.data)).toEqual([expect.objectContaining({ status: 'dispatching' })]);
    expect(told[0]?.payload.data.driver).toBeUndefined();
    expect(await db('outbox').where('job_id', 'like', `dispatch-${assigned.id}-partner-suspended-%`)).toHaveLength(1);
    expect(await db('bookings').where({ id: riding.id }).first('status', 'operator_partner_id')).toEqual({
      status: 'passenger_on_board',
      operator_partner_id: partner.id,
    });
    // Its own customer's ride stays with it.
    expect(await db('bookings').where({ id: own.id }).first('status', 'operator_partner_id')).toEqual({
      status: 'driver_assigned',
      operator_partner_id: partner.id,
    });

    const back = await admin('partner', 'reinstate', partner.id);
    expect(back.code, back.stderr).toBe(0);
    expect(JSON.parse(back.stdout)).toEqual({ id: partner.id, status: 'active' });
    expect((await db('partners').where({ id: partner.id }).first('status')).status).toBe('active');
    // Active again, its key books: this unknown quote gets as far as the quote (404).
    const again = await book('/api/public/v1/booking', redeem);
    expect(again.status).toBe(404);
    const actions = await db('audit_log').where({ subject_id: partner.id }).orderBy('id').pluck('action');
    expect(actions).toEqual(['partner.create', 'partner.suspend', 'partner.suspend', 'partner.reinstate']);
    const unknown = await admin('partner', 'suspend', '00000000-0000-4000-8000-000000000000');
    expect(unknown.code).toBe(1);
  });

  it('answers mistakes with JSON on stderr and exit 1', async () => {
    const mistakes = [
      ['partner', 'create'],
      ['partner', 'create', '--name', 'X', '--daily-limit', 'lots'],
      ['partner', 'create', '--name', 'X', '--webhook-url', 'ftp://x'],
      ['partner', 'create', '--name', 'X', '--operator', '--fleet-classes', 'tank', '--fleet-capacity', '2'],
      ['partner', 'create', '--name', 'X', '--operator', '--fleet-classes', 'saloon'],
      ['partner', 'create', '--name', 'X', '--fleet-capacity', '2'],
      ['key', 'revoke', 'not-an-id'],
      ['key', 'revoke', '00000000-0000-7000-8000-000000000000'],
      ['key', 'create', '--name', 'x', '--partner', '00000000-0000-7000-8000-000000000000'],
      ['key', 'create', '--name', 'x', '--bogus'],
      ['frobnicate', 'everything'],
    ];
    // Each a process of its own, three at a time (a slow machine starts eleven slowly either way).
    const runs: { args: string[]; r: Awaited<ReturnType<typeof admin>> }[] = [];
    const queue = [...mistakes];
    await Promise.all(
      [1, 2, 3].map(async () => {
        for (let args = queue.shift(); args; args = queue.shift()) runs.push({ args, r: await admin(...args) });
      }),
    );
    for (const { args, r } of runs) {
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      const err = JSON.parse(r.stderr.trim().split('\n').pop() as string);
      expect(err.error.code, args.join(' ')).toMatch(/^(invalid_input|not_found)$/);
    }
    // A setting it cannot read is reported the same way, naming the variable.
    const misconfigured = await runTs('bin/admin.ts', ['key', 'list'], { ...env.childEnv, PORT: 'eighty' }, 90_000);
    expect(misconfigured.code).toBe(1);
    expect(misconfigured.stdout).toBe('');
    const err = JSON.parse(misconfigured.stderr.trim().split('\n').pop() as string);
    expect(err.error).toMatchObject({ code: 'configuration_error', message: expect.stringContaining('PORT') });
  }, 180_000);

  it('refuses numbers no column holds and names that are too long or not one line, naming the option', async () => {
    const cases: Array<[string[], string]> = [
      [['partner', 'create', '--name', 'X', '--daily-limit', '99999999999999999999'], '--daily-limit'],
      [
        [
          'partner',
          'create',
          '--name',
          'Op',
          '--operator',
          '--fleet-classes',
          'saloon',
          '--fleet-capacity',
          '99999999999',
        ],
        '--fleet-capacity',
      ],
      [['trial', 'extend', '--partner', '00000000-0000-7000-8000-000000000000', '--days', '99999999999'], '--days'],
      [['partner', 'create', '--name', 'x'.repeat(101)], '--name'],
      [['partner', 'create', '--name', 'Evil Co\nAdmin: approved'], '--name'],
      [['key', 'create', '--name', 'agent\u202egnp.exe'], '--name'],
      [['key', 'create', '--name', 'y'.repeat(101)], '--name'],
    ];
    const runs = await adminAll(cases.map(([args]) => args));
    runs.forEach((r, i) => {
      const [args, option] = cases[i] as [string[], string];
      const error = refused(r, args.join(' '));
      expect(error.code, args.join(' ')).toBe('invalid_input');
      expect(error.message, args.join(' ')).toContain(option);
      expect(error.message, args.join(' ')).not.toMatch(/insert into|out of range for type/i);
    });
    const n = await env.rt.db('partners').whereIn('name', ['X', 'Op']).count({ n: '*' }).first();
    expect(Number(n?.n)).toBe(0);
    // A name of exactly 100 characters is fine.
    const ok = await admin('key', 'create', '--name', 'z'.repeat(100));
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('keeps stdout empty and stderr one JSON error, with no SQL or stack, when the database fails', async () => {
    const down = await runTs(
      'bin/admin.ts',
      ['key', 'list'],
      { ...env.childEnv, DATABASE_URL: 'postgres://postgres@127.0.0.1:5999/dtn' },
      90_000,
    );
    const unreachable = refused(down, 'database down');
    expect(unreachable).toMatchObject({
      code: 'service_unavailable',
      message: expect.stringContaining('DATABASE_URL'),
    });
    expect(down.stderr).not.toMatch(/Acquire connection|\n\s+at /);
    // A query that fails for another reason (here: a table without the columns asked for) is an
    // internal error without its SQL. (No table at all is a database not migrated: said so.)
    await env.rt.db.raw('create schema if not exists cli_broken_schema');
    await env.rt.db.raw('create table if not exists cli_broken_schema.api_keys (id integer)');
    try {
      const broken = await runTs(
        'bin/admin.ts',
        ['key', 'list'],
        { ...env.childEnv, DATABASE_SCHEMA: 'cli_broken_schema' },
        90_000,
      );
      const internal = refused(broken, 'broken table');
      expect(internal.code).toBe('internal_error');
      expect(internal.message).toMatch(/^unexpected error/);
      expect(internal.message).not.toMatch(/select|api_keys|column/i);
    } finally {
      await env.rt.db.raw('drop schema cli_broken_schema cascade');
    }
  });

  it('prints usage on stderr and exits 1 (as every error) when given no command', async () => {
    const r = await admin();
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const err = JSON.parse(r.stderr);
    expect(err.error.code).toBe('invalid_input');
    expect(err.error.usage).toContain('booking history REF');
    expect(err.error.usage).toContain('[--force');
  });

  it('finds a booking by the reference forms the API accepts, and answers booking_not_found otherwise', async () => {
    const driver = await approvedDriver(env.rt.db);
    const code = `1${randomBytes(2).toString('hex').toUpperCase()}0`;
    const b = await insertOfferedBooking(env.rt.db, `DTN-${code}`, { driverId: driver.id });
    const typed = `i${code.slice(1, 5).toLowerCase()}o`;
    const forms = [`DTN-${typed.toUpperCase()}`, typed, `dtn${code}`, code.replace('1', 'L')];
    const runs = await adminAll([...forms.map((f) => ['booking', 'history', f]), ['booking', 'history', 'DTN-ZZZZZZ']]);
    forms.forEach((f, i) => {
      const r = runs[i] as Awaited<ReturnType<typeof admin>>;
      expect(r.code, `${f}: ${r.stderr}`).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ reference: b.reference, status: 'dispatching' });
    });
    expect(refused(runs[forms.length] as Awaited<ReturnType<typeof admin>>, 'unknown').code).toBe('booking_not_found');
  });

  it('reads a tariff file relative to where npm was run (INIT_CWD)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-tariff-'));
    try {
      fs.writeFileSync(path.join(dir, 'rates.json'), JSON.stringify({ authority: 'Nowhere' }));
      const r = await runTs(
        'bin/admin.ts',
        ['tariff', 'import', 'rates.json'],
        { ...env.childEnv, INIT_CWD: dir },
        90_000,
      );
      const error = refused(r, 'tariff import');
      // Found and read (it is not a valid table), not "cannot read rates.json" from the package root.
      expect(error.message).toContain(`${path.join(dir, 'rates.json')} is not a tariff table`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses rate cards that price rides at nothing or name places no quote can match; remove of no card is not_found', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Card Co', actor: 'test' });
    const set = (...args: string[]) => ['ratecard', 'set', '--partner', partner.id, ...args];
    const bad = [
      set('--per-mile', '0', '--minimum', '0'),
      set('--per-mile', '2', '--minimum', '5', '--fixed', 'ZZ9>M1=45'),
      set('--per-mile', '2', '--minimum', '5', '--fixed', 'MAN>QQQ=45'),
      set('--per-mile', '2', '--minimum', '5', '--fixed', 'MAN>M1=0'),
      ['ratecard', 'remove', '--partner', partner.id],
      ['ratecard', 'remove', '--partner', '00000000-0000-7000-8000-000000000000'],
    ];
    const runs = await adminAll(bad);
    runs.forEach((r, i) => {
      const args = bad[i] as string[];
      expect(refused(r, args.join(' ')).code, args.join(' ')).toBe(
        args[1] === 'remove' ? 'not_found' : 'invalid_input',
      );
    });
    expect(await env.rt.db('rate_cards').where({ partner_id: partner.id }).first()).toBeUndefined();
    const ok = await admin(...set('--per-mile', '2.10', '--minimum', '0', '--fixed', 'MAN>M1=45.00,LHR<>SW1A=70'));
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).card.fixedRoutes).toHaveLength(2);
    const removed = await admin('ratecard', 'remove', '--partner', partner.id);
    expect(JSON.parse(removed.stdout)).toEqual({ removed: true });
  });

  it('suspends only an approved driver: an application or a rejected driver is a conflict', async () => {
    const pending = await approvedDriver(env.rt.db);
    const rejected = await approvedDriver(env.rt.db);
    await env.rt.db('drivers').where({ id: pending.id }).update({ status: 'pending_approval' });
    await env.rt.db('drivers').where({ id: rejected.id }).update({ status: 'rejected' });
    const [a, b] = await adminAll([
      ['driver', 'suspend', pending.id],
      ['driver', 'suspend', rejected.id],
    ]);
    expect(refused(a as Awaited<ReturnType<typeof admin>>, 'pending')).toMatchObject({
      code: 'conflict',
      message: expect.stringContaining('pending approval'),
    });
    expect(refused(b as Awaited<ReturnType<typeof admin>>, 'rejected').code).toBe('conflict');
    const statuses = await env.rt
      .db('drivers')
      .whereIn('id', [pending.id, rejected.id])
      .orderBy('status')
      .pluck('status');
    expect(statuses).toEqual(['pending_approval', 'rejected']);
  });
});
