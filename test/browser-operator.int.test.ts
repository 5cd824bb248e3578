import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { applyDriver } from '../shared/services/drivers.ts';
import { createOperator } from '../shared/services/operators.ts';
import { expectAccessible, launchBrowser, newBrowserPage, screenshot, watchPageErrors } from './helpers/browser.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * The operator pages in a real browser (Debian's Chromium through playwright-core) against the
 * real API: an operator signs in with their account and approves a pending driver application
 * from the drivers page; the database shows the driver approved. Each page passes axe-core with
 * no serious or critical violation; screenshots go to artifacts/screenshots/.
 */
let env: TestEnv;
let api: Served;
let browser: Browser;
const contexts: BrowserContext[] = [];

// A real browser on a slow, busy machine: generous limits (nothing here asserts timing).
vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

beforeAll(async () => {
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000' } });
  api = await serve(await appFor(env));
  browser = await launchBrowser();
}, 120_000);

afterEach(async () => {
  for (const c of contexts.splice(0)) await c.close().catch(() => {});
});

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await env?.cleanup();
}, 60_000);

async function pendingApplication(name: string): Promise<string> {
  const { driverId } = await applyDriver(
    env.rt.db,
    {
      name,
      phone: '+447700900771',
      email: 'applicant.browser@example.org',
      licensingAuthority: 'Manchester City Council',
      licenceNumber: `BRW-${Date.now()}`,
      licenceExpiry: '2031-01-01',
      vehicle: {
        make: 'Skoda',
        model: 'Octavia',
        colour: 'Blue',
        registration: 'BR25 OWS',
        class: 'estate',
        seats: 4,
        wheelchairAccessible: false,
      },
      homeCity: 'Manchester',
      operatingRadiusMiles: 15,
    },
    { actor: 'test' },
  );
  return driverId;
}

describe('an operator in a browser', () => {
  it('signs in and approves a pending driver application', async () => {
    const op = await createOperator(env.rt.db, { email: 'ops.browser@example.org', name: 'Ola', actor: 'test' });
    const id = await pendingApplication('Bea Browser');

    const { context, page } = await newBrowserPage(browser, { desktop: true });
    contexts.push(context);
    const errors = watchPageErrors(page);
    // Without a session the operator pages lead to the sign-in page.
    await page.goto(`${api.url}/operator`);
    await page.waitForURL((url) => url.pathname === '/operator/login');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Operator sign-in');
    await screenshot(page, 'sign-in');
    await expectAccessible(page);

    await page.getByLabel('E-mail address').click();
    await page.keyboard.type(op.email);
    await page.getByLabel('Password').click();
    await page.keyboard.type(op.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.pathname === '/operator');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Hello, Ola');
    await screenshot(page, 'overview');
    await expectAccessible(page);

    await page.getByRole('link', { name: 'Driver applications pending' }).click();
    await page.waitForURL((url) => url.pathname === '/operator/drivers');
    await page.getByText('Bea Browser').first().waitFor({ state: 'visible' });
    await screenshot(page, 'drivers-pending');
    await expectAccessible(page);
    expect(await env.rt.db('drivers').where({ id }).first('status')).toEqual({ status: 'pending_approval' });

    // The button's accessible name says whom it approves.
    await page.getByRole('button', { name: 'Approve Bea Browser' }).click();
    await page.waitForURL((url) => url.searchParams.get('done') === 'approved' && url.searchParams.get('id') === id);
    await page.getByText('Approved Bea Browser.').waitFor({ state: 'visible' });
    const driver = await env.rt.db('drivers').where({ id }).first('status', 'token_hash', 'trial_ends_at');
    expect(driver.status).toBe('approved');
    expect(driver.token_hash).not.toBeNull();
    expect(driver.trial_ends_at).not.toBeNull();
    expect(await page.getByRole('button', { name: 'Approve Bea Browser' }).count()).toBe(0);
    await screenshot(page, 'driver-approved');
    await expectAccessible(page);
    expect(errors).toEqual([]);
  });
});
