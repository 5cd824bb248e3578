import type { ErrorRequestHandler, Request, Response } from 'express';
import { repeatedHourZone } from '../../shared/domain/london-zone.ts';
import { AppError } from '../../shared/errors.ts';
import type { Caller } from '../middleware/auth.ts';
import { isMalformedPath } from '../middleware/errors.ts';
import type { RateLimits } from '../middleware/rate-limit.ts';
import type { RouteDef, RoutePolicy } from '../route.ts';
import {
  type CspOptions,
  contentSecurityPolicy,
  escapeHtml,
  pageHeaders,
  renderPage,
  sendPage,
  stylesheet,
} from './layout.ts';

/**
 * What the passenger website's pages (booking and tracking) share: one small inline style
 * sheet (mobile first, light and dark, contrast of at least 4.5:1, large touch targets,
 * visible focus), the site header, labels and formats (pounds, Europe/London times), the
 * message pages and the rate limiter.
 */
/** The test-mode notice's style (also in the pay page's own sheet): a dashed accent frame. */
export const TEST_MODE_CSS =
  '.test-mode{border:3px dashed var(--accent);border-radius:.5rem;padding:.6rem 1rem;margin:0 0 1.25rem}';

/**
 * Shown at the top of every passenger page of a test-mode (sandbox) quote or booking, so a
 * tester, or a passenger who was sent a sandbox link by mistake, cannot take it for a real ride.
 */
export function testModeNotice(what: 'quote' | 'booking'): string {
  const text =
    what === 'quote'
      ? 'This is a sandbox quote. Booking it sends no real taxi and charges nothing; its messages are recorded, not sent.'
      : 'This is a sandbox booking. No real taxi is coming and nothing is charged; its messages are recorded, not sent.';
  return `<div class="test-mode" role="note"><p><strong>Test mode.</strong> ${text}</p></div>`;
}

export const SITE_STYLE = stylesheet(
  [
    ':root{color-scheme:light dark;--fg:#1a1a1a;--bg:#fff;--muted:#4f4f4f;--accent:#0b5cad;--on-accent:#fff;--bad:#a4161a;--ok:#116b2e;--line:#c8c8c8;--panel:#f4f6f8}',
    '@media (prefers-color-scheme:dark){:root{--fg:#f2f2f2;--bg:#121212;--muted:#c2c2c2;--accent:#8cc4ff;--on-accent:#0b1a2a;--bad:#ff8a8a;--ok:#7fdc9a;--line:#555;--panel:#1e2226}}',
    '*{box-sizing:border-box}',
    'body{margin:0;font:1.0625rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}',
    '.site{padding:.75rem 1rem;border-bottom:1px solid var(--line);font-weight:700}',
    'main{max-width:34rem;margin:0 auto;padding:1.25rem 1rem 2.5rem}',
    'h1{font-size:1.5rem;line-height:1.25;margin:0 0 1rem}h2{font-size:1.15rem;margin:1.75rem 0 .5rem}',
    'p{margin:.5rem 0}a{color:var(--accent)}',
    'dl{display:grid;grid-template-columns:auto 1fr;gap:.35rem 1rem;margin:0}dt{color:var(--muted)}dd{margin:0;font-weight:600}',
    'table{width:100%;border-collapse:collapse}caption{text-align:left;color:var(--muted);padding:0 0 .35rem}',
    'td,th{padding:.4rem 0;border-bottom:1px solid var(--line);text-align:left;font-weight:400}td:last-child,th:last-child{text-align:right;white-space:nowrap}',
    'tfoot th,tfoot td{font-weight:700;border-bottom:0}',
    '.fare{font-size:1.35rem}.note{color:var(--muted);font-size:.95rem}',
    '.status{font-size:1.35rem;font-weight:700;margin:.25rem 0}',
    'label,legend{display:block;font-weight:600;margin:1.1rem 0 .3rem}fieldset{border:0;padding:0;margin:0}',
    '.hint{display:block;color:var(--muted);font-size:.95rem;margin:-.1rem 0 .35rem}',
    'input[type=text],input[type=tel],input[type=email]{width:100%;font:inherit;padding:.7rem .75rem;min-height:3rem;border:2px solid var(--line);border-radius:.5rem;background:var(--bg);color:var(--fg)}',
    '.choice{display:flex;align-items:center;gap:.6rem;font-weight:400;margin:.35rem 0;min-height:2.75rem}.choice input{width:1.4rem;height:1.4rem;margin:0}',
    '.field-error{color:var(--bad);font-weight:600;margin:.1rem 0 .35rem}',
    '[aria-invalid=true]{border-color:var(--bad)!important}',
    '.alert{border:3px solid var(--bad);border-radius:.5rem;padding:.75rem 1rem;margin:0 0 1.25rem}.alert h2{margin:0 0 .35rem}.alert ul{margin:0;padding-left:1.25rem}',
    '.done{border-color:var(--ok)}',
    'button,.button{display:block;width:100%;text-align:center;font:inherit;font-weight:700;padding:.8rem 1rem;min-height:3rem;margin:1.25rem 0 0;border-radius:.5rem;border:2px solid var(--accent);background:var(--accent);color:var(--on-accent);cursor:pointer;text-decoration:none}',
    'button.secondary,.button.secondary{background:transparent;color:var(--accent)}button.danger{background:var(--bad);border-color:var(--bad);color:var(--bg)}',
    'a:focus-visible,button:focus-visible,input:focus-visible{outline:3px solid var(--fg);outline-offset:2px}',
    'ol.history{padding-left:1.25rem;margin:.25rem 0}ol.history li{margin:.2rem 0}time{font-variant-numeric:tabular-nums}',
    '.reg{font-family:ui-monospace,monospace;font-weight:700;letter-spacing:.05em}',
    '[hidden]{display:none!important}',
    TEST_MODE_CSS,
  ].join('\n'),
);

/** Where the site's pages may post and what they may load: their style, our own scripts and event streams. */
export function siteCsp(opts: Pick<CspOptions, 'scriptSrc' | 'connectSrc'> = {}): string {
  return contentSecurityPolicy({ styles: [SITE_STYLE], formAction: ["'self'"], ...opts });
}

export const POUNDS = new Intl.NumberFormat('en-GB', { style: 'currency', currency: 'GBP' });
export const pounds = (pence: number): string => POUNDS.format(pence / 100);

const LONDON = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  weekday: 'short',
  day: 'numeric',
  month: 'short',
  year: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
});
const LONDON_SHORT = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'Europe/London',
  weekday: 'short',
  day: 'numeric',
  month: 'short',
  hour: '2-digit',
  minute: '2-digit',
});

/** "Wed, 25 Nov 2026, 14:05" in Europe/London ("01:30 GMT" in the hour that happens twice: `repeatedHourZone`). */
export const londonTime = (at: Date): string => `${LONDON.format(at)}${repeatedHourZone(at)}`;
/** The same without the year (status history). */
export const londonShort = (at: Date): string => `${LONDON_SHORT.format(at)}${repeatedHourZone(at)}`;

/** A `<time>` element for a moment, shown in Europe/London. */
export function timeElement(at: Date, short = false): string {
  return `<time datetime="${at.toISOString()}">${escapeHtml(short ? londonShort(at) : londonTime(at))}</time>`;
}

export const VEHICLE_LABELS: Record<string, string> = {
  saloon: 'Saloon',
  estate: 'Estate',
  executive: 'Executive',
  luxury: 'Luxury',
  '5seater': '5-seater',
  '6seater': '6-seater',
  '7seater': '7-seater',
  mpv: 'MPV (8 seats)',
  wav: 'Wheelchair-accessible vehicle',
};

/** The payment methods of the contract (CONTRACT.md section 0) as passengers read them. */
export const PAYMENT_LABELS: Record<string, string> = {
  cash: 'Cash to the driver',
  card: "Card to the driver, on the driver's own card reader",
  pay_link: "The driver's own payment link",
  bank_transfer: 'Bank transfer',
  account: 'On account',
};

/** Booking statuses (CONTRACT.md section 4) as passengers read them; the tracking script uses the same. */
export const STATUS_LABELS: Record<string, string> = {
  pending: 'Booked: a driver is found shortly before pickup',
  dispatching: 'Finding your driver',
  driver_assigned: 'Driver assigned',
  driver_en_route: 'Your driver is on the way',
  driver_arrived: 'Your driver has arrived',
  passenger_on_board: 'On board',
  completed: 'Completed',
  cancelled: 'Cancelled',
  no_driver_available: 'No driver found yet',
};

/**
 * `no_driver_available` as the passenger must read it: while dispatch will ask again before
 * pickup, or once it has stopped (pickup too soon to try again), when waiting is no use.
 */
export const NO_DRIVER_LABELS = {
  retrying: 'No driver found yet: we ask drivers again every few minutes until your pickup time',
  stopped: 'No driver was found: please make other plans (cancelling is free)',
} as const;

export const statusLabel = (status: string): string => STATUS_LABELS[status] ?? status.replace(/_/g, ' ');

/** A site page: the shell with the site's header and style sheet. */
export function sitePage(serviceName: string, title: string, body: readonly string[], footer: readonly string[] = []) {
  return renderPage({
    title: `${title} | ${serviceName}`,
    style: SITE_STYLE,
    header: [`<header class="site">${escapeHtml(serviceName)}</header>`],
    body,
    footer,
  });
}

/** A page that only says something (not found, please wait, something went wrong). */
export function sendMessagePage(
  res: Response,
  serviceName: string,
  status: number,
  title: string,
  paragraphs: readonly string[],
  extra: readonly string[] = [],
): void {
  const html = sitePage(serviceName, title, [
    `<h1>${escapeHtml(title)}</h1>`,
    ...paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`),
    ...extra,
  ]);
  sendPage(res, status, html, pageHeaders(siteCsp()));
}

function clientIp(req: Request): string {
  return req.ip ?? req.socket.remoteAddress ?? 'unknown';
}

/**
 * The API's rate limiter (`createRateLimits`, Redis) for the website's pages: nobody is
 * authenticated, so per client IP, the general per-IP limit plus `policies`. Throws 429
 * `rate_limited` with Retry-After, or 503 when Redis is away, as every API route does.
 */
export function pageLimiter(
  limits: RateLimits,
  policies: RoutePolicy[] = [],
): (req: Request, res: Response) => Promise<void> {
  const middleware = limits.middleware({ rateLimit: policies } as Partial<RouteDef> as RouteDef);
  return async (req, res) => {
    res.locals.caller = websiteCaller(req);
    await middleware(req, res, () => {});
  };
}

/** Who a website request comes from, as the API sees a caller without a key. */
export function websiteCaller(req: Request): Caller {
  return { kind: 'anonymous', ip: clientIp(req) };
}

/** A Retry-After in seconds as a person reads it ("about 15 minutes"), or null without one. */
export function waitInWords(retryAfter: string | undefined): string | null {
  const seconds = Number(retryAfter);
  if (!retryAfter || !Number.isFinite(seconds) || seconds < 0) return null;
  if (seconds < 60) {
    const whole = Math.max(1, Math.ceil(seconds));
    return `${whole} second${whole === 1 ? '' : 's'}`;
  }
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 60) return `about ${minutes} minute${minutes === 1 ? '' : 's'}`;
  const hours = Math.ceil(minutes / 60);
  return `about ${hours} hour${hours === 1 ? '' : 's'}`;
}

/**
 * Run a page's handler; a refusal it did not answer itself (an AppError: 429, 503, …) becomes
 * a page with its status and headers, and a failure of ours a plain 500 page (logged), never
 * the API's JSON envelope or a stack trace.
 */
export function pageHandler(
  serviceName: string,
  handler: (req: Request, res: Response) => Promise<void>,
): (req: Request, res: Response) => Promise<void> {
  return async (req, res) => {
    try {
      await handler(req, res);
    } catch (err) {
      if (res.headersSent) {
        req.log?.error({ err }, 'page failed after the response started');
        res.destroy();
        return;
      }
      if (err instanceof AppError) {
        for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
        // A person cannot read a header: the API's "retry after the number of seconds in
        // Retry-After" says how long, in words.
        const wait = waitInWords(err.headers['Retry-After']);
        const text = wait
          ? err.message.replace(/retry after the number of seconds in Retry-After/, `try again in ${wait}`)
          : err.message;
        const title =
          err.status === 429
            ? 'Please wait a moment'
            : err.status === 503
              ? 'Please try again in a moment'
              : 'This cannot be done';
        sendMessagePage(res, serviceName, err.status, title, [text]);
        return;
      }
      req.log?.error({ err }, 'page failed');
      sendMessagePage(res, serviceName, 500, 'Something went wrong', [
        'Something went wrong on our side. Please try again in a minute.',
      ]);
    }
  };
}

/**
 * The error middleware, before the API's error handler, for a page's link that is not a link:
 * a request for a page (`isPage`: a path under the website's, the pay page's or the operator
 * pages' prefixes) whose percent-escapes do not decode to UTF-8 (`/track/%ff`, `/book/%e2%82`;
 * Express refuses the route parameter before any handler runs) is a 400 page, never the API's
 * JSON envelope. Every other error, and this one on the API's paths, goes on to the envelope.
 */
export function malformedLinkPage(serviceName: string, isPage: (req: Request) => boolean): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (!isMalformedPath(err) || res.headersSent || !isPage(req)) return next(err);
    sendMessagePage(res, serviceName, 400, 'This link is not valid', [
      'This link is not valid: check it was copied whole, or open it again from the message it came in.',
    ]);
  };
}
