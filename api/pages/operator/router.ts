import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ApiDeps } from '../../deps.ts';
import { formReader } from '../../middleware/body.ts';
import type { RateLimits } from '../../middleware/rate-limit.ts';
import { pageHandler, pageLimiter, sendMessagePage } from '../site.ts';
import { loginHandlers } from './login.ts';
import { operatorPages } from './pages.ts';
import { QUEUES_PATH, queuesBoard } from './queues-board.ts';
import { HOME_PATH, LOGIN_PATH, requireSession } from './session.ts';

/** Every path `operatorRouter` serves lies under this (`servedUnder`, api/app.ts). */
export const OPERATOR_PATHS = [HOME_PATH];

type Handler = (req: Request, res: Response) => Promise<void>;

/**
 * A path whose percent-escapes do not decode to UTF-8 (`/operator/nope/%ff`) goes on as the error
 * Express raises for such a route parameter (a URIError with status 400), which the app answers
 * with its "This link is not valid" page, as it does on every page prefix.
 */
function refuseMalformedPath(req: Request, _res: Response, next: NextFunction): void {
  const path = req.originalUrl.split('?', 1)[0] ?? '';
  try {
    decodeURIComponent(path);
  } catch (err) {
    if (!(err instanceof URIError)) throw err;
    next(Object.assign(new URIError('Failed to decode the path'), { status: 400, statusCode: 400 }));
    return;
  }
  next();
}

/**
 * The operator pages (`/operator`), served by the API process: sign-in, the overview, driver
 * applications, partners and keys, dead webhooks, and the BullMQ queue board. Every path but
 * the sign-in page requires an operator session (session.ts). Mounted before the API's JSON
 * body parser, as the website is: forms post `application/x-www-form-urlencoded`, and the queue
 * board parses its own JSON. Pages are limited by the API's Redis limiter per client IP (the
 * general per-IP limit; sign-in has its own limits, login.ts); every refusal or failure is a
 * page, never the API's JSON envelope.
 */
export function operatorRouter(deps: ApiDeps, limits: RateLimits): Router {
  const serviceName = deps.config.serviceName;
  const router = express.Router();
  const readForm = formReader();
  const page = pageLimiter(limits);
  const session = requireSession(deps);

  /** The form body, parsed inside the page handler so a malformed or oversized form is a page too. */
  const withForm =
    (handler: Handler): Handler =>
    async (req, res) => {
      await readForm(req, res);
      await handler(req, res);
    };
  /** A page of a signed-in operator: limited, then the handler, failures as pages. */
  const handle = (handler: Handler) =>
    pageHandler(serviceName, async (req, res) => {
      await page(req, res);
      await handler(req, res);
    });

  const login = loginHandlers(deps, limits);
  router.get(LOGIN_PATH, pageHandler(serviceName, login.show));
  router.post(LOGIN_PATH, pageHandler(serviceName, withForm(login.submit)));
  router.post('/operator/logout', session, handle(withForm(login.logout)));

  const pages = operatorPages(deps);
  router.get(HOME_PATH, session, handle(pages.overview));
  router.get('/operator/drivers', session, handle(pages.drivers));
  for (const action of ['approve', 'reject', 'suspend', 'trial'] as const) {
    router.post(`/operator/drivers/:id/${action}`, session, handle(withForm(pages.driverAction(action))));
  }
  router.get('/operator/partners', session, handle(pages.partners));
  router.post('/operator/partners', session, handle(withForm(pages.createPartner)));
  router.post('/operator/partners/:id/keys', session, handle(withForm(pages.createKey)));
  router.post('/operator/partners/:id/trial', session, handle(withForm(pages.partnerTrial)));
  router.post('/operator/keys', session, handle(withForm(pages.createKey)));
  router.post('/operator/keys/:id/revoke', session, handle(withForm(pages.revokeKey)));
  router.get('/operator/webhooks', session, handle(pages.webhooks));
  router.post('/operator/webhooks/:id/replay', session, handle(withForm(pages.replay)));

  // The queue board: its UI, its assets and its JSON API, all behind the session; the API
  // answers 401 without one (its script cannot follow a redirect to the sign-in page).
  router.use(
    QUEUES_PATH,
    requireSession(deps, { api: (req) => req.originalUrl.startsWith(`${QUEUES_PATH}/api/`) }),
    ...queuesBoard(deps.queues, { serviceName, publicBaseUrls: deps.config.publicBaseUrls }),
  );

  // Anything else under /operator: a path whose escapes do not decode is the 400 page of a link
  // that is not valid (`malformedLinkPage`, api/app.ts), decided by the path as on the routes
  // with an id, before any session is asked for; else a 404 page, for signed-in operators only.
  router.use(HOME_PATH, refuseMalformedPath, session, (_req: Request, res: Response) =>
    sendMessagePage(
      res,
      serviceName,
      404,
      'Page not found',
      ['There is no operator page here.'],
      [`<p><a href="${HOME_PATH}">Operator overview</a></p>`],
    ),
  );
  return router;
}
