import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOGIN_LIMITS, REFUSED } from '../api/pages/operator/login.ts';
import { QUEUES_CSP } from '../api/pages/operator/queues-board.ts';
import { sha256 } from '../shared/crypto.ts';
import { NameError } from '../shared/domain/names.ts';
import { issueApiKey } from '../shared/services/api-keys.ts';
import { applyDriver, authenticateDriver, suspendDriver } from '../shared/services/drivers.ts';
import { createOperator, disableOperator } from '../shared/services/operators.ts';
import { createPartner } from '../shared/services/partners.ts';
import { DEMO_OPERATOR_EMAIL, seedDemo } from '../shared/services/seed.ts';
import { approvedDriver, withPresenceUnreadable } from './helpers/drivers.ts';
import { appFor, blockedBy, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { CookieJar, csrfOf, expectSafePage, getPage, postForm } from './helpers/pages.ts';
import { runTs } from './helpers/process.ts';

/**
 * The operator pages (`/operator`) through real HTTP, as a browser uses them: sign-in with a
 * real account (made by the CLI), forms posted form-encoded with the cookies the pages set,
 * every change checked in the database the services write.
 */
let env: TestEnv;
let api: Served;
let operator: { id: string; email: string; password: string };

beforeAll(async () => {
  // TRUST_PROXY_HOPS: the rate-limit tests speak for other client IPs with X-Forwarded-For.
  env = await createTestEnv({ env: { RATE_LIMIT_PER_IP_PER_MINUTE: '100000', TRUST_PROXY_HOPS: '1' } });
  api = await serve(await appFor(env));
  const made = await runTs('bin/admin.ts', ['operator', 'create', '--email', 'Ops.Lead@Example.org', '--name', 'Olu'], {
    ...env.childEnv,
    DTN_OPERATOR: 'setup',
  });
  expect(made.code, made.stderr).toBe(0);
  operator = JSON.parse(made.stdout);
});
afterAll(async () => {
  await api?.close();
  await env?.cleanup();
});

const db = () => env.rt.db;
let seq = 0;

/** Post a form with extra request headers (another client IP, a cross-site origin). */
async function postWith(path: string, fields: Record<string, string>, jar: CookieJar, headers: Record<string, string>) {
  const res = await fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: {
      accept: 'text/html',
      'content-type': 'application/x-www-form-urlencoded',
      ...(jar.header() ? { cookie: jar.header() } : {}),
      ...headers,
    },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
  jar.take(res.headers);
  return { status: res.status, headers: res.headers, html: await res.text(), location: res.headers.get('location') };
}

let ips = 0;
/** A client IP of its own for each sign-in, so that the per-IP sign-in limit only meets the test that is about it. */
const freshIp = () => {
  ips += 1;
  return `10.${Math.floor(ips / 250)}.${ips % 250}.1`;
};

/** Open the sign-in page and post it (from `ip`, by X-Forwarded-For). */
async function signIn(email: string, password: string, jar = new CookieJar(), next?: string, ip = freshIp()) {
  const login = await getPage(api.url, `/operator/login${next ? `?next=${encodeURIComponent(next)}` : ''}`, jar);
  expect(login.status).toBe(200);
  const fields: Record<string, string> = { email, password, csrf: csrfOf(login.html, '/operator/login') };
  const nextField = /<input type="hidden" name="next" value="([^"]+)">/.exec(login.html)?.[1];
  if (nextField) fields.next = nextField.replace(/&amp;/g, '&');
  return postWith('/operator/login', fields, jar, { 'x-forwarded-for': ip });
}

/**
 * A signed-in browser, of an operator of its own (each address has its own sign-in limit).
 */
async function session(): Promise<{ jar: CookieJar; op: { id: string; email: string; password: string } }> {
  seq += 1;
  const op = await createOperator(db(), { email: `op${seq}@example.org`, name: `Operator ${seq}`, actor: 'test' });
  const jar = new CookieJar();
  const p = await signIn(op.email, op.password, jar);
  expect(p.status, p.html).toBe(303);
  return { jar, op };
}

const cookieOf = (jar: CookieJar, name: string) => new RegExp(`(?:^|; )${name}=([^;]*)`).exec(jar.header())?.[1] ?? '';

const alertText = (html: string) => /<div class="alert" role="alert">\s*<p>([^<]*)<\/p>/.exec(html)?.[1] ?? null;

async function pendingDriver(name: string): Promise<string> {
  seq += 1;
  const { driverId } = await applyDriver(
    db(),
    {
      name,
      phone: `+4477009${String(20000 + seq)}`,
      email: `applicant${seq}@example.org`,
      licensingAuthority: 'Manchester City Council',
      licenceNumber: `OPS-${seq}-${Date.now()}`,
      licenceExpiry: '2031-01-01',
      vehicle: {
        make: 'Skoda',
        model: 'Octavia',
        colour: 'Blue',
        registration: `OP${seq} XYZ`,
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

describe('operator pages: signing in', () => {
  it('sends a browser without a session to sign in, and back to where it was going', async () => {
    for (const path of [
      '/operator',
      '/operator/drivers?status=approved',
      '/operator/partners',
      '/operator/webhooks',
      '/operator/queues',
    ]) {
      const p = await getPage(api.url, path);
      expect(p.status, path).toBe(303);
      expect(p.location, path).toBe(
        path === '/operator' ? '/operator/login' : `/operator/login?next=${encodeURIComponent(path)}`,
      );
    }
    // A made-up cookie is no session either.
    const fake = await fetch(`${api.url}/operator/partners`, {
      headers: { cookie: `dtn_op=${'A'.repeat(43)}` },
      redirect: 'manual',
    });
    expect(fake.status).toBe(303);
    // Form posts and the queue board's API are refused with a page (never the JSON envelope).
    for (const [method, path] of [
      ['POST', `/operator/drivers/${uuidv7()}/approve`],
      ['POST', '/operator/partners'],
      ['GET', '/operator/queues/api/queues'],
    ] as const) {
      const res = await fetch(`${api.url}${path}`, { method, redirect: 'manual' });
      expect(res.status, path).toBe(401);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
      expect(await res.text()).toContain('Please sign in');
    }

    // Signing in goes on to `next`; a `next` elsewhere is ignored.
    const back = await signIn(operator.email, operator.password, new CookieJar(), '/operator/webhooks');
    expect(back.location).toBe('/operator/webhooks');
    for (const evil of [
      '//evil.example/operator',
      'https://evil.example/operator',
      '/\\evil.example',
      '/operator/../book/x',
    ]) {
      const p = await signIn(operator.email, operator.password, new CookieJar(), evil);
      expect(p.status, evil).toBe(303);
      expect(p.location, evil).toBe('/operator');
    }
  });

  it('refuses a wrong password and an unknown e-mail with the same page', async () => {
    const wrong = await signIn(operator.email, 'not-the-password');
    const unknown = await signIn('nobody@example.org', 'not-the-password');
    const unknownRight = await signIn('nobody@example.org', operator.password);
    for (const p of [wrong, unknown, unknownRight]) {
      expect(p.status).toBe(401);
      expectSafePage(p, { script: false });
      expect(alertText(p.html)).toBe(REFUSED);
      expect(p.headers.getSetCookie().some((c) => c.startsWith('dtn_op='))).toBe(false);
    }
    // Same page, apart from the form token and what was typed.
    const strip = (html: string) => html.replace(/name="csrf" value="[^"]*"/, '').replace(/id="email"[^>]*>/, '');
    expect(strip(wrong.html)).toBe(strip(unknown.html));
    // A disabled operator is refused the same way.
    const other = await createOperator(db(), { email: 'gone@example.org', actor: 'test' });
    await disableOperator(db(), other.id, 'test');
    const disabled = await signIn(other.email, other.password);
    expect(disabled.status).toBe(401);
    expect(alertText(disabled.html)).toBe(REFUSED);
  });

  it('signs in with a session cookie whose token is stored only hashed', async () => {
    const jar = new CookieJar();
    const p = await signIn(operator.email.toUpperCase(), operator.password, jar);
    expect(p.status).toBe(303);
    expect(p.location).toBe('/operator');
    const cookie = p.headers.getSetCookie().find((c) => c.startsWith('dtn_op=')) as string;
    expect(cookie).toMatch(/; Max-Age=43200;/);
    expect(cookie).toContain('; Path=/operator');
    expect(cookie).toContain('; HttpOnly');
    expect(cookie).toContain('; SameSite=Strict');
    const token = cookieOf(jar, 'dtn_op');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const rows = await db()('operator_sessions').where({ operator_id: operator.id });
    const mine = rows.find((r) => Buffer.compare(r.token_hash, sha256(token)) === 0);
    expect(mine).toBeDefined();
    expect(new Date(mine.expires_at).getTime() - Date.now()).toBeGreaterThan(11.9 * 3600_000);
    // Nothing in the database holds the token itself.
    const dump = JSON.stringify(await db()('operator_sessions')) + JSON.stringify(await db()('audit_log'));
    expect(dump).not.toContain(token);
    expect(dump).not.toContain(Buffer.from(token).toString('hex'));
    // Nor the password.
    const account = await db()('operators').where({ id: operator.id }).first();
    expect(account.email).toBe('ops.lead@example.org');
    expect(account.password_hash).toMatch(/^\$scrypt\$ln=15,r=8,p=1\$/);
    expect(account.password_hash).not.toContain(operator.password);

    const home = await getPage(api.url, '/operator', jar);
    expect(home.status).toBe(200);
    expectSafePage(home, { script: false });
    expect(home.html).toContain('Hello, Olu');
    expect(home.html).toContain('<a href="/operator/queues">Queues</a>');
    expect(home.html).toMatch(/<th scope="row">dispatch<\/th>/);
    // A signed-in browser going to the sign-in page goes on.
    expect((await getPage(api.url, '/operator/login', jar)).location).toBe('/operator');
    // Anything else under /operator is a page.
    const missing = await getPage(api.url, '/operator/nothing-here', jar);
    expect(missing.status).toBe(404);
    expectSafePage(missing);
  });

  it('seeds a demo operator once with SEED_DEMO, whose printed password signs in', async () => {
    const first = await seedDemo(db(), env.config, env.rt.logger);
    expect(first.created.operatorEmail).toBe(DEMO_OPERATOR_EMAIL);
    expect(first.created.operatorPassword).toMatch(/^[0-9A-Za-z]{24}$/);
    const again = await seedDemo(db(), env.config, env.rt.logger);
    expect(again.created).toEqual({});
    expect(await db()('operators').where({ email: DEMO_OPERATOR_EMAIL })).toHaveLength(1);
    const p = await signIn(DEMO_OPERATOR_EMAIL, first.created.operatorPassword as string);
    expect(p.status).toBe(303);
  });

  it('limits sign-in attempts per e-mail address and per client IP', async () => {
    const jar = new CookieJar();
    const csrf = csrfOf((await getPage(api.url, '/operator/login', jar)).html, '/operator/login');
    const attempt = (email: string, password: string, ip: string) =>
      postWith('/operator/login', { email, password, csrf }, jar, { 'x-forwarded-for': ip });

    // Per address: a new IP every time, the same address.
    const target = await createOperator(db(), { email: 'target@example.org', actor: 'test' });
    for (let i = 0; i < LOGIN_LIMITS.perEmail; i++) {
      expect((await attempt('TARGET@example.org', `guess-${i}`, `203.0.113.${i + 1}`)).status).toBe(401);
    }
    const limited = await attempt('target@example.org', target.password, '203.0.113.200');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.html).toContain('Please wait a moment');
    // How long, in words: a person cannot read the Retry-After header the API's message names.
    expect(limited.html).toMatch(/try again in (about \d+ (minute|hour)s?|\d+ seconds?)/);
    expect(limited.html).not.toContain('Retry-After');
    expect(limited.headers.getSetCookie().some((c) => c.startsWith('dtn_op='))).toBe(false);

    // Per IP: the same IP, a new address every time.
    for (let i = 0; i < LOGIN_LIMITS.perIp; i++) {
      expect((await attempt(`someone${i}@example.org`, 'guess', '198.51.100.9')).status).toBe(401);
    }
    expect((await attempt(operator.email, operator.password, '198.51.100.9')).status).toBe(429);
    // Another IP is not held back.
    expect((await attempt(operator.email, operator.password, '198.51.100.10')).status).toBe(303);
    // Thirty-odd scrypt checks: more than the default time on a busy machine.
  }, 90_000);

  it('signs out: the old cookie no longer works', async () => {
    const { jar } = await session();
    const token = cookieOf(jar, 'dtn_op');
    const home = await getPage(api.url, '/operator', jar);
    const out = await postForm(api.url, '/operator/logout', { csrf: csrfOf(home.html, '/operator/logout') }, jar);
    expect(out.status).toBe(303);
    expect(out.location).toBe('/operator/login?signed-out=1');
    expect(out.headers.getSetCookie().find((c) => c.startsWith('dtn_op='))).toMatch(
      /^dtn_op=;.*Expires=Thu, 01 Jan 1970/,
    );
    expect(
      await db()('operator_sessions')
        .where({ token_hash: sha256(token) })
        .first(),
    ).toBeUndefined();
    const signedOut = await getPage(api.url, '/operator/login?signed-out=1', jar);
    expect(signedOut.html).toContain('You are signed out.');
    // The old cookie, presented again, is no session.
    const replayed = await fetch(`${api.url}/operator`, { headers: { cookie: `dtn_op=${token}` }, redirect: 'manual' });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get('location')).toBe('/operator/login');

    // Disabling an operator ends their sessions at once.
    const other = await createOperator(db(), { email: 'leaver@example.org', actor: 'test' });
    const theirs = new CookieJar();
    expect((await signIn(other.email, other.password, theirs)).status).toBe(303);
    expect((await getPage(api.url, '/operator', theirs)).status).toBe(200);
    await disableOperator(db(), other.id, 'test');
    expect((await getPage(api.url, '/operator', theirs)).status).toBe(303);
  });
});

describe('operator pages: drivers', () => {
  it('approves a pending application from the page', async () => {
    const { jar, op } = await session();
    const id = await pendingDriver('Priya Pending');
    const list = await getPage(api.url, '/operator/drivers', jar);
    expect(list.status).toBe(200);
    expectSafePage(list, { script: false });
    expect(list.html).toContain('Priya Pending');
    expect(list.html).toContain('Blue Skoda Octavia');
    expect(list.html).toContain('Manchester City Council');
    const action = `/operator/drivers/${id}/approve`;
    expect(list.html).toContain(`<form method="post" action="${action}">`);
    expect(list.html).toContain(`Approve<span class="sr-only"> Priya Pending</span>`);

    const done = await postForm(api.url, action, { csrf: csrfOf(list.html, action), back: 'pending_approval' }, jar);
    expect(done.status).toBe(303);
    expect(done.location).toBe(`/operator/drivers?status=pending_approval&done=approved&id=${id}`);
    const driver = await db()('drivers').where({ id }).first();
    expect(driver.status).toBe('approved');
    expect(driver.token_hash).not.toBeNull();
    expect(driver.trial_ends_at).not.toBeNull();
    // The token went to the driver by SMS and e-mail, and works.
    const messages = await db()('outbound_messages').where({ driver_id: id, purpose: 'driver_token' });
    expect(messages.map((m) => m.channel).sort()).toEqual(['email', 'sms']);
    const token = /dtn_drv_[0-9A-Za-z]{40}/.exec(messages[0].body)?.[0] as string;
    expect(await authenticateDriver(db(), token)).toMatchObject({ id, status: 'approved' });

    const outcome = await getPage(api.url, done.location as string, jar);
    expect(outcome.status).toBe(200);
    expect(outcome.html).toContain(`Approved Priya Pending. Their driver token (${driver.token_prefix}…) was sent`);
    expect(outcome.html).not.toContain(token);
    // No longer pending; listed as approved.
    expect(outcome.html).not.toContain(`id="driver-${id}"`);
    const approved = await getPage(api.url, '/operator/drivers?status=approved', jar);
    expect(approved.html).toContain(`id="driver-${id}"`);
    expect(approved.html).toContain(`/operator/drivers/${id}/suspend`);

    const audit = await db()('audit_log').where({ subject_id: id, action: 'driver.approve' }).first();
    expect(audit.actor).toBe(`operator:${op.id}`);
  });

  it('rejects an application', async () => {
    const { jar } = await session();
    const id = await pendingDriver('Rory Rejected');
    const list = await getPage(api.url, '/operator/drivers', jar);
    const action = `/operator/drivers/${id}/reject`;
    const done = await postForm(api.url, action, { csrf: csrfOf(list.html, action) }, jar);
    expect(done.status).toBe(303);
    expect((await db()('drivers').where({ id }).first()).status).toBe('rejected');
    const outcome = await getPage(api.url, done.location as string, jar);
    expect(outcome.html).toContain('Rejected the application of Rory Rejected.');
    // A rejected driver is not suspended (a form posted from a page opened before): said, nothing changes.
    const late = await postForm(api.url, `/operator/drivers/${id}/suspend`, { csrf: csrfOf(list.html, action) }, jar);
    expect(late.status).toBe(400);
    expectSafePage(late);
    expect(late.html).toContain('This driver is rejected: only an approved driver can be suspended.');
    expect((await db()('drivers').where({ id }).first()).status).toBe('rejected');
    // Unknown driver: a 404 page.
    const unknown = await postForm(
      api.url,
      `/operator/drivers/${uuidv7()}/reject`,
      { csrf: csrfOf(list.html, action) },
      jar,
    );
    expect(unknown.status).toBe(404);
    expectSafePage(unknown);
  });

  it('refuses a form without its token, or with another session’s', async () => {
    const { jar, op } = await session();
    const id = await pendingDriver('Casey Csrf');
    const action = `/operator/drivers/${id}/approve`;
    const missing = await postForm(api.url, action, {}, jar);
    expect(missing.status).toBe(403);
    expectSafePage(missing);
    expect(missing.html).toContain('This form could not be checked');
    // A token of another signed-in browser.
    const { jar: other } = await session();
    const theirs = csrfOf((await getPage(api.url, '/operator/drivers', other)).html, action);
    expect((await postForm(api.url, action, { csrf: theirs }, jar)).status).toBe(403);
    // A token of an earlier session of the same browser.
    const mine = csrfOf((await getPage(api.url, '/operator/drivers', jar)).html, action);
    const home = await getPage(api.url, '/operator', jar);
    await postForm(api.url, '/operator/logout', { csrf: csrfOf(home.html, '/operator/logout') }, jar);
    expect((await signIn(op.email, op.password, jar)).status).toBe(303);
    expect((await postForm(api.url, action, { csrf: mine }, jar)).status).toBe(403);
    expect((await db()('drivers').where({ id }).first()).status).toBe('pending_approval');
    // Sign-in without its token.
    const login = await postForm(
      api.url,
      '/operator/login',
      { email: operator.email, password: operator.password },
      new CookieJar(),
    );
    expect(login.status).toBe(403);
  });

  it('extends a driver’s and a partner’s trial', async () => {
    const { jar, op } = await session();
    const id = await pendingDriver('Tess Trial');
    const list = await getPage(api.url, '/operator/drivers', jar);
    const action = `/operator/drivers/${id}/trial`;
    expect(list.html).toContain(`<label for="trial-${id}-days">`);
    const csrf = csrfOf(list.html, action);
    for (const days of ['0', 'ten', '3651', '']) {
      const bad = await postForm(api.url, action, { csrf, days }, jar);
      expect(bad.status, days).toBe(400);
    }
    const done = await postForm(api.url, action, { csrf, days: '45' }, jar);
    expect(done.status).toBe(303);
    const ends = (await db()('drivers').where({ id }).first()).trial_ends_at as Date;
    // Not yet approved: the standard 90 days from today, plus 45.
    expect(Math.round((ends.getTime() - Date.now()) / 86_400_000)).toBe(135);
    expect((await getPage(api.url, done.location as string, jar)).html).toContain(
      `The free trial of Tess Trial now ends ${ends.toISOString().slice(0, 10)}.`,
    );

    const partner = await createPartner(db(), env.config, { name: 'Trial Partner', actor: 'test' });
    const partners = await getPage(api.url, '/operator/partners', jar);
    const pAction = `/operator/partners/${partner.id}/trial`;
    const p = await postForm(api.url, pAction, { csrf: csrfOf(partners.html, pAction), days: '10' }, jar);
    expect(p.status).toBe(303);
    const pEnds = (await db()('partners').where({ id: partner.id }).first()).trial_ends_at as Date;
    expect(Math.round((pEnds.getTime() - Date.now()) / 86_400_000)).toBe(40);
    expect((await getPage(api.url, p.location as string, jar)).html).toContain(
      'The free trial of Trial Partner now ends',
    );
    const audit = await db()('audit_log').where({ subject_id: partner.id, action: 'partner.trial_extend' }).first();
    expect(audit.actor).toBe(`operator:${op.id}`);
  });
});

describe('operator pages: drivers taking jobs', () => {
  it('counts the drivers taking jobs now and says on each approved driver whether they are', async () => {
    const { jar } = await session();
    const d = await approvedDriver(db(), { name: 'Owen Online' });
    const presence = async (available: boolean) => {
      const res = await fetch(`${api.url}/api/public/v1/driver/presence`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${d.token}` },
        body: JSON.stringify({ available, lat: 53.4774, lng: -2.2309 }),
      });
      expect(res.status, await res.text()).toBe(200);
    };
    const card = (html: string) =>
      new RegExp(`<article class="card" id="driver-${d.id}"[\\s\\S]*?</article>`).exec(html)?.[0] ?? '';

    await presence(true);
    const home = await getPage(api.url, '/operator', jar);
    expect(home.html).toMatch(
      /<li><strong>1<\/strong><a href="\/operator\/drivers\?status=approved">Drivers taking jobs now<\/a><\/li>/,
    );
    const on = await getPage(api.url, '/operator/drivers?status=approved', jar);
    expect(card(on.html)).toMatch(/<dt>Taking jobs<\/dt><dd>yes, last location report <time datetime="[^"]+">/);

    await presence(false);
    expect((await getPage(api.url, '/operator', jar)).html).toContain(
      '<li><strong>0</strong><a href="/operator/drivers?status=approved">Drivers taking jobs now</a></li>',
    );
    expect(card((await getPage(api.url, '/operator/drivers?status=approved', jar)).html)).toContain(
      '<dt>Taking jobs</dt><dd>no</dd>',
    );
    // found in a probe: a sandbox driver reports into the sandbox's presence index, and showed "no"
    const sandbox = await approvedDriver(db(), { name: 'Sandy Sandbox', testMode: true });
    const reported = await fetch(`${api.url}/api/public/v1/driver/presence`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${sandbox.token}` },
      body: JSON.stringify({ available: true, lat: 53.4774, lng: -2.2309 }),
    });
    expect(reported.status, await reported.text()).toBe(200);
    const sandboxCard = new RegExp(`<article class="card" id="driver-${sandbox.id}"[\\s\\S]*?</article>`).exec(
      (await getPage(api.url, '/operator/drivers?status=approved', jar)).html,
    )?.[0];
    expect(sandboxCard).toMatch(/<dt>Taking jobs<\/dt><dd>yes, last location report <time datetime="[^"]+">/);
    // The live map not answering: the pages still work and say they cannot tell.
    await withPresenceUnreadable(env.rt.redis, env.config.queuePrefix, async () => {
      const home = await getPage(api.url, '/operator', jar);
      expect(home.status).toBe(200);
      expect(home.html).toContain(
        '<li><strong>?</strong><a href="/operator/drivers?status=approved">Drivers taking jobs (Redis did not answer)</a></li>',
      );
      const drivers = await getPage(api.url, '/operator/drivers?status=approved', jar);
      expect(drivers.status).toBe(200);
      expect(card(drivers.html)).toContain('<dt>Taking jobs</dt><dd>unknown: Redis did not answer</dd>');
    });

    // A pending application says nothing about taking jobs.
    const pending = await pendingDriver('Pat Pending');
    const list = await getPage(api.url, '/operator/drivers', jar);
    const pendingCard = new RegExp(`<article class="card" id="driver-${pending}"[\\s\\S]*?</article>`).exec(
      list.html,
    )?.[0];
    expect(pendingCard).toBeDefined();
    expect(pendingCard).not.toContain('Taking jobs');
  });
});

describe('operator pages: partners and keys', () => {
  const whoami = (key: string) => fetch(`${api.url}/api/public/v1/whoami`, { headers: { 'x-api-key': key } });

  it('creates a partner and shows its secrets once', async () => {
    const { jar, op } = await session();
    const page = await getPage(api.url, '/operator/partners', jar);
    expectSafePage(page, { script: false });
    const csrf = csrfOf(page.html, '/operator/partners');

    const bad = await postForm(
      api.url,
      '/operator/partners',
      { csrf, name: '', dailyLimit: 'lots', webhookUrl: 'ftp://x' },
      jar,
    );
    expect(bad.status).toBe(400);
    expect(bad.html).toContain('Enter the partner’s name.');
    expect(bad.html).toContain('The daily job limit must be a whole number');
    expect(bad.html).toContain('The webhook URL must be an http or https URL.');
    expect(bad.html).toContain('value="ftp://x"');

    const made = await postForm(
      api.url,
      '/operator/partners',
      { csrf, name: 'Web Transfers Ltd', dailyLimit: '250', webhookUrl: 'https://web.example/hooks', canSetFares: '1' },
      jar,
    );
    expect(made.status).toBe(201);
    expectSafePage(made, { script: false });
    expect(made.headers.get('cache-control')).toBe('no-store');
    const apiKey = /id="api-key">(dtn_live_[0-9A-Za-z]{32})</.exec(made.html)?.[1] as string;
    const signing = /id="signing-secret">(dtn_sign_[0-9A-Za-z]{40})</.exec(made.html)?.[1] as string;
    const whsec = /id="webhook-secret">(whsec_[A-Za-z0-9+/=]{44})</.exec(made.html)?.[1] as string;
    expect(apiKey && signing && whsec).toBeTruthy();
    expect(made.html).toContain('shown this once');

    const partner = await db()('partners').where({ name: 'Web Transfers Ltd' }).first();
    expect(partner).toMatchObject({ can_set_fares: true, daily_job_limit: 250 });
    expect(await (await whoami(apiKey)).json()).toMatchObject({ authenticated: true, key: { partnerId: partner.id } });
    const audit = await db()('audit_log').where({ subject_id: partner.id, action: 'partner.create' }).first();
    expect(audit.actor).toBe(`operator:${op.id}`);

    // Never shown again: the list has the prefix only.
    const again = await getPage(api.url, '/operator/partners', jar);
    expect(again.html).toContain('Web Transfers Ltd');
    expect(again.html).toContain('https://web.example/hooks');
    expect(again.html).toContain(`${apiKey.slice(0, 14)}…`);
    for (const secret of [apiKey, signing, whsec]) expect(again.html).not.toContain(secret);
  });

  it('creates and revokes a key', async () => {
    const { jar, op } = await session();
    const partner = await createPartner(db(), env.config, { name: 'Key Partner', actor: 'test' });
    const page = await getPage(api.url, '/operator/partners', jar);
    const create = `/operator/partners/${partner.id}/keys`;
    const made = await postForm(
      api.url,
      create,
      { csrf: csrfOf(page.html, create), name: 'sandbox bot', test: '1' },
      jar,
    );
    expect(made.status).toBe(201);
    const key = /id="api-key">(dtn_test_[0-9A-Za-z]{32})</.exec(made.html)?.[1] as string;
    expect(key).toBeTruthy();
    expect((await whoami(key)).status).toBe(200);
    const row = await db()('api_keys')
      .where({ prefix: key.slice(0, 14) })
      .first();
    expect(row).toMatchObject({ partner_id: partner.id, name: 'sandbox bot', mode: 'test', revoked_at: null });

    const listed = await getPage(api.url, '/operator/partners', jar);
    expect(listed.html).not.toContain(key);
    const revoke = `/operator/keys/${row.id}/revoke`;
    expect(listed.html).toContain(`<form method="post" action="${revoke}">`);
    const done = await postForm(api.url, revoke, { csrf: csrfOf(listed.html, revoke) }, jar);
    expect(done.status).toBe(303);
    expect(done.location).toBe(`/operator/partners?done=revoked&id=${row.id}`);
    expect((await whoami(key)).status).toBe(401);
    expect((await db()('api_keys').where({ id: row.id }).first()).revoked_at).not.toBeNull();
    const after = await getPage(api.url, done.location as string, jar);
    expect(after.html).toContain(`Revoked key ${key.slice(0, 14)}…; it no longer works.`);
    expect(after.html).not.toContain(`action="${revoke}"`);
    const audit = await db()('audit_log').where({ subject_id: row.id, action: 'key.revoke' }).first();
    expect(audit.actor).toBe(`operator:${op.id}`);

    // A key of no partner; an unknown partner is a 404 page.
    const loose = await postForm(
      api.url,
      '/operator/keys',
      { csrf: csrfOf(after.html, '/operator/keys'), name: 'ops script' },
      jar,
    );
    expect(loose.status).toBe(201);
    expect(loose.html).toMatch(/id="api-key">dtn_live_/);
    const nobody = `/operator/partners/${uuidv7()}/keys`;
    expect(
      (await postForm(api.url, nobody, { csrf: csrfOf(after.html, '/operator/keys'), name: 'x' }, jar)).status,
    ).toBe(404);
  });
});

/** A partner with a webhook endpoint at `url`, and one dead delivery to it: the delivery's id. */
async function deadDelivery(name: string, url: string, at: { sequence: number; attempts: number }): Promise<string> {
  const partner = await createPartner(db(), env.config, { name, webhookUrl: url, actor: 'test' });
  const endpoint = await db()('webhook_endpoints').where({ partner_id: partner.id }).first();
  const deliveryId = uuidv7();
  await db()('webhook_deliveries').insert({
    id: deliveryId,
    endpoint_id: endpoint.id,
    event_type: 'booking.status',
    sequence: at.sequence,
    message_id: `msg_${deliveryId.replace(/-/g, '')}`,
    payload: JSON.stringify({ type: 'booking.status' }),
    state: 'dead',
    attempts: at.attempts,
  });
  return deliveryId;
}

describe('operator pages: dead webhooks and queues', () => {
  it('replays a dead webhook delivery', async () => {
    const { jar, op } = await session();
    const deliveryId = await deadDelivery('Hook Partner', 'https://hooks.example/dtn', { sequence: 3, attempts: 4 });
    await db()('webhook_delivery_attempts').insert({
      delivery_id: deliveryId,
      attempt: 4,
      status_code: 503,
      error: 'HTTP 503',
    });

    const page = await getPage(api.url, '/operator/webhooks', jar);
    expect(page.status).toBe(200);
    expectSafePage(page, { script: false });
    expect(page.html).toContain('https://hooks.example/dtn');
    expect(page.html).toContain('HTTP 503');
    const action = `/operator/webhooks/${deliveryId}/replay`;
    const done = await postForm(api.url, action, { csrf: csrfOf(page.html, action) }, jar);
    expect(done.status).toBe(303);
    const delivery = await db()('webhook_deliveries').where({ id: deliveryId }).first();
    expect(delivery.state).toBe('pending');
    const queued = await db()('outbox')
      .where({ job_name: 'deliver-webhook' })
      .whereRaw("payload->>'deliveryId' = ?", [deliveryId]);
    expect(queued).toHaveLength(1);
    expect(queued[0].job_id).toBe(`webhook-${deliveryId}-replay-5`);
    const after = await getPage(api.url, done.location as string, jar);
    expect(after.html).toContain(`Delivery ${deliveryId} is queued for one more attempt`);
    expect(after.html).not.toContain(`action="${action}"`);
    // Not dead any more: replaying again is a conflict page.
    const again = await postForm(api.url, action, { csrf: csrfOf(page.html, action) }, jar);
    expect(again.status).toBe(409);
    expectSafePage(again);
    const audit = await db()('audit_log').where({ subject_id: deliveryId, action: 'webhook.replay' }).first();
    expect(audit.actor).toBe(`operator:${op.id}`);
  });

  it('serves the BullMQ board, its assets and its API only with a session', async () => {
    const { jar } = await session();
    const board = await getPage(api.url, '/operator/queues', jar);
    expect(board.status).toBe(200);
    expect(board.headers.get('content-security-policy')).toBe(QUEUES_CSP);
    expect(board.headers.get('cache-control')).toBe('no-store');
    expect(board.headers.get('x-frame-options')).toBe('DENY');
    expect(board.html).toContain('<base href="/operator/queues/" />');
    expect(board.html).toContain('queues</title>');
    const script = /<script defer src="(static\/js\/main\.[^"]+\.js)">/.exec(board.html)?.[1] as string;
    expect(script).toBeTruthy();
    const asset = await fetch(`${api.url}/operator/queues/${script}`, { headers: { cookie: jar.header() } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toMatch(/javascript/);
    expect((await fetch(`${api.url}/operator/queues/${script}`, { redirect: 'manual' })).status).toBe(303);

    const apiRes = await fetch(`${api.url}/operator/queues/api/queues`, { headers: { cookie: jar.header() } });
    expect(apiRes.status).toBe(200);
    const body = (await apiRes.json()) as { queues: Array<{ name: string }> };
    expect(body.queues.map((q) => q.name).sort()).toEqual(Object.keys(env.rt.queues).sort());

    // A change from another site is refused even with the session; from the board itself it works.
    const queue = Object.keys(env.rt.queues)[0] as string;
    const pause = `${api.url}/operator/queues/api/queues/${queue}/pause`;
    const cross = await fetch(pause, {
      method: 'PUT',
      headers: { cookie: jar.header(), 'sec-fetch-site': 'cross-site' },
    });
    expect(cross.status).toBe(403);
    const foreign = await fetch(pause, {
      method: 'PUT',
      headers: { cookie: jar.header(), origin: 'https://evil.example' },
    });
    expect(foreign.status).toBe(403);
    expect(await env.rt.queues[queue as keyof typeof env.rt.queues].isPaused()).toBe(false);
    const same = await fetch(pause, {
      method: 'PUT',
      headers: { cookie: jar.header(), 'sec-fetch-site': 'same-origin' },
    });
    expect(same.status).toBe(200);
    expect(await env.rt.queues[queue as keyof typeof env.rt.queues].isPaused()).toBe(true);
    // An older browser that sends only Origin: this origin is let through.
    const resume = await fetch(pause.replace(/pause$/, 'resume'), {
      method: 'PUT',
      headers: { cookie: jar.header(), origin: api.url },
    });
    expect(resume.status).toBe(200);
    expect(await env.rt.queues[queue as keyof typeof env.rt.queues].isPaused()).toBe(false);
    // Without a session, nothing.
    expect((await fetch(pause, { method: 'PUT', headers: { 'sec-fetch-site': 'same-origin' } })).status).toBe(401);

    // Signed out: the board is gone with the session.
    const home = await getPage(api.url, '/operator', jar);
    await postForm(api.url, '/operator/logout', { csrf: csrfOf(home.html, '/operator/logout') }, jar);
    expect((await getPage(api.url, '/operator/queues', jar)).status).toBe(303);
    expect((await fetch(`${api.url}/operator/queues/api/queues`, { headers: { cookie: jar.header() } })).status).toBe(
      401,
    );
  });
});

describe('operator pages: repeated submits, refused names, notices and links the URL cannot prove', () => {
  const operatorCli = (...args: string[]) =>
    runTs('bin/admin.ts', args, { ...env.childEnv, DTN_OPERATOR: 'ops-guard' }, 90_000);
  const tokensSent = async (id: string) =>
    (await db()('outbound_messages').where({ driver_id: id, purpose: 'driver_token' })).map(
      (m) => /dtn_drv_[0-9A-Za-z]{40}/.exec(m.body)?.[0] as string,
    );

  it('approves a driver once when Approve is posted twice at once: one token, one SMS and e-mail', async () => {
    const { jar } = await session();
    const id = await pendingDriver('Dora Double');
    const list = await getPage(api.url, '/operator/drivers', jar);
    const action = `/operator/drivers/${id}/approve`;
    const fields = { csrf: csrfOf(list.html, action), back: 'pending_approval' };

    // A double-click: both posts are in and waiting on the driver's row before either goes on.
    let sent: Promise<Array<Awaited<ReturnType<typeof postForm>>>> | undefined;
    await db().transaction(async (trx) => {
      await trx('drivers').where({ id }).forUpdate().first('id');
      sent = Promise.all([postForm(api.url, action, fields, jar), postForm(api.url, action, fields, jar)]);
      expect(await blockedBy(db(), trx, 2)).toBe(true);
    });
    const pair = await (sent as Promise<Array<Awaited<ReturnType<typeof postForm>>>>);
    expect(pair.map((p) => p.status)).toEqual([303, 303]);
    const base = `/operator/drivers?status=pending_approval`;
    expect(pair.map((p) => p.location).sort()).toEqual([
      `${base}&done=already-approved&id=${id}`,
      `${base}&done=approved&id=${id}`,
    ]);

    // One approval: one audit entry, one SMS and one e-mail carrying the same token, which works.
    expect(await db()('audit_log').where({ subject_id: id, action: 'driver.approve' })).toHaveLength(1);
    const messages = await db()('outbound_messages').where({ driver_id: id, purpose: 'driver_token' });
    expect(messages.map((m) => m.channel).sort()).toEqual(['email', 'sms']);
    const tokens = await tokensSent(id);
    expect(new Set(tokens).size).toBe(1);
    expect(await authenticateDriver(db(), tokens[0] as string)).toMatchObject({ id, status: 'approved' });

    // The second lands on the list saying so; a third, later post (a resubmitted page) too.
    const second = pair.find((p) => p.location?.includes('already-approved'));
    const notice = await getPage(api.url, second?.location as string, jar);
    expect(notice.status).toBe(200);
    expectSafePage(notice, { script: false });
    expect(notice.html).toContain(
      'Dora Double was already approved: nothing was changed, and no new token was issued or sent.',
    );
    expect(notice.html).not.toContain(tokens[0] as string);
    const third = await postForm(api.url, action, fields, jar);
    expect(third.location).toBe(`${base}&done=already-approved&id=${id}`);
    expect(await tokensSent(id)).toHaveLength(2);
    expect(await authenticateDriver(db(), tokens[0] as string)).toMatchObject({ id, status: 'approved' });

    // The notices are said only when the driver's status bears them out.
    const other = await pendingDriver('Nina Notyet');
    for (const done of ['approved', 'already-approved', 'suspended', 'rejected']) {
      const crafted = await getPage(api.url, `/operator/drivers?done=${done}&id=${other}`, jar);
      expect(crafted.html, done).not.toContain('role="status"');
    }

    // The CLI's approve still re-issues a token on purpose (an operator replacing a lost one).
    const cli = await operatorCli('driver', 'approve', id);
    expect(cli.code, cli.stderr).toBe(0);
    const reissued = JSON.parse(cli.stdout) as { token: string };
    expect(reissued.token).not.toBe(tokens[0]);
    expect(await authenticateDriver(db(), tokens[0] as string)).toBeNull();
    expect(await authenticateDriver(db(), reissued.token)).toMatchObject({ id, status: 'approved' });
  }, 120_000);

  it('approves a suspended driver again once, from the page', async () => {
    const { jar } = await session();
    const d = await approvedDriver(db(), { name: 'Sid Suspended' });
    await suspendDriver(db(), d.id, 'test');
    const list = await getPage(api.url, '/operator/drivers?status=suspended', jar);
    const action = `/operator/drivers/${d.id}/approve`;
    expect(list.html).toContain(`Approve again<span class="sr-only"> Sid Suspended</span>`);
    const fields = { csrf: csrfOf(list.html, action), back: 'suspended' };
    const pair = await Promise.all([postForm(api.url, action, fields, jar), postForm(api.url, action, fields, jar)]);
    expect(pair.map((p) => p.location?.replace(/.*done=([a-z-]+).*/, '$1')).sort()).toEqual([
      'already-approved',
      'approved',
    ]);
    // The first approval's two messages, and one more pair for the reinstatement.
    expect(await tokensSent(d.id)).toHaveLength(4);
    expect(await db()('audit_log').where({ subject_id: d.id, action: 'driver.approve' })).toHaveLength(2);
  });

  it('refuses the partner and key names the CLI refuses, with the same words, next to the field, creating nothing', async () => {
    const { jar } = await session();
    const partner = await createPartner(db(), env.config, { name: 'Named Partner', actor: 'test' });
    const page = await getPage(api.url, '/operator/partners', jar);
    const csrf = csrfOf(page.html, '/operator/partners');
    const partnersBefore = Number((await db()('partners').count({ n: '*' }).first())?.n);
    const keysBefore = Number((await db()('api_keys').count({ n: '*' }).first())?.n);

    // What the CLI says of such a name.
    const cli = await operatorCli('partner', 'create', '--name', 'Evil\u202Ecod.exe\x07');
    expect(cli.code).toBe(1);
    const cliError = JSON.parse(cli.stderr.trim()).error as { code: string; message: string };
    expect(cliError).toEqual({
      code: 'invalid_input',
      message: '--name must be one line of text, without control characters',
    });
    const cliKey = await operatorCli('key', 'create', '--name', 'k\x01\u200Bey');
    expect(JSON.parse(cliKey.stderr.trim()).error).toEqual(cliError);
    const sameWords = `${cliError.message.replace(/^--name /, '')}.`;

    for (const name of ['Evil\u202Ecod.exe\x07', 'Evil Co\nAdmin: approved', 'Tab\tbed', 'Zero\u200Bwidth']) {
      const refused = await postForm(api.url, '/operator/partners', { csrf, name, dailyLimit: '5' }, jar);
      expect(refused.status, JSON.stringify(name)).toBe(400);
      expectSafePage(refused, { script: false });
      expect(refused.html).toContain(
        `<div class="alert" role="alert">\n<h2>The partner was not created</h2>\n<p>The name ${sameWords}</p>`,
      );
      // Next to the field too, which says it is invalid; the name is shown back without what was refused.
      expect(refused.html).toContain(
        `<span class="hint" id="partner-name-problem"><strong>The name ${sameWords}</strong></span>`,
      );
      expect(refused.html).toMatch(
        /<input id="partner-name"[^>]* aria-invalid="true" aria-describedby="partner-name-problem">/,
      );
      for (const c of ['\u202E', '\u200B', '\x07', '\t']) expect(refused.html).not.toContain(c);
    }
    for (const path of ['/operator/keys', `/operator/partners/${partner.id}/keys`]) {
      for (const name of ['k\x01\u200Bey', 'line\u2028break']) {
        const refused = await postForm(api.url, path, { csrf, name }, jar);
        expect(refused.status, `${path} ${JSON.stringify(name)}`).toBe(400);
        expectSafePage(refused);
        expect(refused.html).toContain(`The key’s name ${sameWords}`);
      }
    }
    expect(Number((await db()('partners').count({ n: '*' }).first())?.n)).toBe(partnersBefore);
    expect(Number((await db()('api_keys').count({ n: '*' }).first())?.n)).toBe(keysBefore);

    // The rule is the services': called directly, they refuse too.
    await expect(createPartner(db(), env.config, { name: 'Evil\u202Ecod.exe', actor: 'test' })).rejects.toThrow(
      NameError,
    );
    await expect(
      issueApiKey(db(), {
        serviceCode: env.config.serviceCode,
        name: 'k\x01ey',
        partnerId: null,
        mode: 'live',
        actor: 'test',
      }),
    ).rejects.toThrow(NameError);
    expect(Number((await db()('partners').count({ n: '*' }).first())?.n)).toBe(partnersBefore);
    expect(Number((await db()('api_keys').count({ n: '*' }).first())?.n)).toBe(keysBefore);

    // A name of plain text (spaces tidied, as before) is made.
    const made = await postForm(api.url, '/operator/partners', { csrf, name: '  Zoë   Cars & Co  ' }, jar);
    expect(made.status, made.html).toBe(201);
    expect(await db()('partners').where({ name: 'Zoë Cars & Co' })).toHaveLength(1);
  }, 120_000);

  it('writes one audit entry for a key revoked twice on the page at once and again by the CLI', async () => {
    const { jar, op } = await session();
    const created = await issueApiKey(db(), {
      serviceCode: env.config.serviceCode,
      name: 'revoked thrice',
      partnerId: null,
      mode: 'live',
      actor: 'test',
    });
    const id = created?.id as string;
    const page = await getPage(api.url, '/operator/partners', jar);
    const action = `/operator/keys/${id}/revoke`;
    const fields = { csrf: csrfOf(page.html, action) };
    let sent: Promise<Array<Awaited<ReturnType<typeof postForm>>>> | undefined;
    await db().transaction(async (trx) => {
      await trx('api_keys').where({ id }).forUpdate().first('id');
      sent = Promise.all([postForm(api.url, action, fields, jar), postForm(api.url, action, fields, jar)]);
      expect(await blockedBy(db(), trx, 2)).toBe(true);
    });
    const pair = await (sent as Promise<Array<Awaited<ReturnType<typeof postForm>>>>);
    expect(pair.map((p) => p.status)).toEqual([303, 303]);
    const revokedAt = (await db()('api_keys').where({ id }).first()).revoked_at as Date;
    expect(revokedAt).not.toBeNull();

    const cli = await operatorCli('key', 'revoke', id);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual({ id, revokedAt: revokedAt.toISOString() });
    const again = await postForm(api.url, action, fields, jar);
    expect(again.status).toBe(303);

    const audits = await db()('audit_log').where({ subject_id: id, action: 'key.revoke' });
    expect(audits).toHaveLength(1);
    expect(audits[0].actor).toBe(`operator:${op.id}`);
    expect(((await db()('api_keys').where({ id }).first()).revoked_at as Date).toISOString()).toBe(
      revokedAt.toISOString(),
    );
  }, 120_000);

  it('says a delivery was replayed only of one that exists and was replayed', async () => {
    const { jar } = await session();
    const queued = 'is queued for one more attempt';
    const unknown = await getPage(api.url, `/operator/webhooks?done=replayed&id=${uuidv7()}`, jar);
    expect(unknown.status).toBe(200);
    expect(unknown.html).not.toContain(queued);
    expect(unknown.html).not.toContain('role="status"');

    // A dead delivery never replayed: no notice either.
    const deliveryId = await deadDelivery('Notice Partner', 'https://hooks.example/notice', {
      sequence: 1,
      attempts: 3,
    });
    const notReplayed = await getPage(api.url, `/operator/webhooks?done=replayed&id=${deliveryId}`, jar);
    expect(notReplayed.html).not.toContain(queued);
    expect(notReplayed.html).not.toContain('role="status"');

    // Replayed: said, in the words of its state.
    const page = await getPage(api.url, '/operator/webhooks', jar);
    const action = `/operator/webhooks/${deliveryId}/replay`;
    const done = await postForm(api.url, action, { csrf: csrfOf(page.html, action) }, jar);
    expect(done.location).toBe(`/operator/webhooks?done=replayed&id=${deliveryId}`);
    expect((await getPage(api.url, done.location as string, jar)).html).toContain(`Delivery ${deliveryId} ${queued}`);
    await db()('webhook_deliveries').where({ id: deliveryId }).update({ state: 'delivered' });
    expect((await getPage(api.url, done.location as string, jar)).html).toContain(
      `Delivery ${deliveryId} was replayed and has been delivered.`,
    );
  });

  it('answers an operator path whose escapes do not decode with the 400 page of a link that is not valid', async () => {
    const { jar } = await session();
    const cases: Array<[string, string]> = [
      ['GET', '/operator/nope/%ff'],
      ['GET', '/operator/%ff'],
      ['GET', '/operator/drivers/%e2%82'],
      ['GET', '/operator/partners/%c0%af/x'],
      ['POST', '/operator/nope/%ed%a0%80'],
    ];
    for (const signedIn of [true, false]) {
      for (const [method, path] of cases) {
        const res = await fetch(`${api.url}${path}`, {
          method,
          headers: { accept: 'text/html', ...(signedIn ? { cookie: jar.header() } : {}) },
          redirect: 'manual',
        });
        const p = { status: res.status, headers: res.headers, html: await res.text(), location: null };
        const what = `${signedIn ? 'signed in' : 'signed out'}: ${method} ${path}`;
        expect(p.status, what).toBe(400);
        expectSafePage(p, { script: false });
        expect(p.html, what).toContain('<h1>This link is not valid</h1>');
      }
    }
    // A path that decodes and names no page is still the 404 page (signed in), or sign-in first.
    expect((await getPage(api.url, '/operator/nope/%C3%A9', jar)).status).toBe(404);
    expect((await getPage(api.url, '/operator/nope/%C3%A9')).status).toBe(303);
  });
});
