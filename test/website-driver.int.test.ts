import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { presenceIndex } from '../shared/services/dispatch.ts';
import { approveDriver, suspendDriver } from '../shared/services/drivers.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { bookThroughApi } from './helpers/bookings.ts';
import { approvedDriver, type TestDriver, withPresenceUnreadable } from './helpers/drivers.ts';
import { appFor, blockedBy, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { CookieJar, csrfOf, expectSafePage, getPage, type Page, postForm } from './helpers/pages.ts';

/**
 * The driver pages through real HTTP, real Postgres and Redis and the real workers: bookings
 * made through the public API are priced and dispatched (pricing, dispatch and the outbox
 * relay), the job card's SMS text carries the short link, and the driver signs in with their
 * token, answers the offer and reports progress with the page's forms; every outcome is
 * checked in the database.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;

// Manchester Piccadilly, where bookThroughApi's journeys start.
const PICCADILLY = { lat: 53.4774, lng: -2.2309 };
const near = (km: number) => ({ lat: PICCADILLY.lat + km / 111.2, lng: PICCADILLY.lng });
const PASSENGER_PHONE = '+447700900456';

beforeAll(async () => {
  env = await createTestEnv({
    env: {
      RATE_LIMIT_PER_IP_PER_MINUTE: '100000',
      QUOTE_LIMIT_PER_HOUR: '100000',
      // bookThroughApi books three hours ahead: dispatch at once.
      DISPATCH_LEAD_MINUTES: '600',
      OFFER_TIMEOUT_SECONDS: '300',
      OUTBOX_POLL_MS: '100',
    },
  });
  await syncBuiltInTariffs(env.rt.db);
  roles = startRoles(['pricing', 'dispatch', 'outbox-relay'], env.rt);
  api = await serve(await appFor(env));
}, 60_000);
afterAll(async () => {
  await api?.close();
  await roles?.close();
  await env?.cleanup();
});

async function presence(token: string, available: boolean, at = near(0.5)): Promise<void> {
  const res = await fetch(`${api.url}/api/public/v1/driver/presence`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ available, ...at }),
  });
  expect(res.status, await res.text()).toBe(200);
}

interface Offered {
  ref: string;
  bookingId: string;
  farePence: number;
  offerId: string;
  /** The path of the short link in the job card's SMS text. */
  link: string;
  passengerName: string;
}

let passengerSeq = 0;

type Booker = (name: string) => Promise<{ ref: string; id: string; farePence: number }>;

/**
 * A booking through the public API, dispatched to `driver` (the only one available), and its
 * job card's link. By default `bookThroughApi`'s, the driver near Piccadilly; `book` and `at`
 * make another booking with the driver waiting elsewhere.
 */
async function offerTo(
  driver: TestDriver,
  opts: { book?: Booker; at?: { lat: number; lng: number } } = {},
): Promise<Offered> {
  await presence(driver.token, true, opts.at);
  passengerSeq += 1;
  const passengerName = `Pat Passenger${passengerSeq}`;
  const b = await (opts.book ?? ((name) => bookThroughApi(api.url, env.rt.db, { name, phone: PASSENGER_PHONE })))(
    passengerName,
  );
  const offer = await eventually(() =>
    env.rt
      .db('dispatch_offers')
      .where({ booking_id: b.id, state: 'offered' })
      .first<{ id: string; driver_id: string } | undefined>('id', 'driver_id'),
  );
  expect(offer.driver_id).toBe(driver.id);
  const card = await eventually(() =>
    env.rt
      .db('outbound_messages')
      .where({ booking_id: b.id, purpose: 'job_card', channel: 'sms' })
      .first<{ body: string } | undefined>('body'),
  );
  const link = /https?:\/\/[^/\s]+(\/o\/[A-Za-z0-9_-]{32})$/.exec(card.body)?.[1];
  expect(link, card.body).toBeDefined();
  // Taken off the map, so the next test's booking goes to its own driver.
  await presence(driver.token, false, opts.at);
  return {
    ref: b.ref,
    bookingId: b.id,
    farePence: b.farePence,
    offerId: offer.id,
    link: link as string,
    passengerName,
  };
}

async function signIn(jar: CookieJar, token: string, next = '/driver'): Promise<Page> {
  const form = await getPage(api.url, `/driver/sign-in?next=${encodeURIComponent(next)}`, jar);
  expect(form.status).toBe(200);
  return postForm(api.url, '/driver/sign-in', { csrf: csrfOf(form.html, '/driver/sign-in'), next, token }, jar);
}

async function signedIn(driver: TestDriver): Promise<CookieJar> {
  const jar = new CookieJar();
  const p = await signIn(jar, driver.token);
  expect(p.status).toBe(303);
  return jar;
}

const offerState = async (id: string) =>
  (await env.rt.db('dispatch_offers').where({ id }).first<{ state: string }>('state')).state;
const booking = (id: string) =>
  env.rt.db('bookings').where({ id }).first<{ status: string; driver_id: string | null }>('status', 'driver_id');
const jobPath = (ref: string) => `/driver/jobs/${ref}`;

describe('sign-in', () => {
  it('a good token sets the session cookie and goes back to next; the feed greets the driver', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Gina Good' });
    const jar = new CookieJar();
    const form = await getPage(api.url, '/driver', jar);
    expect(form.status).toBe(200);
    expectSafePage(form, { script: false });
    expect(form.html).toContain('<h1 id="signin-h">Driver sign-in</h1>');
    expect(form.html).toContain('<label for="token">Driver token</label>');
    expect(form.html).toContain('<input type="hidden" name="next" value="/driver">');

    const res = await postForm(
      api.url,
      '/driver/sign-in',
      { csrf: csrfOf(form.html, '/driver/sign-in'), next: '/driver', token: `  ${d.token} ` },
      jar,
    );
    expect(res.status).toBe(303);
    expect(res.location).toBe('/driver');
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('dtn_driver='));
    expect(cookie).toMatch(/^dtn_driver=[0-9a-f-]{36}\.[0-9]+\.[A-Za-z0-9_-]{43};/);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Lax');
    expect(cookie).toContain('Path=/');
    expect(cookie).not.toContain('Secure'); // http here; an https domain gets Secure
    // The cookie carries no token.
    expect(cookie).not.toContain(d.token.slice(8, 20));
    const maxAge = Number(/Max-Age=([0-9]+)/.exec(cookie ?? '')?.[1]);
    expect(maxAge).toBe(30 * 24 * 3600);

    const home = await getPage(api.url, '/driver', jar);
    expect(home.status).toBe(200);
    // The jobs page always has the script: it reports the location while the driver takes jobs.
    expectSafePage(home);
    expect(home.headers.get('content-security-policy')).toContain("connect-src 'self'");
    expect(home.html).toContain('<h1>Hello, Gina</h1>');
    expect(home.html).toContain('<h2 id="offers-h">Offers</h2>');
    expect(home.html).toContain('<h2 id="earnings-h">Earnings and invoices</h2>');
    expect(home.html).toContain('<form method="post" action="/driver/sign-out">');
  });

  it('a wrong token is refused (401, the error next to the field) and sets no session', async () => {
    const jar = new CookieJar();
    for (const token of ['dtn_drv_0000000000000000000000000000000000000000', 'not a token', '']) {
      const p = await signIn(jar, token);
      expect(p.status).toBe(401);
      expectSafePage(p);
      expect(p.html).toContain('<p class="field-error" id="token-error">That driver token is not valid');
      expect(p.html).toContain('aria-describedby="token-hint token-error" aria-invalid="true"');
      expect(p.headers.getSetCookie().some((c) => c.startsWith('dtn_driver='))).toBe(false);
    }
    expect((await getPage(api.url, '/driver', jar)).html).toContain('Driver sign-in');
  });

  it('a sign-in without the form token is refused (403)', async () => {
    const d = await approvedDriver(env.rt.db);
    const jar = new CookieJar();
    await getPage(api.url, '/driver', jar);
    const p = await postForm(api.url, '/driver/sign-in', { next: '/driver', token: d.token }, jar);
    expect(p.status).toBe(403);
    expectSafePage(p);
    expect(p.headers.getSetCookie().some((c) => c.startsWith('dtn_driver='))).toBe(false);
  });

  it('never redirects off the site: a foreign or odd next goes to the feed', async () => {
    const d = await approvedDriver(env.rt.db);
    for (const next of [
      'https://evil.example/',
      '//evil.example/driver',
      '/\\evil.example',
      '/driver/../admin',
      'javascript:alert(1)',
      '/driver?x=https://evil.example',
    ]) {
      const p = await signIn(new CookieJar(), d.token, next);
      expect(p.status, next).toBe(303);
      expect(p.location, next).toBe('/driver');
    }
    const ok = await signIn(new CookieJar(), d.token, '/driver/jobs/DTN-7K3F9Q');
    expect(ok.location).toBe('/driver/jobs/DTN-7K3F9Q');
  });

  it('signing out clears the session', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Olly Out' });
    const jar = await signedIn(d);
    const home = await getPage(api.url, '/driver', jar);
    // Without the form token, nothing happens.
    expect((await postForm(api.url, '/driver/sign-out', {}, jar)).status).toBe(403);
    expect((await getPage(api.url, '/driver', jar)).html).toContain('Hello, Olly');
    const out = await postForm(api.url, '/driver/sign-out', { csrf: csrfOf(home.html, '/driver/sign-out') }, jar);
    expect(out.status).toBe(303);
    expect(out.location).toBe('/driver');
    expect(out.headers.getSetCookie().find((c) => c.startsWith('dtn_driver='))).toMatch(
      /^dtn_driver=;.*Expires=Thu, 01 Jan 1970/,
    );
    expect((await getPage(api.url, '/driver', jar)).html).toContain('Driver sign-in');
  });

  it('signs out every device: the token is replaced, every session ends, the new token goes by e-mail only (the SMS is a notice)', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Lena Lost' });
    const phone = await signedIn(d);
    const laptop = await signedIn(d);
    const home = await getPage(api.url, '/driver', laptop);
    const path = '/driver/sign-out-everywhere';
    // Without the form token, nothing happens.
    expect((await postForm(api.url, path, {}, laptop)).status).toBe(403);
    expect((await getPage(api.url, '/driver', phone)).html).toContain('Hello, Lena');

    const out = await postForm(api.url, path, { csrf: csrfOf(home.html, path) }, laptop);
    expect(out.status).toBe(200);
    expectSafePage(out);
    expect(out.html).toContain('Signed out on every device');
    for (const jar of [phone, laptop])
      expect((await getPage(api.url, '/driver', jar)).html).toContain('Driver sign-in');
    const dashboard = (token: string) =>
      fetch(`${api.url}/api/public/v1/driver/dashboard`, { headers: { authorization: `Bearer ${token}` } });
    expect((await dashboard(d.token)).status).toBe(401);
    // The new token is in the e-mail only: the SMS (to a phone that may be the lost one) is a notice.
    const sentTokens = async () => {
      const sent = await env.rt
        .db('outbound_messages')
        .where({ driver_id: d.id, purpose: 'driver_token' })
        .orderBy('created_at', 'desc')
        .select<{ channel: string; body: string }[]>('channel', 'body');
      const notices = sent.filter((x) => x.channel === 'sms' && x.body.includes('token was replaced'));
      expect(notices).toHaveLength(sent.filter((x) => x.channel === 'email' && x.body.includes('was replaced')).length);
      for (const m of notices) {
        expect(m.body).not.toMatch(/dtn_drv_/);
        expect(m.body).toContain('The new token is in your e-mail');
      }
      return sent
        .filter((m) => m.channel === 'email')
        .map((m) => /(dtn_drv_[0-9A-Za-z]{40})/.exec(m.body)?.[1] as string);
    };
    const [token] = await sentTokens();
    expect(token).toMatch(/^dtn_drv_[0-9A-Za-z]{40}$/);
    expect(token).not.toBe(d.token);
    expect((await dashboard(token as string)).status).toBe(200);
    expect((await signIn(new CookieJar(), token as string)).status).toBe(303);

    // The same through the API: the answer says where the token went and does not carry it.
    const replace = (t: string) =>
      fetch(`${api.url}/api/public/v1/driver/token`, { method: 'POST', headers: { authorization: `Bearer ${t}` } });
    const replaced = await replace(token as string);
    expect(replaced.status).toBe(200);
    expect(replaced.headers.get('cache-control')).toBe('no-store');
    const text = await replaced.text();
    expect(text).not.toMatch(/dtn_drv_[0-9A-Za-z]{40}/);
    const answer = JSON.parse(text) as { tokenPrefix: string; sentTo: string };
    expect(answer.sentTo).toBe('email');
    const [next] = await sentTokens();
    expect(next?.startsWith(answer.tokenPrefix)).toBe(true);
    expect((await dashboard(token as string)).status).toBe(401);
    expect((await dashboard(next as string)).status).toBe(200);
    const audit = await env.rt.db('audit_log').where({ subject_id: d.id, action: 'driver.token_replace' });
    expect(audit).toHaveLength(2);
    expect(JSON.stringify(audit)).not.toContain(next);

    // Two requests with the same token sent together replace it once: the second finds it replaced (401).
    // Both are signed in and waiting on the driver's row before either goes on.
    let sent: Promise<Response[]> | undefined;
    await env.rt.db.transaction(async (trx) => {
      await trx('drivers').where({ id: d.id }).forUpdate().first('id');
      sent = Promise.all([replace(next as string), replace(next as string)]);
      expect(await blockedBy(env.rt.db, trx, 2)).toBe(true);
    });
    const pair = await (sent as Promise<Response[]>);
    expect(pair.map((r) => r.status).sort()).toEqual([200, 401]);
    expect(await env.rt.db('audit_log').where({ subject_id: d.id, action: 'driver.token_replace' })).toHaveLength(3);

    // Each sends an SMS and an e-mail: five an hour, then 429 with Retry-After (the token kept).
    let [current] = await sentTokens();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await replace(current as string);
      statuses.push(r.status);
      if (r.status === 200) [current] = await sentTokens();
      else {
        expect(((await r.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(3000);
        expect(Number(r.headers.get('retry-after'))).toBeLessThanOrEqual(3600);
      }
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect((await dashboard(current as string)).status).toBe(200);
  });

  it('signs out everywhere once when two devices ask together: the later finds its session ended (409)', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Tess Twice' });
    const path = '/driver/sign-out-everywhere';
    const devices = await Promise.all([signedIn(d), signedIn(d)]);
    const forms = await Promise.all(
      devices.map(async (jar) => csrfOf((await getPage(api.url, '/driver', jar)).html, path)),
    );
    // Both pass the session check and wait on the driver's row before either replaces the token.
    let sent: Promise<Page[]> | undefined;
    await env.rt.db.transaction(async (trx) => {
      await trx('drivers').where({ id: d.id }).forUpdate().first('id');
      sent = Promise.all(devices.map((jar, i) => postForm(api.url, path, { csrf: forms[i] as string }, jar)));
      expect(await blockedBy(env.rt.db, trx, 2)).toBe(true);
    });
    const pages = await (sent as Promise<Page[]>);
    expect(pages.map((p) => p.status).sort()).toEqual([200, 409]);
    const later = pages.find((p) => p.status === 409) as Page;
    expectSafePage(later);
    expect(later.html).toContain('Already signed out everywhere');
    expect(await env.rt.db('audit_log').where({ subject_id: d.id, action: 'driver.token_replace' })).toHaveLength(1);
    for (const jar of devices) expect((await getPage(api.url, '/driver', jar)).html).toContain('Driver sign-in');
  });

  it('a driver suspended while signing out everywhere is sent to the sign-in form, the token kept', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Sid Stopped' });
    const path = '/driver/sign-out-everywhere';
    const jar = await signedIn(d);
    const csrf = csrfOf((await getPage(api.url, '/driver', jar)).html, path);
    let sent: Promise<Page> | undefined;
    await env.rt.db.transaction(async (trx) => {
      await trx('drivers').where({ id: d.id }).forUpdate().first('id');
      sent = postForm(api.url, path, { csrf }, jar);
      expect(await blockedBy(env.rt.db, trx)).toBe(true);
      await trx('drivers').where({ id: d.id }).update({ status: 'suspended' });
    });
    const page = await (sent as Promise<Page>);
    expect(page.status).toBe(303);
    expect(page.location).toBe('/driver');
    expect(await env.rt.db('audit_log').where({ subject_id: d.id, action: 'driver.token_replace' })).toEqual([]);
    expect((await getPage(api.url, '/driver', jar)).html).toContain('Driver sign-in');
  });

  it('a suspended driver’s session stops working at once, as does one from before a new token; a forged one never works', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Sam Suspended' });
    const jar = await signedIn(d);
    expect((await getPage(api.url, '/driver', jar)).html).toContain('Hello, Sam');
    const cookie = jar.header();
    await suspendDriver(env.rt.db, d.id, 'test');
    const after = await getPage(api.url, '/driver', jar);
    expect(after.html).not.toContain('Hello, Sam');
    expect(after.html).toContain('Driver sign-in');
    // Approved again: a new token, and the old session is still no good; the new token signs in.
    const again = await approveDriver(env.rt.db, d.id, 'test');
    const stale = await fetch(`${api.url}/driver`, { headers: { cookie } });
    expect(await stale.text()).toContain('Driver sign-in');
    const fresh = await signedIn({ ...d, token: again?.token as string });
    expect((await getPage(api.url, '/driver', fresh)).html).toContain('Hello, Sam');
    // The same cookie with another MAC (also one differing only in the last character's spare
    // bits), or another driver's id or expiry under this MAC, is nobody.
    const value = /dtn_driver=([^;]+)/.exec(fresh.header())?.[1] as string;
    const [id, expiry, mac] = value.split('.') as [string, string, string];
    const last = mac.slice(-1);
    const spare = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = spare[(spare.indexOf(last) & ~3) + ((spare.indexOf(last) + 1) & 3)] as string;
    const other = await approvedDriver(env.rt.db);
    for (const forged of [
      `${id}.${expiry}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`,
      `${id}.${expiry}.${mac.slice(0, -1)}${sibling}`,
      `${other.id}.${expiry}.${mac}`,
      `${id}.${Number(expiry) + 1}.${mac}`,
    ]) {
      const res = await fetch(`${api.url}/driver`, { headers: { cookie: `dtn_driver=${forged}` } });
      expect(await res.text()).toContain('Driver sign-in');
    }
  });
});

describe('the offer page from the job card link', () => {
  it('without a session: the offer (no passenger data), its countdown, and the sign-in form that returns to it', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Nell New' });
    const o = await offerTo(d);
    const jar = new CookieJar();
    const p = await getPage(api.url, o.link, jar);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.headers.get('vary')).toMatch(/Accept/);
    expect(p.html).toContain(`<h1>Job offer ${o.ref}</h1>`);
    expect(p.html).toContain('<dt>Pickup</dt><dd>Manchester Piccadilly station</dd>');
    // Not booked with meet and greet: nothing said of it.
    expect(p.html).not.toMatch(/meet and greet|name board/i);
    expect(p.html).toMatch(/<div class="countdown" data-countdown="(29\d|300)">/);
    expect(p.html).not.toContain(o.passengerName);
    expect(p.html).not.toContain('7700900456');
    expect(p.html).not.toContain('/accept"');
    expect(p.html).toContain(`<input type="hidden" name="next" value="${o.link}">`);
    // The JSON answer of the same link is unchanged.
    const json = await fetch(`${api.url}${o.link}`, { headers: { accept: 'application/json' } });
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await json.json()) as { offer: { state: string } }).offer.state).toBe('offered');

    const signedIn = await postForm(
      api.url,
      '/driver/sign-in',
      { csrf: csrfOf(p.html, '/driver/sign-in'), next: o.link, token: d.token },
      jar,
    );
    expect(signedIn.status).toBe(303);
    expect(signedIn.location).toBe(o.link);
    const mine = await getPage(api.url, o.link, jar);
    expect(mine.status).toBe(200);
    expect(mine.html).toContain(`<form method="post" action="${jobPath(o.ref)}/accept">`);
    expect(mine.html).toContain(`<form method="post" action="${jobPath(o.ref)}/decline">`);
  });

  it('signed in: countdown markup (aria-live, our script with integrity), accept through the page makes the job the driver’s', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Alice Accept' });
    const o = await offerTo(d);
    const jar = await signedIn(d);
    const p = await getPage(api.url, o.link, jar);
    expect(p.status).toBe(200);
    expectSafePage(p);
    expect(p.html).toContain('<p class="status" role="status">Open: accept or decline before the time runs out.</p>');
    expect(p.html).toMatch(/<span class="clock" aria-hidden="true">[45]:\d\d<\/span>/);
    expect(p.html).toMatch(/<p class="countdown-text" aria-live="polite" aria-atomic="true">About 5 minutes left/);
    expect(p.html).toMatch(/Open until <time datetime="[^"]+">\d\d:\d\d:\d\d<\/time> \(UK time\)\. <a href="\/o\//);
    expect(p.headers.get('content-security-policy')).toContain("script-src 'self'");
    const script = /<script src="(\/assets\/driver-[0-9a-f]{10}\.js)" integrity="(sha256-[^"]+)" defer><\/script>/.exec(
      p.html,
    );
    expect(script).not.toBeNull();
    const js = await fetch(`${api.url}${script?.[1]}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toContain('immutable');
    const source = await js.text();
    expect(`sha256-${createHash('sha256').update(source).digest('base64')}`).toBe(script?.[2]);
    expect(source).toContain('data-countdown');
    expect(source).toContain('location.reload');

    const accepted = await postForm(
      api.url,
      `${jobPath(o.ref)}/accept`,
      { csrf: csrfOf(p.html, `${jobPath(o.ref)}/accept`) },
      jar,
    );
    expect(accepted.status).toBe(303);
    expect(accepted.location).toBe(jobPath(o.ref));
    expect(await offerState(o.offerId)).toBe('accepted');
    expect(await booking(o.bookingId)).toEqual({ status: 'driver_assigned', driver_id: d.id });

    // The link now says the job is theirs and leads to it; the job page has the passenger.
    const again = await getPage(api.url, o.link, jar);
    expect(again.html).toContain('You accepted this job.');
    expect(again.html).toContain(`<a class="button" href="${jobPath(o.ref)}">`);
    expect(again.html).not.toContain('/accept"');
    const job = await getPage(api.url, jobPath(o.ref), jar);
    expect(job.status).toBe(200);
    expectSafePage(job, { script: false });
    expect(job.html).toContain(`<dt>Passenger</dt><dd>${o.passengerName}</dd>`);
    expect(job.html).toContain(`<a href="tel:${PASSENGER_PHONE}">`);
    expect(job.html).toContain('<button type="submit">I am on my way</button>');
  });

  it('decline through the page: the offer is declined and the feed says so', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Dan Decline' });
    const o = await offerTo(d);
    const jar = await signedIn(d);
    const p = await getPage(api.url, o.link, jar);
    const res = await postForm(
      api.url,
      `${jobPath(o.ref)}/decline`,
      { csrf: csrfOf(p.html, `${jobPath(o.ref)}/decline`) },
      jar,
    );
    expect(res.status).toBe(303);
    expect(res.location).toBe(`/driver?declined=${o.ref}`);
    expect(await offerState(o.offerId)).toBe('declined');
    const home = await getPage(api.url, res.location as string, jar);
    expect(home.html).toContain(`You declined ${o.ref}.</p>`);
    expect(home.html).not.toContain('gone to another driver');
    const link = await getPage(api.url, o.link, jar);
    expect(link.html).toContain('You declined this job.');
    expect(link.html).not.toContain('data-countdown');
  });

  it('another driver’s offer is refused: the page (403), the job page (404) and an accept (404) leave it open', async () => {
    const owner = await approvedDriver(env.rt.db, { name: 'Owen Owner' });
    const o = await offerTo(owner);
    const intruder = await approvedDriver(env.rt.db, { name: 'Ivy Intruder' });
    const jar = await signedIn(intruder);
    const p = await getPage(api.url, o.link, jar);
    expect(p.status).toBe(403);
    expectSafePage(p);
    expect(p.html).toContain('This job was offered to another driver');
    expect(p.html).not.toContain('/accept"');
    const job = await getPage(api.url, jobPath(o.ref), jar);
    expect(job.status).toBe(404);
    expect(job.html).not.toContain(o.passengerName);
    // Even with a valid form token of this browser and driver for that job, the service refuses.
    const browser = /dtn_web=([^;]+)/.exec(jar.header())?.[1] as string;
    const csrf = createHmac('sha256', env.config.dataEncryptionKey)
      .update(`csrf:${browser}:driver-job:${intruder.id}:${o.ref}`)
      .digest('base64url');
    const res = await postForm(api.url, `${jobPath(o.ref)}/accept`, { csrf }, jar);
    expect(res.status).toBe(404);
    expectSafePage(res);
    expect(await offerState(o.offerId)).toBe('offered');
    expect((await booking(o.bookingId))?.driver_id).toBeNull();
  });

  it('an accept or decline without the form token (or with a wrong one) is refused and changes nothing', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Cora Csrf' });
    const o = await offerTo(d);
    const jar = await signedIn(d);
    await getPage(api.url, o.link, jar);
    for (const action of ['accept', 'decline']) {
      const none = await postForm(api.url, `${jobPath(o.ref)}/${action}`, {}, jar);
      expect(none.status).toBe(403);
      expectSafePage(none);
      expect(none.html).toContain('This form could not be checked');
      const wrong = await postForm(api.url, `${jobPath(o.ref)}/${action}`, { csrf: 'x'.repeat(43) }, jar);
      expect(wrong.status).toBe(403);
    }
    // A session but no browser cookie (a cross-site post carries neither under SameSite=Lax).
    const session = /dtn_driver=[^;]+/.exec(jar.header())?.[0] as string;
    const bare = await fetch(`${api.url}${jobPath(o.ref)}/accept`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: session, accept: 'text/html' },
      body: 'csrf=abc',
      redirect: 'manual',
    });
    expect(bare.status).toBe(403);
    expect(await offerState(o.offerId)).toBe('offered');
    // Without a session at all: the sign-in form.
    const anon = await postForm(api.url, `${jobPath(o.ref)}/accept`, { csrf: 'abc' });
    expect(anon.status).toBe(401);
    expect(anon.html).toContain('Driver sign-in');
    expect(await offerState(o.offerId)).toBe('offered');
  });

  it('an expired offer says so, has no buttons, and a late accept is refused (409)', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Evan Expired' });
    const o = await offerTo(d);
    const jar = await signedIn(d);
    const open = await getPage(api.url, o.link, jar);
    const csrf = csrfOf(open.html, `${jobPath(o.ref)}/accept`);
    // Time passes: the offer's expiry is behind us (the dispatch worker's time-out job comes later).
    await env.rt
      .db('dispatch_offers')
      .where({ id: o.offerId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    const p = await getPage(api.url, o.link, jar);
    expect(p.status).toBe(200);
    expectSafePage(p, { script: false });
    expect(p.html).toContain('This offer has expired.');
    expect(p.html).not.toContain('data-countdown');
    expect(p.html).not.toContain('/accept"');
    const late = await postForm(api.url, `${jobPath(o.ref)}/accept`, { csrf }, jar);
    expect(late.status).toBe(409);
    expectSafePage(late);
    expect(late.html).toContain('This offer is no longer open');
    expect(late.html).toContain('expired');
    expect((await booking(o.bookingId))?.driver_id).toBeNull();
  });

  it('a meet and greet booking says so on the offer page, in the feed and on the job page', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Gail Greeter' });
    // A v1 quote with meet and greet from Manchester Airport (charged £25), redeemed by its quote_id.
    const meetAndGreet: Booker = async (name) => {
      const post = (path: string, body: unknown) =>
        fetch(`${api.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const q = await post('/api/public/v1/quote', {
        pickup: 'Manchester Airport',
        dropoff: 'Manchester Piccadilly',
        departAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
        meetAndGreet: true,
      });
      const quoted = (await q.json()) as { quoteId: string; appliedRules: Array<{ code: string }> };
      expect(q.status, JSON.stringify(quoted)).toBe(200);
      expect(quoted.appliedRules.map((r) => r.code)).toContain('meet_and_greet');
      const made = await post('/api/public/v1/booking', {
        quote_id: quoted.quoteId,
        passenger_name: name,
        passenger_email: `${passengerSeq}.greeted@example.org`,
        passenger_phone: PASSENGER_PHONE,
        payment_method: 'cash',
      });
      const json = (await made.json()) as { bookingReference: string };
      expect(made.status, JSON.stringify(json)).toBe(201);
      const row = await env.rt
        .db('bookings')
        .where({ reference: json.bookingReference })
        .first<{ id: string; fare_pence: number }>('id', 'fare_pence');
      return { ref: json.bookingReference, id: row.id, farePence: row.fare_pence };
    };
    const o = await offerTo(d, { book: meetAndGreet, at: { lat: 53.3655, lng: -2.2727 } });
    const line = '<dt>Meet and greet</dt><dd>Meet the passenger in arrivals with a name board</dd>';
    const card = await env.rt
      .db('outbound_messages')
      .where({ booking_id: o.bookingId, purpose: 'job_card', channel: 'sms' })
      .first<{ body: string }>('body');
    expect(card.body).toContain(', 1 pax, saloon, meet & greet, fare £');

    // The offer page, before and after signing in; its JSON answer.
    const anon = await getPage(api.url, o.link);
    expect(anon.status).toBe(200);
    expect(anon.html).toContain(line);
    const json = await fetch(`${api.url}${o.link}`, { headers: { accept: 'application/json' } });
    expect(((await json.json()) as { job: { meetAndGreet: boolean } }).job.meetAndGreet).toBe(true);
    const jar = await signedIn(d);
    const mine = await getPage(api.url, o.link, jar);
    expectSafePage(mine);
    expect(mine.html).toContain(line);
    // The feed: the offer, then the job in hand; and the job page.
    const feed = await getPage(api.url, '/driver', jar);
    expect(feed.html).toContain(`<h3><a href="${jobPath(o.ref)}">${o.ref}</a></h3>`);
    expect(feed.html).toContain(line);
    const accepted = await postForm(
      api.url,
      `${jobPath(o.ref)}/accept`,
      { csrf: csrfOf(mine.html, `${jobPath(o.ref)}/accept`) },
      jar,
    );
    expect(accepted.status).toBe(303);
    const job = await getPage(api.url, jobPath(o.ref), jar);
    expect(job.status).toBe(200);
    expectSafePage(job, { script: false });
    expect(job.html).toContain(line);
    expect(job.html).toContain(`<dt>Passenger</dt><dd>${o.passengerName}</dd>`);
    expect((await getPage(api.url, '/driver', jar)).html).toContain(line);
  });

  it('an unknown or altered link is a 404 page', async () => {
    const p = await getPage(api.url, `/o/${'A'.repeat(32)}`);
    expect(p.status).toBe(404);
    expectSafePage(p);
    expect(p.html).toContain('This job link is not valid');
  });
});

describe('a job through to completion', () => {
  it('progress en route → arrived → on board → completed with payment, through the page forms; the feed and dashboard follow', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Priya Progress' });
    const o = await offerTo(d);
    const jar = await signedIn(d);

    // The feed lists the offer with its countdown and buttons.
    const feed = await getPage(api.url, '/driver', jar);
    expectSafePage(feed);
    expect(feed.html).toContain(`<h3><a href="${jobPath(o.ref)}">${o.ref}</a></h3>`);
    expect(feed.html).toContain('data-countdown=');
    const accepted = await postForm(
      api.url,
      `${jobPath(o.ref)}/accept`,
      { csrf: csrfOf(feed.html, `${jobPath(o.ref)}/accept`) },
      jar,
    );
    expect(accepted.location).toBe(jobPath(o.ref));
    const held = await getPage(api.url, '/driver', jar);
    expect(held.html).toContain(`<h3>${o.ref}: Accepted: yours</h3>`);
    // Not booked with meet and greet: neither the feed nor the job page says anything of it.
    expect(feed.html).not.toMatch(/meet and greet|name board/i);
    expect(held.html).not.toMatch(/meet and greet|name board/i);
    expect((await getPage(api.url, jobPath(o.ref), jar)).html).not.toMatch(/meet and greet|name board/i);
    expect(held.html).toContain(`<a class="button" href="${jobPath(o.ref)}">Open job ${o.ref}</a>`);

    const statusPath = `${jobPath(o.ref)}/status`;
    const steps: Array<[string, string, string]> = [
      ['driver_en_route', 'I am on my way', 'On your way to the pickup'],
      ['driver_arrived', 'I have arrived', 'Arrived at the pickup'],
      ['passenger_on_board', 'Passenger on board', 'Passenger on board'],
    ];
    for (const [status, button, label] of steps) {
      const page = await getPage(api.url, jobPath(o.ref), jar);
      expect(page.html).toContain(`<input type="hidden" name="status" value="${status}">`);
      expect(page.html).toContain(`<button type="submit">${button}</button>`);
      const res = await postForm(api.url, statusPath, { csrf: csrfOf(page.html, statusPath), status }, jar);
      expect(res.status, res.html).toBe(303);
      expect(res.location).toBe(jobPath(o.ref));
      expect((await booking(o.bookingId))?.status).toBe(status);
      expect((await getPage(api.url, jobPath(o.ref), jar)).html).toContain(
        `<p class="status" role="status">${label}</p>`,
      );
    }

    // Going back is refused, with the reason on the job page.
    const onBoard = await getPage(api.url, jobPath(o.ref), jar);
    expect(onBoard.html).not.toContain('value="driver_en_route"');
    const csrf = csrfOf(onBoard.html, statusPath);
    const back = await postForm(api.url, statusPath, { csrf, status: 'driver_en_route' }, jar);
    expect(back.status).toBe(409);
    expect(back.html).toContain('cannot become driver en route');
    expect((await booking(o.bookingId))?.status).toBe('passenger_on_board');

    // The completion form: the fare as the default amount, the booking's payment method chosen.
    const fare = (o.farePence / 100).toFixed(2);
    expect(onBoard.html).toContain(`<input id="amount" name="amount" type="text" inputmode="decimal"`);
    expect(onBoard.html).toContain(`value="${fare}"`);
    expect(onBoard.html).toContain('<input type="radio" name="method" value="cash" checked>');
    expect(onBoard.html).toContain('value="bank_transfer"> Bank transfer to you');
    // A booking the passenger pays is not charged to an account: that choice is not offered.
    expect(onBoard.html).not.toContain('value="account"');
    expect(onBoard.html).toContain('The passenger paid you directly.');
    // A bad amount is shown next to the field, what was typed kept; nothing is recorded.
    const bad = await postForm(
      api.url,
      statusPath,
      { csrf, status: 'completed', method: 'card', amount: '12,5x', fee: '0.30' },
      jar,
    );
    expect(bad.status).toBe(400);
    expectSafePage(bad);
    expect(bad.html).toContain('<p class="field-error" id="amount-error">Enter the amount in pounds');
    expect(bad.html).toContain('value="12,5x" aria-describedby="amount-hint amount-error" aria-invalid="true"');
    expect(bad.html).toContain('<input type="radio" name="method" value="card" checked>');
    expect(await env.rt.db('settlement_records').where({ booking_id: o.bookingId })).toHaveLength(0);
    // A fee on a cash payment is refused too.
    const cashFee = await postForm(
      api.url,
      statusPath,
      { csrf, status: 'completed', method: 'cash', amount: fare, fee: '0.30' },
      jar,
    );
    expect(cashFee.status).toBe(400);
    expect(cashFee.html).toContain('id="fee-error">A processing fee applies to card payments only.');

    const done = await postForm(
      api.url,
      statusPath,
      { csrf, status: 'completed', method: 'card', amount: `£${fare}`, fee: '0.45' },
      jar,
    );
    expect(done.status, done.html).toBe(303);
    expect((await booking(o.bookingId))?.status).toBe('completed');
    const settlements = await env.rt
      .db('settlement_records')
      .where({ booking_id: o.bookingId })
      .select('kind', 'method', 'amount_pence', 'processor_fee_pence', 'driver_id', 'recorded_by');
    expect(settlements).toEqual([
      {
        kind: 'card_paid',
        method: 'card',
        amount_pence: o.farePence,
        processor_fee_pence: 45,
        driver_id: d.id,
        recorded_by: `driver:${d.id}`,
      },
    ]);
    const history = await env.rt
      .db('booking_status_history')
      .where({ booking_id: o.bookingId })
      .orderBy('seq')
      .pluck('status');
    expect(history.slice(-5)).toEqual([
      'driver_assigned',
      'driver_en_route',
      'driver_arrived',
      'passenger_on_board',
      'completed',
    ]);

    const finished = await getPage(api.url, jobPath(o.ref), jar);
    expect(finished.status).toBe(200);
    expect(finished.html).toContain('<p class="status" role="status">Completed</p>');
    expect(finished.html).toContain(`Paid £${fare} by card, on your own card reader.`);
    expect(finished.html).not.toContain('name="status"');

    // The feed no longer holds it; the dashboard counts its fare and the dead mileage.
    const home = await getPage(api.url, '/driver', jar);
    expect(home.html).toContain('<p>No jobs in hand.</p>');
    const money = new Intl.NumberFormat('en-GB', { style: 'currency', currency: 'GBP' }).format(o.farePence / 100);
    expect(home.html).toContain(`<dt>Earnings</dt><dd>${money}</dd>`);
    expect(home.html).toContain('<dt>Completed rides</dt><dd>1</dd>');
    // this week has no invoice yet: not a paid week, its fee may still be due
    expect(home.html).toContain('<dt>Paid weeks</dt><dd>0</dd>');
    expect(home.html).toContain('<dt>Paid</dt><dd>Not invoiced yet</dd>');
    const dead = (await env.rt.db('bookings').where({ id: o.bookingId }).first<{ dead_miles: number }>('dead_miles'))
      .dead_miles;
    expect(dead).toBeGreaterThan(0);
    expect(home.html).toContain(`<dt>Dead mileage</dt><dd>${dead.toFixed(1)} miles</dd>`);
    expect(home.html).toMatch(/<h3>Week of \w{3} \d{1,2} \w{3} \(\d{4}-W\d{2}\)<\/h3>/);
    expect(home.html).toMatch(/<dt>Free trial<\/dt><dd>until <time/);
  });
});

describe('taking jobs from the page', () => {
  const positionOf = async (driverId: string) =>
    (await presenceIndex(env.rt.redis, env.config).positions([driverId], Date.now())).get(driverId);
  const report = (jar: CookieJar, fields: Record<string, string>) =>
    fetch(`${api.url}/driver/availability`, {
      method: 'POST',
      headers: {
        accept: 'application/json',
        'content-type': 'application/x-www-form-urlencoded',
        ...(jar.header() ? { cookie: jar.header() } : {}),
      },
      body: new URLSearchParams(fields).toString(),
    });
  /** The page's form, posted as the browser does (its script put the location in the form). */
  const availability = (jar: CookieJar, csrf: string, fields: Record<string, string>) =>
    postForm(api.url, '/driver/availability', { csrf, ...fields }, jar);
  const start = (jar: CookieJar, csrf: string, at: { lat: number; lng: number }) =>
    availability(jar, csrf, { available: '1', lat: String(at.lat), lng: String(at.lng) });

  it('start with the location, get offered a booking nearby, report a move, stop: the same presence index as the driver API', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Wendy Web' });
    const jar = await signedIn(d);
    const off = await getPage(api.url, '/driver', jar);
    expect(off.html).toContain('<h2 id="availability-h">Taking jobs</h2>');
    expect(off.html).toContain('<strong>You are not taking jobs.</strong>');
    expect(off.html).toContain('data-availability="off"');
    expect(off.html).toContain('<button type="submit">Start taking jobs here</button>');
    expect(off.html).toContain('<input type="hidden" name="lat" value="">');
    const csrf = csrfOf(off.html, '/driver/availability');

    // Without a location (JavaScript off, or the browser refused it): said, and nothing changes.
    const noPlace = await availability(jar, csrf, { available: '1', lat: '', lng: '' });
    expect(noPlace.status).toBe(400);
    expect(noPlace.html).toContain('Your location is needed');
    expect(await positionOf(d.id)).toBeUndefined();
    const badPlace = await start(jar, csrf, { lat: 86, lng: 0 });
    // Beyond the presence index's latitudes (Web Mercator): refused like the API's presence report.
    expect(badPlace.status).toBe(400);
    // Decimal degrees only: hexadecimal and exponents are not read as numbers.
    for (const [lat, lng] of [
      ['0x10', '-2'],
      ['53', '-2e0'],
      ['Infinity', '0'],
      // What a phone without a location fix reports, as the driver API refuses it.
      ['0', '0'],
      ['0.0', '-0'],
    ] as const) {
      const odd = await availability(jar, csrf, { available: '1', lat, lng });
      expect(odd.status, `${lat},${lng}`).toBe(400);
    }
    expect(await positionOf(d.id)).toBeUndefined();

    // With the location the page's script puts in the form.
    const here = near(0.1);
    const started = await start(jar, csrf, here);
    expect(started.status).toBe(303);
    expect(started.location).toBe('/driver');
    const at = await positionOf(d.id);
    expect(at?.lat).toBeCloseTo(here.lat, 4);
    expect(at?.lng).toBeCloseTo(here.lng, 4);
    const on = await getPage(api.url, '/driver', jar);
    expect(on.html).toContain('<strong>You are taking jobs.</strong>');
    expect(on.html).toContain('data-availability="on"');
    expect(on.html).toContain('data-report-seconds="30"');
    expect(on.html).toContain('<button type="submit" class="secondary">Stop taking jobs</button>');

    // Dispatch finds the driver there: a booking from Piccadilly is offered to them.
    const b = await bookThroughApi(api.url, env.rt.db, { name: 'Nia Nearby', phone: PASSENGER_PHONE });
    const offer = await eventually(() =>
      env.rt.db('dispatch_offers').where({ booking_id: b.id }).first<{ driver_id: string } | undefined>('driver_id'),
    );
    expect(offer.driver_id).toBe(d.id);

    // The script's report (JSON): a move is recorded at once.
    const moved = near(1.5);
    const r = await report(jar, {
      csrf,
      available: '1',
      report: '1',
      lat: String(moved.lat),
      lng: String(moved.lng),
    });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ available: true, at: expect.any(String) });
    expect((await positionOf(d.id))?.lat).toBeCloseTo(moved.lat, 4);
    // Without the form token, or signed out: refused in the JSON envelope, nothing recorded.
    const forged = await report(jar, { csrf: 'x'.repeat(csrf.length), available: '1', lat: '53.5', lng: '-2.2' });
    expect(forged.status).toBe(403);
    expect(((await forged.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    const anonymous = await report(new CookieJar(), { csrf, available: '1', lat: '53.5', lng: '-2.2' });
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    expect((await positionOf(d.id))?.lat).toBeCloseTo(moved.lat, 4);

    const seenBeforeStop = await env.rt.db('drivers').where({ id: d.id }).first('last_lat', 'last_seen_at');
    // Stop: off the map at once, and the page says so.
    const stopped = await availability(jar, csrfOf(on.html, '/driver/availability'), { available: '0' });
    expect(stopped.status).toBe(303);
    expect(await positionOf(d.id)).toBeUndefined();
    expect((await getPage(api.url, '/driver', jar)).html).toContain('<strong>You are not taking jobs.</strong>');
    // The last known location and its time stay as they were (no made-up position).
    expect(await env.rt.db('drivers').where({ id: d.id }).first('available', 'last_lat', 'last_seen_at')).toEqual({
      available: false,
      ...seenBeforeStop,
    });
    // A page left open (another tab) keeps reporting: a report never starts taking jobs again.
    const stale = await report(jar, {
      csrf,
      available: '1',
      report: '1',
      lat: String(here.lat),
      lng: String(here.lng),
    });
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe('conflict');
    expect(await positionOf(d.id)).toBeUndefined();
  });

  it('says it cannot tell when the live map does not answer, and the jobs page still works', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Una Unknown' });
    const jar = await signedIn(d);
    await withPresenceUnreadable(env.rt.redis, env.config.queuePrefix, async () => {
      const page = await getPage(api.url, '/driver', jar);
      expect(page.status).toBe(200);
      expect(page.html).toContain('data-availability="unknown"');
      expect(page.html).toContain('<strong>We cannot tell right now whether you are taking jobs</strong>');
      // Both choices are offered, and the rest of the page (the feed, the dashboard) is there.
      expect(page.html).toContain('<button type="submit">Start taking jobs here</button>');
      expect(page.html).toContain('<button type="submit" class="secondary">Stop taking jobs</button>');
      expect(page.html).toContain('<h1>Hello, Una</h1>');
    });
    expect((await getPage(api.url, '/driver', jar)).html).toContain('data-availability="off"');
  });

  it('a sandbox driver signed in on the web takes jobs in the sandbox presence index, never the live one', async () => {
    const d = await approvedDriver(env.rt.db, { name: 'Sandy Sandbox' });
    await env.rt.db('drivers').where({ id: d.id }).update({ test_mode: true });
    const jar = await signedIn(d);
    const csrf = csrfOf((await getPage(api.url, '/driver', jar)).html, '/driver/availability');
    const here = near(0.2);
    const started = await start(jar, csrf, here);
    expect(started.status).toBe(303);
    const sandbox = presenceIndex(env.rt.redis, env.config, true);
    expect((await sandbox.positions([d.id], Date.now())).has(d.id)).toBe(true);
    expect(await positionOf(d.id)).toBeUndefined();
    expect((await getPage(api.url, '/driver', jar)).html).toContain('<strong>You are taking jobs.</strong>');
    await availability(jar, csrf, { available: '0' });
    expect((await sandbox.positions([d.id], Date.now())).has(d.id)).toBe(false);
  });
});
