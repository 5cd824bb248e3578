import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ApiDeps } from '../deps.ts';
import { formReader } from '../middleware/body.ts';
import type { RateLimits } from '../middleware/rate-limit.ts';
import { OFFER_LINK_PATH } from '../routes/offers.ts';
import { PASSENGER_VERIFY_LINK_PATH } from '../routes/passenger-verify.ts';
import { sendAsset } from './assets.ts';
import { BOOK_PATH, bookHandlers, REQUOTE_PATH } from './book-page.ts';
import { DOCS_PATH, DOCS_SCRIPT_FILE, docsHandlers, docsScript, SWAGGER_ASSET_PATH } from './docs-page.ts';
import {
  DRIVER_ACCEPT_PATH,
  DRIVER_AVAILABILITY_PATH,
  DRIVER_DECLINE_PATH,
  DRIVER_HOME_PATH,
  DRIVER_JOB_PATH,
  DRIVER_SIGN_IN_PATH,
  DRIVER_SIGN_OUT_EVERYWHERE_PATH,
  DRIVER_SIGN_OUT_PATH,
  DRIVER_STATUS_PATH,
  driverHandlers,
} from './driver-pages.ts';
import { driverScript, driverScriptPath } from './driver-script.ts';
import { pageHandler, pageLimiter } from './site.ts';
import { TRACK_CANCEL_PATH, TRACK_PATH, trackHandlers } from './track-page.ts';
import { trackScript, trackScriptPath } from './track-script.ts';
import { verifyLinkHandlers } from './verify-page.ts';

/** The request names JSON in its Accept header and prefers it to HTML: an API client, not a browser. */
const asksForJson = (req: Request): boolean =>
  /\bapplication\/json\b/i.test(req.get('accept') ?? '') &&
  req.accepts(['application/json', 'text/html']) === 'application/json';

/** Every path `websiteRouter` serves lies under one of these (`servedUnder`, api/app.ts). */
export const WEBSITE_PATHS = ['/book', '/track', '/o', '/driver', PASSENGER_VERIFY_LINK_PATH, '/docs', '/assets'];

/**
 * The passenger website and the API documentation, served by the API process on every
 * connected domain: `/book/{quoteId}` (a quote's bookingUrl), `/track/{token}` (a booking's
 * trackingUrl), the driver pages (`/o/{code}` for a browser, `/driver…`), `/docs` (Swagger UI
 * over the OpenAPI document), and their static assets.
 *
 * Mounted before the API's JSON body parser (its forms post `application/x-www-form-urlencoded`),
 * as the MCP authorization page is. Pages are limited by the API's Redis limiter per client
 * IP (the general per-IP limit; re-quoting also spends the caller's quote allowance), and every
 * refusal or failure is a page, never the API's JSON envelope.
 */
export function websiteRouter(deps: ApiDeps, limits: RateLimits): Router {
  const { config } = deps;
  const router = express.Router();
  const readForm = formReader();
  const serviceName = config.serviceName;
  const page = pageLimiter(limits);
  const quote = pageLimiter(limits, [
    { name: 'quotes', points: config.pricing.quoteLimitPerHour, durationSeconds: 3600 },
  ]);

  /** The form body, parsed inside the page handler so a malformed or oversized form is a page too. */
  const withForm =
    (handler: (req: Request, res: Response) => Promise<void>) =>
    async (req: Request, res: Response): Promise<void> => {
      await readForm(req, res);
      await handler(req, res);
    };
  const handle = (handler: (req: Request, res: Response) => Promise<void>) => pageHandler(serviceName, handler);

  const book = bookHandlers(deps, { page, book: page, quote });
  router.get(BOOK_PATH, handle(book.show));
  router.post(BOOK_PATH, handle(withForm(book.submit)));
  router.post(REQUOTE_PATH, handle(withForm(book.requote)));

  const track = trackHandlers(deps, { page });
  router.get(TRACK_PATH, handle(track.show));
  router.get(TRACK_CANCEL_PATH, handle(track.confirm));
  router.post(TRACK_CANCEL_PATH, handle(withForm(track.cancel)));

  // The driver pages: the job card's short link for a browser (JSON callers go on to the API
  // route of the same path), sign-in, the feed and dashboard, a job and its forms.
  const driver = driverHandlers(deps, { page, rateLimits: limits });
  const offerPage = handle(driver.offer);
  router.get(OFFER_LINK_PATH, (req: Request, res: Response, next: NextFunction) =>
    req.accepts(['application/json', 'text/html']) === 'text/html' ? offerPage(req, res) : next(),
  );
  router.get(DRIVER_SIGN_IN_PATH, handle(driver.signInPage));
  router.post(DRIVER_SIGN_IN_PATH, handle(withForm(driver.signIn)));
  router.post(DRIVER_SIGN_OUT_PATH, handle(withForm(driver.signOut)));
  router.post(DRIVER_SIGN_OUT_EVERYWHERE_PATH, handle(withForm(driver.signOutEverywhere)));
  router.get(DRIVER_HOME_PATH, handle(driver.home));
  router.get(DRIVER_JOB_PATH, handle(driver.job));
  router.post(DRIVER_ACCEPT_PATH, handle(withForm(driver.accept)));
  router.post(DRIVER_DECLINE_PATH, handle(withForm(driver.decline)));
  router.post(DRIVER_STATUS_PATH, handle(withForm(driver.status)));
  router.post(DRIVER_AVAILABILITY_PATH, handle(withForm(driver.availability)));

  // The e-mail verification link opened in a browser: a page with a Confirm button. A caller
  // that takes HTML gets the page unless it names JSON in its Accept header and prefers it:
  // mail scanners that open every link ask for `*/*` or nothing (or for HTML), and going on to
  // the API route of the same path, which verifies at once, would confirm addresses nobody
  // confirmed. One that takes no HTML at all (an API client asking for XML, say) gets the API's
  // JSON answer.
  const verify = verifyLinkHandlers(deps, { page });
  const verifyPage = handle(verify.show);
  router.get(PASSENGER_VERIFY_LINK_PATH, (req: Request, res: Response, next: NextFunction) =>
    !asksForJson(req) && req.accepts('text/html') ? verifyPage(req, res) : next(),
  );
  // The page's Confirm form posts here; a JSON client (a JSON body, or asking for JSON and not
  // HTML) is passed on to the API, which verifies by GET only and answers 405 in its envelope.
  const confirm = handle(withForm(verify.confirm));
  router.post(PASSENGER_VERIFY_LINK_PATH, (req: Request, res: Response, next: NextFunction) => {
    const jsonBody = /^application\/(?:[\w.+-]+\+)?json\b/i.test(req.get('content-type') ?? '');
    return jsonBody || asksForJson(req) ? next() : confirm(req, res);
  });

  const docs = docsHandlers(deps, { page });
  router.get(DOCS_PATH, handle(docs.page));
  router.get(SWAGGER_ASSET_PATH, (req: Request, res: Response, next: NextFunction) =>
    docs.asset(req, res, next).catch(next),
  );

  // The website's own scripts, at paths carrying their content hash.
  router.get('/assets/:file', (req: Request, res: Response, next: NextFunction) => {
    const file = `/assets/${String(req.params.file)}`;
    if (file === trackScriptPath()) return sendAsset(req, res, trackScript(), { immutable: true });
    if (file === driverScriptPath()) return sendAsset(req, res, driverScript(), { immutable: true });
    if (file === `/assets/${DOCS_SCRIPT_FILE}`) return sendAsset(req, res, docsScript(), { immutable: true });
    next();
  });
  return router;
}
