import type { Request, Response } from 'express';
import { sha256 } from '../../shared/crypto.ts';
import { hasMeetAndGreet } from '../../shared/domain/dispatch/job-card.ts';
import { placeLabel } from '../../shared/domain/place-label.ts';
import { AppError } from '../../shared/errors.ts';
import {
  type BookingTimeline,
  bookingTimeline,
  publishBookingEvent,
  TERMINAL_STATUSES,
  timelineEvents,
} from '../../shared/services/booking-events.ts';
import { CANCELLABLE, cancelBooking, payToken } from '../../shared/services/bookings.ts';
import { baseUrlFor } from '../base-url.ts';
import type { ApiDeps } from '../deps.ts';
import { formToken, formTokenValid } from './csrf.ts';
import { escapeHtml, pageHeaders, sendPage } from './layout.ts';
import {
  NO_DRIVER_LABELS,
  PAYMENT_LABELS,
  pounds,
  sendMessagePage,
  siteCsp,
  sitePage,
  statusLabel,
  testModeNotice,
  timeElement,
  VEHICLE_LABELS,
} from './site.ts';
import { PAYABLE_STATUSES, trackScript, trackScriptPath } from './track-script.ts';

/**
 * The tracking page a booking's `trackingUrl` opens (`/track/{token}`, the booking's tracking
 * token: only its SHA-256 is stored). Server-rendered, so it shows the current state without
 * script: status, pickup time, route, the driver and vehicle once assigned, the ETA while
 * they are on the way, the status history, the pay-the-driver link once a driver is on the job,
 * a refresh link, and a cancel button (two steps: a confirmation page, no script needed) while
 * cancelling is allowed. With script, `/assets/track-<hash>.js` follows the booking's
 * server-sent events (the API's stream) and updates the page in place.
 */

export const TRACK_PATH = '/track/:token';
export const TRACK_CANCEL_PATH = '/track/:token/cancel';

/** A booking's tracking token: base64url of an HMAC-SHA256 (43 characters). */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

interface TrackRow {
  id: string;
  reference: string;
  status: string;
  pickup: { name: string };
  dropoff: { name: string };
  pickup_time: Date;
  passengers: number;
  vehicle_type: string;
  fare_pence: number | null;
  payment_method: string;
  driver_id: string | null;
  test_mode: boolean;
  /** The fare's rules: a charged meet and greet is shown (`hasMeetAndGreet`). */
  applied_rules: unknown;
}

async function loadBooking(deps: ApiDeps, token: string): Promise<TrackRow | null> {
  if (!TOKEN.test(token)) return null;
  const row = await deps
    .db('bookings')
    .where({ tracking_token_hash: sha256(token) })
    .first<TrackRow | undefined>(
      'id',
      'reference',
      'status',
      'pickup',
      'dropoff',
      'pickup_time',
      'passengers',
      'vehicle_type',
      'fare_pence',
      'payment_method',
      'driver_id',
      'test_mode',
      'applied_rules',
    );
  return row ?? null;
}

const cancelAction = (bookingId: string) => `cancel:${bookingId}`;

function journey(b: TrackRow): string[] {
  return [
    '<section aria-labelledby="journey-h">',
    '<h2 id="journey-h">Your journey</h2>',
    '<dl>',
    `<dt>Pickup</dt><dd>${timeElement(b.pickup_time)} (UK time)</dd>`,
    `<dt>From</dt><dd>${escapeHtml(placeLabel(b.pickup))}</dd>`,
    `<dt>To</dt><dd>${escapeHtml(placeLabel(b.dropoff))}</dd>`,
    `<dt>Passengers</dt><dd>${b.passengers}</dd>`,
    `<dt>Vehicle</dt><dd>${escapeHtml(VEHICLE_LABELS[b.vehicle_type] ?? b.vehicle_type)}</dd>`,
    `<dt>Fare</dt><dd>${b.fare_pence === null ? 'to be confirmed' : escapeHtml(pounds(b.fare_pence))}</dd>`,
    `<dt>Payment</dt><dd>${escapeHtml(PAYMENT_LABELS[b.payment_method] ?? b.payment_method)}</dd>`,
    // As the confirmation e-mail says it: the passenger paid for it, and looks for the name board.
    ...(hasMeetAndGreet(b.applied_rules)
      ? ['<dt>Meet and greet</dt><dd>Your driver meets you in the arrivals hall with a name board</dd>']
      : []),
    '</dl>',
    '</section>',
  ];
}

interface TrackView {
  serviceName: string;
  token: string;
  /** The pay-the-driver link's own token (`payToken`): that page cannot track or cancel. */
  payToken: string;
  booking: TrackRow;
  timeline: BookingTimeline;
  /** The cancel form's token, when cancelling is allowed. */
  cancelToken: string | null;
  alert?: string;
}

function trackPage(v: TrackView): string {
  const { booking: b, timeline: t } = v;
  const status = t.status;
  // No driver: whether waiting is any use (dispatch asks again before pickup) or not.
  const nowLabel =
    status === 'no_driver_available' ? NO_DRIVER_LABELS[t.retrying ? 'retrying' : 'stopped'] : statusLabel(status);
  const token = encodeURIComponent(v.token);
  const events = timelineEvents(t);
  const latest = events[events.length - 1];
  const eta = typeof latest?.etaMinutes === 'number' ? latest.etaMinutes : null;
  const driver = status === 'cancelled' ? null : t.driver;
  const vehicle = driver?.vehicle ?? null;
  const payable = status !== 'cancelled' && (PAYABLE_STATUSES.includes(status) || b.driver_id !== null);
  const finished = TERMINAL_STATUSES.has(status);
  const eventsUrl = `/api/public/v1/booking/${encodeURIComponent(b.reference)}/events?t=${token}`;
  const script = trackScript();
  const body = [
    `<h1>Booking ${escapeHtml(b.reference)}</h1>`,
    ...(b.test_mode ? [testModeNotice('booking')] : []),
    ...(v.alert ? [`<div class="alert" role="alert"><p>${escapeHtml(v.alert)}</p></div>`] : []),
    `<p class="status" id="status" role="status">${escapeHtml(nowLabel)}</p>`,
    `<p id="eta"${eta === null ? ' hidden' : ''}>${eta === null ? '' : `Your driver is about ${eta} ${eta === 1 ? 'minute' : 'minutes'} away.`}</p>`,
    ...(status === 'cancelled' ? ['<p>This booking is cancelled. There is nothing to pay.</p>'] : []),
    ...(finished
      ? []
      : [
          `<p id="live" class="note" hidden data-events="${escapeHtml(eventsUrl)}" data-seq="${t.statusSeq}" data-status="${escapeHtml(t.status)}">This page updates by itself.</p>`,
        ]),
    `<p><a href="/track/${token}">Refresh this page</a> to see the latest status.</p>`,
    `<section id="driver" aria-labelledby="driver-h"${driver ? '' : ' hidden'}>`,
    '<h2 id="driver-h">Your driver</h2>',
    '<dl>',
    `<dt>Driver</dt><dd id="driver-name">${escapeHtml(driver?.name ?? '')}</dd>`,
    `<dt>Vehicle</dt><dd id="vehicle">${escapeHtml(vehicle ? `${vehicle.colour} ${vehicle.make} ${vehicle.model}` : 'to follow')}</dd>`,
    `<dt>Registration</dt><dd id="registration" class="reg">${escapeHtml(vehicle?.registration ?? 'to follow')}</dd>`,
    '</dl>',
    '</section>',
    `<p id="pay"${payable ? '' : ' hidden'}><a class="button" href="/pay/${encodeURIComponent(v.payToken)}">Pay your driver</a></p>`,
    ...journey(b),
    '<section aria-labelledby="history-h">',
    '<h2 id="history-h">History</h2>',
    '<ol id="history" class="history">',
    ...t.entries.map((e) => `<li>${timeElement(e.at, true)} ${escapeHtml(statusLabel(e.status))}</li>`),
    '</ol>',
    '</section>',
  ];
  if (v.cancelToken !== null) {
    body.push(
      '<section id="cancel" aria-labelledby="cancel-h">',
      '<h2 id="cancel-h">Cancel</h2>',
      '<p>Cancelling is free until you are on board.</p>',
      `<form method="post" action="/track/${token}/cancel">`,
      `<input type="hidden" name="csrf" value="${escapeHtml(v.cancelToken)}">`,
      '<button type="submit" class="secondary">Cancel this booking</button>',
      '</form>',
      '</section>',
    );
  }
  body.push(
    `<p class="note">${escapeHtml(v.serviceName)} takes no commission and never takes payment: the fare goes to your driver.</p>`,
  );
  const footer = finished ? [] : [`<script src="${trackScriptPath()}" integrity="${script.integrity}" defer></script>`];
  return sitePage(v.serviceName, `Booking ${b.reference}: ${nowLabel}`, body, footer);
}

function confirmPage(serviceName: string, token: string, b: TrackRow, csrf: string, alert?: string): string {
  const t = encodeURIComponent(token);
  return sitePage(serviceName, `Cancel booking ${b.reference}?`, [
    `<h1>Cancel booking ${escapeHtml(b.reference)}?</h1>`,
    ...(alert ? [`<div class="alert" role="alert"><p>${escapeHtml(alert)}</p></div>`] : []),
    ...journey(b),
    '<p>Your driver is told at once. Cancelling is free.</p>',
    `<form method="post" action="/track/${t}/cancel">`,
    `<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">`,
    '<input type="hidden" name="confirm" value="yes">',
    '<button type="submit" class="danger">Yes, cancel my booking</button>',
    '</form>',
    `<p><a class="button secondary" href="/track/${t}">No, keep my booking</a></p>`,
  ]);
}

function sendNotFound(res: Response, serviceName: string): void {
  sendMessagePage(res, serviceName, 404, 'This tracking link is not valid', [
    'Check that the whole link from your booking confirmation was opened.',
  ]);
}

export interface TrackHandlers {
  show(req: Request, res: Response): Promise<void>;
  confirm(req: Request, res: Response): Promise<void>;
  cancel(req: Request, res: Response): Promise<void>;
}

type Limit = (req: Request, res: Response) => Promise<void>;

export function trackHandlers(deps: ApiDeps, limits: { page: Limit }): TrackHandlers {
  const { config } = deps;
  const serviceName = config.serviceName;
  const key = config.dataEncryptionKey;
  const headers = pageHeaders(siteCsp({ scriptSrc: ["'self'"], connectSrc: ["'self'"] }));
  const secure = (req: Request) => baseUrlFor(req, config).startsWith('https:');

  async function render(req: Request, res: Response, status: number, token: string, b: TrackRow, alert?: string) {
    const timeline = await bookingTimeline(deps.db, b.id, 0);
    if (!timeline) return sendNotFound(res, serviceName);
    const cancelToken = CANCELLABLE.has(timeline.status)
      ? formToken(req, res, key, cancelAction(b.id), secure(req))
      : null;
    sendPage(
      res,
      status,
      trackPage({
        serviceName,
        token,
        payToken: payToken(b.id, key),
        booking: { ...b, status: timeline.status },
        timeline,
        cancelToken,
        alert,
      }),
      headers,
    );
  }

  function renderConfirm(req: Request, res: Response, status: number, token: string, b: TrackRow, alert?: string) {
    const csrf = formToken(req, res, key, cancelAction(b.id), secure(req));
    sendPage(res, status, confirmPage(serviceName, token, b, csrf, alert), headers);
  }

  return {
    async show(req, res) {
      await limits.page(req, res);
      const token = String(req.params.token);
      const b = await loadBooking(deps, token);
      if (!b) return sendNotFound(res, serviceName);
      await render(req, res, 200, token, b);
    },

    /** `GET /track/{token}/cancel`: the confirmation step on its own (a link can lead straight to it). */
    async confirm(req, res) {
      await limits.page(req, res);
      const token = String(req.params.token);
      const b = await loadBooking(deps, token);
      if (!b) return sendNotFound(res, serviceName);
      if (!CANCELLABLE.has(b.status)) {
        res.redirect(303, `/track/${encodeURIComponent(token)}`);
        return;
      }
      renderConfirm(req, res, 200, token, b);
    },

    /**
     * `POST /track/{token}/cancel`: without `confirm=yes`, the confirmation page; with it (and
     * the form token), the API's cancel (`cancelBooking`, then the wake-up of the booking's
     * event streams), then back to the tracking page. A booking that can no longer be
     * cancelled is the tracking page with the reason (409).
     */
    async cancel(req, res) {
      await limits.page(req, res);
      const token = String(req.params.token);
      const b = await loadBooking(deps, token);
      if (!b) return sendNotFound(res, serviceName);
      const body = (req.body ?? {}) as Record<string, unknown>;
      const valid = formTokenValid(req, key, cancelAction(b.id), body.csrf);
      if (b.status === 'cancelled') {
        res.redirect(303, `/track/${encodeURIComponent(token)}`);
        return;
      }
      if (!CANCELLABLE.has(b.status)) {
        return render(
          req,
          res,
          409,
          token,
          b,
          `A booking that is ${statusLabel(b.status).toLowerCase()} can no longer be cancelled.`,
        );
      }
      if (!valid) {
        req.log?.warn({ booking: b.reference }, 'website cancel refused: missing or wrong form token');
        return renderConfirm(
          req,
          res,
          403,
          token,
          b,
          'This form could not be checked (it had expired, or cookies are blocked). Confirm again if you want to cancel.',
        );
      }
      if (body.confirm !== 'yes') return renderConfirm(req, res, 200, token, b);
      try {
        await cancelBooking(deps.db, b.id, null, 'passenger');
      } catch (err) {
        if (err instanceof AppError && err.code === 'cannot_cancel') {
          return render(req, res, 409, token, b, err.message);
        }
        throw err;
      }
      await publishBookingEvent(deps.redis, config.queuePrefix, b.id);
      req.log?.info({ booking: b.reference }, 'website cancel');
      res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
      res.redirect(303, `/track/${encodeURIComponent(token)}`);
    },
  };
}
