import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Queues } from '../../../shared/queues/connection.ts';

/**
 * The BullMQ queues on bull-board (`@bull-board/express`), at /operator/queues behind the
 * operator session (the router mounts it after `requireSession`). Its UI is a React app that
 * bull-board serves from node_modules (`/operator/queues/static/…`), with inline styles and its
 * JSON API under `/operator/queues/api/…`, so it gets a policy of its own rather than weakening
 * the pages' one: scripts only from this origin, styles from this origin and inline (what
 * its UI needs), images and fonts from this origin or data:, fetches to this origin only;
 * nothing from elsewhere (its Google Fonts link is refused and the system fonts are used),
 * no framing, no caching, no referrer.
 *
 * Its API changes queues (retry, clean, pause, …) with JSON requests and no form token. The
 * session cookie is SameSite=Strict, so another site's request carries no session; as a second
 * guard, a changing request (not GET or HEAD) is refused unless the browser says it comes from
 * this origin (`Sec-Fetch-Site`, else `Origin`), and one with neither header must still carry
 * the session cookie.
 */

type BoardAdapter = Parameters<typeof createBullBoard>[0]['serverAdapter'];

export const QUEUES_PATH = '/operator/queues';

export const QUEUES_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

function boardHeaders(_req: Request, res: Response, next: NextFunction): void {
  res.set({
    'Content-Security-Policy': QUEUES_CSP,
    'X-Frame-Options': 'DENY',
    'Cache-Control': 'no-store',
    'X-Robots-Tag': 'noindex',
    'Referrer-Policy': 'no-referrer',
  });
  next();
}

/**
 * Whether a changing request comes from this site, as far as the browser tells: its
 * `Sec-Fetch-Site`, else its `Origin` (this request's own origin, or a connected domain when a
 * proxy in front changed the scheme or host).
 */
export function sameOriginRequest(req: Request, publicBaseUrls: readonly string[] = []): boolean {
  const site = req.get('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin';
  const origin = req.get('origin')?.toLowerCase();
  if (origin === undefined) return true;
  const own = `${req.protocol}://${req.get('host') ?? ''}`.toLowerCase();
  return origin === own || publicBaseUrls.some((u) => u.toLowerCase().replace(/\/+$/, '') === origin);
}

function sameOriginWrites(publicBaseUrls: readonly string[]) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.method === 'GET' || req.method === 'HEAD' || sameOriginRequest(req, publicBaseUrls)) {
      next();
      return;
    }
    req.log?.warn({ method: req.method }, 'queue board request refused: not from this origin');
    res.status(403).type('text/plain').send('Refused: not from this origin.');
  };
}

/** The board for every queue of `queues`, as Express handlers for QUEUES_PATH (after the session check). */
export function queuesBoard(
  queues: Queues,
  opts: { serviceName: string; publicBaseUrls: readonly string[] },
): RequestHandler[] {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(QUEUES_PATH);
  createBullBoard({
    queues: Object.values(queues).map((q) => new BullMQAdapter(q)),
    // @bull-board/express 9.10.1 declares its interface with its own copy of @bull-board/api
    // (9.10.1); the types differ only in a private field, the adapter is the same at run time.
    serverAdapter: serverAdapter as unknown as BoardAdapter,
    options: {
      uiConfig: {
        boardTitle: `${opts.serviceName} queues`,
        hideDocsLink: true,
        miscLinks: [{ text: 'Operator pages', url: '/operator' }],
      },
    },
  });
  const board = serverAdapter.getRouter() as RequestHandler;
  // Wrapped so that the board is passed `next` (its own 404 falls through to ours).
  return [boardHeaders, sameOriginWrites(opts.publicBaseUrls), (req, res, next) => board(req, res, next)];
}
