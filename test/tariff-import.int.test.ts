import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPartner } from '../shared/services/partners.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * Tariffs are data with effective dates: an operator imports a council's new table with the
 * CLI and quotes use, per departure, the table in force then. An approved partner rate card
 * replaces the council tariff for that partner's quotes.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let file: string;

const council = JSON.parse(
  fs.readFileSync(path.join(import.meta.dirname, '..', 'data', 'council-tariffs.json'), 'utf8'),
);

beforeAll(async () => {
  env = await createTestEnv();
  await syncBuiltInTariffs(env.rt.db);
  // Manchester's table as the council might publish it next: flag fall up from £3.40 to £5.00
  // from 1 January 2027.
  const manchester = structuredClone(council.authorities.find((a: { id: string }) => a.id === 'manchester'));
  manchester.effective_from = '2027-01-01';
  manchester.as_of = '2027-01-01';
  manchester.tariffs[0].flag_fall.amount_pence = 500;
  file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dtn-tariff-')), 'manchester-2027.json');
  fs.writeFileSync(file, JSON.stringify({ ...council, authorities: [manchester] }));
  const imported = await runTs('bin/admin.ts', ['tariff', 'import', file], env.childEnv);
  expect(imported.code, imported.stderr).toBe(0);
  expect(JSON.parse(imported.stdout).imported).toEqual([
    {
      id: expect.any(Number),
      authorityId: 'manchester',
      authority: 'Manchester City Council',
      effectiveFrom: '2027-01-01',
    },
  ]);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env));
});
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
  if (file) fs.rmSync(path.dirname(file), { recursive: true, force: true });
});

async function quote(departAt: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${api.url}/api/public/v1/quote`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ pickup: 'Manchester Piccadilly', dropoff: 'Manchester Airport', departAt }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    fareGBP: number;
    tariffSource: { kind: string; asOf: string };
    appliedRules: Array<{ code: string; amountGBP: number }>;
  };
}

describe('tariff import', () => {
  it('prices each departure on the table in force then', async () => {
    const before = await quote('2026-12-09T12:00:00Z'); // a Wednesday, old table
    const after = await quote('2027-01-13T12:00:00Z'); // a Wednesday, new table
    expect(before.appliedRules.find((r) => r.code === 'flag_fall')?.amountGBP).toBe(3.4);
    expect(after.appliedRules.find((r) => r.code === 'flag_fall')?.amountGBP).toBe(5);
    expect(before.tariffSource.asOf).toBe('2023-09-15');
    expect(after.tariffSource.asOf).toBe('2027-01-01');
    expect(Math.round((after.fareGBP - before.fareGBP) * 100)).toBe(160);
  });

  it('leaves an imported table alone when the same file is imported again, and lists versions', async () => {
    const again = await runTs('bin/admin.ts', ['tariff', 'import', file], env.childEnv);
    expect(JSON.parse(again.stdout)).toEqual({
      imported: [],
      unchanged: [{ authorityId: 'manchester', effectiveFrom: '2027-01-01' }],
    });
    const list = JSON.parse((await runTs('bin/admin.ts', ['tariff', 'list'], env.childEnv)).stdout) as Array<{
      authorityId: string;
      effectiveFrom: string;
    }>;
    expect(list.filter((t) => t.authorityId === 'manchester').map((t) => t.effectiveFrom)).toEqual([
      '2027-01-01',
      '2023-09-15',
    ]);
  });

  it('refuses a file that is not a tariff table, naming the problem', async () => {
    const bad = path.join(path.dirname(file), 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ id: 'x', authority: 'X' }));
    const r = await runTs('bin/admin.ts', ['tariff', 'import', bad], env.childEnv);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stderr.trim()).error).toMatchObject({
      code: 'invalid_input',
      message: expect.stringContaining('is not a tariff table'),
    });
  });
});

describe('partner rate card', () => {
  it('replaces the council tariff for quotes made with that partner key once approved', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Acme Transfers', actor: 'test' });
    const cardId = uuidv7();
    await env.rt.db('rate_cards').insert({
      id: cardId,
      partner_id: partner.id,
      card: JSON.stringify({
        kind: 'partner_rate',
        owner: 'Acme Transfers',
        asOf: '2026-11-01',
        perMilePence: 250,
        minimumPence: 1500,
      }),
    });
    const unapproved = await quote('2026-12-09T12:00:00Z', { 'x-api-key': partner.apiKey });
    expect(unapproved.tariffSource.kind).toBe('council');

    await env.rt.db('rate_cards').where({ id: cardId }).update({ approved_at: new Date(), approved_by: 'test' });
    const approved = await quote('2026-12-09T12:00:00Z', { 'x-api-key': partner.apiKey });
    expect(approved.tariffSource).toMatchObject({ kind: 'partner_rate', authority: 'Acme Transfers' });
    const sum = approved.appliedRules.reduce((s, r) => s + Math.round(r.amountGBP * 100), 0);
    expect(sum).toBe(Math.round(approved.fareGBP * 100));

    const anonymous = await quote('2026-12-09T12:00:00Z');
    expect(anonymous.tariffSource.kind).toBe('council');
  });
});
