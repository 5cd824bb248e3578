import type { Request, Response } from 'express';
import { screenFields } from '../../shared/domain/content-screen.ts';
import { isWellFormedEmail } from '../../shared/domain/email-acceptance.ts';
import { placeLabel } from '../../shared/domain/place-label.ts';
import type { AppliedRule, TariffSource, VehicleType } from '../../shared/domain/tariffs/types.ts';
import { AppError } from '../../shared/errors.ts';
import { PAYMENT_SPELLINGS } from '../../shared/schemas/bookings.ts';
import { normalisePhone, type PaymentMethod, redeemQuote } from '../../shared/services/bookings.ts';
import { createQuote, isQuoteForNow } from '../../shared/services/quotes.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { bookingCaller, countedIfBooked, redeemingPassenger, screen, untilClientGone } from '../routes/bookings.ts';
import { quoteCaller } from '../routes/quotes.ts';
import { formToken, formTokenValid } from './csrf.ts';
import { escapeHtml, pageHeaders, sendPage } from './layout.ts';
import {
  PAYMENT_LABELS,
  pounds,
  sendMessagePage,
  siteCsp,
  sitePage,
  testModeNotice,
  timeElement,
  VEHICLE_LABELS,
  waitInWords,
  websiteCaller,
} from './site.ts';

/**
 * The booking page a quote's `bookingUrl` opens (`/book/{quoteId}`): the quote (route, time in
 * Europe/London, vehicle, passengers, the fixed fare with its itemised rules, expiry) and a form
 * asking only for name, mobile, e-mail and how the driver will be paid. It never asks for card
 * details. The form books through the API's own path for redeeming a quote (the content
 * screen, the v1 passenger checks, `redeemQuote` with origin `website`), so every rule of the
 * API applies and a form sent twice lands on the same booking.
 */

export const BOOK_PATH = '/book/:quoteId';
export const REQUOTE_PATH = '/book/:quoteId/requote';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A quote whose pickup is this far in the past cannot be booked (as `redeemQuote` decides). */
const PAST_SLACK_MS = 5 * 60_000;

/** The payment choices of the website: the contract's methods a passenger pays a driver with. */
const WEBSITE_PAYMENTS = ['cash', 'card', 'pay_link'] as const satisfies readonly PaymentMethod[];
type WebsitePayment = (typeof WEBSITE_PAYMENTS)[number];

/** Field limits of the API's booking schemas (shared/schemas/bookings.ts). */
const LIMITS = { name: 100, phone: 32, email: 254 } as const;

type Field = 'name' | 'phone' | 'email' | 'payment';
type FieldErrors = Partial<Record<Field, string>>;

interface FormValues {
  name: string;
  phone: string;
  email: string;
  payment: string;
}

interface QuoteRow {
  id: string;
  expires_at: Date;
  redeemed_at: Date | null;
  pickup: { query: string; name: string };
  dropoff: { query: string; name: string };
  depart_at: Date;
  created_at: Date;
  vehicle_type: string;
  passengers: number;
  meet_and_greet: boolean;
  worldwide: boolean;
  distance_miles: number;
  duration_minutes: number;
  fare_pence: number;
  applied_rules: AppliedRule[];
  tariff_source: TariffSource;
  warnings: string[];
  test_mode: boolean;
  /** Whose quote it is (an integrator's key and partner), and so whose booking it makes. */
  api_key_id: string | null;
  partner_id: string | null;
}

async function loadQuote(deps: ApiDeps, raw: string): Promise<QuoteRow | null> {
  if (!UUID.test(raw)) return null;
  const row = await deps
    .db('quotes')
    .where({ id: raw.toLowerCase() })
    .first<QuoteRow | undefined>(
      'id',
      'expires_at',
      'redeemed_at',
      'pickup',
      'dropoff',
      'depart_at',
      'created_at',
      'vehicle_type',
      'passengers',
      'meet_and_greet',
      'worldwide',
      'distance_miles',
      'duration_minutes',
      'fare_pence',
      'applied_rules',
      'tariff_source',
      'warnings',
      'test_mode',
      'api_key_id',
      'partner_id',
    );
  return row ?? null;
}

/**
 * Whose booking (and re-quote) a quote makes on this page: its key's and partner's, while the
 * key is not revoked and the partner not suspended (a suspended partner makes no booking, as
 * its key would not); else nobody's, the website's own.
 */
async function quoteOwner(deps: ApiDeps, q: QuoteRow): Promise<{ apiKeyId: string | null; partnerId: string | null }> {
  const nobody = { apiKeyId: null, partnerId: null };
  if (!q.api_key_id) return nobody;
  const key = await deps
    .db('api_keys as k')
    .leftJoin('partners as p', 'p.id', 'k.partner_id')
    .where('k.id', q.api_key_id)
    .first<{ revoked_at: Date | null; partner_id: string | null; partner_status: string | null } | undefined>(
      'k.revoked_at',
      'k.partner_id',
      'p.status as partner_status',
    );
  if (!key || key.revoked_at || (key.partner_id !== null && key.partner_status !== 'active')) return nobody;
  return { apiKeyId: q.api_key_id, partnerId: key.partner_id };
}

type Unavailable = 'expired' | 'redeemed' | 'past';

function unavailability(q: QuoteRow, now = Date.now()): Unavailable | null {
  if (q.redeemed_at) return 'redeemed';
  if (q.expires_at.getTime() <= now) return 'expired';
  if (!isQuoteForNow(q) && q.depart_at.getTime() < now - PAST_SLACK_MS) return 'past';
  return null;
}

/**
 * Until when the page books the quote: its expiry, or for a stated pickup time the end of the
 * grace after it (`unavailability`), when that comes first (a quote at 23:55 for 00:30 expires
 * the next night, but cannot be booked after 00:35).
 */
function bookableUntil(q: QuoteRow): Date {
  if (isQuoteForNow(q)) return q.expires_at;
  const pickupGrace = q.depart_at.getTime() + PAST_SLACK_MS;
  return new Date(Math.min(q.expires_at.getTime(), pickupGrace));
}

const bookAction = (quoteId: string) => `book:${quoteId}`;
const requoteAction = (quoteId: string) => `requote:${quoteId}`;
const secure = (base: string) => base.startsWith('https:');

// ---------------------------------------------------------------------------------------------
// Rendering

/**
 * A quote's warning as a passenger reads it: without the statistical codes integrators get
 * ("the pickup's local authority (E08000035)"), which mean nothing to a passenger.
 */
function forPassengers(warning: string): string {
  return warning.replace(/ \((?:[EWSN]\d{8}|unknown)\)/g, '');
}

function journey(q: QuoteRow): string[] {
  const vehicle = VEHICLE_LABELS[q.vehicle_type] ?? q.vehicle_type;
  const miles = Math.round(q.distance_miles * 10) / 10;
  return [
    '<section aria-labelledby="journey-h">',
    '<h2 id="journey-h">Your journey</h2>',
    '<dl>',
    `<dt>From</dt><dd>${escapeHtml(placeLabel(q.pickup))}</dd>`,
    `<dt>To</dt><dd>${escapeHtml(placeLabel(q.dropoff))}</dd>`,
    // A quote for "now" books a pickup when it is booked (`redeemedPickup`): not the moment it
    // was priced, which is in the past by the time the page is read.
    isQuoteForNow(q)
      ? '<dt>Pickup</dt><dd>Now: as soon as you book</dd>'
      : `<dt>Pickup</dt><dd>${timeElement(q.depart_at)} (UK time)</dd>`,
    `<dt>Vehicle</dt><dd>${escapeHtml(vehicle)}</dd>`,
    `<dt>Passengers</dt><dd>${q.passengers}</dd>`,
    `<dt>Distance</dt><dd>about ${miles} miles, ${q.duration_minutes} minutes</dd>`,
    '</dl>',
    '</section>',
  ];
}

function fare(q: QuoteRow): string[] {
  const source = q.tariff_source;
  const tariff =
    source.kind === 'council'
      ? `${source.authority} taxi tariff: ${source.tariff} (in force from ${source.asOf}).`
      : source.kind === 'default'
        ? `${source.authority}: ${source.tariff}.`
        : `The approved rates of ${source.authority}: ${source.tariff}.`;
  return [
    '<section aria-labelledby="fare-h">',
    `<h2 id="fare-h">Fixed fare: <span class="fare">${escapeHtml(pounds(q.fare_pence))}</span></h2>`,
    '<table>',
    '<caption>How the fare is made up</caption>',
    '<tbody>',
    ...q.applied_rules.map(
      (r) => `<tr><th scope="row">${escapeHtml(r.description)}</th><td>${escapeHtml(pounds(r.amountPence))}</td></tr>`,
    ),
    '</tbody>',
    `<tfoot><tr><th scope="row">Total, paid to your driver</th><td>${escapeHtml(pounds(q.fare_pence))}</td></tr></tfoot>`,
    '</table>',
    `<p class="note">${escapeHtml(tariff)} The fare is fixed: it does not change with traffic. We take no commission.</p>`,
    ...(q.warnings.length > 0
      ? ['<ul class="note">', ...q.warnings.map((w) => `<li>${escapeHtml(forPassengers(w))}</li>`), '</ul>']
      : []),
    `<p>This quote can be booked until ${timeElement(bookableUntil(q))} (UK time).</p>`,
    '</section>',
  ];
}

interface TextField {
  id: Exclude<Field, 'payment'>;
  label: string;
  hint: string;
  type: 'text' | 'tel' | 'email';
  autocomplete: string;
  inputmode?: string;
}

const TEXT_FIELDS: TextField[] = [
  { id: 'name', label: 'Your name', hint: 'So your driver knows who to look for.', type: 'text', autocomplete: 'name' },
  {
    id: 'phone',
    label: 'Mobile number',
    hint: 'Your driver calls or texts this number. For example 07700 900123 or +44 7700 900123.',
    type: 'tel',
    autocomplete: 'tel',
    inputmode: 'tel',
  },
  {
    id: 'email',
    label: 'E-mail address',
    hint: 'We e-mail your confirmation with the link to track or cancel the booking.',
    type: 'email',
    autocomplete: 'email',
    inputmode: 'email',
  },
];

/** A field: its label, hint, error (right above the input, and named by aria-describedby), and the input with what was typed. */
function textField(f: TextField, value: string, error: string | undefined): string[] {
  const described = [`${f.id}-hint`, ...(error ? [`${f.id}-error`] : [])].join(' ');
  return [
    `<label for="${f.id}">${escapeHtml(f.label)}</label>`,
    `<span class="hint" id="${f.id}-hint">${escapeHtml(f.hint)}</span>`,
    ...(error ? [`<p class="field-error" id="${f.id}-error">${escapeHtml(error)}</p>`] : []),
    `<input id="${f.id}" name="${f.id}" type="${f.type}" autocomplete="${f.autocomplete}"${f.inputmode ? ` inputmode="${f.inputmode}"` : ''} required maxlength="${LIMITS[f.id]}" value="${escapeHtml(value)}" aria-describedby="${described}"${error ? ' aria-invalid="true"' : ''}>`,
  ];
}

function paymentField(value: string, error: string | undefined): string[] {
  const chosen = (WEBSITE_PAYMENTS as readonly string[]).includes(value) ? value : 'cash';
  return [
    `<fieldset aria-describedby="payment-hint${error ? ' payment-error' : ''}">`,
    '<legend>How will you pay your driver?</legend>',
    '<span class="hint" id="payment-hint">You pay the driver directly at the end of the ride. We never take payment and never ask for card details.</span>',
    ...(error ? [`<p class="field-error" id="payment-error">${escapeHtml(error)}</p>`] : []),
    ...WEBSITE_PAYMENTS.map(
      (m) =>
        `<label class="choice"><input type="radio" name="payment" value="${m}"${m === chosen ? ' checked' : ''}> ${escapeHtml(PAYMENT_LABELS[m])}</label>`,
    ),
    '</fieldset>',
  ];
}

const FIELD_ORDER: Field[] = ['name', 'phone', 'email', 'payment'];

function errorSummary(errors: FieldErrors, general: string[]): string[] {
  const fields = FIELD_ORDER.filter((f) => errors[f]);
  if (fields.length === 0 && general.length === 0) return [];
  return [
    '<div class="alert" role="alert">',
    '<h2>There is a problem</h2>',
    '<ul>',
    ...general.map((g) => `<li>${escapeHtml(g)}</li>`),
    ...fields.map(
      (f) => `<li><a href="#${f === 'payment' ? 'payment-hint' : f}">${escapeHtml(errors[f] as string)}</a></li>`,
    ),
    '</ul>',
    '</div>',
  ];
}

interface BookView {
  serviceName: string;
  quote: QuoteRow;
  token: string;
  values: FormValues;
  errors: FieldErrors;
  general: string[];
}

function bookPage(v: BookView): string {
  const q = v.quote;
  const failed = Object.keys(v.errors).length > 0 || v.general.length > 0;
  return sitePage(v.serviceName, `${failed ? 'Error: ' : ''}Book your taxi`, [
    '<h1>Book your taxi</h1>',
    ...(q.test_mode ? [testModeNotice('quote')] : []),
    ...errorSummary(v.errors, v.general),
    ...journey(q),
    ...fare(q),
    '<section aria-labelledby="details-h">',
    '<h2 id="details-h">Your details</h2>',
    `<form method="post" action="/book/${escapeHtml(q.id)}">`,
    `<input type="hidden" name="csrf" value="${escapeHtml(v.token)}">`,
    ...TEXT_FIELDS.flatMap((f) => textField(f, v.values[f.id], v.errors[f.id])),
    ...paymentField(v.values.payment, v.errors.payment),
    `<button type="submit">Book for ${escapeHtml(pounds(q.fare_pence))}</button>`,
    '</form>',
    '<p class="note">Your name and mobile number go to your driver only. Cancelling is free until you are on board.</p>',
    '</section>',
  ]);
}

const UNAVAILABLE_TEXT: Record<Unavailable, { status: number; title: string; lines: string[] }> = {
  expired: {
    status: 410,
    title: 'This quote has expired',
    lines: ['Quotes can be booked for 24 hours. Get a fresh quote for the same journey below.'],
  },
  redeemed: {
    status: 409,
    title: 'This quote has already been booked',
    lines: [
      'Each quote can be booked once. If you booked it, the confirmation e-mail has the link to track or cancel your ride.',
      'To book this journey again, get a fresh quote below.',
    ],
  },
  past: {
    status: 410,
    title: 'The pickup time of this quote has passed',
    lines: ['Get a fresh quote for the same journey below, for a pickup as soon as possible.'],
  },
};

function unavailablePage(serviceName: string, q: QuoteRow, why: Unavailable, token: string, notice?: string): string {
  const text = UNAVAILABLE_TEXT[why];
  const sameTime = q.depart_at.getTime() > Date.now() + 10 * 60_000;
  return sitePage(serviceName, text.title, [
    `<h1>${escapeHtml(text.title)}</h1>`,
    ...(notice ? [`<div class="alert" role="alert"><p>${escapeHtml(notice)}</p></div>`] : []),
    ...text.lines.map((l) => `<p>${escapeHtml(l)}</p>`),
    ...journey(q),
    `<p>The quoted fare was ${escapeHtml(pounds(q.fare_pence))}.</p>`,
    `<form method="post" action="/book/${escapeHtml(q.id)}/requote">`,
    `<input type="hidden" name="csrf" value="${escapeHtml(token)}">`,
    '<button type="submit">Get a fresh quote for this journey</button>',
    '</form>',
    `<p class="note">Same route, vehicle and passengers, ${sameTime ? 'at the same pickup time' : 'for a pickup as soon as possible'}, priced on today's tariff.</p>`,
  ]);
}

function sendQuoteNotFound(res: Response, serviceName: string): void {
  sendMessagePage(res, serviceName, 404, 'We cannot find this quote', [
    'Check that the whole link was opened. Quotes come from the app, website or assistant you asked for a fare: ask it for a new one.',
  ]);
}

// ---------------------------------------------------------------------------------------------
// The form

function formValues(body: unknown): FormValues & { csrf: unknown } {
  const b = (body ?? {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  return {
    name: str(b.name).trim(),
    phone: str(b.phone).trim(),
    email: str(b.email).trim(),
    payment: str(b.payment),
    csrf: b.csrf,
  };
}

/** The website's values are the contract's methods (cash, card, pay_link); the API's other spellings are taken too. */
function paymentOf(raw: string): WebsitePayment | null {
  const mapped = (WEBSITE_PAYMENTS as readonly string[]).includes(raw)
    ? raw
    : (PAYMENT_SPELLINGS as Record<string, string>)[raw];
  return (WEBSITE_PAYMENTS as readonly string[]).includes(mapped ?? '') ? (mapped as WebsitePayment) : null;
}

const FIELD_LABELS: Record<Field, string> = {
  name: 'name',
  phone: 'mobile number',
  email: 'e-mail address',
  payment: 'payment choice',
};

/** The field a detail of an API error names (the API's pointers and the form's own). */
const FIELD_OF_POINTER: Record<string, Field> = {
  '/name': 'name',
  '/passengerName': 'name',
  '/passenger_name': 'name',
  '/phone': 'phone',
  '/passengerPhone': 'phone',
  '/passenger_phone': 'phone',
  '/passenger_phone_whatsapp': 'phone',
  '/email': 'email',
  '/passengerEmail': 'email',
  '/passenger_email': 'email',
  '/payment': 'payment',
  '/paymentMethod': 'payment',
  '/payment_method': 'payment',
};

const PHONE_MESSAGE = 'Enter a mobile number, like 07700 900123 or +44 7700 900123.';

/** The checks that need no I/O, all at once (so every problem shows together): presence, length, phone, the content screen. */
function localChecks(v: FormValues): FieldErrors {
  const errors: FieldErrors = {};
  if (v.name === '') errors.name = 'Enter your name.';
  else if ([...v.name].length > LIMITS.name) errors.name = `Your name must be ${LIMITS.name} characters or fewer.`;
  if (v.phone === '') errors.phone = 'Enter your mobile number.';
  else if (v.phone.length > LIMITS.phone) errors.phone = PHONE_MESSAGE;
  else {
    try {
      normalisePhone(v.phone);
    } catch {
      errors.phone = PHONE_MESSAGE;
    }
  }
  if (v.email === '') errors.email = 'Enter your e-mail address.';
  else if (v.email.length > LIMITS.email || !isWellFormedEmail(v.email))
    errors.email = 'This is not a valid e-mail address.';
  if (!paymentOf(v.payment)) errors.payment = 'Choose how you will pay your driver.';
  const screened = screenFields([{ pointer: '/name', kind: 'name', value: v.name }]);
  if (!screened.ok && !errors.name) {
    errors.name = `This name cannot be accepted: it ${screened.details[0]?.problem ?? 'is not accepted'}.`;
  }
  return errors;
}

/** An API refusal as the form shows it: next to the field its details name, else above the form. */
function formErrors(err: AppError): { errors: FieldErrors; general: string[] } {
  const errors: FieldErrors = {};
  // A limit says how long, as the service's message pages do ("about 60 minutes").
  const wait = err.code === 'rate_limited' ? waitInWords(err.headers['Retry-After']) : null;
  const message = wait ? `${err.message} You can try again in ${wait}.` : err.message;
  for (const d of err.details) {
    const field = FIELD_OF_POINTER[d.field];
    if (!field || errors[field]) continue;
    errors[field] =
      err.code === 'content_rejected'
        ? `This ${FIELD_LABELS[field]} cannot be accepted: it ${d.problem}.`
        : err.code === 'invalid_input' && field === 'phone'
          ? PHONE_MESSAGE
          : message;
  }
  return { errors, general: Object.keys(errors).length > 0 ? [] : [message] };
}

// ---------------------------------------------------------------------------------------------
// Handlers

export interface BookHandlers {
  show(req: Request, res: Response): Promise<void>;
  submit(req: Request, res: Response): Promise<void>;
  requote(req: Request, res: Response): Promise<void>;
}

type Limit = (req: Request, res: Response) => Promise<void>;

export function bookHandlers(deps: ApiDeps, limits: { page: Limit; book: Limit; quote: Limit }): BookHandlers {
  const { config } = deps;
  const serviceName = config.serviceName;
  const key = config.dataEncryptionKey;
  const headers = () => pageHeaders(siteCsp());

  function render(req: Request, res: Response, status: number, view: Omit<BookView, 'serviceName' | 'token'>) {
    const token = formToken(req, res, key, bookAction(view.quote.id), secure(baseUrlFor(req, config)));
    sendPage(res, status, bookPage({ ...view, serviceName, token }), headers());
  }

  function renderUnavailable(req: Request, res: Response, q: QuoteRow, why: Unavailable, refused = false) {
    const token = formToken(req, res, key, requoteAction(q.id), secure(baseUrlFor(req, config)));
    const notice = refused
      ? 'This form could not be checked (it had expired, or cookies are blocked): press the button again.'
      : undefined;
    sendPage(
      res,
      refused ? 403 : UNAVAILABLE_TEXT[why].status,
      unavailablePage(serviceName, q, why, token, notice),
      headers(),
    );
  }

  return {
    async show(req, res) {
      await limits.page(req, res);
      const quote = await loadQuote(deps, String(req.params.quoteId));
      if (!quote) return sendQuoteNotFound(res, serviceName);
      const why = unavailability(quote);
      if (why) return renderUnavailable(req, res, quote, why);
      render(req, res, 200, {
        quote,
        values: { name: '', phone: '', email: '', payment: 'cash' },
        errors: {},
        general: [],
      });
    },

    async submit(req, res) {
      await limits.book(req, res);
      const quote = await loadQuote(deps, String(req.params.quoteId));
      if (!quote) return sendQuoteNotFound(res, serviceName);
      const { csrf, ...values } = formValues(req.body);
      if (!formTokenValid(req, key, bookAction(quote.id), csrf)) {
        req.log?.warn({ quote: quote.id }, 'website booking form refused: missing or wrong form token');
        const why = unavailability(quote);
        if (why) return renderUnavailable(req, res, quote, why);
        return render(req, res, 403, {
          quote,
          values,
          errors: {},
          general: [
            'This form could not be checked (it had expired, or cookies are blocked). Check your details and press Book again.',
          ],
        });
      }
      const local = localChecks(values);
      if (Object.keys(local).length > 0) return render(req, res, 400, { quote, values, errors: local, general: [] });
      const base = baseUrlFor(req, config);
      try {
        // The API's path for redeeming a quote: the content screen, the v1 passenger checks
        // (e-mail acceptance, phone, blocked passengers, the hourly limit of an unconfirmed
        // address, which a form sent again for a quote already redeemed passes), then redeemQuote, which books a quote once and returns the same booking
        // to the same passenger.
        screen(req, [{ pointer: '/name', kind: 'name', value: values.name }]);
        const { passenger, emailVerified, preloaded, uncount } = await redeemingPassenger(
          untilClientGone(res),
          deps,
          values.name,
          values.email,
          values.phone,
          '/email',
          quote.test_mode,
          quote.id,
        );
        const view = await countedIfBooked(uncount, async () =>
          redeemQuote(
            deps,
            {
              origin: 'website',
              quoteId: quote.id,
              passenger,
              paymentMethod: paymentOf(values.payment) as WebsitePayment,
              emailVerified,
              confirmByEmail: true,
            },
            // The booking is the quote's: an integrator's quote, booked by its passenger on this
            // page, is the integrator's booking (its key and partner: its test messages, webhooks
            // and lookups), in the quote's mode.
            { ...bookingCaller(websiteCaller(req)), followsQuoteMode: true, ...(await quoteOwner(deps, quote)) },
            base,
            preloaded,
          ),
        );
        req.log?.info({ booking: view.reference, repeat: !view.created }, 'website booking');
        res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
        res.redirect(303, new URL(view.trackingUrl).pathname);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        if (err.code === 'quote_not_found') return sendQuoteNotFound(res, serviceName);
        if (err.code === 'quote_expired') return renderUnavailable(req, res, quote, 'expired');
        // This passenger booked the quote already, paying another way: the form again, saying
        // so (booking it again would not change how they pay), not "booked by someone".
        const paid = err.details.find((d) => d.field === '/paymentMethod');
        if (err.code === 'quote_already_redeemed' && paid) {
          const booked = await deps
            .db('bookings')
            .where({ quote_id: quote.id })
            .first<{ payment_method: string } | undefined>('payment_method');
          const was = PAYMENT_LABELS[booked?.payment_method ?? '']?.toLowerCase() ?? 'another way';
          return render(req, res, err.status, {
            quote,
            values,
            errors: {
              payment: `You have booked this ride already (payment: ${was}). Booking it again does not change that: to pay another way, cancel it from the tracking link in your confirmation e-mail, then book again.`,
            },
            general: [],
          });
        }
        if (err.code === 'quote_already_redeemed') return renderUnavailable(req, res, quote, 'redeemed');
        if (err.code === 'pickup_in_past') return renderUnavailable(req, res, quote, 'past');
        for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
        render(req, res, err.status, { quote, values, ...formErrors(err) });
      }
    },

    async requote(req, res) {
      await limits.quote(req, res);
      const quote = await loadQuote(deps, String(req.params.quoteId));
      if (!quote) return sendQuoteNotFound(res, serviceName);
      const { csrf } = formValues(req.body);
      const why = unavailability(quote);
      if (why && !formTokenValid(req, key, requoteAction(quote.id), csrf)) {
        return renderUnavailable(req, res, quote, why, true);
      }
      if (!why) {
        // Still bookable: nothing to re-quote.
        res.redirect(303, `/book/${quote.id}`);
        return;
      }
      // The same journey through the quote service, as the API quotes it (same pricing worker,
      // same stored quote, the caller's quote limit), at the same time when it is still ahead.
      const sameTime = quote.depart_at.getTime() > Date.now() + 10 * 60_000;
      const fresh = await createQuote(
        deps,
        {
          pickup: quote.pickup.query,
          dropoff: quote.dropoff.query,
          ...(sameTime ? { departAt: quote.depart_at.toISOString() } : {}),
          passengers: quote.passengers,
          vehicleType: quote.vehicle_type as VehicleType,
          meetAndGreet: quote.meet_and_greet,
          worldwide: quote.worldwide,
        },
        // The new quote is the old one's: in its mode (a sandbox quote's re-quote is a sandbox
        // quote, never a live one) and its integrator's, so booking it is theirs as well.
        { ...quoteCaller(websiteCaller(req)), testMode: quote.test_mode, ...(await quoteOwner(deps, quote)) },
        baseUrlFor(req, config),
      );
      req.log?.info({ from: quote.id, quote: fresh.id }, 'website re-quote');
      res.redirect(303, `/book/${fresh.id}`);
    },
  };
}
