import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendStatus } from '../shared/db/bookings.ts';
import { publishBookingEvent } from '../shared/services/booking-events.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { bookThroughApi } from './helpers/bookings.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { CookieJar, csrfOf, expectSafePage, getPage, postForm } from './helpers/pages.ts';

/**
 * The tracking page a booking's trackingUrl opens (`/track/{token}`), through real HTTP:
 * bookings made through the public API, statuses appended as the workers append them, the
 * live script and the event stream it follows, and the two-step cancel.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;

beforeAll(async () => {
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', QUOTE_LIMIT_PER_HOUR: '100000' } });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing'], env.rt);
  api = await serve(await appFor(env));
});
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

const book = () => bookThroughApi(api.url, env.rt.db);

/** A status appended the way the workers do it, then the wake-up after commit. */
async function advance(bookingId: string, status: string, extra: Record<string, unknown> = {}): Promise<void> {
  await env.rt.db.transaction(async (trx) => {
    if (Object.keys(extra).length > 0) await trx('bookings').where({ id: bookingId }).update(extra);
    await appendStatus(trx, bookingId, status, 'test');
  });
  await publishBookingEvent(env.rt.redis, env.config.queuePrefix, bookingId);
}

const statusOf = async (id: string) => (await env.rt.db('bookings').where({ id }).first('status')).status as string;
const cancelForm = (path: string) => `<form method="post" action="${path}/cancel">`;

describe('GET /track/{token}', () => {
  it('shows the status, pickup time, route, history and a refresh link, server-rendered; the live script is ours and allowed by the CSP', async () => {
    const b = await book();
    const p = await getPage(api.url, b.trackPath);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain(`<h1>Booking ${b.ref}</h1>`);
    expect(p.html).toContain(
      '<p class="status" id="status" role="status">Booked: a driver is found shortly before pickup</p>',
    );
    // A station is named as one (the rail data's name is the town's for many).
    expect(p.html).toContain('<dd>Manchester Piccadilly station</dd>');
    expect(p.html).toMatch(/<dt>Pickup<\/dt><dd><time datetime="[^"]+">[^<]+<\/time> \(UK time\)<\/dd>/);
    expect(p.html).toContain('<dt>Payment</dt><dd>Cash to the driver</dd>');
    expect(p.html).not.toContain('<dt>Meet and greet</dt>');
    // A meet and greet the passenger paid for is on the page, as in the confirmation e-mail.
    const met = await bookThroughApi(api.url, env.rt.db, {
      ride: { pickup: 'Manchester Airport', dropoff: 'Manchester Piccadilly', meetAndGreet: true },
    });
    expect((await getPage(api.url, met.trackPath)).html).toContain(
      '<dt>Meet and greet</dt><dd>Your driver meets you in the arrivals hall with a name board</dd>',
    );
    expect(p.html).toMatch(
      /<ol id="history" class="history">\n<li><time datetime="[^"]+">[^<]+<\/time> Booked: a driver/,
    );
    expect(p.html).toContain(`<a href="${b.trackPath}">Refresh this page</a>`);
    // No driver yet: the driver section and the pay link are there for the script, hidden.
    expect(p.html).toContain('<section id="driver" aria-labelledby="driver-h" hidden>');
    expect(p.html).toContain(`<p id="pay" hidden><a class="button" href="${b.payPath}">Pay your driver</a></p>`);
    expect(p.html).toContain(cancelForm(b.trackPath));

    // The live part: the API's event stream of this booking, and our own script.
    const eventsUrl = `/api/public/v1/booking/${b.ref}/events?t=${b.token}`;
    expect(p.html).toContain(
      `<p id="live" class="note" hidden data-events="${eventsUrl}" data-seq="1" data-status="pending">`,
    );
    const csp = p.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    const script = /<script src="(\/assets\/track-[0-9a-f]{10}\.js)" integrity="(sha256-[^"]+)" defer><\/script>/.exec(
      p.html,
    );
    expect(script).not.toBeNull();
    const [, src, integrity] = script as RegExpExecArray;
    const js = await fetch(`${api.url}${src}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toContain('immutable');
    const body = Buffer.from(await js.arrayBuffer());
    expect(`sha256-${createHash('sha256').update(body).digest('base64')}`).toBe(integrity);
    expect(body.toString()).toContain("var url = live.getAttribute('data-events');");
    expect(body.toString()).toContain('new EventSource(url)');
    expect(body.toString()).not.toContain('innerHTML');
    // Revalidation: the ETag answers 304.
    const again = await fetch(`${api.url}${src}`, { headers: { 'if-none-match': js.headers.get('etag') as string } });
    expect(again.status).toBe(304);
    expect((await fetch(`${api.url}/assets/track-0000000000.js`)).status).toBe(404);

    // The stream the page follows answers with the booking's history.
    const abort = new AbortController();
    const stream = await fetch(`${api.url}${eventsUrl}`, { signal: abort.signal });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('event: status')) text += new TextDecoder().decode((await reader.read()).value);
    abort.abort();
    expect(text).toContain('"status":"pending"');
  });

  it('with a driver on the way: driver (escaped), vehicle, registration, ETA and the pay link', async () => {
    const b = await book();
    const driver = await approvedDriver(env.rt.db, { name: 'Zed' });
    await env.rt
      .db('drivers')
      .where({ id: driver.id })
      .update({ name: `<b>Zed</b> "Q" O'Brien`, last_lat: 53.506, last_lng: -2.231, last_seen_at: new Date() });
    const vehicle = await env.rt.db('vehicles').where({ driver_id: driver.id }).first('id', 'registration');
    await env.rt.db('vehicles').where({ id: vehicle.id }).update({ colour: 'Red & <i>Blue</i>' });
    await advance(b.id, 'driver_assigned', { driver_id: driver.id, vehicle_id: vehicle.id });
    await advance(b.id, 'driver_en_route');
    const p = await getPage(api.url, b.trackPath);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain('id="status" role="status">Your driver is on the way</p>');
    expect(p.html).toContain('<section id="driver" aria-labelledby="driver-h">');
    expect(p.html).toContain('<dd id="driver-name">&lt;b&gt;Zed&lt;/b&gt; O.</dd>');
    expect(p.html).toContain('<dd id="vehicle">Red &amp; &lt;i&gt;Blue&lt;/i&gt; Toyota Prius</dd>');
    expect(p.html).toContain(`<dd id="registration" class="reg">${vehicle.registration}</dd>`);
    expect(p.html).not.toContain('<b>Zed');
    expect(p.html).not.toContain('<i>Blue');
    expect(p.html).toMatch(/<p id="eta">Your driver is about \d+ minutes? away\.<\/p>/);
    expect(p.html).toContain(`<p id="pay"><a class="button" href="${b.payPath}">Pay your driver</a></p>`);
    expect(p.html).toContain('data-seq="3"');
    expect([...p.html.matchAll(/<li><time /g)]).toHaveLength(3);
    expect(p.html).toContain(cancelForm(b.trackPath));
  });

  it('a completed ride: the pay link, no cancel button and no live script', async () => {
    const b = await book();
    const driver = await approvedDriver(env.rt.db);
    await advance(b.id, 'driver_assigned', { driver_id: driver.id });
    await advance(b.id, 'passenger_on_board');
    await advance(b.id, 'completed');
    const p = await getPage(api.url, b.trackPath);
    expect(p.status).toBe(200);
    expectSafePage(p, { script: false });
    expect(p.html).toContain('id="status" role="status">Completed</p>');
    expect(p.html).toContain(`<p id="pay"><a class="button" href="${b.payPath}">Pay your driver</a></p>`);
    expect(p.html).not.toContain('/cancel');
    expect(p.html).not.toContain('id="live"');
  });

  it('no driver found: says whether we ask again before pickup or the passenger should make other plans', async () => {
    const b = await book();
    await advance(b.id, 'dispatching');
    await advance(b.id, 'no_driver_available', { dispatch_retry_at: new Date(Date.now() + 5 * 60_000) });
    const retrying = await getPage(api.url, b.trackPath);
    expect(retrying.html).toContain(
      'id="status" role="status">No driver found yet: we ask drivers again every few minutes until your pickup time</p>',
    );
    // Dispatch has stopped (pickup too soon to try again): waiting is no use.
    await env.rt.db('bookings').where({ id: b.id }).update({ dispatch_retry_at: null });
    const stopped = await getPage(api.url, b.trackPath);
    expect(stopped.html).toContain(
      'id="status" role="status">No driver was found: please make other plans (cancelling is free)</p>',
    );
    expect(stopped.html).not.toContain('Still looking');
  });

  it('an unknown, altered or malformed token is a 404 page', async () => {
    const b = await book();
    const altered = `${b.token.slice(0, -1)}${b.token.endsWith('A') ? 'B' : 'A'}`;
    for (const path of [
      `/track/${altered}`,
      '/track/not-a-token',
      `/track/${'x'.repeat(300)}`,
      `/track/${b.token}%3Cb%3E`,
    ]) {
      const p = await getPage(api.url, path);
      expect(p.status, path).toBe(404);
      expectSafePage(p, { script: false });
      expect(p.html).toContain('This tracking link is not valid');
      expect(p.html).not.toContain(b.ref);
    }
    expect((await getPage(api.url, `/track/${altered}/cancel`)).status).toBe(404);
    expect((await postForm(api.url, `/track/${altered}/cancel`, { confirm: 'yes' })).status).toBe(404);
  });
});

describe('cancelling from the tracking page', () => {
  it('the button leads to a confirmation page; confirming cancels it through the API’s cancel, and the button is gone', async () => {
    const b = await book();
    const jar = new CookieJar();
    const page = await getPage(api.url, b.trackPath, jar);
    const first = await postForm(
      api.url,
      `${b.trackPath}/cancel`,
      { csrf: csrfOf(page.html, `${b.trackPath}/cancel`) },
      jar,
    );
    expect(first.status).toBe(200);
    expectSafePage(first, { script: false });
    expect(first.html).toContain(`<h1>Cancel booking ${b.ref}?</h1>`);
    expect(first.html).toContain('<input type="hidden" name="confirm" value="yes">');
    expect(first.html).toContain(`<a class="button secondary" href="${b.trackPath}">No, keep my booking</a>`);
    expect(await statusOf(b.id)).toBe('pending');

    // The same confirmation page is at GET …/cancel.
    const direct = await getPage(api.url, `${b.trackPath}/cancel`, jar);
    expect(direct.status).toBe(200);
    expect(direct.html).toContain('Yes, cancel my booking');

    const confirmed = await postForm(
      api.url,
      `${b.trackPath}/cancel`,
      { csrf: csrfOf(first.html, `${b.trackPath}/cancel`), confirm: 'yes' },
      jar,
    );
    expect(confirmed.status).toBe(303);
    expect(confirmed.location).toBe(b.trackPath);
    expect(await statusOf(b.id)).toBe('cancelled');
    const history = await env.rt.db('booking_status_history').where({ booking_id: b.id }).orderBy('seq');
    expect(history.map((h) => [h.status, h.actor])).toEqual([
      ['pending', 'origin:api'],
      ['cancelled', 'passenger'],
    ]);
    // The drivers are told through the same job as an API cancel.
    expect(
      await env.rt.db('outbox').where({ job_name: 'booking-cancelled', job_id: `cancelled-${b.id}` }),
    ).toHaveLength(1);

    const after = await getPage(api.url, b.trackPath, jar);
    expect(after.status).toBe(200);
    expect(after.html).toContain('id="status" role="status">Cancelled</p>');
    expect(after.html).toContain('This booking is cancelled. There is nothing to pay.');
    expect(after.html).not.toContain(cancelForm(b.trackPath));
    expect(after.html).toContain('<p id="pay" hidden>');
    // Confirming again changes nothing.
    const twice = await postForm(api.url, `${b.trackPath}/cancel`, { csrf: csrfOf(first.html), confirm: 'yes' }, jar);
    expect(twice.status).toBe(303);
    expect(await env.rt.db('booking_status_history').where({ booking_id: b.id })).toHaveLength(2);
  });

  it('once the passenger is on board the button is gone, and a cancel sent anyway is refused (409)', async () => {
    const b = await book();
    const jar = new CookieJar();
    const page = await getPage(api.url, b.trackPath, jar);
    const csrf = csrfOf(page.html, `${b.trackPath}/cancel`);
    const driver = await approvedDriver(env.rt.db);
    await advance(b.id, 'driver_assigned', { driver_id: driver.id });
    await advance(b.id, 'passenger_on_board');

    const now = await getPage(api.url, b.trackPath, jar);
    expect(now.html).toContain('id="status" role="status">On board</p>');
    expect(now.html).not.toContain(cancelForm(b.trackPath));
    expect(now.html).not.toContain('Cancel this booking');

    const forced = await postForm(api.url, `${b.trackPath}/cancel`, { csrf, confirm: 'yes' }, jar);
    expect(forced.status).toBe(409);
    expectSafePage(forced);
    expect(forced.html).toContain('can no longer be cancelled');
    expect(await statusOf(b.id)).toBe('passenger_on_board');
    const direct = await getPage(api.url, `${b.trackPath}/cancel`, jar);
    expect(direct.status).toBe(303);
    expect(direct.location).toBe(b.trackPath);
  });

  it('a cancel without the page’s form token (or its cookie) is refused and changes nothing', async () => {
    const b = await book();
    const jar = new CookieJar();
    const page = await getPage(api.url, b.trackPath, jar);
    const csrf = csrfOf(page.html, `${b.trackPath}/cancel`);
    for (const [what, fields, cookies] of [
      ['no token', { confirm: 'yes' }, jar],
      ['no cookie', { confirm: 'yes', csrf }, undefined],
      ['another browser', { confirm: 'yes', csrf }, new CookieJar()],
    ] as const) {
      const post = await postForm(api.url, `${b.trackPath}/cancel`, fields, cookies);
      expect(post.status, what).toBe(403);
      expect(post.html, what).toContain('This form could not be checked');
    }
    expect(await statusOf(b.id)).toBe('pending');
  });
});
