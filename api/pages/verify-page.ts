import type { Request, Response } from 'express';
import { normaliseEmail } from '../../shared/domain/email-acceptance.ts';
import { linkState, verifyByLink } from '../../shared/services/email-verification.ts';
import type { ApiDeps } from '../deps.ts';
import { escapeHtml, pageHeaders, sendPage } from './layout.ts';
import { sendMessagePage, siteCsp, sitePage } from './site.ts';

/**
 * The verification link of a passenger's e-mail (`/api/public/v1/passenger-verify/link?token=…`)
 * opened in a browser. The JSON route of the same path verifies on GET for API clients; a
 * browser is shown the address and a Confirm button instead, and the address is verified by
 * the POST that button sends. Mail scanners that open every link in a message (they fetch
 * pages, they do not submit forms) so cannot verify an address nobody confirmed. The link's
 * token is the only credential: the form carries it back, so no cookie is involved.
 */

const TOKEN = /^[0-9A-Za-z_-]{16,128}$/;

function tokenOf(raw: unknown): string | null {
  return typeof raw === 'string' && TOKEN.test(raw) ? raw : null;
}

export function verifyLinkHandlers(deps: ApiDeps, limits: { page(req: Request, res: Response): Promise<void> }) {
  const serviceName = deps.config.serviceName;
  const headers = pageHeaders(siteCsp());
  const unknown = (res: Response) =>
    sendMessagePage(res, serviceName, 404, 'This link has expired', [
      'This verification link is unknown or has expired (a link you asked for is valid for 30 minutes, the one in a booking confirmation for 3 days).',
      'Ask for a new code or link where you started, then open the newest e-mail. An unconfirmed address can still book (up to 8 new bookings an hour).',
    ]);
  const verified = (res: Response, email: string) =>
    sendMessagePage(res, serviceName, 200, 'Your e-mail address is verified', [
      `${normaliseEmail(email)} is verified. You can close this page and carry on where you were.`,
    ]);

  return {
    async show(req: Request, res: Response): Promise<void> {
      await limits.page(req, res);
      const token = tokenOf(req.query.token);
      if (!token) return unknown(res);
      const link = await linkState(deps.db, token, { key: deps.config.dataEncryptionKey });
      if (link.state === 'unknown') return unknown(res);
      if (link.state === 'verified') return verified(res, link.email);
      const html = sitePage(serviceName, 'Confirm your e-mail address', [
        '<h1>Confirm your e-mail address</h1>',
        `<p>Confirm that <strong>${escapeHtml(normaliseEmail(link.email))}</strong> is your address.</p>`,
        `<form method="post" action="${escapeHtml(req.baseUrl + req.path)}">`,
        `<input type="hidden" name="token" value="${escapeHtml(token)}">`,
        '<button type="submit">Confirm my e-mail address</button>',
        '</form>',
        '<p class="note">If you did not ask for this, close this page: nothing happens without the button.</p>',
      ]);
      sendPage(res, 200, html, headers);
    },

    async confirm(req: Request, res: Response): Promise<void> {
      await limits.page(req, res);
      const token = tokenOf((req.body as Record<string, unknown> | undefined)?.token);
      if (!token) return unknown(res);
      const result = await verifyByLink(deps.db, token, { key: deps.config.dataEncryptionKey });
      if (!result) return unknown(res);
      verified(res, result.email);
    },
  };
}
