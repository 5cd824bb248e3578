import { anyCaseKey } from '../../shared/domain/any-case.ts';
import { normaliseEmail } from '../../shared/domain/email-acceptance.ts';
import { AppError, detailsText, type ErrorDetail } from '../../shared/errors.ts';
import { PAYMENT_SPELLINGS } from '../../shared/schemas/bookings.ts';
import { normalisePhone } from '../../shared/services/bookings.ts';

/**
 * One field's spellings (CONTRACT.md section 0: where SPEC.md shows a second spelling, both
 * are accepted), and how their values are compared: as they mean, not as they are typed.
 */
interface Spelling {
  /** The field's spellings; the camelCase one (no underscore), where the route takes it, is the name shared code uses. */
  names: readonly string[];
  /** The camelCase name shared code uses, where the route takes none (the alias routes' phone). */
  camel?: string;
  /** What a value means, for comparing two spellings' values. Never throws. */
  meaning?: (value: unknown) => unknown;
}

const text = (v: unknown) =>
  typeof v === 'string' ? v.normalize('NFKC').trim().toLowerCase().replace(/\s+/g, ' ') : v;
const phone = (v: unknown) => {
  if (typeof v !== 'string') return v;
  try {
    return normalisePhone(v);
  } catch {
    return text(v);
  }
};
const instant = (v: unknown) => {
  const at = typeof v === 'string' ? Date.parse(v) : Number.NaN;
  return Number.isNaN(at) ? text(v) : Math.floor(at / 1000);
};
const vehicle = (v: unknown) => (typeof v === 'string' ? anyCaseKey(v.normalize('NFKC')) : v);
const email = (v: unknown) => (typeof v === 'string' ? normaliseEmail(v.normalize('NFKC')) : v);
const method = (v: unknown) =>
  typeof v === 'string' && Object.hasOwn(PAYMENT_SPELLINGS, v)
    ? PAYMENT_SPELLINGS[v as keyof typeof PAYMENT_SPELLINGS]
    : v;

/** Every field the booking and quote routes take in two spellings. */
export const SPELLINGS = {
  quoteId: { names: ['quote_id', 'quoteId'], meaning: text },
  passengerName: { names: ['passengerName', 'passenger_name'], meaning: text },
  passengerEmail: { names: ['passengerEmail', 'passenger_email'], meaning: email },
  aliasPhone: { names: ['passenger_phone_whatsapp', 'passenger_phone'], camel: 'passengerPhone', meaning: phone },
  v1Phone: { names: ['passengerPhone', 'passenger_phone', 'passenger_phone_whatsapp'], meaning: phone },
  departAt: { names: ['departAt', 'depart_at'], meaning: instant },
  vehicleType: { names: ['vehicleType', 'vehicle_type'], meaning: vehicle },
  meetAndGreet: { names: ['meetAndGreet', 'meet_and_greet'] },
  paymentMethod: { names: ['paymentMethod', 'payment_method'], meaning: method },
  passengers: { names: ['passengers', 'passenger_count'] },
  flightNumber: {
    names: ['flightNumber', 'flight_number'],
    meaning: (v) => (typeof v === 'string' ? anyCaseKey(v) : v),
  },
} as const satisfies Record<string, Spelling>;

/**
 * The snake_case spellings of each camelCase name, from SPELLINGS, in its order: for naming a
 * field in an error as the caller spelt it (`pointersAsSent` in bookings.ts).
 */
export const SNAKE_SPELLINGS: Readonly<Record<string, readonly string[]>> = (() => {
  const out: Record<string, string[]> = {};
  for (const group of Object.values(SPELLINGS) as Spelling[]) {
    const camel = group.camel ?? group.names.find((n) => !n.includes('_'));
    if (!camel) continue;
    const snakes = out[camel] ?? [];
    for (const n of group.names) if (n.includes('_') && !snakes.includes(n)) snakes.push(n);
    out[camel] = snakes;
  }
  return out;
})();

/**
 * A field sent in both its spellings with values that mean different things ("vehicleType":
 * "saloon" beside "vehicle_type": "mpv") is 400 `invalid_input` naming each spelling: which one
 * the caller meant cannot be known, and booking either could be the wrong ride. The same value
 * in both, however typed (case, spacing, `07700 900123` beside `+447700900123`,
 * `cash_to_driver` beside `cash`), is one field.
 */
export function assertSpellingsAgree(body: object, spellings: readonly Spelling[]): void {
  const sent = body as Record<string, unknown>;
  const details: ErrorDetail[] = [];
  for (const { names, meaning = text } of spellings) {
    const given = names.filter((n) => sent[n] !== undefined);
    if (given.length < 2) continue;
    const meanings = new Set(given.map((n) => JSON.stringify(meaning(sent[n]))));
    if (meanings.size < 2) continue;
    for (const n of given) {
      const others = given
        .filter((o) => o !== n)
        .map((o) => `/${o}`)
        .join(' and ');
      details.push({ field: `/${n}`, problem: `says otherwise than ${others}: send one of them` });
    }
  }
  if (details.length > 0) {
    throw new AppError('invalid_input', `Two spellings of one field disagree: ${detailsText(details)}.`, details);
  }
}

/**
 * The body of a snake_case route with each of these fields' snake_case spelling filled from its
 * camelCase one when only that was sent (an assistant that learnt the v1 names): the handler
 * then reads one spelling. Run after `assertSpellingsAgree`, so a field sent both ways means
 * one thing. The body as sent is kept for naming fields in errors (`pointersAsSent`).
 */
export function snakeFilled<T extends object>(body: T, spellings: readonly Spelling[]): T {
  const out = { ...body } as Record<string, unknown>;
  for (const { names } of spellings) {
    const snake = names.find((n) => n.includes('_'));
    const camel = names.find((n) => !n.includes('_'));
    if (snake && camel && out[snake] === undefined && out[camel] !== undefined) out[snake] = out[camel];
  }
  return out as T;
}
