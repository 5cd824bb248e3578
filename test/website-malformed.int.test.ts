import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperator } from '../shared/services/operators.ts';
import { syncBuiltInTariffs } from '../shared/services/tariff-store.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { CookieJar, csrfOf, expectSafePage, getPage, type Page } from './helpers/pages.ts';

/**
 * What the website and the operator pages do with input that is not text, through real HTTP:
 * a form field whose percent-escapes decode to bytes that are not UTF-8 (or do not decode at
 * all) is refused with the same 400 page as raw bytes that are not UTF-8, and nothing of it is
 * stored; a page path whose percent-escapes do not decode is a 400 page, while the API's paths
 * keep the JSON envelope.
 */
let env: TestEnv;
let roles: RunningRoles;
let api: Served;

// biome-ignore lint/suspicious/noExplicitAny: JSON read back in assertions
type Json = Record<string, any>;

/** In every refused input: nothing containing it may be stored anywhere. */
const MARK = 'PctProbe';

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

const db = () => env.rt.db;

async function quote(): Promise<Json> {
  const res = await fetch(`${api.url}/api/public/v1/quote`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      departAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
      passengers: 2,
    }),
  });
  const json = (await res.json()) as Json;
  expect(res.status, JSON.stringify(json)).toBe(200);
  return json;
}

/** Post a form body exactly as given (its escapes untouched), as a browser would with the page's cookies. */
async function postRaw(path: string, body: string, jar: CookieJar): Promise<Page> {
  const res = await fetch(`${api.url}${path}`, {
    method: 'POST',
    headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', cookie: jar.header() },
    body,
    redirect: 'manual',
  });
  jar.take(res.headers);
  return { status: res.status, headers: res.headers, html: await res.text(), location: res.headers.get('location') };
}

/** The refusal of raw bytes that are not UTF-8: a 400 page of the site, never the JSON envelope. */
function expectUnreadableForm(p: Page, what: string): void {
  expect(p.status, what).toBe(400);
  expectSafePage(p, { script: false });
  expect(p.html, what).toContain('The form could not be read: go back and send it again.');
}

/** Every row of every table of this file's schema whose text contains `needle`. */
async function storedWith(needle: string): Promise<string[]> {
  const schema = env.config.databaseSchema;
  const tables = await db()
    .select('table_name')
    .from('information_schema.tables')
    .where({ table_schema: schema, table_type: 'BASE TABLE' });
  const found: string[] = [];
  for (const { table_name: table } of tables as Array<{ table_name: string }>) {
    const { rows } = await db().raw('select t::text as row from ??.?? as t where t::text like ?', [
      schema,
      table,
      `%${needle}%`,
    ]);
    for (const r of rows as Array<{ row: string }>) found.push(`${table}: ${r.row}`);
  }
  return found;
}

describe('form fields whose percent-decoding is not UTF-8', () => {
  /** Escapes that are not text: each is refused, in a value or in a name. */
  const notText: Array<[string, string]> = [
    ['bytes that are never UTF-8', '%FF%FE'],
    ['a sequence cut short', '%C3'],
    ['a sequence cut short at the end', '%E2%82'],
    ['an overlong encoding', '%C0%AF'],
    ['a surrogate encoded as UTF-8', '%ED%A0%80'],
    ['a lone continuation byte', '%80'],
    ['a percent sign that escapes nothing', '%zz'],
  ];

  it('the booking form refuses them with the 400 page of raw bytes that are not UTF-8, and books nothing', async () => {
    const q = await quote();
    const bookPath = `/book/${q.quoteId}`;
    const jar = new CookieJar();
    const csrf = csrfOf((await getPage(api.url, bookPath, jar)).html, bookPath);
    const rest = (fields: Record<string, string>) =>
      new URLSearchParams({ phone: '07700 900123', email: 'nina@example.org', payment: 'cash', csrf, ...fields });

    // What the QA probe sent.
    for (const name of [`Nina%FF%FE${MARK}`, `Nina%C3${MARK}`]) {
      expectUnreadableForm(await postRaw(bookPath, `name=${name}&${rest({})}`, jar), name);
    }
    for (const [what, bad] of notText) {
      // In the name's value, in a value among well-formed escapes, and in a field's name.
      expectUnreadableForm(await postRaw(bookPath, `name=Nina${bad}${MARK}&${rest({})}`, jar), `value: ${what}`);
      expectUnreadableForm(
        await postRaw(bookPath, `name=Zo%C3%AB+${MARK}${bad}&${rest({})}`, jar),
        `value with good escapes: ${what}`,
      );
      expectUnreadableForm(
        await postRaw(bookPath, `${rest({ name: `Nina ${MARK}` })}&notes${bad}=${MARK}`, jar),
        `name: ${what}`,
      );
    }
    expect(await db()('bookings').where({ quote_id: q.quoteId })).toHaveLength(0);

    // Raw bytes that are not UTF-8 get the same page.
    const raw = await fetch(`${api.url}${bookPath}`, {
      method: 'POST',
      headers: { accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded', cookie: jar.header() },
      body: Buffer.concat([Buffer.from(`${rest({})}&name=Nina`), Buffer.from([0xff, 0xfe]), Buffer.from(MARK)]),
      redirect: 'manual',
    });
    const rawPage: Page = { status: raw.status, headers: raw.headers, html: await raw.text(), location: null };
    expectUnreadableForm(rawPage, 'raw bytes');

    // Escaped UTF-8 (as every browser sends it) books, decoded: "Zoë O'Brien 100%".
    const ok = await postRaw(bookPath, `name=Zo%C3%AB+O%27Brien+100%25&${rest({})}`, jar);
    expect(ok.status, ok.html).toBe(303);
    const [booking] = await db()('bookings').where({ quote_id: q.quoteId });
    expect(booking.passenger_name).toBe("Zoë O'Brien 100%");

    expect(await storedWith(MARK)).toEqual([]);
  });

  it('the operator sign-in form refuses them too, and signs nobody in', async () => {
    const op = await createOperator(db(), { email: 'pct.ops@example.org', name: 'Pat', actor: 'test' });
    const jar = new CookieJar();
    const login = await getPage(api.url, '/operator/login', jar);
    const form = new URLSearchParams({
      email: op.email,
      password: op.password,
      csrf: csrfOf(login.html, '/operator/login'),
    });
    for (const [what, bad] of notText) {
      expectUnreadableForm(await postRaw('/operator/login', `${form}&${MARK}${bad}=1`, jar), `name: ${what}`);
      expectUnreadableForm(await postRaw('/operator/login', `${form}&note=${MARK}${bad}`, jar), `value: ${what}`);
    }
    expect(await db()('operator_sessions').where({ operator_id: op.id })).toHaveLength(0);
    // The same form, well formed, signs in.
    const ok = await postRaw('/operator/login', form.toString(), jar);
    expect(ok.status, ok.html).toBe(303);
    expect(await db()('operator_sessions').where({ operator_id: op.id })).toHaveLength(1);

    // Signed in: a partner named with bytes that are not UTF-8 is refused, and none is made.
    const partners = await getPage(api.url, '/operator/partners', jar);
    expect(partners.status).toBe(200);
    const csrf = csrfOf(partners.html, '/operator/partners');
    const made = await postRaw('/operator/partners', `csrf=${csrf}&name=Acme+${MARK}%FF+Cars&dailyLimit=5`, jar);
    expectUnreadableForm(made, 'partner name');
    expect(await db()('partners').where('name', 'like', `%${MARK}%`)).toHaveLength(0);

    expect(await storedWith(MARK)).toEqual([]);
  });
});

describe('page paths whose percent-escapes do not decode', () => {
  const request = (path: string, init: RequestInit = {}) =>
    fetch(`${api.url}${path}`, { redirect: 'manual', ...init, headers: { accept: 'text/html', ...init.headers } });

  it('are a 400 page of the site on the website, the pay page and the operator pages', async () => {
    const paths: Array<[string, string]> = [
      ['GET', '/track/%ff'],
      ['GET', '/book/%ff'],
      ['GET', '/pay/%ff'],
      ['GET', '/track/%e2%82'],
      ['GET', '/o/%ff'],
      ['GET', '/TRACK/%ff'],
      ['GET', '/track/%ff/cancel'],
      ['POST', '/track/%ff/cancel'],
      ['POST', '/book/%c3/requote'],
      ['GET', '/driver/jobs/%ed%a0%80'],
      ['GET', '/assets/%ff'],
      ['POST', '/operator/drivers/%ff/approve'],
      ['POST', '/operator/keys/%c0%af/revoke'],
    ];
    for (const [method, path] of paths) {
      const res = await request(path, {
        method,
        ...(method === 'POST'
          ? { body: 'confirm=yes', headers: { 'content-type': 'application/x-www-form-urlencoded' } }
          : {}),
      });
      const page: Page = { status: res.status, headers: res.headers, html: await res.text(), location: null };
      expect(page.status, `${method} ${path}`).toBe(400);
      expectSafePage(page, { script: false });
      expect(page.html, path).toContain('<h1>This link is not valid</h1>');
      expect(page.html, path).toContain('check it was copied whole');
      expect(page.html, path).not.toContain('invalid_input');
    }
    // What a browser asks for, on the job card's link too.
    const browser = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
    for (const path of ['/o/%ff', '/track/%ff', '/pay/%e2%82']) {
      const res = await request(path, { headers: { accept: browser } });
      expect(res.status, path).toBe(400);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
      expect(await res.text(), path).toContain('This link is not valid');
    }
    // A HEAD has the page's status and headers, without the page.
    const head = await request('/track/%ff', { method: 'HEAD' });
    expect(head.status).toBe(400);
    expect(head.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await head.text()).toBe('');
  });

  it('keep the JSON envelope on the API, and on the job card link for a caller preferring JSON, as its good links do', async () => {
    const apiCalls: Array<[string, string]> = [
      ['/api/public/v1/booking/%ff', 'application/json'],
      ['/api/public/v1/booking/%e2%82/events', 'application/json'],
      ['/api/public/v1/booking/%ff', 'text/html'],
      ['/o/%ff', 'application/json'],
      ['/o/%ff', '*/*'],
    ];
    for (const [path, accept] of apiCalls) {
      const res = await request(path, { headers: { accept } });
      expect(res.status, path).toBe(400);
      expect(res.headers.get('content-type'), path).toMatch(/^application\/json/);
      expect(((await res.json()) as Json).error.code, path).toBe('invalid_input');
    }
  });

  it('a path with no page under a page prefix is a 404 page; on the API, the JSON envelope', async () => {
    for (const path of ['/book/a/b', '/track', '/pay/a/b', '/driver/nowhere', '/docs/x/y']) {
      const res = await request(path);
      const page: Page = { status: res.status, headers: res.headers, html: await res.text(), location: null };
      expect(page.status, path).toBe(404);
      expectSafePage(page, { script: false });
      expect(page.html, path).toContain('<h1>Page not found</h1>');
      expect(page.html, path).not.toContain('not_found');
    }
    for (const [path, accept] of [
      ['/api/public/v1/nowhere', 'text/html'],
      ['/o/a/b', 'application/json'],
      ['/nowhere', 'text/html'],
    ]) {
      const res = await request(path as string, { headers: { accept: accept as string } });
      expect(res.status, path).toBe(404);
      expect(((await res.json()) as Json).error.code, path).toBe('not_found');
    }
  });
});
