import { randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AREA_UNKNOWN,
  hasMeetAndGreet,
  JOB_CARD_MAX,
  type JobCard,
  jobCardText,
  londonWhen,
  OFFER_CODE_LENGTH,
  offerCode,
  offerLink,
  pickupArea,
  verifyOfferCode,
} from '../shared/domain/dispatch/job-card.ts';
import { heldJob, offeredJob } from '../shared/domain/dispatch/job-view.ts';

const KEY = Buffer.alloc(32, 7);
const OTHER_KEY = Buffer.alloc(32, 8);
const OFFER = '01938a7e-5c2b-7d4e-9f10-123456789abc';
const BASE = 'https://directtaxi.network';

describe('offer codes', () => {
  it('round-trips the offer id and stays short', () => {
    const code = offerCode(OFFER, KEY);
    expect(code).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(code).toHaveLength(32);
    expect(OFFER_CODE_LENGTH).toBe(32);
    expect(verifyOfferCode(code, KEY)).toBe(OFFER);
    expect(offerLink(BASE, code)).toBe(`${BASE}/o/${code}`);
    expect(offerLink(`${BASE}/`, code)).toBe(`${BASE}/o/${code}`);
    // Upper-case input ids come back in the canonical lower case.
    expect(verifyOfferCode(offerCode(OFFER.toUpperCase(), KEY), KEY)).toBe(OFFER);
  });

  it('round-trips any UUID', () => {
    fc.assert(
      fc.property(fc.uuid(), (id) => {
        const code = offerCode(id, KEY);
        expect(code).toHaveLength(OFFER_CODE_LENGTH);
        expect(verifyOfferCode(code, KEY)).toBe(id.toLowerCase());
      }),
    );
  });

  it('gives different codes for different offers', () => {
    const codes = new Set(Array.from({ length: 200 }, () => offerCode(randomUUID(), KEY)));
    expect(codes.size).toBe(200);
    // Neighbouring ids (v7 ids share their time prefix) differ in the MAC part too.
    const a = offerCode('01938a7e-5c2b-7d4e-9f10-123456789abc', KEY);
    const b = offerCode('01938a7e-5c2b-7d4e-9f10-123456789abd', KEY);
    expect(a.slice(22)).not.toBe(b.slice(22));
  });

  it('refuses a code made with another key', () => {
    expect(verifyOfferCode(offerCode(OFFER, OTHER_KEY), KEY)).toBeNull();
  });

  it('refuses every single-character change', () => {
    const code = offerCode(OFFER, KEY);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (let i = 0; i < code.length; i++) {
      for (const c of ['A', 'z', '-', alphabet[(alphabet.indexOf(code[i] as string) + 1) % 64] as string]) {
        if (c === code[i]) continue;
        const tampered = code.slice(0, i) + c + code.slice(i + 1);
        expect(verifyOfferCode(tampered, KEY), tampered).toBeNull();
      }
    }
  });

  it('refuses a code whose id was swapped for another offer', () => {
    const mine = offerCode(OFFER, KEY);
    const other = offerCode(randomUUID(), KEY);
    expect(verifyOfferCode(other.slice(0, 22) + mine.slice(22), KEY)).toBeNull();
  });

  it('answers null, never throws, for short, long and garbage codes', () => {
    const code = offerCode(OFFER, KEY);
    const bad: unknown[] = [
      '',
      code.slice(0, -1),
      code.slice(0, 22),
      `${code}A`,
      `${code}=`,
      `${code.slice(0, 5)}+${code.slice(6)}`,
      `${code.slice(0, 31)}/`,
      ' '.repeat(32),
      `${code.slice(0, 31)}\n`,
      '../../../../etc/passwd',
      'é'.repeat(32),
      '%00'.repeat(11),
      'x'.repeat(10_000),
      null,
      undefined,
      42,
      {},
    ];
    for (const b of bad) expect(verifyOfferCode(b as string, KEY)).toBeNull();
    expect(verifyOfferCode(code, 'not a buffer' as unknown as Buffer)).toBeNull();
    fc.assert(fc.property(fc.string({ maxLength: 64 }), (s) => verifyOfferCode(s, KEY) === null));
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 24, maxLength: 24 }),
        (bytes) =>
          // Random bytes of the right length are a valid-looking code with a wrong MAC.
          verifyOfferCode(Buffer.from(bytes).toString('base64url'), randomBytes(32)) === null,
      ),
    );
  });

  it('throws on an offer id that is not a UUID (a programming error)', () => {
    expect(() => offerCode('not-a-uuid', KEY)).toThrow(TypeError);
  });
});

describe('pickupArea', () => {
  it('keeps the name of a station, airport or named place', () => {
    // A station is named as one (the rail data names many by their town alone: "Leeds").
    expect(pickupArea({ name: 'Manchester Piccadilly', kind: 'station', postcodeDistrict: 'M1' })).toBe(
      'Manchester Piccadilly station',
    );
    expect(pickupArea({ name: 'Leeds', kind: 'station' })).toBe('Leeds station');
    expect(pickupArea({ name: 'London Heathrow Airport, Terminal 5', kind: 'airport' })).toBe(
      'London Heathrow Airport, Terminal 5',
    );
    expect(pickupArea({ name: 'Leeds', kind: 'place' })).toBe('Leeds');
    // A map provider's formatted name: the country goes, then trailing parts until it fits.
    expect(pickupArea({ name: 'Manchester Airport (MAN), Manchester M90 1QX, UK', kind: 'airport' })).toBe(
      'Manchester Airport (MAN)',
    );
    expect(pickupArea({ name: 'A'.repeat(60), kind: 'place' })).toBe(`${'A'.repeat(37)}...`);
    expect(pickupArea({ name: 'Bristol Temple Meads\nStation\u202e', kind: 'station' })).toBe(
      'Bristol Temple Meads Station',
    );
  });

  it('gives only the postcode district and post town of an address or postcode', () => {
    const address = { name: 'Ada Lovelace, Flat 4, 12 Rose Lane, Leeds LS1 4AP', kind: 'address' };
    expect(pickupArea(address)).toBe('LS1');
    expect(pickupArea({ ...address, postcodeDistrict: 'LS1', town: 'Leeds' })).toBe('Leeds LS1');
    expect(pickupArea({ name: 'SW1A 2AA', kind: 'postcode' })).toBe('SW1A');
    expect(pickupArea({ name: 'm1', kind: 'postcode' })).toBe('M1');
    // The stored district wins over a postcode typed in the text.
    expect(pickupArea({ name: '1 High St, EC1A 1BB', kind: 'address', postcodeDistrict: 'EC1A' })).toBe('EC1A');
  });

  it('finds the district and town at the point when the place carries none', () => {
    const lookupDistrict = (lat: number, lng: number) =>
      lat === 53.48 && lng === -2.24 ? { district: 'M1', town: 'Manchester' } : null;
    expect(
      pickupArea({ name: '10 Piccadilly Gardens', kind: 'address', lat: 53.48, lng: -2.24 }, { lookupDistrict }),
    ).toBe('Manchester M1');
    // A district typed in the text keeps its own; the town of a different nearest district is not borrowed.
    expect(
      pickupArea({ name: '5 Oxford Rd, M13 9PL', kind: 'address', lat: 53.48, lng: -2.24 }, { lookupDistrict }),
    ).toBe('M13');
    expect(pickupArea({ name: 'Somewhere', kind: 'address', lat: 0, lng: 0 }, { lookupDistrict })).toBe(AREA_UNKNOWN);
  });

  it('never shows address text when there is no district or town', () => {
    expect(pickupArea({ name: "Ada's house, 12 Rose Lane", kind: 'address' })).toBe(AREA_UNKNOWN);
    expect(pickupArea({ name: '12 Rose Lane', kind: 'something-new' })).toBe(AREA_UNKNOWN);
    expect(pickupArea({ name: '', kind: 'station' })).toBe(AREA_UNKNOWN);
    expect(pickupArea({ name: 'x', kind: 'address', postcodeDistrict: 'not a district' })).toBe(AREA_UNKNOWN);
  });
});

describe('jobCardText', () => {
  const card = (over: Partial<JobCard> = {}): JobCard => ({
    reference: 'DTN-7K3F9Q',
    pickupArea: 'Manchester Piccadilly',
    dropoffArea: 'Manchester Airport',
    pickupTime: new Date('2026-12-05T14:30:00Z'),
    farePence: 2840,
    passengers: 2,
    vehicleType: 'saloon',
    expiresAt: new Date('2026-12-05T14:00:45Z'),
    link: offerLink(BASE, offerCode(OFFER, KEY)),
    tier: 1,
    paymentMethod: 'cash',
    ...over,
  });
  const NOW = new Date('2026-12-05T14:00:00Z');
  /** The longest card a job makes: long areas, an operator's long reference, a long base URL. */
  const LONG_AREA = 'Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch Railway Station, Anglesey, Wales';
  const longestCard = (over: Partial<JobCard> = {}) =>
    card({
      reference: 'ABCDE-7K3F9Q',
      tier: 3,
      pickupArea: LONG_AREA,
      dropoffArea: LONG_AREA,
      vehicleType: 'wav',
      paymentMethod: 'bank_transfer',
      farePence: 123456,
      passengers: 8,
      link: offerLink('https://book.a-rather-long-connected-domain.example.co.uk', offerCode(OFFER, KEY)),
      ...over,
    });

  it('carries the job facts and the link', () => {
    const text = jobCardText(card(), NOW);
    expect(text).toBe(
      `DTN job DTN-7K3F9Q: Manchester Piccadilly to Manchester Airport, Sat 5 Dec 14:30, 2 pax, saloon, ` +
        `fare £28.40 (cash to you, 0% commission). Accept within 45s: ${BASE}/o/${offerCode(OFFER, KEY)}`,
    );
    expect(text.length).toBeLessThanOrEqual(JOB_CARD_MAX);
    // Two SMS segments at most (153 GSM-7 characters each) for a typical card.
    expect(text.length).toBeLessThanOrEqual(306);
  });

  it('uses only GSM-7 characters of its own, so an SMS is not sent as UCS-2', () => {
    const gsm7 = /^[@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&'()*+,\-./0-9:;<=>?¡A-ZÄÖÑÜ§¿a-zäöñüà]*$/;
    expect(jobCardText(card(), NOW)).toMatch(gsm7);
    expect(jobCardText(card({ tier: 2, vehicleType: 'wav', paymentMethod: 'pay_link' }), NOW)).toMatch(gsm7);
  });

  it('names the tier, vehicle, payment and an unpriced fare', () => {
    expect(jobCardText(card({ tier: 2 }), NOW)).toMatch(/^DTN network job DTN-7K3F9Q: /);
    expect(jobCardText(card({ tier: 3 }), NOW)).toMatch(/^DTN operator job /);
    expect(jobCardText(card({ vehicleType: '6seater' }), NOW)).toContain(', 6-seater, ');
    expect(jobCardText(card({ paymentMethod: 'card' }), NOW)).toContain('fare £28.40 (card to you, 0% commission)');
    expect(jobCardText(card({ paymentMethod: undefined }), NOW)).toContain('(paid to you, 0% commission)');
    expect(jobCardText(card({ farePence: null }), NOW)).toContain('fare in app (0% commission)');
    expect(jobCardText(card({ expiresAt: new Date('2026-12-05T14:10:00Z') }), NOW)).toContain('Accept by 14:10:');
  });

  it('carries no passenger name, phone or address, given areas from pickupArea', () => {
    const pickup = { name: 'Ada Lovelace, 12 Rose Lane, Leeds LS1 4AP +447700900123', kind: 'address' };
    const text = jobCardText(
      card({ pickupArea: pickupArea(pickup), dropoffArea: pickupArea({ name: 'Leeds', kind: 'place' }) }),
      NOW,
    );
    expect(text).toContain(': LS1 to Leeds,');
    expect(text).not.toMatch(/Ada|Lovelace|Rose Lane|4AP|7700900123/);
  });

  it('stays within 320 characters with long areas and a long base URL', () => {
    const text = jobCardText(longestCard(), NOW);
    expect(text.length).toBeLessThanOrEqual(JOB_CARD_MAX);
    expect(text).toContain(offerCode(OFFER, KEY));
    expect(text).toContain('£1234.56');
  });

  it('says meet & greet after the vehicle when the passenger booked it, and nothing of it otherwise', () => {
    const text = jobCardText(card({ meetAndGreet: true }), NOW);
    expect(text).toBe(
      `DTN job DTN-7K3F9Q: Manchester Piccadilly to Manchester Airport, Sat 5 Dec 14:30, 2 pax, saloon, meet & greet, ` +
        `fare £28.40 (cash to you, 0% commission). Accept within 45s: ${BASE}/o/${offerCode(OFFER, KEY)}`,
    );
    expect(text.length).toBeLessThanOrEqual(306);
    expect(jobCardText(card({ meetAndGreet: true, farePence: null }), NOW)).toContain(
      ', saloon, meet & greet, fare in app (0% commission).',
    );
    for (const without of [card(), card({ meetAndGreet: false })]) {
      expect(jobCardText(without, NOW)).not.toMatch(/meet|greet|&/i);
    }
    // `&` is in the GSM-7 basic set: the card is still sent as GSM-7, not UCS-2.
    const gsm7 = /^[@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&'()*+,\-./0-9:;<=>?¡A-ZÄÖÑÜ§¿a-zäöñüà]*$/;
    expect(text).toMatch(gsm7);
  });

  it('keeps meet & greet and stays within 320 characters with long areas and a long base URL', () => {
    const longCard = longestCard({ meetAndGreet: true });
    const text = jobCardText(longCard, NOW);
    expect(text.length).toBeLessThanOrEqual(JOB_CARD_MAX);
    expect(text).toContain(', 8 pax, wheelchair accessible, meet & greet, fare £1234.56 (bank transfer to you,');
    expect(text).toContain(offerCode(OFFER, KEY));
    // The areas gave way to it: shorter than on the same card without meet and greet.
    const without = jobCardText({ ...longCard, meetAndGreet: false }, NOW);
    expect(without.length).toBeLessThanOrEqual(JOB_CARD_MAX);
    expect(text.indexOf(' to ')).toBeLessThan(without.indexOf(' to '));
  });

  it('cleans control characters out of the areas', () => {
    const text = jobCardText(card({ pickupArea: 'Leeds\nReply STOP\u0000' }), NOW);
    expect(text).not.toMatch(/\p{Cc}/u);
    expect(text).toContain('Leeds Reply STOP to');
  });

  it('gives UK time across GMT and BST', () => {
    // Winter: GMT (UTC+0).
    expect(londonWhen(new Date('2026-12-05T14:30:00Z'))).toBe('Sat 5 Dec 14:30');
    // Summer: BST (UTC+1).
    expect(londonWhen(new Date('2026-07-04T13:30:00Z'))).toBe('Sat 4 Jul 14:30');
    // The clocks go forward at 01:00 UTC on Sunday 29 March 2026.
    expect(londonWhen(new Date('2026-03-29T00:59:00Z'))).toBe('Sun 29 Mar 00:59');
    expect(londonWhen(new Date('2026-03-29T01:00:00Z'))).toBe('Sun 29 Mar 02:00');
    // And back at 01:00 UTC on Sunday 25 October 2026: 01:30 happens twice.
    expect(londonWhen(new Date('2026-10-25T00:30:00Z'))).toBe('Sun 25 Oct 01:30');
    expect(londonWhen(new Date('2026-10-25T01:30:00Z'))).toBe('Sun 25 Oct 01:30');
    // Midnight is 00, not 24; a UTC evening in summer is the next day in London.
    expect(londonWhen(new Date('2026-06-30T23:15:00Z'))).toBe('Wed 1 Jul 00:15');
    expect(jobCardText(card({ pickupTime: new Date('2026-07-04T13:30:00Z') }), NOW)).toContain(', Sat 4 Jul 14:30, ');
  });
});

describe('meet and greet from the applied rules', () => {
  const rules = (...codes: string[]) => codes.map((code) => ({ code, description: code, amountPence: 100 }));

  it('is a charged meet_and_greet rule, in either amount spelling, and nothing else', () => {
    expect(hasMeetAndGreet(rules('flag_fall', 'distance', 'airport_pickup', 'meet_and_greet'))).toBe(true);
    expect(hasMeetAndGreet([{ code: 'meet_and_greet', description: 'Meet and greet', amountGBP: 25 }])).toBe(true);
    expect(hasMeetAndGreet(JSON.stringify(rules('meet_and_greet')))).toBe(true);
    // Asked for away from an airport: not charged, so no rule (a warning on the quote instead).
    expect(hasMeetAndGreet(rules('flag_fall', 'distance'))).toBe(false);
    // A partner's own fare replaces the rules.
    expect(hasMeetAndGreet(rules('partner_fare'))).toBe(false);
    for (const odd of [
      [],
      null,
      undefined,
      '',
      'not json',
      '{"code":"meet_and_greet"}',
      42,
      [null, 'meet_and_greet'],
    ]) {
      expect(hasMeetAndGreet(odd)).toBe(false);
    }
    expect(hasMeetAndGreet([{ code: 'MEET_AND_GREET' }, { description: 'meet_and_greet' }])).toBe(false);
  });

  it('is in the job as the feed and the booking.amended webhook show it', () => {
    const columns = {
      pickup: { name: 'Manchester Airport', lat: 53.365, lng: -2.2727 },
      dropoff: { name: 'Manchester Piccadilly', lat: 53.4774, lng: -2.2309 },
      pickup_time: new Date('2026-12-05T14:30:00Z'),
      passengers: 2,
      vehicle_type: 'saloon',
      fare_pence: 6260,
      payment_method: 'pay_link',
      passenger_name: 'Ada Lovelace',
      passenger_phone: null,
    };
    expect(offeredJob({ ...columns, applied_rules: rules('flag_fall', 'meet_and_greet') }).meetAndGreet).toBe(true);
    expect(heldJob({ ...columns, applied_rules: rules('flag_fall', 'meet_and_greet') }).meetAndGreet).toBe(true);
    expect(offeredJob({ ...columns, applied_rules: rules('flag_fall') }).meetAndGreet).toBe(false);
    expect(heldJob(columns).meetAndGreet).toBe(false);
    // How the passenger pays, as the job card says it.
    expect(offeredJob(columns).paymentMethod).toBe('pay_link');
  });
});
