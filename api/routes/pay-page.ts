import { Type } from '@sinclair/typebox';
import type { Response } from 'express';
import { sha256 } from '../../shared/crypto.ts';
import { type PaymentState, paymentState } from '../../shared/domain/payment-state.ts';
import { shortDriverName } from '../../shared/services/booking-events.ts';
import { bookingIdOfPayToken } from '../../shared/services/bookings.ts';
import { contentSecurityPolicy, escapeHtml, pageHeaders, renderPage, sendPage, stylesheet } from '../pages/layout.ts';
import { TEST_MODE_CSS, testModeNotice } from '../pages/site.ts';
import { defineRoute, type RouteDef, type StreamedResult } from '../route.ts';

export const PAY_PAGE_PATH = '/pay/:token';

/** A pay token (`payToken`), or a tracking token (`trackingToken`) in a link sent before pay tokens: 43 characters of base64url. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** The page's only style sheet, inline and allowed by its hash: the page loads nothing else. */
const STYLE = stylesheet(
  [
    ':root{color-scheme:light dark;--fg:#1a1a1a;--bg:#fff;--muted:#555;--accent:#0b5cad;--ok:#116b2e;--line:#d0d0d0}',
    '@media (prefers-color-scheme:dark){:root{--fg:#f2f2f2;--bg:#121212;--muted:#bbb;--accent:#8cc4ff;--ok:#7fdc9a;--line:#444}}',
    '*{box-sizing:border-box}',
    'body{margin:0;font:1.0625rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}',
    'main{max-width:32rem;margin:0 auto;padding:1.25rem 1rem 2.5rem}',
    'h1{font-size:1.5rem;margin:0 0 1rem}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}',
    'dl{display:grid;grid-template-columns:auto 1fr;gap:.35rem 1rem;margin:0}dt{color:var(--muted)}dd{margin:0;font-weight:600}',
    '.fare{font-size:1.35rem}',
    'ul{list-style:none;padding:0;margin:0}li{border:1px solid var(--line);border-radius:.5rem;padding:.9rem;margin:0 0 .75rem}',
    'h3{font-size:1rem;margin:0 0 .25rem}p{margin:.25rem 0}',
    '.button{display:block;text-align:center;padding:.85rem 1rem;min-height:3rem;border-radius:.5rem;background:var(--accent);color:var(--bg);font-weight:700;text-decoration:none}',
    '.button:focus-visible{outline:3px solid var(--fg);outline-offset:2px}',
    '.paid{color:var(--ok)}.note{color:var(--muted);font-size:.95rem;margin-top:1.25rem}',
    TEST_MODE_CSS,
  ].join('\n'),
);

/** No script, no forms, nothing loaded: only its own style. */
const HEADERS = pageHeaders(contentSecurityPolicy({ styles: [STYLE] }));

const POUNDS = new Intl.NumberFormat('en-GB', { style: 'currency', currency: 'GBP' });

interface PayRow {
  id: string;
  reference: string;
  status: string;
  fare_pence: number | null;
  payment_method: string;
  driver_name: string | null;
  payment_link: string | null;
  test_mode: boolean;
}

/** An https link, as drivers' links are checked when they apply; anything else is not shown. */
function httpsLink(raw: string | null): string | null {
  if (!raw) return null;
  try {
    return new URL(raw).protocol === 'https:' ? raw : null;
  } catch {
    return null;
  }
}

function page(title: string, body: string[]): string {
  return renderPage({ title, style: STYLE, body });
}

const STATE_LABEL: Record<PaymentState, string> = { due: 'Due', paid: 'Paid', void: 'Nothing to pay' };

function payPage(row: PayRow, state: PaymentState, serviceName: string): string {
  const fare = row.fare_pence === null ? null : POUNDS.format(row.fare_pence / 100);
  const link = httpsLink(row.payment_link);
  // First name and initial, as the tracking page shows; none once the booking is cancelled,
  // as the tracking page shows no driver then either.
  const driver =
    row.driver_name === null || row.status === 'cancelled' ? null : escapeHtml(shortDriverName(row.driver_name));
  const facts = [
    `<dt>Booking</dt><dd>${escapeHtml(row.reference)}</dd>`,
    `<dt>Fare</dt><dd class="fare">${fare === null ? 'to be confirmed by your driver' : escapeHtml(fare)}</dd>`,
    ...(driver === null ? [] : [`<dt>Driver</dt><dd>${driver}</dd>`]),
    `<dt>Payment</dt><dd${state === 'paid' ? ' class="paid"' : ''}>${STATE_LABEL[state]}</dd>`,
  ];
  const body = [
    `<h1>Pay your driver</h1>`,
    ...(row.test_mode ? [testModeNotice('booking')] : []),
    '<dl>',
    ...facts,
    '</dl>',
  ];
  if (state === 'paid') {
    body.push('<p class="note">This fare has been paid. Thank you for travelling with a local driver.</p>');
  } else if (state === 'void') {
    body.push('<p class="note">This booking was cancelled: there is nothing to pay.</p>');
  } else if (row.payment_method === 'account') {
    body.push('<p class="note">This ride is paid on account: there is nothing to pay the driver.</p>');
  } else {
    const amount = fare === null ? 'the fare' : escapeHtml(fare);
    const options: string[] = [];
    if (driver !== null && link !== null) {
      options.push(
        '<li>',
        '<h3>Payment link</h3>',
        `<p><a class="button" href="${escapeHtml(link)}" rel="noopener noreferrer">Pay ${driver} by payment link</a></p>`,
        `<p>Opens ${driver}'s own payment page: the whole fare goes to your driver.</p>`,
        '</li>',
      );
    }
    options.push(
      '<li>',
      '<h3>Cash</h3>',
      `<p>Pay ${amount} in cash to your driver at the end of the journey.</p>`,
      '</li>',
    );
    body.push('<section aria-labelledby="how">', '<h2 id="how">How to pay</h2>', '<ul>', ...options, '</ul>');
    if (driver === null) {
      body.push("<p>Your driver's own payment link appears here once a driver is assigned to your booking.</p>");
    }
    body.push('</section>');
  }
  body.push(
    `<p class="note">${escapeHtml(serviceName)} takes no commission and never takes payment: the fare goes straight to your driver, and nobody here will ask for your card details.</p>`,
  );
  return page(`Pay your driver: ${row.reference} | ${serviceName}`, body);
}

function notFoundPage(serviceName: string): string {
  return page(`Link not found | ${serviceName}`, [
    '<h1>This payment link is not valid</h1>',
    '<p>Check that the whole link from your booking confirmation was opened, or pay your driver in cash.</p>',
  ]);
}

function sendHtml(res: Response, status: number, html: string): StreamedResult {
  sendPage(res, status, html, HEADERS);
  return { stream: true };
}

/**
 * `GET /pay/{token}`: the pay-the-driver page a booking's `payDriverUrl` opens. The token is the
 * booking's pay token (`payToken`: its id and a MAC, so this link opens this page only); the
 * tracking token, which pay links sent before pay tokens carry, is still taken (only its
 * SHA-256 is stored; that link opens the tracking page anyway). A small server-rendered page: the
 * booking reference, the fare, the assigned driver's name and their own payment link (when they
 * have one), the cash option and the payment state (`paymentState`, as the booking lookup
 * answers it). It never has a form or card fields: the service never takes payment. Every value
 * is HTML-escaped; its only style is inline and allowed by hash in a strict Content-Security-Policy,
 * so the page loads and runs nothing else. An unknown or malformed token is a 404 page.
 */
export function payPageRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: PAY_PAGE_PATH,
      operationId: 'payDriverPage',
      summary: 'The pay-the-driver page (HTML) of a booking',
      tags: ['bookings'],
      auth: 'none',
      documented: false,
      params: Type.Object({ token: Type.String() }),
      responses: {
        200: { description: 'The page', contentType: 'text/html' },
        404: { description: 'Unknown link', contentType: 'text/html' },
      },
      handler: async ({ deps, params, res }) => {
        const serviceName = deps.config.serviceName;
        if (!TOKEN.test(params.token)) return sendHtml(res, 404, notFoundPage(serviceName));
        const bookingId = bookingIdOfPayToken(params.token, deps.config.dataEncryptionKey);
        const row = await deps
          .db('bookings as b')
          .leftJoin('drivers as d', 'd.id', 'b.driver_id')
          .where(bookingId === null ? { 'b.tracking_token_hash': sha256(params.token) } : { 'b.id': bookingId })
          .first<PayRow | undefined>(
            'b.id',
            'b.reference',
            'b.status',
            'b.fare_pence',
            'b.payment_method',
            'b.test_mode',
            // Ours, else the one a partner operator holding the booking named.
            deps.db.raw(`coalesce(d.name, b.operator_driver->>'name') as driver_name`),
            'd.payment_link',
          );
        if (!row) return sendHtml(res, 404, notFoundPage(serviceName));
        const records = await deps
          .db('settlement_records')
          .where({ booking_id: row.id })
          .select<Array<{ kind: string; amount_pence: number }>>('kind', 'amount_pence');
        return sendHtml(res, 200, payPage(row, paymentState(row, records), serviceName));
      },
    }),
  ];
}
