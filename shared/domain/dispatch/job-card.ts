/**
 * The job card: the SMS and WhatsApp text a driver receives when a booking is offered to them
 * (SPEC.md section 6, "Job card"), and the short link in it that opens the offer
 * (`GET /o/{code}`, api/routes/offers.ts). Pure: no I/O, no clock unless passed, no config.
 *
 * Privacy: SMS is not a private channel (it sits on lock screens, in carrier logs and in the
 * provider's message log), so a card carries the job's AREAS only: never the passenger's
 * name, phone or e-mail, nor a house or street address. The driver sees those in the driver
 * app once they accept.
 *
 * Size: the text stays within 320 characters and uses only characters of the GSM-7 alphabet
 * that we write ourselves (`to`, not an arrow; `...`, not an ellipsis; `&` of `meet & greet` is
 * GSM-7): one non-GSM character would switch the whole message to UCS-2, whose segments hold 70
 * characters instead of 153, and each segment is billed to the driver (SPEC.md 2.10, £0.02 per
 * SMS).
 */

import { createHmac, timingSafeEqual } from 'node:crypto';
import { findPostcode, OUTWARD_RE } from '../../geo/text.ts';
import { repeatedHourZone } from '../london-zone.ts';
import { placeLabel } from '../place-label.ts';

// ----- the short link -----

/** Bytes of HMAC-SHA256 kept in a code: 64 bits, so a forged code is a 1 in 2^64 guess. */
const MAC_BYTES = 8;
const ID_BYTES = 16;
/** 24 bytes as base64url: exactly 32 characters, no padding, every string has one decoding. */
export const OFFER_CODE_LENGTH = ((ID_BYTES + MAC_BYTES) * 4) / 3;
const CODE_RE = new RegExp(`^[A-Za-z0-9_-]{${OFFER_CODE_LENGTH}}$`);
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Domain separation: the same key also signs tracking links (`tracking:`) and seals secrets. */
const MAC_DOMAIN = 'offer-link:';

function macOf(id: Buffer, key: Buffer): Buffer {
  return createHmac('sha256', key).update(MAC_DOMAIN).update(id).digest().subarray(0, MAC_BYTES);
}

/**
 * The code in an offer's short link: the offer id (a UUID, 16 bytes) followed by the first 8
 * bytes of HMAC-SHA256(key, "offer-link:" + id bytes), base64url: 32 characters. Needs no
 * storage; only the service (holding `dataEncryptionKey`) can make one. Throws a TypeError
 * when `offerId` is not a UUID (a programming error, not input).
 */
export function offerCode(offerId: string, key: Buffer): string {
  if (!UUID_RE.test(offerId)) throw new TypeError('offerCode: the offer id must be a UUID');
  const id = Buffer.from(offerId.replace(/-/g, ''), 'hex');
  return Buffer.concat([id, macOf(id, key)]).toString('base64url');
}

/**
 * The offer id (lower-case UUID) a code was made for, or null when the code is malformed,
 * truncated, altered or made with another key. The MAC is compared in constant time. Never throws.
 */
export function verifyOfferCode(code: string, key: Buffer): string | null {
  try {
    if (typeof code !== 'string' || !CODE_RE.test(code) || !Buffer.isBuffer(key)) return null;
    const raw = Buffer.from(code, 'base64url');
    if (raw.length !== ID_BYTES + MAC_BYTES) return null;
    const id = raw.subarray(0, ID_BYTES);
    if (!timingSafeEqual(raw.subarray(ID_BYTES), macOf(id, key))) return null;
    const hex = id.toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  } catch {
    return null;
  }
}

/** The short link itself: `${baseUrl}/o/${code}` (a trailing slash on the base is dropped). */
export function offerLink(baseUrl: string, code: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/o/${code}`;
}

// ----- areas -----

/** A stored place (the `pickup`/`dropoff` jsonb of a booking); only these fields are read. */
export interface CardPlace {
  name?: string | null;
  kind?: string | null;
  postcodeDistrict?: string | null;
  /** A post town, when the place carries one. */
  town?: string | null;
  lat?: number | null;
  lng?: number | null;
}

export interface AreaOptions {
  /**
   * The postcode district nearest a point, with its post town: lets a place stored without
   * `postcodeDistrict` or a town still show one. The API passes one built on the gazetteer's
   * `nearestDistrict`; without it only what the place itself carries is used.
   */
  lookupDistrict?: (lat: number, lng: number) => { district: string; town: string | null } | null;
}

/** Kinds whose name is a public place, safe to show as it is. */
const PUBLIC_KINDS = new Set(['station', 'airport', 'place']);
/** The longest area shown; a longer name loses trailing comma parts, then is cut. */
const AREA_MAX = 40;
/** Shown when an address gives no district and no town: the driver sees the address in the app. */
export const AREA_UNKNOWN = 'address in app';

/** Control and format characters (newlines, bidi overrides) out, whitespace collapsed. */
function clean(text: string): string {
  return text
    .replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/** At most `max` characters: whole comma parts while they fit, else a hard cut with `...`. */
function shorten(text: string, max: number): string {
  if (text.length <= max) return text;
  const parts = text.split(', ');
  while (parts.length > 1 && parts.join(', ').length > max) parts.pop();
  const joined = parts.join(', ');
  if (joined.length <= max) return joined;
  return `${joined.slice(0, Math.max(1, max - 3)).trimEnd()}...`;
}

/** An outward code ("SW1A", "M1") from a district field or a place name, else null. */
function outwardOf(text: string | null | undefined): string | null {
  if (!text) return null;
  const compact = text.replace(/\s+/g, '').toUpperCase();
  if (OUTWARD_RE.test(compact)) return compact;
  return findPostcode(text)?.outward ?? null;
}

/**
 * A coarse area for a stored place, safe for an SMS. The rule:
 * - a station, airport or named place (town, city) keeps its name: it is a public place
 *   (whitespace and control characters cleaned, a trailing ", UK" or ", United Kingdom"
 *   dropped, at most 40 characters);
 * - a postcode, an address, or any other kind gives its postcode district and post town,
 *   e.g. "Leeds LS1", "London SW1A": the district is the place's `postcodeDistrict`, else the
 *   outward code of a postcode in its name, else the district `lookupDistrict` finds at its
 *   point; the town is the place's `town`, else the post town of that same district. Nothing
 *   else of an address's text is ever shown (house numbers, streets, building names). With
 *   neither a district nor a town the area is "address in app".
 */
export function pickupArea(place: CardPlace, opts: AreaOptions = {}): string {
  const kind = place.kind ?? '';
  if (PUBLIC_KINDS.has(kind)) {
    // Named as people read it (a station as one: `placeLabel`), once cleaned.
    const name = placeLabel({ kind, name: clean(place.name ?? '').replace(/,\s*(UK|United Kingdom)$/i, '') });
    if (name !== '') return shorten(name, AREA_MAX);
  }
  let district = outwardOf(place.postcodeDistrict) ?? outwardOf(place.name);
  let town = place.town ? clean(place.town) : '';
  const { lookupDistrict } = opts;
  if (
    lookupDistrict &&
    (!district || !town) &&
    typeof place.lat === 'number' &&
    typeof place.lng === 'number' &&
    Number.isFinite(place.lat) &&
    Number.isFinite(place.lng)
  ) {
    const found = lookupDistrict(place.lat, place.lng);
    const foundDistrict = outwardOf(found?.district);
    if (foundDistrict && !district) district = foundDistrict;
    // The post town only of the district shown, never of a neighbouring one.
    if (!town && found?.town && foundDistrict === district) town = clean(found.town);
  }
  const area = [shorten(town, 30), district ?? ''].filter(Boolean).join(' ');
  return area === '' ? AREA_UNKNOWN : area;
}

// ----- the text -----

export interface JobCard {
  /** Booking reference, e.g. DTN-7K3F9Q; its prefix names the service in the text. */
  reference: string;
  pickupArea: string;
  dropoffArea: string;
  pickupTime: Date;
  farePence: number | null;
  passengers: number;
  vehicleType: string;
  expiresAt: Date;
  link: string;
  tier: 1 | 2 | 3;
  /** How the passenger pays the driver (the booking's payment_method); omitted: "paid to you". */
  paymentMethod?: string;
  /** The passenger booked (and was charged) meet and greet: `hasMeetAndGreet` of the booking's applied rules. */
  meetAndGreet?: boolean;
}

// ----- meet and greet -----

/** The applied rule that charges meet and greet (shared/domain/tariffs/engine.ts, £25 at an airport pickup). */
export const MEET_AND_GREET_RULE = 'meet_and_greet';
/** What the driver pages say of a meet and greet job ("Meet and greet: Meet the passenger ..."). */
export const MEET_AND_GREET_TEXT = 'Meet the passenger in arrivals with a name board';

/**
 * Whether a booking's `applied_rules` (jsonb: an array of `{code, description, amountPence}`,
 * or `amountGBP` as the API shows them) charge meet and greet. Asked for away from an airport it
 * is not charged, so there is no such rule and the driver is not told of it. Anything that is
 * not such an array (a missing column, a malformed row) is false. Never throws.
 */
export function hasMeetAndGreet(appliedRules: unknown): boolean {
  let rules = appliedRules;
  if (typeof rules === 'string') {
    try {
      rules = JSON.parse(rules);
    } catch {
      return false;
    }
  }
  return (
    Array.isArray(rules) &&
    rules.some((r) => typeof r === 'object' && r !== null && (r as { code?: unknown }).code === MEET_AND_GREET_RULE)
  );
}

/** One formatter for every card (building an Intl.DateTimeFormat costs far more than using one). */
const LONDON = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  weekday: 'short',
  day: 'numeric',
  month: 'short',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
});

/** "Sat 5 Dec 14:30" in UK time (GMT or BST as the date falls), assembled from parts so ICU punctuation does not leak in. */
export function londonWhen(at: Date): string {
  const p: Record<string, string> = {};
  for (const part of LONDON.formatToParts(at)) p[part.type] = part.value;
  return `${p.weekday} ${p.day} ${p.month} ${p.hour}:${p.minute}`;
}

const VEHICLE_LABELS: Record<string, string> = {
  saloon: 'saloon',
  estate: 'estate',
  executive: 'executive',
  luxury: 'luxury',
  '5seater': '5-seater',
  '6seater': '6-seater',
  '7seater': '7-seater',
  mpv: 'MPV',
  wav: 'wheelchair accessible',
};

/** How the passenger pays, as the driver reads it on the card and the offer page ("cash to you"). */
export const PAYMENT_LABELS: Record<string, string> = {
  cash: 'cash to you',
  card: 'card to you',
  pay_link: 'your pay link',
  bank_transfer: 'bank transfer to you',
  account: 'on account',
};

const TIER_LABELS: Record<1 | 2 | 3, string> = { 1: 'job', 2: 'network job', 3: 'operator job' };

/** The longest card we send: two concatenated GSM-7 segments hold 306, three 459; we aim for 2. */
export const JOB_CARD_MAX = 320;

/**
 * The job card text, e.g. `DTN job DTN-7K3F9Q: Manchester Piccadilly to Manchester Airport,
 * Sat 5 Dec 14:30, 2 pax, saloon, fare £28.40 (cash to you, 0% commission). Accept within 45s:
 * https://…/o/<code>`; a meet and greet job says so after the vehicle (`2 pax, saloon, meet &
 * greet, fare …`). Times are UK time. The areas should come from `pickupArea` (this function
 * only cleans and shortens them). "Accept within" counts from `now` to the offer's expiry. Kept
 * within 320 characters by shortening the areas when needed (never by dropping meet and greet).
 */
export function jobCardText(card: JobCard, now: Date = new Date()): string {
  const reference = clean(card.reference);
  const brand = /^([A-Z]{2,5})-/.exec(reference)?.[1];
  const tier = TIER_LABELS[card.tier] ?? 'job';
  const head = brand ? `${brand} ${tier}` : tier.charAt(0).toUpperCase() + tier.slice(1);
  const vehicle = VEHICLE_LABELS[card.vehicleType] ?? clean(card.vehicleType).slice(0, 24);
  const paid = (card.paymentMethod && PAYMENT_LABELS[card.paymentMethod]) || 'paid to you';
  const fare =
    card.farePence === null || !Number.isFinite(card.farePence)
      ? `fare in app (0% commission)`
      : `fare £${(card.farePence / 100).toFixed(2)} (${paid}, 0% commission)`;
  const seconds = Math.max(1, Math.round((card.expiresAt.getTime() - now.getTime()) / 1000));
  const accept = seconds <= 120 ? `Accept within ${seconds}s` : `Accept by ${londonWhen(card.expiresAt).slice(-5)}`;
  const pax = `${card.passengers} pax`;
  const meet = card.meetAndGreet ? 'meet & greet, ' : '';
  const build = (areaMax: number) =>
    `${head} ${reference}: ${shorten(clean(card.pickupArea), areaMax)} to ${shorten(clean(card.dropoffArea), areaMax)}, ` +
    `${londonWhen(card.pickupTime)}${repeatedHourZone(card.pickupTime)}, ${pax}, ${vehicle}, ${meet}${fare}. ${accept}: ${card.link}`;
  let text = build(AREA_MAX);
  for (let areaMax = AREA_MAX - 8; text.length > JOB_CARD_MAX && areaMax >= 8; areaMax -= 8) text = build(areaMax);
  return text;
}
