import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { presenceIndex } from '../shared/services/dispatch.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { bookThroughApi } from './helpers/bookings.ts';
import {
  BROWSER_WAIT_MS,
  expectAccessible,
  launchBrowser,
  newBrowserPage,
  screenshot,
  watchPageErrors,
} from './helpers/browser.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { startTwilioStub } from './helpers/twilio-stub.ts';

/**
 * The driver's side in a real browser (Debian's Chromium through playwright-core), against the
 * real API and workers (pricing, dispatch, notify, the outbox relay) and a local Twilio
 * stand-in: the job card's SMS carries the short link; the driver opens it on their phone,
 * signs in with their driver token, accepts the offer and reports they are on the way, with
 * the page's own forms. Each page passes axe-core with no serious or critical violation;
 * screenshots go to artifacts/screenshots/.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;
let browser: Browser;
let twilio: Awaited<ReturnType<typeof startTwilioStub>>;
const contexts: BrowserContext[] = [];

// A real browser on a slow, busy machine: generous limits (nothing here asserts timing).
vi.setConfig({ testTimeout: 180_000, hookTimeout: 120_000 });

// Manchester Piccadilly, where bookThroughApi's journeys start, and 500 m north of it.
const NEAR_PICKUP = { lat: 53.4774 + 0.5 / 111.2, lng: -2.2309 };

beforeAll(async () => {
  twilio = await startTwilioStub();
  env = await createTestEnv({
    env: {
      TWILIO_API_BASE_URL: twilio.url,
      TWILIO_ACCOUNT_SID: 'AC33333333333333333333333333333333',
      TWILIO_AUTH_TOKEN: 'secret-token',
      RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
      QUOTE_LIMIT_PER_HOUR: '100000',
      // bookThroughApi books three hours ahead: dispatch at once.
      DISPATCH_LEAD_MINUTES: '600',
      // The offer stays open however slow the machine (its page reloads itself when time runs out).
      OFFER_TIMEOUT_SECONDS: '900',
      PRESENCE_TTL_SECONDS: '3600',
      OUTBOX_POLL_MS: '100',
    },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing', 'dispatch', 'notify', 'outbox-relay'], env.rt);
  api = await serve(await appFor(env));
  browser = await launchBrowser();
}, 120_000);

afterEach(async () => {
  for (const c of contexts.splice(0)) await c.close().catch(() => {});
});

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await roles?.close();
  await twilio?.close();
  await env?.cleanup();
}, 60_000);

describe('a driver in a browser', () => {
  it('opens the job card link, signs in with the driver token, accepts the offer and sets off', async () => {
    const driver = await approvedDriver(env.rt.db, { name: 'Jo Jobcard' });
    const presence = await fetch(`${api.url}/api/public/v1/driver/presence`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${driver.token}` },
      body: JSON.stringify({ available: true, ...NEAR_PICKUP }),
    });
    expect(presence.status, await presence.text()).toBe(200);
    const booking = await bookThroughApi(api.url, env.rt.db, { name: 'Pia Passenger' });
    const offer = await eventually(
      () =>
        env.rt
          .db('dispatch_offers')
          .where({ booking_id: booking.id, state: 'offered' })
          .first<{ id: string; driver_id: string } | undefined>('id', 'driver_id'),
      BROWSER_WAIT_MS,
    );
    expect(offer.driver_id).toBe(driver.id);
    // The job card as the driver's phone received it (the SMS through Twilio), and its short link.
    const sms = await eventually(
      async () =>
        twilio.requests.find((r) => r.form.To === driver.phone && /\/o\/[A-Za-z0-9_-]+/.test(r.form.Body ?? '')),
      BROWSER_WAIT_MS,
    );
    const link = /https?:\/\/\S+?(\/o\/[A-Za-z0-9_-]+)/.exec(sms.form.Body ?? '')?.[1] as string;
    expect(link).toBeTruthy();

    const { context, page } = await newBrowserPage(browser);
    contexts.push(context);
    const errors = watchPageErrors(page);
    const opened = await page.goto(`${api.url}${link}`);
    expect(opened?.status()).toBe(200);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(`Job offer ${booking.ref}`);
    // Signed out: the offer without the passenger's details, and the sign-in form.
    expect(await page.getByText('Pia Passenger').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Accept' }).count()).toBe(0);
    await screenshot(page, 'offer-signed-out');
    await expectAccessible(page);

    await page.getByLabel('Driver token').click();
    await page.keyboard.type(driver.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Back on the same link, now signed in, with the answer buttons.
    await page.waitForURL((url) => url.pathname === link);
    await page.getByRole('button', { name: 'Accept' }).waitFor({ state: 'visible' });
    await page.getByRole('button', { name: 'Decline' }).waitFor({ state: 'visible' });
    await screenshot(page, 'offer');
    await expectAccessible(page);
    expect(await env.rt.db('dispatch_offers').where({ id: offer.id }).first('state')).toEqual({ state: 'offered' });

    await page.getByRole('button', { name: 'Accept' }).click();
    await page.waitForURL((url) => url.pathname === `/driver/jobs/${booking.ref}`);
    expect(await env.rt.db('dispatch_offers').where({ id: offer.id }).first('state')).toEqual({ state: 'accepted' });
    expect(await env.rt.db('bookings').where({ id: booking.id }).first('status', 'driver_id')).toEqual({
      status: 'driver_assigned',
      driver_id: driver.id,
    });
    // The job is theirs: now they see who to pick up.
    await page.getByText('Pia Passenger').first().waitFor({ state: 'visible' });
    await screenshot(page, 'job-accepted');
    await expectAccessible(page);

    await page.getByRole('button', { name: 'I am on my way' }).click();
    await eventually(
      async () =>
        ((await env.rt.db('bookings').where({ id: booking.id }).first('status')) as { status: string }).status ===
        'driver_en_route',
      BROWSER_WAIT_MS,
    );
    await page.waitForLoadState('load');
    await screenshot(page, 'job-en-route');
    await expectAccessible(page);
    expect(errors).toEqual([]);
  });

  it('starts taking jobs with the phone’s location, follows a move, and stops', async () => {
    const driver = await approvedDriver(env.rt.db, { name: 'Gil Geo' });
    const positionOf = async () =>
      (await presenceIndex(env.rt.redis, env.config).positions([driver.id], Date.now())).get(driver.id);
    const { context, page } = await newBrowserPage(browser);
    contexts.push(context);
    await context.grantPermissions(['geolocation'], { origin: api.url });
    const first = { latitude: 53.4794, longitude: -2.2453 }; // Manchester city centre
    await context.setGeolocation(first);
    const errors = watchPageErrors(page);
    await page.goto(`${api.url}/driver`);
    await page.getByLabel('Driver token').click();
    await page.keyboard.type(driver.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Start taking jobs here' }).waitFor({ state: 'visible' });
    await screenshot(page, 'driver-not-taking-jobs');
    await expectAccessible(page);

    await page.getByRole('button', { name: 'Start taking jobs here' }).click();
    await page.getByText('You are taking jobs.').waitFor({ state: 'visible' });
    const at = await eventually(positionOf, BROWSER_WAIT_MS);
    expect(at.lat).toBeCloseTo(first.latitude, 4);
    expect(at.lng).toBeCloseTo(first.longitude, 4);
    await screenshot(page, 'driver-taking-jobs');
    await expectAccessible(page);

    // The phone moves 2 km: the page reports it at once (more than 200 m), not at the next beat.
    const moved = { latitude: 53.4974, longitude: -2.2453 };
    await context.setGeolocation(moved);
    await eventually(async () => {
      const p = await positionOf();
      return p !== undefined && Math.abs(p.lat - moved.latitude) < 1e-4;
    }, BROWSER_WAIT_MS);

    await page.getByRole('button', { name: 'Stop taking jobs' }).click();
    await page.getByText('You are not taking jobs.').waitFor({ state: 'visible' });
    expect(await positionOf()).toBeUndefined();
    expect(errors).toEqual([]);
  });
});
