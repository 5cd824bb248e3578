import type { Request, Response } from 'express';
import { sha256 } from '../../shared/crypto.ts';
import { MAX_LAT } from '../../shared/dispatch/presence-index.ts';
import { MEET_AND_GREET_TEXT, PAYMENT_LABELS } from '../../shared/domain/dispatch/job-card.ts';
import { PAYMENT_METHODS } from '../../shared/domain/payment-state.ts';
import { normaliseReference } from '../../shared/domain/reference.ts';
import { AppError, type ErrorCode, errorBody } from '../../shared/errors.ts';
import { MAX_FARE_GBP } from '../../shared/schemas/common.ts';
import { publishBookingEvent } from '../../shared/services/booking-events.ts';
import { presenceIndex } from '../../shared/services/dispatch.ts';
import { type DashboardWeek, type DriverDashboard, driverDashboard } from '../../shared/services/driver-dashboard.ts';
import {
  acceptOffer,
  declineOffer,
  type FeedJob,
  isNoFix,
  type JobHolder,
  jobFeed,
  type Payment,
  PROGRESS,
  type Progress,
  reportPresence,
  reportProgress,
} from '../../shared/services/driver-jobs.ts';
import { authenticateDriver, type DriverIdentity, replaceDriverToken } from '../../shared/services/drivers.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { requestIdOf } from '../middleware/errors.ts';
import type { RateLimits } from '../middleware/rate-limit.ts';
import { type FoundOffer, findOfferByCode, type OfferLinkResponse } from '../routes/offers.ts';
import { formToken, formTokenValid } from './csrf.ts';
import { driverScript, driverScriptPath } from './driver-script.ts';
import { endSession, safeNext, sessionDriver, startSession } from './driver-session.ts';
import { contentSecurityPolicy, escapeHtml, pageHeaders, renderPage, sendPage, stylesheet } from './layout.ts';
import { SITE_STYLE, sendMessagePage, timeElement, VEHICLE_LABELS, websiteCaller } from './site.ts';

/**
 * The driver pages (issue 9 item 4), served by the API process on every connected domain:
 *
 * - `GET /o/{code}`: the job card's short link, for a browser: the offer (areas, time, size,
 *   fare, state) with a countdown to its expiry and, for the signed-in driver it was offered
 *   to, Accept and Decline. Without a session it shows the offer and the sign-in form.
 * - `GET, POST /driver/sign-in` and `POST /driver/sign-out`: the driver token (issued at
 *   approval) checked as the API checks it, then a session cookie (driver-session.ts).
 *   `POST /driver/sign-out-everywhere` replaces the token (`replaceDriverToken`), which ends
 *   every session on every device; the new token is sent by e-mail only (the SMS is a notice).
 * - `GET /driver`: the job feed (offers and jobs in hand, as `GET /api/public/v1/jobs`) and the
 *   dashboard (earnings, completed rides, paid weeks, invoices, dead mileage).
 * - `GET /driver/jobs/{ref}`: a job in hand with the pickup details and progress buttons;
 *   `POST /driver/jobs/{ref}/accept`, `/decline` and `/status` are its forms.
 *
 * Every action goes through the same services as the driver API (acceptOffer, declineOffer,
 * reportProgress, jobFeed, driverDashboard) and wakes the booking's event streams as its
 * routes do. Forms work without script and carry a CSRF token bound to the browser, the
 * driver and the job; the countdown script (driver-script.ts) is an enhancement. Refusals are
 * pages with their status, never the API's JSON envelope.
 */

export const DRIVER_HOME_PATH = '/driver';
export const DRIVER_SIGN_IN_PATH = '/driver/sign-in';
export const DRIVER_SIGN_OUT_PATH = '/driver/sign-out';
/** Sign out every device: the driver's token is replaced (the new one goes by e-mail only). */
export const DRIVER_SIGN_OUT_EVERYWHERE_PATH = '/driver/sign-out-everywhere';
export const DRIVER_JOB_PATH = '/driver/jobs/:ref';
export const DRIVER_ACCEPT_PATH = '/driver/jobs/:ref/accept';
export const DRIVER_DECLINE_PATH = '/driver/jobs/:ref/decline';
export const DRIVER_STATUS_PATH = '/driver/jobs/:ref/status';
/** Start or stop taking local jobs from the page; the page's script also reports its location here. */
export const DRIVER_AVAILABILITY_PATH = '/driver/availability';
/** Most seconds between two location reports from a page that is taking jobs. */
export const AVAILABILITY_REPORT_SECONDS = 30;

/** The site's style sheet and what the driver pages add: the countdown, job cards, the token field. */
export const DRIVER_STYLE = stylesheet(
  [
    SITE_STYLE.css,
    '.site{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:center;gap:.5rem}.site a{font-weight:600;padding:.5rem 0}',
    'input[type=password]{width:100%;font:inherit;padding:.7rem .75rem;min-height:3rem;border:2px solid var(--line);border-radius:.5rem;background:var(--bg);color:var(--fg)}',
    '.card{border:1px solid var(--line);border-radius:.5rem;padding:.75rem 1rem;margin:1rem 0;background:var(--panel)}.card h3{margin:0 0 .5rem;font-size:1.1rem}',
    '.countdown{border:3px solid var(--accent);border-radius:.5rem;padding:.5rem 1rem;margin:1rem 0}',
    '.clock{display:block;font-size:2.25rem;font-weight:700;font-variant-numeric:tabular-nums;line-height:1.2}',
    '.actions{display:grid;grid-template-columns:1fr 1fr;gap:.75rem}.actions button{margin-top:.75rem}',
    'details{margin:.5rem 0}summary{cursor:pointer;min-height:2.75rem;display:flex;align-items:center;color:var(--accent);font-weight:600}',
    'summary:focus-visible{outline:3px solid var(--fg);outline-offset:2px}',
    '.big{font-size:1.35rem;font-weight:700}',
  ].join('\n'),
);

/** Labels of a job's state as the driver reads them. */
const STATE_LABELS: Record<string, string> = {
  offered: 'Offered to you',
  accepted: 'Accepted: yours',
  driver_assigned: 'Accepted: yours',
  driver_en_route: 'On your way to the pickup',
  driver_arrived: 'Arrived at the pickup',
  passenger_on_board: 'Passenger on board',
  completed: 'Completed',
  cancelled: 'Cancelled by the passenger',
};
const stateLabel = (s: string) => STATE_LABELS[s] ?? s.replace(/_/g, ' ');

/** The progress buttons (the steps of `reportProgress` after acceptance). */
type Step = Exclude<Progress, 'driver_assigned'>;
const STEPS: readonly Step[] = ['driver_en_route', 'driver_arrived', 'passenger_on_board', 'completed'];
const STEP_BUTTONS: Record<Step, string> = {
  driver_en_route: 'I am on my way',
  driver_arrived: 'I have arrived',
  passenger_on_board: 'Passenger on board',
  completed: 'Complete the ride',
};

/** How a fare can be paid to the driver (the status API's payment methods). */
const METHODS: readonly Payment['method'][] = PAYMENT_METHODS;
const METHOD_LABELS: Record<Payment['method'], string> = {
  cash: 'Cash',
  card: 'Card, on your own card reader',
  pay_link: 'Your payment link',
  bank_transfer: 'Bank transfer to you',
  account: 'Charged to the booker’s account',
};
/** The methods offered for a booking: `account` only for one made on account. */
const methodsFor = (bookingMethod: string) => METHODS.filter((m) => m !== 'account' || bookingMethod === 'account');

const pounds = new Intl.NumberFormat('en-GB', { style: 'currency', currency: 'GBP' });
const gbpText = (gbp: number | null): string => (gbp === null ? 'not priced' : pounds.format(gbp));
const vehicleText = (v: string) => VEHICLE_LABELS[v] ?? v;
const milesText = (m: number) => `${m.toFixed(1)} ${m === 1 ? 'mile' : 'miles'}`;

/** A job's form token binds the browser, the driver and the job. */
const jobAction = (driverId: string, ref: string) => `driver-job:${driverId}:${ref}`;
const SIGN_IN_ACTION = 'driver-sign-in';
const signOutAction = (driverId: string) => `driver-sign-out:${driverId}`;
const signOutEverywhereAction = (driverId: string) => `driver-sign-out-everywhere:${driverId}`;
const availabilityAction = (driverId: string) => `driver-availability:${driverId}`;

const hidden = (name: string, value: string) => `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`;
const alertBox = (text: string) => `<div class="alert" role="alert"><p>${escapeHtml(text)}</p></div>`;

/** "2026-W47" to the Monday it starts on (ISO week), for headings. */
function weekMonday(week: string): Date | null {
  const m = /^([0-9]{4})-W([0-9]{2})$/.exec(week);
  if (!m) return null;
  const jan4 = Date.UTC(Number(m[1]), 0, 4);
  const jan4Day = (new Date(jan4).getUTCDay() + 6) % 7;
  return new Date(jan4 - jan4Day * 86_400_000 + (Number(m[2]) - 1) * 7 * 86_400_000);
}
const DAY = new Intl.DateTimeFormat('en-GB', { timeZone: 'UTC', weekday: 'short', day: 'numeric', month: 'short' });
const CLOCK = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

/** Seconds left on an offer, as the page is rendered. */
const secondsLeft = (expiresAt: Date, now: number) => Math.max(0, Math.ceil((expiresAt.getTime() - now) / 1000));

/** The countdown: the server's seconds left (the script counts them down), the expiry in words, a refresh link. */
function countdown(expiresAt: Date, refreshPath: string, now: number): string[] {
  const left = secondsLeft(expiresAt, now);
  const m = Math.floor(left / 60);
  const s = left % 60;
  const words =
    left >= 120 ? `About ${Math.round(left / 60)} minutes left to answer.` : `${left} seconds left to answer.`;
  return [
    `<div class="countdown" data-countdown="${left}">`,
    `<span class="clock" aria-hidden="true">${m}:${String(s).padStart(2, '0')}</span>`,
    `<p class="countdown-text" aria-live="polite" aria-atomic="true">${escapeHtml(words)}</p>`,
    `<p class="note">Open until <time datetime="${expiresAt.toISOString()}">${escapeHtml(CLOCK.format(expiresAt))}</time> (UK time). <a href="${escapeHtml(refreshPath)}">Refresh</a></p>`,
    '</div>',
  ];
}

/** "Meet and greet: meet the passenger in arrivals with a name board", for a job whose passenger booked it. */
function meetAndGreetFact(meetAndGreet: boolean): string[] {
  return meetAndGreet ? [`<dt>Meet and greet</dt><dd>${escapeHtml(MEET_AND_GREET_TEXT)}</dd>`] : [];
}

/** The job as an offer shows it: areas only (the short link never shows the passenger or the address). */
function offerFacts(job: OfferLinkResponse['job']): string[] {
  return [
    '<dl>',
    `<dt>Pickup</dt><dd>${escapeHtml(job.pickupArea)}</dd>`,
    `<dt>Drop-off</dt><dd>${escapeHtml(job.dropoffArea)}</dd>`,
    `<dt>When</dt><dd>${timeElement(new Date(job.pickupTime))} (UK time)</dd>`,
    `<dt>Passengers</dt><dd>${job.passengers}</dd>`,
    `<dt>Vehicle</dt><dd>${escapeHtml(vehicleText(job.vehicleType))}</dd>`,
    `<dt>Fare</dt><dd>${escapeHtml(gbpText(job.fareGBP))}${job.fareGBP === null ? '' : `, ${PAYMENT_LABELS[job.paymentMethod] ?? 'paid to you'}, 0% commission`}</dd>`,
    ...meetAndGreetFact(job.meetAndGreet),
    '</dl>',
  ];
}

/** A feed job's facts (the API feed's data: place names, and the passenger once accepted). */
function jobFacts(job: FeedJob, opts: { passenger: boolean }): string[] {
  const passenger = opts.passenger ? job.passenger : undefined;
  return [
    '<dl>',
    `<dt>Pickup</dt><dd>${escapeHtml(job.pickup.name)}</dd>`,
    `<dt>Drop-off</dt><dd>${escapeHtml(job.dropoff.name)}</dd>`,
    `<dt>When</dt><dd>${timeElement(new Date(job.pickupTime))} (UK time)</dd>`,
    `<dt>Passengers</dt><dd>${job.passengers}</dd>`,
    `<dt>Vehicle</dt><dd>${escapeHtml(vehicleText(job.vehicleType))}</dd>`,
    `<dt>Fare</dt><dd>${escapeHtml(gbpText(job.fareGBP))}</dd>`,
    ...meetAndGreetFact(job.meetAndGreet),
    ...(passenger
      ? [
          `<dt>Passenger</dt><dd>${escapeHtml(passenger.name)}</dd>`,
          `<dt>Phone</dt><dd>${passenger.phone ? `<a href="tel:${escapeHtml(passenger.phone)}">${escapeHtml(passenger.phone)}</a>` : 'not given'}</dd>`,
        ]
      : []),
    ...(opts.passenger && job.flightNumber ? [`<dt>Flight</dt><dd>${escapeHtml(job.flightNumber)}</dd>`] : []),
    ...(opts.passenger && job.notes ? [`<dt>Notes</dt><dd>${escapeHtml(job.notes)}</dd>`] : []),
    '</dl>',
  ];
}

/** Accept and Decline: two forms posting to the job, each with the job's form token. */
function answerForms(ref: string, csrf: string): string[] {
  const base = `/driver/jobs/${encodeURIComponent(ref)}`;
  return [
    '<div class="actions">',
    `<form method="post" action="${base}/accept">`,
    hidden('csrf', csrf),
    `<button type="submit">Accept</button>`,
    '</form>',
    `<form method="post" action="${base}/decline">`,
    hidden('csrf', csrf),
    `<button type="submit" class="secondary">Decline</button>`,
    '</form>',
    '</div>',
  ];
}

interface SignInView {
  csrf: string;
  next: string;
  error?: string;
  heading: 'h1' | 'h2';
}

function signInForm(v: SignInView): string[] {
  const described = `token-hint${v.error ? ' token-error' : ''}`;
  return [
    '<section aria-labelledby="signin-h">',
    `<${v.heading} id="signin-h">Driver sign-in</${v.heading}>`,
    ...(v.error ? [alertBox(v.error)] : []),
    `<form method="post" action="${DRIVER_SIGN_IN_PATH}">`,
    hidden('csrf', v.csrf),
    hidden('next', v.next),
    '<label for="token">Driver token</label>',
    '<span class="hint" id="token-hint">The token in the SMS or e-mail you got when you were approved: it starts with dtn_drv_. This phone stays signed in for 30 days.</span>',
    ...(v.error ? [`<p class="field-error" id="token-error">${escapeHtml(v.error)}</p>`] : []),
    `<input id="token" name="token" type="password" autocomplete="current-password" autocapitalize="none" spellcheck="false" required maxlength="80" aria-describedby="${described}"${v.error ? ' aria-invalid="true"' : ''}>`,
    '<button type="submit">Sign in</button>',
    '</form>',
    '</section>',
  ];
}

/** The errors a completion form can show next to its fields. */
interface StatusErrors {
  method?: string;
  amount?: string;
  fee?: string;
  general?: string;
}

interface StatusForm {
  method: string;
  amount: string;
  fee: string;
}

function progressForms(
  ref: string,
  status: string,
  csrf: string,
  fareGBP: number | null,
  defaultMethod: string,
  form: StatusForm | null,
  errors: StatusErrors,
): string[] {
  const path = `/driver/jobs/${encodeURIComponent(ref)}/status`;
  const at = PROGRESS.indexOf(status as Progress);
  const ahead = STEPS.filter((s) => PROGRESS.indexOf(s) > at && s !== 'completed');
  const out: string[] = ['<section aria-labelledby="progress-h">', '<h2 id="progress-h">Progress</h2>'];
  if (errors.general) out.push(alertBox(errors.general));
  ahead.forEach((step, i) => {
    out.push(
      `<form method="post" action="${path}">`,
      hidden('csrf', csrf),
      hidden('status', step),
      `<button type="submit"${i === 0 ? '' : ' class="secondary"'}>${escapeHtml(STEP_BUTTONS[step])}</button>`,
      '</form>',
    );
  });
  const method = form?.method ?? ((METHODS as readonly string[]).includes(defaultMethod) ? defaultMethod : 'cash');
  const amount = form?.amount ?? (fareGBP === null ? '' : fareGBP.toFixed(2));
  const fee = form?.fee ?? '';
  const field = (id: keyof StatusErrors) =>
    `aria-describedby="${id}-hint${errors[id] ? ` ${id}-error` : ''}"${errors[id] ? ' aria-invalid="true"' : ''}`;
  const fieldError = (id: keyof StatusErrors) =>
    errors[id] ? [`<p class="field-error" id="${id}-error">${escapeHtml(errors[id] as string)}</p>`] : [];
  out.push(
    '<h3 id="complete-h">Ride finished?</h3>',
    `<form method="post" action="${path}">`,
    hidden('csrf', csrf),
    hidden('status', 'completed'),
    `<fieldset ${field('method')}>`,
    '<legend>How was the fare paid?</legend>',
    `<span class="hint" id="method-hint">${defaultMethod === 'account' ? 'Booked on the booker’s account: the passenger does not pay you.' : 'The passenger paid you directly.'}</span>`,
    ...fieldError('method'),
    ...methodsFor(defaultMethod).map(
      (m) =>
        `<label class="choice"><input type="radio" name="method" value="${m}"${m === method ? ' checked' : ''}> ${escapeHtml(METHOD_LABELS[m])}</label>`,
    ),
    '</fieldset>',
    '<label for="amount">Amount paid (£)</label>',
    `<span class="hint" id="amount-hint">The fare is ${escapeHtml(gbpText(fareGBP))}; change it if the passenger paid a different amount.</span>`,
    ...fieldError('amount'),
    `<input id="amount" name="amount" type="text" inputmode="decimal" autocomplete="off" required maxlength="10" value="${escapeHtml(amount)}" ${field('amount')}>`,
    '<label for="fee">Card processing fee (£, card only)</label>',
    '<span class="hint" id="fee-hint">What your card reader charged for this payment, if you know it. It is passed through on your weekly invoice.</span>',
    ...fieldError('fee'),
    `<input id="fee" name="fee" type="text" inputmode="decimal" autocomplete="off" maxlength="10" value="${escapeHtml(fee)}" ${field('fee')}>`,
    `<button type="submit">${escapeHtml(STEP_BUTTONS.completed)}</button>`,
    '</form>',
    '</section>',
  );
  return out;
}

function dashboardSection(d: DriverDashboard): string[] {
  const t = d.totals;
  const trial = d.trialEndsAt ? new Date(d.trialEndsAt) : null;
  const out = [
    '<section aria-labelledby="earnings-h">',
    '<h2 id="earnings-h">Earnings and invoices</h2>',
    '<dl>',
    `<dt>Earnings</dt><dd>${escapeHtml(pounds.format(t.earningsGBP))}</dd>`,
    `<dt>Completed rides</dt><dd>${t.completedRides}</dd>`,
    `<dt>Paid weeks</dt><dd>${t.paidWeeks}</dd>`,
    `<dt>Dead mileage</dt><dd>${escapeHtml(milesText(t.deadMiles))}</dd>`,
    ...(trial
      ? [`<dt>Free trial</dt><dd>${trial.getTime() > Date.now() ? 'until' : 'ended'} ${timeElement(trial)}</dd>`]
      : []),
    '</dl>',
    '<p class="note">Weeks run Monday to Sunday (UK time). Earnings are the fares of the rides you completed; they are all yours. The weekly fee applies only above £500 of earnings, after the free trial.</p>',
  ];
  if (d.weeks.length === 0) {
    out.push('<p>No completed rides or invoices yet.</p>');
  }
  for (const w of d.weeks) out.push(...weekCard(w));
  out.push('</section>');
  return out;
}

function weekCard(w: DashboardWeek): string[] {
  const monday = weekMonday(w.week);
  const title = monday ? `Week of ${DAY.format(monday)} (${w.week})` : w.week;
  const inv = w.invoice;
  return [
    `<div class="card" id="week-${escapeHtml(w.week)}">`,
    `<h3>${escapeHtml(title)}</h3>`,
    '<dl>',
    `<dt>Earnings</dt><dd>${escapeHtml(pounds.format(w.earningsGBP))}</dd>`,
    `<dt>Rides</dt><dd>${w.completedRides}</dd>`,
    `<dt>Dead mileage</dt><dd>${escapeHtml(milesText(w.deadMiles))}</dd>`,
    `<dt>Invoice</dt><dd>${inv ? `${escapeHtml(pounds.format(inv.totalGBP))} (${escapeHtml(inv.state.replace(/_/g, ' '))})` : 'none'}</dd>`,
    `<dt>Paid</dt><dd>${w.paid ? 'Yes' : inv ? 'Not yet' : 'Not invoiced yet'}</dd>`,
    '</dl>',
    ...(inv && inv.lines.length > 0
      ? [
          '<details>',
          '<summary>Invoice lines</summary>',
          '<table>',
          `<caption>Invoice for ${escapeHtml(w.week)}</caption>`,
          '<thead><tr><th scope="col">Item</th><th scope="col">Amount</th></tr></thead>',
          '<tbody>',
          ...inv.lines.map(
            (l) =>
              `<tr><td>${escapeHtml(l.description)}${l.quantity > 1 ? ` × ${l.quantity}` : ''}</td><td>${escapeHtml(pounds.format(l.amountGBP))}</td></tr>`,
          ),
          '</tbody>',
          `<tfoot><tr><th scope="row">Total</th><td>${escapeHtml(pounds.format(inv.totalGBP))}</td></tr></tfoot>`,
          '</table>',
          '</details>',
        ]
      : []),
    '</div>',
  ];
}

/** A posted amount in pounds ("12", "12.5", "£12.50"): pence, or null when it is not one. */
function parsePounds(raw: unknown, max: number): number | null {
  if (typeof raw !== 'string') return null;
  const text = raw.trim().replace(/^£\s*/, '');
  if (!/^[0-9]{1,6}(?:\.[0-9]{1,2})?$/.test(text)) return null;
  const pence = Math.round(Number(text) * 100);
  return pence <= max * 100 ? pence : null;
}

interface BookingOfDriver {
  id: string;
  status: string;
  payment_method: string;
  fare_pence: number | null;
}

export interface DriverHandlers {
  offer(req: Request, res: Response): Promise<void>;
  signInPage(req: Request, res: Response): Promise<void>;
  signIn(req: Request, res: Response): Promise<void>;
  signOut(req: Request, res: Response): Promise<void>;
  signOutEverywhere(req: Request, res: Response): Promise<void>;
  home(req: Request, res: Response): Promise<void>;
  job(req: Request, res: Response): Promise<void>;
  accept(req: Request, res: Response): Promise<void>;
  decline(req: Request, res: Response): Promise<void>;
  status(req: Request, res: Response): Promise<void>;
  availability(req: Request, res: Response): Promise<void>;
}

type Limit = (req: Request, res: Response) => Promise<void>;

export function driverHandlers(deps: ApiDeps, limits: { page: Limit; rateLimits: RateLimits }): DriverHandlers {
  const { config } = deps;
  const serviceName = config.serviceName;
  const key = config.dataEncryptionKey;
  const prefix = config.bookings.referencePrefix;
  const headers = pageHeaders(
    contentSecurityPolicy({
      styles: [DRIVER_STYLE],
      formAction: ["'self'"],
      scriptSrc: ["'self'"],
      // The page's script reports the driver's location to DRIVER_AVAILABILITY_PATH.
      connectSrc: ["'self'"],
    }),
  );
  const secure = (req: Request) => baseUrlFor(req, config).startsWith('https:');
  const holderOf = (d: DriverIdentity): JobHolder => ({ kind: 'driver', id: d.id });
  const announce = (bookingId: string) => publishBookingEvent(deps.redis, config.queuePrefix, bookingId);
  const jobPath = (ref: string) => `/driver/jobs/${encodeURIComponent(ref)}`;

  // A page taking jobs reports at least three times per presence time-out, and at most every 30 s.
  const reportSeconds = Math.max(
    1,
    Math.min(AVAILABILITY_REPORT_SECONDS, Math.floor(config.dispatch.presenceTtlSeconds / 3)),
  );
  const ttlText =
    config.dispatch.presenceTtlSeconds >= 120
      ? `${Math.round(config.dispatch.presenceTtlSeconds / 60)} minutes`
      : `${config.dispatch.presenceTtlSeconds} seconds`;

  /**
   * Taking local jobs from the page: the state (live in the presence index or not) and the form
   * that changes it. Starting needs the location, which the page's script reads from the
   * browser (geolocation) and puts in the form; while the state is on, the script reports the
   * location every `reportSeconds` and when it moves, as a driver app does.
   */
  function availabilitySection(req: Request, res: Response, driver: DriverIdentity, live: boolean | null): string[] {
    const csrf = formToken(req, res, key, availabilityAction(driver.id), secure(req));
    const form = (available: boolean, label: string, extra: string[]) => [
      `<form method="post" action="${DRIVER_AVAILABILITY_PATH}">`,
      hidden('csrf', csrf),
      hidden('available', available ? '1' : '0'),
      ...extra,
      `<button type="submit"${available ? '' : ' class="secondary"'}>${label}</button>`,
      '</form>',
    ];
    const start = () => [
      ...form(true, 'Start taking jobs here', [hidden('lat', ''), hidden('lng', '')]),
      '<noscript><p>Starting needs your location, which this page reads with JavaScript: turn JavaScript on, or use a driver app.</p></noscript>',
    ];
    const status = '<p class="availability-status" role="status" aria-live="polite"></p>';
    return [
      `<section aria-labelledby="availability-h" data-availability="${live === null ? 'unknown' : live ? 'on' : 'off'}" data-report-seconds="${reportSeconds}" data-action="${DRIVER_AVAILABILITY_PATH}" data-csrf="${escapeHtml(csrf)}">`,
      '<h2 id="availability-h">Taking jobs</h2>',
      ...(live === null
        ? [
            '<p><strong>We cannot tell right now whether you are taking jobs</strong>: our live map did not answer. Try again in a minute.</p>',
            status,
            ...start(),
            ...form(false, 'Stop taking jobs', []),
          ]
        : live
          ? [
              '<p><strong>You are taking jobs.</strong> Passengers near you can be offered to you.</p>',
              `<p>Keep this page open while you work: it sends your location every ${reportSeconds} seconds. If it stops (the page closed, the phone asleep), offers stop after ${ttlText}.</p>`,
              status,
              ...form(false, 'Stop taking jobs', []),
            ]
          : [
              '<p><strong>You are not taking jobs.</strong> Offers go only to drivers who are.</p>',
              status,
              ...start(),
            ]),
      '</section>',
    ];
  }

  function page(title: string, driver: DriverIdentity | null, body: readonly string[], withScript = false): string {
    const script = driverScript();
    return renderPage({
      title: `${title} | ${serviceName} drivers`,
      style: DRIVER_STYLE,
      header: [
        `<header class="site"><span>${escapeHtml(serviceName)} drivers</span>${driver ? `<a href="${DRIVER_HOME_PATH}">My jobs</a>` : ''}</header>`,
      ],
      body,
      footer: withScript ? [`<script src="${driverScriptPath()}" integrity="${script.integrity}" defer></script>`] : [],
    });
  }

  const send = (res: Response, status: number, html: string) => sendPage(res, status, html, headers);

  /** A message page with a way back to the driver's jobs. */
  function message(res: Response, status: number, title: string, text: string, back = true): void {
    sendMessagePage(
      res,
      serviceName,
      status,
      title,
      [text],
      back ? [`<p><a class="button" href="${DRIVER_HOME_PATH}">My jobs</a></p>`] : [],
    );
  }

  function signInPage(req: Request, res: Response, status: number, next: string, error?: string): void {
    const csrf = formToken(req, res, key, SIGN_IN_ACTION, secure(req));
    send(res, status, page('Driver sign-in', null, signInForm({ csrf, next, error, heading: 'h1' })));
  }

  /** The signed-in driver, or null after answering with the sign-in page (which returns to `next`). */
  async function driverOr(req: Request, res: Response, next: string, status = 200): Promise<DriverIdentity | null> {
    const driver = await sessionDriver(req, deps.db, key);
    if (!driver) signInPage(req, res, status, next);
    return driver;
  }

  const refOf = (req: Request) => normaliseReference(String(req.params.ref), prefix);

  const formRefused = (res: Response, ref: string) =>
    sendMessagePage(
      res,
      serviceName,
      403,
      'This form could not be checked',
      ['It had expired, or this browser blocks cookies. Open the job again and retry.'],
      [`<p><a class="button" href="${jobPath(ref)}">Open job ${escapeHtml(ref)}</a></p>`],
    );

  /**
   * What every job form (accept, decline, progress) checks first, answering itself when one
   * fails: the page rate limit, the reference, the signed-in driver (else the sign-in page, 401)
   * and the form token. The driver, the reference and the posted fields, or null when answered.
   */
  async function jobForm(
    req: Request,
    res: Response,
    what: string,
  ): Promise<{ driver: DriverIdentity; ref: string; body: Record<string, unknown> } | null> {
    await limits.page(req, res);
    const ref = refOf(req);
    const driver = await driverOr(req, res, ref ? jobPath(ref) : DRIVER_HOME_PATH, 401);
    if (!driver) return null;
    if (!ref) {
      message(res, 404, 'No such job for you', 'That is not a booking reference.');
      return null;
    }
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (!formTokenValid(req, key, jobAction(driver.id, ref), body.csrf)) {
      req.log?.warn({ booking: ref }, `driver ${what} refused: missing or wrong form token`);
      formRefused(res, ref);
      return null;
    }
    return { driver, ref, body };
  }

  /** An accept or decline the offer no longer allows, answered as a page: true when it was one. */
  function offerRefused(res: Response, err: unknown, ref: string): boolean {
    if (err instanceof AppError && err.code === 'offer_unavailable') {
      message(res, 409, 'This offer is no longer open', err.message);
      return true;
    }
    if (err instanceof AppError && err.code === 'job_not_found') {
      message(res, 404, 'No such job for you', `There is no offer of ${ref} for you.`);
      return true;
    }
    return false;
  }

  function offerPage(req: Request, res: Response, code: string, found: FoundOffer, driver: DriverIdentity | null) {
    const { view } = found;
    const ref = view.job.bookingReference;
    const now = Date.now();
    const open = view.offer.state === 'offered';
    const path = `/o/${code}`;
    const body = [`<h1>Job offer ${escapeHtml(ref)}</h1>`];
    if (driver === null) {
      body.push(
        `<p class="status" role="status">${escapeHtml(open ? 'Open offer' : `This offer is ${view.offer.state}.`)}</p>`,
        ...(open ? countdown(new Date(view.offer.expiresAt), path, now) : []),
        ...offerFacts(view.job),
        ...signInForm({
          csrf: formToken(req, res, key, SIGN_IN_ACTION, secure(req)),
          next: path,
          heading: 'h2',
        }),
      );
      return send(res, 200, page(`Job offer ${ref}`, null, body, open));
    }
    const states: Record<string, string> = {
      offered: 'Open: accept or decline before the time runs out.',
      accepted: 'You accepted this job.',
      // Only what is known: after a decline or expiry the job may go to another driver, find
      // none, or be cancelled (the JSON accept says which, when it knows).
      declined: 'You declined this job.',
      expired: 'This offer has expired.',
      withdrawn: 'This offer was withdrawn: the passenger cancelled, or the job was taken back.',
    };
    body.push(`<p class="status" role="status">${escapeHtml(states[view.offer.state] ?? view.offer.state)}</p>`);
    if (open) body.push(...countdown(new Date(view.offer.expiresAt), path, now));
    body.push(...offerFacts(view.job));
    if (open) body.push(...answerForms(ref, formToken(req, res, key, jobAction(driver.id, ref), secure(req))));
    if (view.offer.state === 'accepted') {
      body.push(`<p><a class="button" href="${jobPath(ref)}">Open the job: pickup details and progress</a></p>`);
    }
    body.push(`<p><a href="${DRIVER_HOME_PATH}">All my jobs and earnings</a></p>`);
    send(res, 200, page(`Job offer ${ref}`, driver, body, open));
  }

  /** The job page: an open offer (answer it), a job in hand (details and progress), or how it ended. */
  async function jobPage(
    req: Request,
    res: Response,
    driver: DriverIdentity,
    ref: string,
    status = 200,
    form: StatusForm | null = null,
    errors: StatusErrors = {},
  ): Promise<void> {
    const [feed, booking] = await Promise.all([
      jobFeed(deps.db, holderOf(driver)),
      deps
        .db('bookings')
        .where({ reference: ref, driver_id: driver.id })
        .first<BookingOfDriver | undefined>('id', 'status', 'payment_method', 'fare_pence'),
    ]);
    const job = feed.find((j) => j.bookingReference === ref);
    const csrf = () => formToken(req, res, key, jobAction(driver.id, ref), secure(req));
    const body = [`<h1>Job ${escapeHtml(ref)}</h1>`];
    if (job?.state === 'offered') {
      const expires = new Date(job.offerExpiresAt as string);
      body.push(
        `<p class="status" role="status">${escapeHtml(stateLabel(job.state))}</p>`,
        ...countdown(expires, jobPath(ref), Date.now()),
        ...jobFacts(job, { passenger: false }),
        ...answerForms(ref, csrf()),
      );
      return send(res, status, page(`Job ${ref}`, driver, body, true));
    }
    if (job && booking) {
      body.push(
        `<p class="status" role="status">${escapeHtml(stateLabel(job.state))}</p>`,
        ...jobFacts(job, { passenger: true }),
        `<p class="note">The passenger pays you by ${escapeHtml((METHOD_LABELS[booking.payment_method as Payment['method']] ?? booking.payment_method.replace(/_/g, ' ')).toLowerCase())}.</p>`,
        ...progressForms(ref, booking.status, csrf(), job.fareGBP, booking.payment_method, form, errors),
      );
      return send(res, status, page(`Job ${ref}`, driver, body));
    }
    if (booking && (booking.status === 'completed' || booking.status === 'cancelled')) {
      const paid =
        booking.status === 'completed'
          ? await deps
              .db('settlement_records')
              .where({ booking_id: booking.id, driver_id: driver.id })
              .orderBy('id', 'desc')
              .first<{ method: string | null; amount_pence: number } | undefined>('method', 'amount_pence')
          : undefined;
      body.push(
        `<p class="status" role="status">${escapeHtml(stateLabel(booking.status))}</p>`,
        ...(errors.general ? [alertBox(errors.general)] : []),
        ...(paid
          ? [
              `<p class="big">Paid ${escapeHtml(pounds.format(paid.amount_pence / 100))} by ${escapeHtml((METHOD_LABELS[paid.method as Payment['method']] ?? paid.method ?? 'other').toLowerCase())}.</p>`,
            ]
          : []),
        `<p><a class="button" href="${DRIVER_HOME_PATH}">My jobs and earnings</a></p>`,
      );
      return send(res, status, page(`Job ${ref}`, driver, body));
    }
    message(res, 404, 'No such job for you', `There is no open offer or job ${ref} for you.`);
  }

  return {
    /** `GET /o/{code}` for a browser. */
    async offer(req, res) {
      await limits.page(req, res);
      res.vary('Accept');
      const code = String(req.params.code);
      const found = await findOfferByCode(deps, code);
      if (!found) {
        return message(res, 404, 'This job link is not valid', 'Check that the whole link from the SMS was opened.');
      }
      const driver = await sessionDriver(req, deps.db, key);
      if (driver && found.driverId !== driver.id) {
        return message(
          res,
          403,
          'This job was offered to another driver',
          'You are signed in as a driver this offer was not sent to. Only the driver who got the job card can answer it.',
        );
      }
      offerPage(req, res, code, found, driver);
    },

    /** `GET /driver/sign-in?next=…`: the form on its own (signed-in drivers go straight on). */
    async signInPage(req, res) {
      await limits.page(req, res);
      const next = safeNext(req.query.next);
      if (await sessionDriver(req, deps.db, key)) {
        res.redirect(303, next);
        return;
      }
      signInPage(req, res, 200, next);
    },

    /**
     * `POST /driver/sign-in`: the form token, then the driver token checked as the API checks
     * it (`authenticateDriver`); a wrong one counts against the IP as a failed API key does
     * (429 after too many). Success sets the session cookie and goes back to `next` (one of
     * our driver pages only).
     */
    async signIn(req, res) {
      await limits.page(req, res);
      const body = (req.body ?? {}) as Record<string, unknown>;
      const next = safeNext(body.next);
      if (!formTokenValid(req, key, SIGN_IN_ACTION, body.csrf)) {
        req.log?.warn('driver sign-in refused: missing or wrong form token');
        return signInPage(
          req,
          res,
          403,
          next,
          'This form could not be checked (it had expired, or cookies are blocked). Enter your token again.',
        );
      }
      const token = typeof body.token === 'string' ? body.token.trim() : '';
      const driver = token ? await authenticateDriver(deps.db, token) : null;
      if (!driver) {
        await limits.rateLimits.countAuthFailure(websiteCaller(req).ip);
        return signInPage(
          req,
          res,
          401,
          next,
          'That driver token is not valid, or your account is not approved. Check the token in your approval SMS or e-mail.',
        );
      }
      startSession(res, key, driver.id, sha256(token), secure(req));
      req.log?.info({ driver: driver.id }, 'driver signed in on the web');
      res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
      res.redirect(303, next);
    },

    /** `POST /driver/sign-out`: clears the session cookie on this browser. */
    async signOut(req, res) {
      await limits.page(req, res);
      const driver = await sessionDriver(req, deps.db, key);
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (driver && !formTokenValid(req, key, signOutAction(driver.id), body.csrf)) {
        return message(
          res,
          403,
          'This form could not be checked',
          'Open your jobs page again and sign out from there.',
        );
      }
      endSession(res, secure(req));
      res.set({ 'Cache-Control': 'no-store' });
      res.redirect(303, DRIVER_HOME_PATH);
    },

    /**
     * `POST /driver/sign-out-everywhere`: a lost or shared phone. The token is replaced, so
     * every session (this one too) and the old token end at once; the new token goes to the
     * driver's e-mail only (the SMS is a notice), and they sign in with it.
     */
    async signOutEverywhere(req, res) {
      await limits.page(req, res);
      const driver = await sessionDriver(req, deps.db, key);
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (!driver) return res.redirect(303, DRIVER_HOME_PATH);
      if (!formTokenValid(req, key, signOutEverywhereAction(driver.id), body.csrf)) {
        return message(
          res,
          403,
          'This form could not be checked',
          'Open your jobs page again and sign out from there.',
        );
      }
      let replaced: Awaited<ReturnType<typeof replaceDriverToken>>;
      try {
        replaced = driver.tokenHash
          ? await replaceDriverToken(deps.db, driver.id, `driver:${driver.id}`, driver.tokenHash)
          : null;
      } catch (err) {
        if (!(err instanceof AppError) || err.code !== 'rate_limited') throw err;
        for (const [k, v] of Object.entries(err.headers ?? {})) res.setHeader(k, v);
        return message(res, 429, 'Too many new tokens', err.message);
      }
      endSession(res, secure(req));
      res.set({ 'Cache-Control': 'no-store' });
      if (!replaced) {
        // Suspended in the meantime: the session has ended as any of theirs has (to the sign-in form).
        const now = await deps.db('drivers').where({ id: driver.id }).first<{ status: string } | undefined>('status');
        if (now?.status !== 'approved') return res.redirect(303, DRIVER_HOME_PATH);
        // The token this session holds was replaced in the meantime (another device, a form sent twice).
        return message(
          res,
          409,
          'Already signed out everywhere',
          'Your token was replaced already, so this session had ended. The newest token is in your e-mail: sign in with it.',
        );
      }
      req.log?.info({ driver: driver.id }, 'driver signed out everywhere: token replaced');
      return message(
        res,
        200,
        'Signed out on every device',
        'Your old driver token no longer works anywhere. A new one is on its way to your e-mail address (we sent your phone a notice only): sign in with it.',
      );
    },

    /** `GET /driver`: the feed and the dashboard, or the sign-in form. */
    async home(req, res) {
      await limits.page(req, res);
      const driver = await driverOr(req, res, DRIVER_HOME_PATH);
      if (!driver) return;
      const [feed, dashboard, positions] = await Promise.all([
        jobFeed(deps.db, holderOf(driver)),
        driverDashboard(deps.db, driver.id),
        // Redis away: the jobs page still works (its data is in Postgres); the state is unknown.
        presenceIndex(deps.redis, config, driver.testMode === true)
          .positions([driver.id], Date.now())
          .catch((err: unknown) => {
            req.log?.warn({ err }, 'driver presence unavailable');
            return null;
          }),
      ]);
      const declined = typeof req.query.declined === 'string' ? normaliseReference(req.query.declined, prefix) : null;
      const now = Date.now();
      const offers = feed.filter((j) => j.state === 'offered');
      const held = feed.filter((j) => j.state !== 'offered');
      const body = [
        `<h1>Hello, ${escapeHtml(driver.name.split(/\s+/)[0] ?? driver.name)}</h1>`,
        ...(declined
          ? [`<div class="alert done" role="status"><p>You declined ${escapeHtml(declined)}.</p></div>`]
          : []),
        ...availabilitySection(req, res, driver, positions ? positions.has(driver.id) : null),
        '<section aria-labelledby="offers-h">',
        '<h2 id="offers-h">Offers</h2>',
        ...(offers.length === 0
          ? [`<p>No open offers. New offers come by SMS and WhatsApp. <a href="${DRIVER_HOME_PATH}">Refresh</a></p>`]
          : []),
      ];
      for (const job of offers) {
        const ref = job.bookingReference;
        body.push(
          '<div class="card">',
          `<h3><a href="${jobPath(ref)}">${escapeHtml(ref)}</a></h3>`,
          ...countdown(new Date(job.offerExpiresAt as string), DRIVER_HOME_PATH, now),
          ...jobFacts(job, { passenger: false }),
          ...answerForms(ref, formToken(req, res, key, jobAction(driver.id, ref), secure(req))),
          '</div>',
        );
      }
      body.push('</section>', '<section aria-labelledby="jobs-h">', '<h2 id="jobs-h">Jobs in hand</h2>');
      if (held.length === 0) body.push('<p>No jobs in hand.</p>');
      for (const job of held) {
        const ref = job.bookingReference;
        body.push(
          '<div class="card">',
          `<h3>${escapeHtml(ref)}: ${escapeHtml(stateLabel(job.state))}</h3>`,
          '<dl>',
          `<dt>When</dt><dd>${timeElement(new Date(job.pickupTime))} (UK time)</dd>`,
          `<dt>Pickup</dt><dd>${escapeHtml(job.pickup.name)}</dd>`,
          `<dt>Drop-off</dt><dd>${escapeHtml(job.dropoff.name)}</dd>`,
          `<dt>Fare</dt><dd>${escapeHtml(gbpText(job.fareGBP))}</dd>`,
          ...meetAndGreetFact(job.meetAndGreet),
          '</dl>',
          `<p><a class="button" href="${jobPath(ref)}">Open job ${escapeHtml(ref)}</a></p>`,
          '</div>',
        );
      }
      body.push('</section>', ...dashboardSection(dashboard));
      body.push(
        `<form method="post" action="${DRIVER_SIGN_OUT_PATH}">`,
        hidden('csrf', formToken(req, res, key, signOutAction(driver.id), secure(req))),
        `<button type="submit" class="secondary">Sign out ${escapeHtml(driver.name)}</button>`,
        '</form>',
        `<form method="post" action="${DRIVER_SIGN_OUT_EVERYWHERE_PATH}">`,
        hidden('csrf', formToken(req, res, key, signOutEverywhereAction(driver.id), secure(req))),
        '<button type="submit" class="secondary">Sign out on every device (new token by e-mail)</button>',
        '</form>',
      );
      // Always the script: it keeps reporting the location while the driver takes jobs.
      send(res, 200, page('My jobs', driver, body, true));
    },

    /** `GET /driver/jobs/{ref}`. */
    async job(req, res) {
      await limits.page(req, res);
      const ref = refOf(req);
      const driver = await driverOr(req, res, ref ? jobPath(ref) : DRIVER_HOME_PATH);
      if (!driver) return;
      if (!ref) return message(res, 404, 'No such job for you', 'That is not a booking reference.');
      await jobPage(req, res, driver, ref);
    },

    /** `POST /driver/jobs/{ref}/accept`: `acceptOffer`, then the job page. */
    async accept(req, res) {
      const form = await jobForm(req, res, 'accept');
      if (!form) return;
      const { driver, ref } = form;
      try {
        const accepted = await acceptOffer(deps, holderOf(driver), ref, prefix);
        await announce(accepted.bookingId);
      } catch (err) {
        if (offerRefused(res, err, ref)) return;
        throw err;
      }
      res.set({ 'Cache-Control': 'no-store' });
      res.redirect(303, jobPath(ref));
    },

    /** `POST /driver/jobs/{ref}/decline`: `declineOffer` (the job goes to the next driver), then the feed. */
    async decline(req, res) {
      const form = await jobForm(req, res, 'decline');
      if (!form) return;
      const { driver, ref } = form;
      try {
        await declineOffer(deps, holderOf(driver), ref, null, prefix);
      } catch (err) {
        if (offerRefused(res, err, ref)) return;
        throw err;
      }
      res.set({ 'Cache-Control': 'no-store' });
      res.redirect(303, `${DRIVER_HOME_PATH}?declined=${encodeURIComponent(ref)}`);
    },

    /**
     * `POST /driver/jobs/{ref}/status`: `reportProgress` with the step, and for `completed` how
     * the fare was paid (method, amount, card fee). A problem is shown next to its field on the
     * job page, what was typed kept; a step that is no longer allowed is the job page with why.
     */
    async status(req, res) {
      const form = await jobForm(req, res, 'progress');
      if (!form) return;
      const { driver, ref, body } = form;
      const step = STEPS.find((s) => s === body.status);
      if (!step) return jobPage(req, res, driver, ref, 400, null, { general: 'Choose one of the progress buttons.' });
      let payment: Payment | undefined;
      let typed: StatusForm | null = null;
      if (step === 'completed') {
        typed = {
          method: typeof body.method === 'string' ? body.method : '',
          amount: typeof body.amount === 'string' ? body.amount.slice(0, 20) : '',
          fee: typeof body.fee === 'string' ? body.fee.slice(0, 20) : '',
        };
        const errors: StatusErrors = {};
        const method = METHODS.find((m) => m === typed?.method);
        if (!method) errors.method = 'Choose how the fare was paid.';
        const amount = parsePounds(typed.amount, MAX_FARE_GBP);
        if (amount === null) {
          errors.amount = `Enter the amount in pounds, like 28.40 (at most £${MAX_FARE_GBP.toLocaleString('en-GB')}).`;
        }
        const fee = typed.fee.trim() === '' ? 0 : parsePounds(typed.fee, 1_000);
        if (fee === null) errors.fee = 'Enter the fee in pounds, like 0.45 (at most £1,000), or leave it empty.';
        else if (fee > 0 && method && method !== 'card') errors.fee = 'A processing fee applies to card payments only.';
        if (!method || amount === null || fee === null || errors.fee) {
          return jobPage(req, res, driver, ref, 400, typed, errors);
        }
        payment = {
          method,
          amountGBP: amount / 100,
          ...(method === 'card' ? { processorFeeGBP: fee / 100 } : {}),
        };
      }
      try {
        const done = await reportProgress(deps, holderOf(driver), ref, step, payment, prefix);
        if (done.changed) await announce(done.bookingId);
      } catch (err) {
        if (err instanceof AppError && (err.code === 'conflict' || err.code === 'invalid_input')) {
          return jobPage(req, res, driver, ref, err.status, typed, { general: err.message });
        }
        if (err instanceof AppError && err.code === 'job_not_found') {
          return message(res, 404, 'No such job for you', `Job ${ref} is not yours.`);
        }
        throw err;
      }
      res.set({ 'Cache-Control': 'no-store' });
      res.redirect(303, jobPath(ref));
    },

    /**
     * `POST /driver/availability`: start (`available=1` with `lat` and `lng`) or stop taking
     * jobs, in the same presence index the driver API's presence report feeds (the sandbox
     * index for a sandbox driver). The page's buttons post it as a form (answered with the jobs
     * page). Its script posts the location reports (`report=1`, `Accept: application/json`,
     * answered in JSON, errors in the envelope): a report only keeps a driver who is taking jobs
     * there, never starts one, so a page left open elsewhere does not undo a Stop (here, in
     * another tab, or by the driver app) nor revive a presence that timed out: it is 409
     * `conflict`, and the script stops.
     */
    async availability(req, res) {
      await limits.page(req, res);
      const json = req.accepts(['text/html', 'application/json']) === 'application/json';
      const refuse = (status: number, code: ErrorCode, title: string, text: string) => {
        if (json) {
          res.set({ 'Cache-Control': 'no-store' });
          res.status(status).json(errorBody(code, text, [], requestIdOf(req)));
        } else message(res, status, title, text);
      };
      const driver = await sessionDriver(req, deps.db, key);
      if (!driver) {
        if (json) return refuse(401, 'unauthorized', 'Signed out', 'Sign in again to keep taking jobs.');
        return signInPage(req, res, 401, DRIVER_HOME_PATH);
      }
      const body = (req.body ?? {}) as Record<string, unknown>;
      if (!formTokenValid(req, key, availabilityAction(driver.id), body.csrf)) {
        req.log?.warn({ driver: driver.id }, 'driver availability refused: missing or wrong form token');
        return refuse(
          403,
          'forbidden',
          'This form could not be checked',
          'It had expired, or this browser blocks cookies. Open your jobs page again and retry.',
        );
      }
      const index = presenceIndex(deps.redis, config, driver.testMode === true);
      const now = new Date();
      res.set({ 'Cache-Control': 'no-store' });
      if (body.available !== '1') {
        // Stop: off the map at once. The last known location and its time are left as they were.
        await index.remove(driver.id);
        await deps.db('drivers').where({ id: driver.id }).update({ available: false });
        req.log?.info({ driver: driver.id, available: false }, 'driver availability set on the web');
        if (json) {
          res.status(200).json({ available: false, at: now.toISOString() });
          return;
        }
        res.redirect(303, DRIVER_HOME_PATH);
        return;
      }
      const at = coordinates(body.lat, body.lng);
      if (!at) {
        return refuse(
          400,
          'invalid_input',
          'Your location is needed',
          'Passengers near you are offered to you by where you are: allow this page to use your location when the browser asks, then start again.',
        );
      }
      // A report moves a driver who is taking jobs, atomically (never adds one back).
      const report = body.report === '1';
      const recorded = await reportPresence(
        deps,
        driver.id,
        { available: true, ...at },
        now,
        driver.testMode === true,
        { onlyIfLive: report },
      );
      if (!recorded) {
        return refuse(
          409,
          'conflict',
          'You are not taking jobs',
          'You stopped taking jobs (on this page, another one or your app), or your location stopped reaching us: start again to take jobs.',
        );
      }
      if (json) {
        res.status(200).json({ available: true, at: now.toISOString() });
        return;
      }
      req.log?.info({ driver: driver.id, available: true }, 'driver availability set on the web');
      res.redirect(303, DRIVER_HOME_PATH);
    },
  };
}

/** A latitude and longitude from form fields, or null when either is missing, out of range or 0,0. */
function coordinates(rawLat: unknown, rawLng: unknown): { lat: number; lng: number } | null {
  if (typeof rawLat !== 'string' || typeof rawLng !== 'string') return null;
  // Decimal degrees only: Number() would also read "0x10" as 16, "1e1" as 10 and "" as 0.
  const DECIMAL = /^\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)\s*$/;
  if (!DECIMAL.test(rawLat) || !DECIMAL.test(rawLng)) return null;
  const lat = Number(rawLat);
  const lng = Number(rawLng);
  // The presence index's (Redis GEO's) range, as the driver API's presence schema.
  if (!Number.isFinite(lat) || !Number.isFinite(lng) || Math.abs(lat) > MAX_LAT || Math.abs(lng) > 180) {
    return null;
  }
  // 0,0 is a phone without a location fix, as the driver API's presence report refuses it.
  if (isNoFix(lat, lng)) return null;
  return { lat, lng };
}
