import { createHash, randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payToken } from '../shared/services/bookings.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { bookThroughApi } from './helpers/bookings.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * GET /pay/{token}: the pay-the-driver page a booking's payDriverUrl opens. Bookings are made
 * through the real v1 booking API (priced by the pricing worker); the driver assignment and
 * settlement records are written as dispatch and the driver app would write them.
 */
let env: TestEnv;
let srv: Served;
let roles: RunningRoles;

// biome-ignore lint/suspicious/noExplicitAny: JSON read back in assertions
type Json = Record<string, any>;

const book = () => bookThroughApi(srv.url, env.rt.db);

async function driver(name: string, paymentLink?: string): Promise<string> {
  const { id: driverId } = await approvedDriver(env.rt.db, paymentLink ? { paymentLink } : {});
  // The name as stored, markup included, to check that the page escapes it.
  await env.rt.db('drivers').where({ id: driverId }).update({ name });
  return driverId;
}

const assign = (bookingId: string, driverId: string) =>
  env.rt.db('bookings').where({ id: bookingId }).update({ driver_id: driverId, status: 'driver_assigned' });

async function page(path: string) {
  const res = await fetch(`${srv.url}${path}`, { headers: { accept: 'text/html' } });
  return { status: res.status, headers: res.headers, html: await res.text() };
}

/** What every pay page must be: HTML, no forms or card fields, no script, a strict CSP that allows its one style. */
function expectSafePage(p: Awaited<ReturnType<typeof page>>) {
  expect(p.headers.get('content-type')).toMatch(/^text\/html; charset=utf-8/);
  expect(p.headers.get('cache-control')).toBe('no-store');
  expect(p.html).toMatch(/^<!doctype html>/);
  expect(p.html).toContain('<html lang="en">');
  expect(p.html).toContain('name="viewport"');
  expect(p.html).not.toContain('<input');
  expect(p.html).not.toContain('<form');
  expect(p.html).not.toContain('<script');
  expect(p.html).not.toContain('<iframe');
  expect(p.html.toLowerCase()).not.toContain('card number');
  expect(p.html.toLowerCase()).not.toMatch(/\bcvv\b/); // a word, not letters inside a random token
  expect(p.html).not.toMatch(/(src|href)="(https?:)?\/\/(?!pay\.example)/);
  const csp = p.headers.get('content-security-policy') ?? '';
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("form-action 'none'");
  expect(csp).not.toContain('unsafe-inline');
  const style = /<style>([\s\S]*?)<\/style>/.exec(p.html)?.[1] ?? '';
  expect(csp).toContain(`'sha256-${createHash('sha256').update(style).digest('base64')}'`);
}

beforeAll(async () => {
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', QUOTE_LIMIT_PER_HOUR: '100000' } });
  srv = await serve(await appFor(env));
  roles = startRoles(['pricing'], env.rt);
}, 60_000);

afterAll(async () => {
  await roles?.close();
  await srv?.close();
  await env?.cleanup();
});

describe('pay-the-driver page', () => {
  it('before a driver is assigned: reference, fare in £, due, the cash option and no payment link', async () => {
    const b = await book();
    const p = await page(b.payPath);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain(b.ref);
    const fare = `£${(b.farePence / 100).toFixed(2)}`;
    expect(p.html).toContain(fare);
    expect(p.html).toContain('<dt>Payment</dt><dd>Due</dd>');
    expect(p.html).toContain('<h3>Cash</h3>');
    expect(p.html).toContain(`Pay ${fare} in cash to your driver`);
    expect(p.html).not.toContain('<a ');
    expect(p.html).toContain('appears here once a driver is assigned');
  });

  it("with an assigned driver: the driver's name (escaped) and their own payment link, and the cash option", async () => {
    const b = await book();
    const driverId = await driver(`<b>"Zoë"</b>&Co Zed O'Brien`, 'https://pay.example/zoe?ref=1&amount=2');
    await assign(b.id, driverId);
    const p = await page(b.payPath);
    expect(p.status).toBe(200);
    expectSafePage(p);
    // First name and initial, as on the tracking page; escaped.
    const escaped = '&lt;b&gt;&quot;Zoë&quot;&lt;/b&gt;&amp;Co O.';
    expect(p.html).not.toContain('Brien');
    expect(p.html).toContain(`<dt>Driver</dt><dd>${escaped}</dd>`);
    expect(p.html).not.toContain('<b>');
    expect(p.html).toContain(
      `<a class="button" href="https://pay.example/zoe?ref=1&amp;amount=2" rel="noopener noreferrer">`,
    );
    expect(p.html).toContain(`Pay ${escaped} by payment link</a>`);
    expect(p.html).toContain('<h3>Cash</h3>');
    expect(p.html).not.toContain('appears here once a driver is assigned');
  });

  it('a driver without a payment link: the cash option only', async () => {
    const b = await book();
    await assign(b.id, await driver('Cash Only Cal'));
    const p = await page(b.payPath);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain('<dt>Driver</dt><dd>Cash C.</dd>');
    expect(p.html).not.toContain('<a ');
    expect(p.html).toContain('<h3>Cash</h3>');
  });

  it('derives the payment state from settlement records, as the booking lookup does', async () => {
    const b = await book();
    const driverId = await driver('Paid Pat', 'https://pay.example/pat');
    await assign(b.id, driverId);
    await env.rt.db('settlement_records').insert({
      booking_id: b.id,
      driver_id: driverId,
      kind: 'pay_link_paid',
      method: 'pay_link',
      amount_pence: b.farePence,
      recorded_by: `driver:${driverId}`,
    });
    const p = await page(b.payPath);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain('<dd class="paid">Paid</dd>');
    expect(p.html).not.toContain('<h3>Cash</h3>');
    expect(p.html).not.toContain('<a ');
    const lookup = await fetch(`${srv.url}/api/public/v1/booking/${b.ref}?email=${encodeURIComponent(b.email)}`);
    expect(((await lookup.json()) as Json).payment.state).toBe('paid');

    const cancelled = await book();
    await assign(cancelled.id, await driver('Gone Gary'));
    await env.rt.db('bookings').where({ id: cancelled.id }).update({ status: 'cancelled' });
    const v = await page(cancelled.payPath);
    expect(v.html).toContain('<dd>Nothing to pay</dd>');
    // No driver named once the booking is cancelled, as on the tracking page.
    expect(v.html).not.toContain('Gary');
    expect(v.html).not.toContain('<dt>Driver</dt>');
    expect(v.html).toContain('was cancelled');
    expect(v.html).not.toContain('<h3>Cash</h3>');
  });

  it('the pay link has its own token: it opens the pay page only, not tracking, lookup, events or cancel', async () => {
    const b = await book();
    const pay = b.payPath.split('/').pop() as string;
    expect(b.payPath).toBe(`/pay/${pay}`);
    expect(pay).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(pay).not.toBe(b.token);
    expect(pay).toBe(payToken(b.id, env.config.dataEncryptionKey));
    expect((await page(b.payPath)).status).toBe(200);
    // The pay token is not a tracking token anywhere a tracking token is taken.
    expect((await page(`/track/${pay}`)).status).toBe(404);
    const lookup = await fetch(`${srv.url}/api/public/v1/booking/${b.ref}?t=${pay}`);
    expect(lookup.status).toBe(404);
    expect(((await lookup.json()) as Json).error.code).toBe('booking_not_found');
    const events = await fetch(`${srv.url}/api/public/v1/booking/${b.ref}/events?t=${pay}`, {
      headers: { accept: 'text/event-stream' },
    });
    // The event stream answers a wrong token as it answers an unknown booking.
    expect(events.status).toBe(404);
    await events.body?.cancel();
    const cancel = await fetch(`${srv.url}/api/public/v1/booking/${b.ref}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'cancel', t: pay }),
    });
    expect(cancel.status).toBe(404);
    expect(((await cancel.json()) as Json).error.code).toBe('booking_not_found');
    const row = await env.rt.db('bookings').where({ id: b.id }).first('status');
    expect(row.status).not.toBe('cancelled');
    // The tracking page links to the pay page by the pay token, never by its own.
    await assign(b.id, await driver('Tracked Tina'));
    const track = await page(b.trackPath);
    expect(track.status).toBe(200);
    expect(track.html).toContain(`href="/pay/${pay}"`);
    expect(track.html).not.toContain(`/pay/${b.token}`);
  });

  it('a pay link sent before pay tokens (the tracking token) still opens the page', async () => {
    const b = await book();
    const p = await page(`/pay/${b.token}`);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain(b.ref);
  });

  it('a pay token is refused for another booking id, under another key, or spelled another way', async () => {
    const b = await book();
    const key = env.config.dataEncryptionKey;
    const pay = b.payPath.split('/').pop() as string;
    const raw = Buffer.from(pay, 'base64url');
    // Another booking's id with this booking's MAC.
    const otherId = Buffer.from((await book()).id.replaceAll('-', ''), 'hex');
    const swapped = Buffer.concat([otherId, raw.subarray(16)]).toString('base64url');
    // The right id, the MAC made with another key.
    const foreign = payToken(b.id, randomBytes(32));
    // A well-made token for a booking that does not exist.
    const unknown = payToken(uuidv7(), key);
    // The same bytes with the last character's two spare bits set: decodes alike, is not the link.
    const last = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const spare = `${pay.slice(0, -1)}${last[last.indexOf(pay.slice(-1)) | 1]}`;
    expect(Buffer.from(spare, 'base64url').equals(raw)).toBe(true);
    for (const t of [swapped, foreign, unknown, spare]) {
      const p = await page(`/pay/${t}`);
      expect(p.status, t).toBe(404);
      expect(p.html).toContain('This payment link is not valid');
      expect(p.html).not.toContain(b.ref);
    }
  });

  it('an unknown, altered or malformed token is a 404 page', async () => {
    const b = await book();
    const token = b.payPath.split('/').pop() as string;
    const altered = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    for (const path of [`/pay/${altered}`, '/pay/not-a-token', `/pay/${'x'.repeat(200)}`, `/pay/${token}%3Cb%3E`]) {
      const p = await page(path);
      expect(p.status, path).toBe(404);
      expectSafePage(p);
      expect(p.html).toContain('This payment link is not valid');
      expect(p.html).not.toContain(b.ref);
    }
  });
});
