import { randomBytes } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobCardText, offerCode, offerLink, pickupArea } from '../shared/domain/dispatch/job-card.ts';
import { queueMessage } from '../shared/services/messages.ts';
import type { WorkerContext } from '../workers/context.ts';
import { sendMessage } from '../workers/notify/send-message.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';
import { startTwilioStub } from './helpers/twilio-stub.ts';

/**
 * The job card's short link (`GET /o/{code}`, api/routes/offers.ts) through real HTTP against
 * real Postgres, and the card itself delivered by SMS and WhatsApp through the real twilio
 * client to the local Twilio stand-in. How the notify worker talks to Twilio (the Messages.json
 * path, basic auth, form encoding, SMS and WhatsApp senders, retries) is covered in
 * notify.int.test.ts; here only what the job card adds is checked: its text, sent as is on
 * both channels to the same driver number.
 */
const SID = 'AC0123456789abcdef0123456789abcdef';
const TOKEN = 'stub-auth-token';
const DRIVER_PHONE = '+447700900123';
const PASSENGER = { name: 'Ada Lovelace', phone: '+447700900555', email: 'ada@example.org' };

let env: TestEnv;
let http: Served;
let twilio: Awaited<ReturnType<typeof startTwilioStub>>;
let driverId: string;

beforeAll(async () => {
  twilio = await startTwilioStub();
  env = await createTestEnv({
    env: {
      TWILIO_ACCOUNT_SID: SID,
      TWILIO_AUTH_TOKEN: TOKEN,
      TWILIO_API_BASE_URL: twilio.url,
      TWILIO_SMS_FROM: '+447700900111',
      TWILIO_WHATSAPP_FROM: 'whatsapp:+447700900222',
    },
  });
  http = await serve(await appFor(env));
  driverId = uuidv7();
  await env.rt.db('drivers').insert({
    id: driverId,
    name: 'Dee Driver',
    phone: DRIVER_PHONE,
    email: 'dee@example.org',
    status: 'approved',
    licensing_authority: 'Manchester City Council',
    licence_number: 'PH-12345',
    licence_expiry: '2030-01-01',
    home_city: 'Manchester',
    home_lat: 53.4794,
    home_lng: -2.2453,
    operating_radius_miles: 15,
  });
  await env.rt.db('vehicles').insert({
    id: uuidv7(),
    driver_id: driverId,
    make: 'Toyota',
    model: 'Corolla',
    colour: 'Silver',
    registration: 'MA70 ABC',
    class: 'saloon',
    seats: 4,
  });
});
afterAll(async () => {
  await http?.close();
  await env?.cleanup();
  await twilio?.close();
});

type StoredPlace = { query: string; name: string; kind: string; lat: number; lng: number; postcodeDistrict?: string };

const PICCADILLY: StoredPlace = {
  query: 'Manchester Piccadilly',
  name: 'Manchester Piccadilly',
  kind: 'station',
  lat: 53.4774,
  lng: -2.2309,
};
/** An address stored as bookings store it (no postcodeDistrict): personal text the card must not show. */
const ADA_HOME: StoredPlace = {
  query: "Ada's flat, 12 Rose Lane, Leeds",
  name: "Ada's flat, 12 Rose Lane, Leeds",
  kind: 'address',
  lat: 53.7976,
  lng: -1.5513,
};

let refSeq = 0;
async function insertOffer(opts: {
  pickup?: StoredPlace;
  dropoff?: StoredPlace;
  expiresAt?: Date;
  state?: string;
  farePence?: number | null;
  appliedRules?: Array<{ code: string; description: string; amountPence: number }>;
}): Promise<{ offerId: string; bookingId: string; reference: string; expiresAt: Date; pickupTime: Date }> {
  const bookingId = uuidv7();
  refSeq += 1;
  const reference = `DTN-7K3F${String(refSeq).padStart(2, '0')}`;
  const pickupTime = new Date('2026-12-05T14:30:00Z');
  await env.rt.db('bookings').insert({
    id: bookingId,
    reference,
    origin: 'api',
    status: 'dispatching',
    passenger_name: PASSENGER.name,
    passenger_email: PASSENGER.email,
    passenger_phone: PASSENGER.phone,
    passengers: 2,
    vehicle_type: 'saloon',
    pickup: JSON.stringify(opts.pickup ?? PICCADILLY),
    dropoff: JSON.stringify(opts.dropoff ?? ADA_HOME),
    pickup_time: pickupTime,
    fare_pence: opts.farePence === undefined ? 2840 : opts.farePence,
    ...(opts.appliedRules ? { applied_rules: JSON.stringify(opts.appliedRules) } : {}),
    notes: 'Ring Ada on arrival',
    tracking_token_hash: randomBytes(32),
  });
  const offerId = uuidv7();
  const expiresAt = opts.expiresAt ?? new Date(Date.now() + 45_000);
  await env.rt.db('dispatch_offers').insert({
    id: offerId,
    booking_id: bookingId,
    tier: 1,
    attempt: 1,
    driver_id: driverId,
    state: opts.state ?? 'offered',
    expires_at: expiresAt,
  });
  return { offerId, bookingId, reference, expiresAt, pickupTime };
}

const code = (offerId: string) => offerCode(offerId, env.config.dataEncryptionKey);
const get = (c: string, accept = 'application/json') => fetch(`${http.url}/o/${c}`, { headers: { accept } });

/**
 * Nothing personal about the passenger, nor the address text, appears in `text`. Random tokens
 * (offer codes, CSRF values, asset hashes: runs of 16 or more base64url characters) are removed
 * first: a short name such as "Ada" turns up inside one often enough to make the check flaky.
 */
function expectNoPassengerData(text: string): void {
  const withoutTokens = text.replace(/[A-Za-z0-9_-]{16,}/g, '[token]');
  for (const secret of ['Ada', 'Lovelace', '7700900555', 'ada@example.org', 'Rose Lane', 'Ring']) {
    expect(withoutTokens).not.toContain(secret);
  }
}

describe('GET /o/{code}', () => {
  it('answers the offer and its job, with areas only and the driver API calls', async () => {
    const o = await insertOffer({});
    const res = await get(code(o.offerId));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('vary')).toMatch(/Accept/i);
    expect(res.headers.get('ratelimit-policy')).toContain('per-ip');
    const raw = await res.text();
    expect(JSON.parse(raw)).toEqual({
      offer: { state: 'offered', expiresAt: o.expiresAt.toISOString(), tier: 1 },
      job: {
        bookingReference: o.reference,
        pickupArea: 'Manchester Piccadilly station',
        // The address's district and post town, found at its point: nothing of its text.
        dropoffArea: 'Leeds LS1',
        pickupTime: o.pickupTime.toISOString(),
        passengers: 2,
        vehicleType: 'saloon',
        fareGBP: 28.4,
        paymentMethod: 'cash',
        meetAndGreet: false,
      },
      accept: { method: 'POST', path: `/api/public/v1/jobs/${o.reference}/accept`, auth: 'driver bearer token' },
      decline: { method: 'POST', path: `/api/public/v1/jobs/${o.reference}/decline`, auth: 'driver bearer token' },
    });
    expectNoPassengerData(raw);
  });

  it('says whether the passenger booked meet and greet: a charged meet_and_greet rule', async () => {
    const airport: StoredPlace = {
      query: 'Manchester Airport',
      name: 'Manchester Airport',
      kind: 'airport',
      lat: 53.365,
      lng: -2.2727,
    };
    const met = await insertOffer({
      pickup: airport,
      farePence: 6260,
      appliedRules: [
        { code: 'flag_fall', description: 'Flag fall', amountPence: 3580 },
        { code: 'meet_and_greet', description: 'Meet and greet in the arrivals hall', amountPence: 2500 },
        { code: 'airport_pickup', description: 'Terminal pick-up', amountPence: 180 },
      ],
    });
    const json = (await (await get(code(met.offerId))).json()) as { job: Record<string, unknown> };
    expect(json.job).toMatchObject({ pickupArea: 'Manchester Airport', fareGBP: 62.6, meetAndGreet: true });
    const page = await get(code(met.offerId), 'text/html');
    expect(await page.text()).toContain(
      '<dt>Meet and greet</dt><dd>Meet the passenger in arrivals with a name board</dd>',
    );
    const without = await insertOffer({
      appliedRules: [{ code: 'flag_fall', description: 'Flag fall', amountPence: 2840 }],
    });
    expect(((await (await get(code(without.offerId))).json()) as typeof json).job.meetAndGreet).toBe(false);
    expect(await (await get(code(without.offerId), 'text/html')).text()).not.toMatch(/meet and greet|name board/i);
  });

  it('answers JSON to a caller that accepts anything', async () => {
    const o = await insertOffer({});
    const res = await get(code(o.offerId), '*/*');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('reads an open offer past its expiry as expired, and shows an answered one as it is', async () => {
    const late = await insertOffer({ expiresAt: new Date(Date.now() - 1000) });
    expect(((await (await get(code(late.offerId))).json()) as { offer: { state: string } }).offer.state).toBe(
      'expired',
    );
    const taken = await insertOffer({ state: 'accepted', farePence: null });
    const body = (await (await get(code(taken.offerId))).json()) as {
      offer: { state: string };
      job: { fareGBP: null };
    };
    expect(body.offer.state).toBe('accepted');
    expect(body.job.fareGBP).toBeNull();
  });

  it('is 404 not_found for a forged, altered, truncated or unknown code', async () => {
    const o = await insertOffer({});
    const good = code(o.offerId);
    const forged = offerCode(o.offerId, Buffer.alloc(32, 1));
    const altered = `${good.slice(0, 31)}${good.endsWith('A') ? 'B' : 'A'}`;
    const unknown = code(uuidv7()); // a genuine code for an offer that does not exist
    for (const c of [forged, altered, good.slice(0, 20), unknown, 'x', '%3Cscript%3E']) {
      const res = await get(c);
      expect(res.status, c).toBe(404);
      const body = (await res.json()) as { error: { code: string; message: string }; requestId: string };
      expect(body.error.code).toBe('not_found');
      expect(body.requestId).toMatch(/^req_/);
      expect(JSON.stringify(body)).not.toContain(o.reference);
    }
  });

  it('answers a browser the driver offer page, with everything escaped', async () => {
    const hostile = (name: string): StoredPlace => ({ query: 'x', name, kind: 'station', lat: 53.48, lng: -2.24 });
    const o = await insertOffer({
      pickup: hostile(`<img src=x onerror=alert(1)>"&'Lime St'`),
      dropoff: hostile('<script>alert(1)</script>'),
    });
    const res = await get(code(o.offerId), 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('vary')).toMatch(/Accept/i);
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/);
    // Only our own countdown script; nothing the places carried.
    expect(html).not.toMatch(/<img|<script>/i);
    // A station is named as one; past 40 characters the area is cut.
    expect(html).toContain('<dd>&lt;img src=x onerror=alert(1)&gt;&quot;&amp;&#39;Lime S...</dd>');
    expect(html).toContain('<dd>&lt;script&gt;alert(1)&lt;/script&gt; station</dd>');
    expect(html).toContain(`Job offer ${o.reference}`);
    expect(html).toContain(`<time datetime="${o.pickupTime.toISOString()}">`);
    // Not signed in: the driver signs in with their token to accept or decline (website-driver.int.test.ts).
    expect(html).toContain('<form method="post" action="/driver/sign-in">');
    expectNoPassengerData(html);
  });

  it('is in the OpenAPI document as a public operation', async () => {
    const doc = (await (await fetch(`${http.url}/api/public/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security: unknown[]; responses: Record<string, unknown> }>>;
    };
    const op = doc.paths['/o/{code}']?.get;
    expect(op?.security[0]).toEqual({});
    expect(Object.keys(op?.responses ?? {})).toEqual(expect.arrayContaining(['200', '404', '429']));
  });
});

describe('the job card by SMS and WhatsApp', () => {
  it('sends the card text as is, on both channels, to the driver number', async () => {
    const o = await insertOffer({});
    const text = jobCardText({
      reference: o.reference,
      pickupArea: pickupArea(PICCADILLY),
      dropoffArea: pickupArea({ ...ADA_HOME, postcodeDistrict: 'LS1' }),
      pickupTime: o.pickupTime,
      farePence: 2840,
      passengers: 2,
      vehicleType: 'saloon',
      expiresAt: o.expiresAt,
      link: offerLink(env.config.publicBaseUrls[0] as string, code(o.offerId)),
      tier: 1,
      paymentMethod: 'cash',
    });
    expect(text).toContain('£28.40');
    expectNoPassengerData(text);

    const ids = await env.rt.db.transaction(async (trx) => {
      const out: string[] = [];
      for (const channel of ['sms', 'whatsapp'] as const) {
        out.push(
          await queueMessage(trx, {
            channel,
            recipient: DRIVER_PHONE,
            body: text,
            purpose: 'job_card',
            bookingId: o.bookingId,
            driverId,
          }),
        );
      }
      return out;
    });
    // The runtime holds everything a handler may use, as startRoles gives it.
    const ctx: WorkerContext = env.rt;
    for (const messageId of ids) await sendMessage({ messageId }, ctx);

    const seen = twilio.requests.filter((r) => r.form.Body === text);
    expect(seen).toHaveLength(2);
    // Path, basic auth and form encoding of these requests: notify.int.test.ts.
    expect(seen.map((r) => ({ To: r.form.To, From: r.form.From }))).toEqual([
      { To: DRIVER_PHONE, From: '+447700900111' },
      { To: `whatsapp:${DRIVER_PHONE}`, From: 'whatsapp:+447700900222' },
    ]);
    // The link in the delivered text opens the offer.
    const link = /https?:\/\/\S+\/o\/([A-Za-z0-9_-]{32})$/.exec(seen[0]?.form.Body ?? '');
    expect(link?.[1]).toBe(code(o.offerId));
    expect((await get(link?.[1] as string)).status).toBe(200);

    const rows = await env.rt.db('outbound_messages').whereIn('id', ids).orderBy('channel');
    expect(rows.map((r) => [r.channel, r.state, r.body === text, r.driver_id])).toEqual([
      ['sms', 'sent', true, driverId],
      ['whatsapp', 'sent', true, driverId],
    ]);
  });
});
