import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWeek, weekOf } from '../shared/domain/billing/week.ts';
import { createApiKey } from '../shared/services/api-keys.ts';
import { previewInvoices } from '../shared/services/billing.ts';
import { presenceIndex } from '../shared/services/dispatch.ts';
import { createPartner } from '../shared/services/partners.ts';
import { type RunningRoles, startRoles } from '../workers/runner.ts';
import { approvedDriver } from './helpers/drivers.ts';
import { appFor, createTestEnv, eventually, type Served, serve, type TestEnv } from './helpers/env.ts';
import { freePort, obtainTokens } from './helpers/oauth-flow.ts';
import { CookieJar, csrfOf, getPage, postForm } from './helpers/pages.ts';
import { readSigned } from './helpers/signed-webhook.ts';
import { startSmtpCapture } from './helpers/smtp-capture.ts';
import { startTwilioStub } from './helpers/twilio-stub.ts';

/**
 * The sandbox end to end: a partner's test key books through every endpoint family (v1, the
 * alias quote-and-create, instant, a partner batch, the MCP tool server), the real worker roles
 * run in-process (pricing, dispatch, notify, fanout, outbox relay) and the simulator's drivers
 * take each booking to `completed` through the driver API over HTTP, at accelerated time. Status
 * webhooks reach a local receiver that verifies them with the `standardwebhooks` package; the
 * Twilio stand-in and the SMTP capture show nothing left the service for a test booking.
 */
interface Received {
  headers: Record<string, string>;
  body: { data: { bookingReference: string; status: string; sequence: number } };
  verified: boolean;
}

let env: TestEnv;
let api: Served;
let roles: RunningRoles;
let url: string;
let receiver: http.Server;
let smtp: Awaited<ReturnType<typeof startSmtpCapture>>;
let twilio: Awaited<ReturnType<typeof startTwilioStub>>;
const received: Received[] = [];
let webhookSecret: string;
let testKey: string;
let liveKey: string;
let mcpToken: string;
let mailsAfterAuthorization = 0;

const FLEET = 10;
const inMinutes = (m: number) => new Date(Date.now() + m * 60_000).toISOString();

beforeAll(async () => {
  process.env.WEBHOOK_RETRY_BASE_MS = '100';
  smtp = await startSmtpCapture();
  twilio = await startTwilioStub();
  receiver = http.createServer(async (req, res) => {
    const { headers, body, verified } = await readSigned(req, [webhookSecret]);
    received.push({ headers, body: JSON.parse(body) as Received['body'], verified });
    res.statusCode = 204;
    res.end();
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  env = await createTestEnv({
    env: {
      PUBLIC_BASE_URLS: url,
      SMTP_URL: smtp.url,
      TWILIO_API_BASE_URL: twilio.url,
      RATE_LIMIT_PER_KEY_PER_MINUTE: '1000000',
      RATE_LIMIT_PER_IP_PER_MINUTE: '1000000',
      SIMULATOR_API_URL: url,
      SIMULATOR_FLEET_SIZE: String(FLEET),
      SIMULATOR_CITIES: 'Manchester',
      SIMULATOR_ACCEPT_PROBABILITY: '1',
      SIMULATOR_DELAY_MIN_MS: '0',
      SIMULATOR_DELAY_MAX_MS: '30',
      SIMULATOR_TIME_SCALE: '100000',
      SIMULATOR_TICK_MS: '100',
    },
  });
  api = await serve(await appFor(env), port);
  const partner = await createPartner(env.rt.db, env.config, {
    name: 'Sandbox Partner',
    webhookUrl: 'https://partner.example/hooks',
    actor: 'test',
  });
  await env.rt
    .db('webhook_endpoints')
    .where({ partner_id: partner.id })
    .update({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks` });
  webhookSecret = partner.webhookSecret as string;
  liveKey = partner.apiKey;
  testKey = (
    await createApiKey(env.rt.db, {
      serviceCode: env.config.serviceCode,
      name: 'sandbox',
      partnerId: partner.id,
      mode: 'test',
    })
  ).key;
  roles = startRoles(['pricing', 'dispatch', 'notify', 'fanout', 'outbox-relay', 'simulator'], env.rt);
  // The MCP authorization e-mails its one-time code (live: the passenger's own address).
  mcpToken = (
    await obtainTokens({ url, email: 'grace.hopper@example.org', mails: smtp.mails, clientName: 'Sandbox Bot' })
  ).accessToken;
  mailsAfterAuthorization = smtp.mails.length;
}, 60_000);

afterAll(async () => {
  await roles?.close();
  await api?.close();
  receiver?.close();
  await env?.cleanup();
  await smtp?.close();
  await twilio?.close();
  delete process.env.WEBHOOK_RETRY_BASE_MS;
});

async function request(
  method: string,
  path: string,
  opts: { key?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  const key = opts.key === undefined ? testKey : opts.key;
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(key ? { [env.config.apiKeyHeader]: key } : {}),
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...opts.headers,
    },
    ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

let phoneSeq = 0;
const passenger = () => {
  phoneSeq += 1;
  return {
    name: `Sandy Tester ${phoneSeq}`,
    phone: `+4477009${String(11000 + phoneSeq)}`,
    email: `sandy${phoneSeq}@example.org`,
  };
};

async function v1Booking(opts: { key?: string; notes?: string; headers?: Record<string, string> } = {}) {
  const p = passenger();
  const res = await request('POST', '/api/public/v1/booking', {
    key: opts.key ?? testKey,
    ...(opts.headers ? { headers: opts.headers } : {}),
    body: {
      pickup: 'Manchester Piccadilly',
      dropoff: 'Manchester Airport',
      departAt: inMinutes(10),
      passengerName: p.name,
      passengerEmail: p.email,
      passengerPhone: p.phone,
      ...(opts.notes ? { notes: opts.notes } : {}),
    },
  });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return { ref: res.json.bookingReference as string, email: p.email };
}

const bookingOf = (ref: string) => env.rt.db('bookings').where({ reference: ref }).first();
const historyOf = async (ref: string) =>
  (
    await env.rt
      .db('booking_status_history as h')
      .join('bookings as b', 'b.id', 'h.booking_id')
      .where('b.reference', ref)
      .orderBy('h.seq')
      .select<{ status: string; details: Record<string, unknown> }[]>('h.status', 'h.details')
  ).map((h) => h);
const offersOf = (ref: string) =>
  env.rt
    .db('dispatch_offers as o')
    .join('bookings as b', 'b.id', 'o.booking_id')
    .join('drivers as d', 'd.id', 'o.driver_id')
    .where('b.reference', ref)
    .orderBy('o.attempt')
    .select<{ state: string; driver_id: string; simulated: boolean; decline_reason: string | null }[]>(
      'o.state',
      'o.driver_id',
      'd.simulated',
      'o.decline_reason',
    );
const statusOf = async (ref: string) => (await bookingOf(ref))?.status as string | undefined;
const reaches = (ref: string, status: string, timeoutMs = 90_000) =>
  eventually(async () => (await statusOf(ref)) === status, timeoutMs);

const PROGRESS = ['driver_assigned', 'driver_en_route', 'driver_arrived', 'passenger_on_board', 'completed'];
const refs: Record<string, string> = {};
let instantStatusUrl = '';
const v1Emails: Record<string, string> = {};

describe('sandbox: test keys and the simulator', () => {
  it('books through every endpoint family with a test key; each booking is completed by a simulated driver', async () => {
    // v1
    const v1 = await v1Booking();
    refs.v1 = v1.ref;
    v1Emails[v1.ref] = v1.email;
    // alias: estimate, then create from the quote
    const estimate = await request('POST', '/api/public/quotes/estimate', {
      body: {
        pickup_address: 'Manchester Piccadilly',
        dropoff_address: 'Salford',
        passenger_count: 1,
        depart_at: inMinutes(10),
      },
    });
    expect(estimate.status, JSON.stringify(estimate.json)).toBe(200);
    const a = passenger();
    const created = await request('POST', '/api/public/bookings/create', {
      body: {
        quote_id: estimate.json.quote_id,
        passenger_name: a.name,
        passenger_phone_whatsapp: a.phone,
        payment_method: 'cash_to_driver',
      },
    });
    expect(created.status, JSON.stringify(created.json)).toBe(200);
    refs.alias = created.json.booking_reference as string;
    // instant
    const i = passenger();
    const instant = await request('POST', '/api/public/bookings/instant', {
      body: {
        pickup_address: 'Manchester Oxford Road',
        dropoff_address: 'Stockport',
        passenger_name: i.name,
        passenger_phone_whatsapp: i.phone,
        depart_at: inMinutes(10),
        agent: 'sandbox-test',
        payment_method: 'direct_to_driver',
      },
    });
    expect(instant.status, JSON.stringify(instant.json)).toBe(200);
    refs.instant = instant.json.booking_reference as string;
    instantStatusUrl = instant.json.status_url as string;
    // partner batch
    const batch = await request('POST', '/api/public/v1/jobs', {
      body: [
        { jobRef: 'SBX-1', pickup: 'Manchester Victoria', dropoff: 'Manchester Airport', pickupTime: inMinutes(10) },
        { jobRef: 'SBX-2', pickup: 'Salford', dropoff: 'Manchester Piccadilly', pickupTime: inMinutes(10) },
      ],
    });
    expect(batch.status, JSON.stringify(batch.json)).toBe(200);
    const results = batch.json.results as Array<{ bookingReference: string; outcome: string }>;
    expect(results.map((r) => r.outcome)).toEqual(['created', 'created']);
    refs.batch1 = results[0]?.bookingReference as string;
    refs.batch2 = results[1]?.bookingReference as string;
    // MCP, with the test key beside the OAuth token
    const client = new Client({ name: 'sandbox-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${mcpToken}`, [env.config.apiKeyHeader]: testKey } },
      }),
    );
    const booked = (await client.callTool({
      name: 'start_booking',
      arguments: {
        pickup: 'Manchester Piccadilly',
        dropoff: 'Didsbury',
        departAt: inMinutes(10),
        passengerName: 'Grace Hopper',
        passengerPhone: '+447700900777',
      },
    })) as CallToolResult;
    await client.close();
    expect(booked.isError, JSON.stringify(booked)).toBeFalsy();
    refs.mcp = (booked.structuredContent as { bookingReference: string }).bookingReference;

    for (const ref of Object.values(refs)) {
      const row = await bookingOf(ref);
      expect(row.test_mode, ref).toBe(true);
    }
    expect((await bookingOf(refs.instant as string)).payment_method).toBe('pay_link');
    expect((await bookingOf(refs.batch1 as string)).payment_method).toBe('account');
    await Promise.all(Object.values(refs).map((ref) => reaches(ref, 'completed')));

    const fleet = await env.rt.db('drivers').where({ simulated: true }).select('id', 'test_mode');
    expect(fleet).toHaveLength(FLEET);
    expect(fleet.every((d) => d.test_mode === true)).toBe(true);
    for (const ref of Object.values(refs)) {
      const row = await bookingOf(ref);
      expect(
        fleet.map((d) => d.id),
        ref,
      ).toContain(row.driver_id);
      const statuses = (await historyOf(ref)).map((h) => h.status);
      expect(
        statuses.filter((s) => PROGRESS.includes(s)),
        ref,
      ).toEqual(PROGRESS);
      const settlement = await env.rt.db('settlement_records').where({ booking_id: row.id });
      expect(settlement, ref).toHaveLength(1);
      // The simulated passenger pays as booked: a partner's job on account is charged to it,
      // a booking for the driver's payment link pays by it, a booking for cash or card is paid either way at the kerb.
      if (row.payment_method === 'account' || row.payment_method === 'pay_link') {
        expect(settlement[0].method, ref).toBe(row.payment_method);
      } else expect(['cash', 'card'], ref).toContain(settlement[0].method);
      expect(settlement[0].amount_pence).toBe(row.fare_pence);
    }
  }, 180_000);

  it('delivers every status webhook of those bookings, signed (verified with standardwebhooks)', async () => {
    for (const ref of Object.values(refs)) {
      const row = await bookingOf(ref);
      // Every status after the booking was made, in sequence order, delivered.
      const deliveries = await eventually(async () => {
        const d = await env.rt.db('webhook_deliveries').where({ booking_id: row.id }).orderBy('sequence');
        return d.length > 0 &&
          d.every((x) => x.state === 'delivered') &&
          d.some((x) => x.payload.data.status === 'completed')
          ? d
          : null;
      }, 30_000);
      const got = received.filter((r) => r.body.data.bookingReference === ref);
      expect(
        got.every((r) => r.verified),
        ref,
      ).toBe(true);
      expect(new Set(got.map((r) => r.body.data.status)), ref).toEqual(
        new Set(deliveries.map((d) => d.payload.data.status as string)),
      );
      for (const s of PROGRESS)
        expect(
          got.map((r) => r.body.data.status),
          ref,
        ).toContain(s);
    }
  }, 60_000);

  it('sends no SMS, WhatsApp or e-mail for test bookings: they are recorded and readable with the test key', async () => {
    const ids = (await env.rt.db('bookings').whereIn('reference', Object.values(refs)).pluck('id')) as string[];
    // Let the notify worker process everything queued.
    await eventually(async () => {
      const queued = await env.rt.db('outbound_messages').whereIn('booking_id', ids).where({ state: 'queued' });
      return queued.length === 0;
    }, 30_000);
    const messages = await env.rt.db('outbound_messages').whereIn('booking_id', ids);
    expect(messages.some((m) => m.purpose === 'job_card' && m.channel === 'sms')).toBe(true);
    expect(messages.some((m) => m.purpose === 'job_card' && m.channel === 'whatsapp')).toBe(true);
    expect(messages.some((m) => m.purpose === 'confirmation' && m.channel === 'email')).toBe(true);
    expect(messages.every((m) => m.test_mode === true && m.state === 'recorded')).toBe(true);
    // Nothing reached the Twilio stand-in; the only e-mails are the MCP authorization's codes.
    expect(twilio.requests).toHaveLength(0);
    expect(smtp.mails).toHaveLength(mailsAfterAuthorization);

    const viewed = await request('GET', `/api/public/v1/test/messages?booking=${refs.v1}`);
    expect(viewed.status).toBe(200);
    const list = viewed.json.messages as Array<{
      bookingReference: string;
      purpose: string;
      body: string;
      state: string;
    }>;
    expect(list.length).toBeGreaterThan(0);
    expect(list.every((m) => m.bookingReference === refs.v1 && m.state === 'recorded')).toBe(true);
    const card = list.find((m) => m.purpose === 'job_card');
    expect(card?.body).toContain(refs.v1 as string);
    expect(list.find((m) => m.purpose === 'confirmation')?.body).toContain('/track/');
    expect((await request('GET', '/api/public/v1/test/messages', { key: liveKey })).status).toBe(403);

    // The recorded confirmation's tracking link opens pages that say they are the sandbox.
    const token = /\/track\/([A-Za-z0-9_-]{43})/.exec(
      list.find((m) => m.purpose === 'confirmation')?.body ?? '',
    )?.[1] as string;
    expect(token).toBeDefined();
    for (const page of [`/track/${token}`, `/pay/${token}`]) {
      const res = await fetch(`${url}${page}`);
      expect(res.status, page).toBe(200);
      const html = await res.text();
      expect(html, page).toContain('<div class="test-mode" role="note"><p><strong>Test mode.</strong>');
      expect(html, page).toContain('No real taxi is coming');
    }
  }, 60_000);

  it('marks the booking page of a test quote "Test mode", and of a live quote not', async () => {
    const body = { pickup_address: 'Manchester Piccadilly', dropoff_address: 'Salford', passenger_count: 1 };
    const test = await request('POST', '/api/public/quotes/estimate', { body });
    const live = await request('POST', '/api/public/quotes/estimate', { body, key: liveKey });
    expect(test.status).toBe(200);
    expect(live.status).toBe(200);
    const testPage = await (await fetch(`${url}/book/${test.json.quote_id as string}`)).text();
    expect(testPage).toContain('This is a sandbox quote. Booking it sends no real taxi');
    const livePage = await (await fetch(`${url}/book/${live.json.quote_id as string}`)).text();
    expect(livePage).toContain('<h1>Book your taxi</h1>');
    expect(livePage).not.toContain('Test mode');
  });

  it("makes a quote booked on its page the quote's key's and partner's booking: the sandbox lists its messages", async () => {
    const body = { pickup_address: 'Manchester Piccadilly', dropoff_address: 'Salford', passenger_count: 1 };
    const booked = async (key: string) => {
      const q = await request('POST', '/api/public/quotes/estimate', { body, key });
      expect(q.status).toBe(200);
      const bookPath = `/book/${q.json.quote_id as string}`;
      const jar = new CookieJar();
      const page = await getPage(url, bookPath, jar);
      const post = await postForm(
        url,
        bookPath,
        {
          name: 'Page Pat',
          phone: '07700 900123',
          email: `page-${key.slice(0, 8)}-${Date.now()}@example.org`,
          payment: 'pay_link',
          csrf: csrfOf(page.html, bookPath),
        },
        jar,
      );
      expect(post.status).toBe(303);
      return env.rt.db('bookings').where({ quote_id: q.json.quote_id }).first();
    };
    // A key's row, by its visible prefix (its first 14 characters).
    const keyOf = async (key: string) =>
      env.rt
        .db('api_keys')
        .where({ prefix: key.slice(0, 14) })
        .first('id', 'partner_id');
    const test = await keyOf(testKey);
    const sandboxBooking = await booked(testKey);
    expect(sandboxBooking).toMatchObject({
      origin: 'website',
      test_mode: true,
      api_key_id: test.id,
      partner_id: test.partner_id,
    });
    const listed = await eventually(async () => {
      const r = await request('GET', `/api/public/v1/test/messages?booking=${sandboxBooking.reference}`);
      const messages = r.json.messages as { purpose: string }[];
      return messages.some((m) => m.purpose === 'confirmation') ? messages : null;
    });
    expect(listed.length).toBeGreaterThan(0);
    // A partner's live quote booked on its page is the partner's live booking.
    const live = await keyOf(liveKey);
    const liveBooking = await booked(liveKey);
    expect(liveBooking).toMatchObject({ test_mode: false, api_key_id: live.id, partner_id: live.partner_id });
    const cancel = await request('POST', `/api/public/v1/booking/${liveBooking.reference}`, {
      key: liveKey,
      body: { action: 'cancel', email: liveBooking.passenger_email },
    });
    expect(cancel.status).toBe(200);
  }, 60_000);

  it("re-quotes an expired sandbox quote as a sandbox quote of the same key, and books a revoked key's quote as the website's", async () => {
    const body = { pickup_address: 'Manchester Piccadilly', dropoff_address: 'Salford', passenger_count: 1 };
    const q = await request('POST', '/api/public/quotes/estimate', { body });
    const id = q.json.quote_id as string;
    const bookPath = `/book/${id}`;
    await env.rt
      .db('quotes')
      .where({ id })
      .update({ expires_at: new Date(Date.now() - 60_000) });
    const jar = new CookieJar();
    const page = await getPage(url, bookPath, jar);
    expect(page.status).toBe(410);
    const requote = await postForm(url, `${bookPath}/requote`, { csrf: csrfOf(page.html) }, jar);
    expect(requote.status).toBe(303);
    const fresh = /^\/book\/([0-9a-f-]{36})$/.exec(requote.location ?? '')?.[1] as string;
    const [was, now] = await Promise.all([
      env.rt.db('quotes').where({ id }).first('test_mode', 'api_key_id', 'partner_id'),
      env.rt.db('quotes').where({ id: fresh }).first('test_mode', 'api_key_id', 'partner_id'),
    ]);
    expect(was.test_mode).toBe(true);
    expect(now).toEqual(was);

    // A key revoked since its quote was made no longer owns what is booked with that quote.
    const revokable = await createApiKey(env.rt.db, {
      serviceCode: env.config.serviceCode,
      name: 'revoked later',
      mode: 'test',
    });
    const q2 = await request('POST', '/api/public/quotes/estimate', { body, key: revokable.key });
    await env.rt.db('api_keys').where({ id: revokable.id }).update({ revoked_at: new Date() });
    const path2 = `/book/${q2.json.quote_id as string}`;
    const jar2 = new CookieJar();
    const page2 = await getPage(url, path2, jar2);
    const post = await postForm(
      url,
      path2,
      {
        name: 'Revoked Rae',
        phone: '07700 900123',
        email: `revoked-${Date.now()}@example.org`,
        payment: 'pay_link',
        csrf: csrfOf(page2.html, path2),
      },
      jar2,
    );
    expect(post.status).toBe(303);
    expect(await env.rt.db('bookings').where({ quote_id: q2.json.quote_id }).first('test_mode', 'api_key_id')).toEqual({
      test_mode: true,
      api_key_id: null,
    });
  }, 60_000);

  // found in a probe: a sandbox booking's own status_url answered 404 opened without the test key
  it("opens a sandbox booking's status_url (its tracking token) without the test key, as a passenger opens it", async () => {
    const url = new URL(instantStatusUrl);
    const path = `${url.pathname}${url.search}`;
    for (const key of [null, liveKey]) {
      const r = await request('GET', path, { key });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(r.json).toMatchObject({ bookingReference: refs.instant });
    }
    // A wrong token is still no booking, whatever the key.
    const wrong = await request('GET', `${url.pathname}?t=${'x'.repeat(43)}`, { key: null });
    expect(wrong.status).toBe(404);
    // Its cancel reaches it too, without the key: the simulator has completed it, so it is the
    // booking's own answer (409 cannot_cancel), not 404.
    const cancelled = await request('POST', path, { key: null, body: { action: 'cancel' } });
    expect(cancelled.status, JSON.stringify(cancelled.json)).toBe(409);
    expect(cancelled.json).toMatchObject({ error: { code: 'cannot_cancel' } });
  });

  it('keeps test data invisible to live keys (and live data from test keys)', async () => {
    const ref = refs.v1 as string;
    const email = v1Emails[ref] as string;
    const path = `/api/public/v1/booking/${ref}?email=${encodeURIComponent(email)}`;
    expect((await request('GET', path)).status).toBe(200);
    expect((await request('GET', path, { key: liveKey })).json).toMatchObject({ error: { code: 'booking_not_found' } });
    expect((await request('GET', path, { key: null })).status).toBe(404);
    expect(
      (await request('POST', `/api/public/v1/booking/${ref}`, { key: liveKey, body: { action: 'cancel', email } }))
        .status,
    ).toBe(404);
    // A test quote cannot be redeemed with a live key.
    const quote = await request('POST', '/api/public/quotes/estimate', {
      body: {
        pickup_address: 'Manchester Piccadilly',
        dropoff_address: 'Salford',
        passenger_count: 1,
        depart_at: inMinutes(20),
      },
    });
    const p = passenger();
    const redeem = await request('POST', '/api/public/bookings/create', {
      key: liveKey,
      body: {
        quote_id: quote.json.quote_id,
        passenger_name: p.name,
        passenger_phone_whatsapp: p.phone,
        payment_method: 'cash_to_driver',
      },
    });
    expect(redeem.status).toBe(404);
    expect(redeem.json).toMatchObject({ error: { code: 'quote_not_found' } });
    // found in a probe: said to exist nowhere; it says which mode it is of and what to do
    expect((redeem.json.error as { message: string }).message).toContain(
      'was made with a test key (the sandbox): book it with a test key',
    );
    // Nor without a key, on either redeeming route: its booking would be one no lookup reaches.
    for (const [path, body] of [
      [
        '/api/public/bookings/create',
        {
          quote_id: quote.json.quote_id,
          passenger_name: p.name,
          passenger_phone_whatsapp: p.phone,
          payment_method: 'cash_to_driver',
        },
      ],
      [
        '/api/public/v1/booking',
        {
          quote_id: quote.json.quote_id,
          passenger_name: p.name,
          passenger_phone: p.phone,
          passenger_email: 'keyless.sandbox@example.org',
        },
      ],
    ] as const) {
      const keyless = await request('POST', path, { key: null, body });
      expect(keyless.status, path).toBe(404);
      expect(keyless.json, path).toMatchObject({ error: { code: 'quote_not_found' } });
      expect((keyless.json.error as { message: string }).message, path).toContain('was made with a test key');
    }
    // And a live quote booked with the test key.
    const liveQuote = await request('POST', '/api/public/quotes/estimate', {
      key: liveKey,
      body: {
        pickup_address: 'Manchester Piccadilly',
        dropoff_address: 'Salford',
        passenger_count: 1,
        depart_at: inMinutes(40),
      },
    });
    const withTestKey = await request('POST', '/api/public/bookings/create', {
      body: {
        quote_id: liveQuote.json.quote_id,
        passenger_name: p.name,
        passenger_phone_whatsapp: p.phone,
        payment_method: 'cash_to_driver',
      },
    });
    expect(withTestKey.status).toBe(404);
    expect((withTestKey.json.error as { message: string }).message).toContain(
      'is a live quote, and a test key books sandbox quotes only',
    );
    // A live key cannot touch the test job's jobRef.
    const amend = await request('POST', '/api/public/v1/jobs', {
      key: liveKey,
      body: { jobRef: 'SBX-1', action: 'cancel' },
    });
    expect(amend.status).toBe(409);
    expect(await statusOf(refs.batch1 as string)).toBe('completed');

    // A live booking is never offered to a simulated driver, and a test booking never to a real one.
    const real = await approvedDriver(env.rt.db, { home: 'Manchester' });
    await request('POST', '/api/public/v1/driver/presence', {
      key: real.token,
      body: { available: true, lat: 53.4774, lng: -2.2309 },
    });
    const live = await v1Booking({ key: liveKey });
    await eventually(async () => (await offersOf(live.ref)).length > 0, 30_000);
    const liveOffers = await offersOf(live.ref);
    expect(liveOffers.every((o) => o.driver_id === real.id && !o.simulated)).toBe(true);
    expect((await bookingOf(live.ref)).test_mode).toBe(false);
    for (const ref of Object.values(refs)) {
      const offers = await offersOf(ref);
      expect(
        offers.every((o) => o.simulated),
        ref,
      ).toBe(true);
    }
    // The live booking's lookup is not visible to the test key.
    const livePath = `/api/public/v1/booking/${live.ref}?email=${encodeURIComponent(live.email)}`;
    expect((await request('GET', livePath)).status).toBe(404);
    expect((await request('GET', livePath, { key: liveKey })).status).toBe(200);
  }, 60_000);

  it('leaves test-mode rides out of the billing run', async () => {
    const week = parseWeek(weekOf(new Date()));
    if (!week) throw new Error('no week');
    const completed = await env.rt
      .db('bookings')
      .whereIn('reference', Object.values(refs))
      .where({ status: 'completed' })
      .select('driver_id', 'fare_pence');
    expect(completed.length).toBe(Object.values(refs).length);
    expect(completed.every((b) => (b.fare_pence as number) > 0)).toBe(true);
    const invoices = await previewInvoices(env.rt.db, week);
    const simulated = new Set(completed.map((b) => b.driver_id as string));
    expect(invoices.filter((i) => simulated.has(i.owner.id))).toEqual([]);
  });

  describe('scenarios', () => {
    it('no_driver (header): every simulated driver declines; the booking ends no_driver_available', async () => {
      const { ref } = await v1Booking({ headers: { 'X-Test-Scenario': 'no_driver' } });
      expect((await bookingOf(ref)).test_scenario).toBe('no_driver');
      await reaches(ref, 'no_driver_available', 60_000);
      const offers = await offersOf(ref);
      expect(offers.length).toBeGreaterThan(0);
      expect(offers.every((o) => o.state === 'declined' && o.simulated)).toBe(true);
      expect((await historyOf(ref)).map((h) => h.status)).not.toContain('driver_assigned');
      // The operator alert is recorded, not sent.
      const alert = await eventually(async () =>
        env.rt
          .db('outbound_messages as m')
          .join('bookings as b', 'b.id', 'm.booking_id')
          .where({ 'b.reference': ref, 'm.purpose': 'operator_alert' })
          .first('m.state', 'm.test_mode')
          .then((m) => (m && m.state !== 'queued' ? m : null)),
      );
      expect(alert).toEqual({ state: 'recorded', test_mode: true });
    }, 90_000);

    it('driver_declines_then_accepts (notes): the first offer is declined, the next accepted', async () => {
      const { ref } = await v1Booking({ notes: 'Gate 2 please. scenario:driver_declines_then_accepts' });
      expect((await bookingOf(ref)).test_scenario).toBe('driver_declines_then_accepts');
      await reaches(ref, 'completed');
      const offers = await offersOf(ref);
      expect(offers.map((o) => o.state)).toEqual(['declined', 'accepted']);
      expect(offers[0]?.driver_id).not.toBe(offers[1]?.driver_id);
    }, 120_000);

    it('driver_cancels: the driver accepts, sets off, then hands the job back; another driver completes it', async () => {
      const { ref } = await v1Booking({ headers: { 'X-Test-Scenario': 'driver_cancels' } });
      await reaches(ref, 'completed');
      const statuses = (await historyOf(ref)).map((h) => h.status);
      const back = statuses.indexOf('driver_en_route');
      expect(back).toBeGreaterThan(0);
      expect(statuses.slice(back + 1, back + 3)).toEqual(['dispatching', 'driver_assigned']);
      expect((await historyOf(ref)).some((h) => h.status === 'dispatching' && h.details.handedBack === true)).toBe(
        true,
      );
      const offers = await offersOf(ref);
      expect(offers.map((o) => o.state)).toEqual(['declined', 'accepted']);
      expect(offers[0]?.decline_reason).toMatch(/^handed back/);
      expect((await bookingOf(ref)).driver_id).toBe(offers[1]?.driver_id);
    }, 120_000);

    it('partner_webhook_fails_twice: the first status webhook counts two failed attempts, then delivers with the same webhook-id', async () => {
      const { ref } = await v1Booking({ headers: { 'X-Test-Scenario': 'partner_webhook_fails_twice' } });
      await reaches(ref, 'completed');
      const row = await bookingOf(ref);
      const first = await eventually(async () => {
        const d = await env.rt.db('webhook_deliveries').where({ booking_id: row.id }).orderBy('sequence').first();
        return d?.state === 'delivered' ? d : null;
      }, 30_000);
      const attempts = await env.rt.db('webhook_delivery_attempts').where({ delivery_id: first.id }).orderBy('attempt');
      expect(attempts).toHaveLength(3);
      expect(attempts[0].error).toMatch(/^test scenario partner_webhook_fails_twice: attempt 1 counted as failed/);
      expect(attempts[1].error).toMatch(/attempt 2 counted as failed/);
      expect(attempts[2].error).toBeNull();
      const copies = received.filter((r) => r.headers['webhook-id'] === first.message_id);
      expect(copies).toHaveLength(3);
      expect(copies.every((r) => r.verified)).toBe(true);
      // Later statuses are delivered at the first attempt (once the fanout worker has sent them all).
      const later = await eventually(async () => {
        const rows = await env.rt.db('webhook_deliveries').where({ booking_id: row.id }).whereNot({ id: first.id });
        return rows.length > 0 && rows.every((d) => d.state === 'delivered') ? rows : null;
      }, 30_000);
      expect(later.map((d) => d.attempts)).toEqual(later.map(() => 1));
    }, 120_000);

    it('refuses a scenario header with a live key or an unknown name (400)', async () => {
      const p = passenger();
      const body = {
        pickup: 'Manchester Piccadilly',
        dropoff: 'Manchester Airport',
        departAt: inMinutes(10),
        passengerName: p.name,
        passengerEmail: p.email,
        passengerPhone: p.phone,
      };
      const live = await request('POST', '/api/public/v1/booking', {
        key: liveKey,
        body,
        headers: { 'X-Test-Scenario': 'no_driver' },
      });
      expect(live.status).toBe(400);
      const unknown = await request('POST', '/api/public/v1/booking', {
        body,
        headers: { 'X-Test-Scenario': 'meteor' },
      });
      expect(unknown.status).toBe(400);
      expect(JSON.stringify(unknown.json)).toContain('driver_declines_then_accepts');
    });
  });
});

describe('the simulator stopping', () => {
  it('takes its drivers off the map at once (available: false), not when their presence expires', async () => {
    const index = presenceIndex(env.rt.redis, env.config, true);
    await eventually(async () => (await index.count(Date.now())) >= FLEET);
    await roles.close();
    // The other roles stopped with it; nothing reports presence any more. Fresh reports would
    // keep the drivers live for the presence time-out (120 s): they are gone now.
    expect(await index.count(Date.now())).toBe(0);
    roles = startRoles(['pricing', 'dispatch', 'notify', 'fanout', 'outbox-relay'], env.rt);
  });
});
