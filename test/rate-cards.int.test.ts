import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../shared/services/api-keys.ts';
import { createPartner } from '../shared/services/partners.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { runTs } from './helpers/process.ts';

/**
 * Approved rate cards (SPEC.md 2.1): set by an operator from the CLI for a driver or a partner,
 * they replace the council tariff for quotes made through that driver (their token) or partner
 * (their key), through the real API and pricing worker; removed, the council tariff is back.
 */
let env: TestEnv;
let api: Served;
let roles: RunningRoles;

beforeAll(async () => {
  env = await createTestEnv({ env: { QUOTE_LIMIT_PER_HOUR: '100000', RATE_LIMIT_PER_IP_PER_MINUTE: '100000' } });
  api = await serve(await appFor(env));
  roles = startRoles(['pricing'], env.rt);
}, 60_000);
afterAll(async () => {
  await roles?.close();
  await api?.close();
  await env?.cleanup();
});

const admin = (...args: string[]) => runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'ops-test' });

// biome-ignore lint/suspicious/noExplicitAny: JSON read back in assertions
type Json = Record<string, any>;

async function quote(headers: Record<string, string>, body: Record<string, unknown>): Promise<Json> {
  const res = await fetch(`${api.url}/api/public/v1/quote`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ passengers: 1, departAt: '2027-03-10T12:00:00Z', ...body }),
  });
  const json = await res.json();
  expect(res.status, JSON.stringify(json)).toBe(200);
  return json as Json;
}

describe('rate cards', () => {
  it('a partner card prices the partner’s quotes per mile with its minimum; others stay on the council tariff', async () => {
    const partner = await createPartner(env.rt.db, env.config, { name: 'Card Cars', actor: 'test' });
    const set = await admin('ratecard', 'set', '--partner', partner.id, '--per-mile', '2.50', '--minimum', '8');
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      card: { kind: 'partner_rate', owner: 'Card Cars', perMilePence: 250, minimumPence: 800 },
      approvedAt: expect.any(String),
    });
    const key = { 'x-api-key': partner.apiKey };
    const trip = { pickup: 'Manchester Piccadilly', dropoff: 'Leeds' };
    const priced = await quote(key, trip);
    expect(priced.tariffSource).toMatchObject({ kind: 'partner_rate', authority: 'Card Cars' });
    const distance = priced.appliedRules.find((r: { code: string }) => r.code === 'distance');
    expect(distance.description).toContain('£2.50 per mile');
    // Rules always sum to the fare.
    const sum = priced.appliedRules.reduce(
      (s: number, r: { amountGBP: number }) => s + Math.round(r.amountGBP * 100),
      0,
    );
    expect(sum).toBe(Math.round(priced.fareGBP * 100));
    // A short hop is raised to the card's minimum.
    const short = await quote(key, { pickup: 'M1 1AE', dropoff: 'M1 2JQ' });
    expect(short.fareGBP).toBe(8);
    // Anyone else: the council tariff.
    const other = await createApiKey(env.rt.db, { serviceCode: env.config.serviceCode, name: 'someone else' });
    const council = await quote({ 'x-api-key': other.key }, trip);
    expect(council.tariffSource.kind).not.toBe('partner_rate');

    const removed = await admin('ratecard', 'remove', '--partner', partner.id);
    expect(JSON.parse(removed.stdout)).toEqual({ removed: true });
    expect((await quote(key, trip)).tariffSource.kind).not.toBe('partner_rate');
    const audit = await env.rt.db('audit_log').where({ subject_id: partner.id }).pluck('action');
    expect(audit).toEqual(expect.arrayContaining(['rate_card.set', 'rate_card.remove']));
  });

  it('a driver card with a fixed route prices the quotes the driver makes with their token', async () => {
    const approved = await approvedDriver(env.rt.db, { name: 'Rita Rates' });
    const driverId = approved.id;
    const set = await admin(
      'ratecard',
      'set',
      '--driver',
      driverId,
      '--per-mile',
      '2',
      '--minimum',
      '6',
      '--fixed',
      'M1<>MAN=39.50',
    );
    expect(set.code, set.stderr).toBe(0);
    const token = { authorization: `Bearer ${approved.token}` };
    const fixed = await quote(token, { pickup: 'Manchester Airport', dropoff: 'M1 1AE' });
    expect(fixed.fareGBP).toBe(39.5);
    expect(fixed.tariffSource).toMatchObject({ kind: 'driver_override', authority: 'Rita Rates' });
    const stored = await env.rt.db('quotes').where({ id: fixed.quoteId }).first('driver_id', 'rate_card_id');
    expect(stored.driver_id).toBe(driverId);
    expect(stored.rate_card_id).toEqual(expect.any(String));
  });

  it('refuses malformed cards and unknown owners', async () => {
    const cases: Array<[string[], string]> = [
      [['--per-mile', '2', '--minimum', '6'], 'invalid_input'],
      [['--partner', '00000000-0000-4000-8000-000000000000', '--per-mile', 'two', '--minimum', '6'], 'invalid_input'],
      [
        ['--partner', '00000000-0000-4000-8000-000000000000', '--per-mile', '2', '--minimum', '6', '--fixed', 'M1-MAN'],
        'invalid_input',
      ],
      [['--partner', '00000000-0000-4000-8000-000000000000', '--per-mile', '2', '--minimum', '6'], 'not_found'],
    ];
    for (const [args, code] of cases) {
      const r = await admin('ratecard', 'set', ...args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(JSON.parse(r.stderr).error.code, args.join(' ')).toBe(code);
    }
  });
});
