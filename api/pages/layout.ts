import { createHash } from 'node:crypto';
import type { Response } from 'express';

/**
 * The shell every server-rendered page shares (the pay-the-driver page, the MCP authorization
 * page, the booking and tracking pages, the API docs): the document skeleton, the escape
 * helper, the Content-Security-Policy built from the page's own style hashes, and the headers
 * that keep pages out of caches, search engines, referrers and frames.
 *
 * Pages load nothing from elsewhere: their style sheet is inline and allowed by its SHA-256,
 * scripts (where a page has one) come from our own origin, and `default-src 'none'` refuses
 * everything a page does not name.
 */

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escape text for HTML element content and quoted attribute values. */
export const escapeHtml = (value: unknown): string => String(value).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] ?? c);

/** The CSP source of a hash: `'sha256-…'`. */
export function sha256Source(content: string): string {
  return `'sha256-${createHash('sha256').update(content).digest('base64')}'`;
}

/** An inline style sheet and the CSP source that allows exactly it. */
export interface Stylesheet {
  css: string;
  source: string;
}

export function stylesheet(css: string): Stylesheet {
  return { css, source: sha256Source(css) };
}

export interface CspOptions {
  /** Inline style sheets of the page (allowed by hash), and any other style sources. */
  styles?: readonly Stylesheet[];
  styleSrc?: readonly string[];
  /** Script sources; none by default (no script may run). */
  scriptSrc?: readonly string[];
  /** Where fetch/EventSource may connect; none by default. */
  connectSrc?: readonly string[];
  /** Images; none by default. */
  imgSrc?: readonly string[];
  fontSrc?: readonly string[];
  /** Where forms may post; none by default. */
  formAction?: readonly string[];
}

/** `default-src 'none'` and only what the page names: never 'unsafe-inline' or 'unsafe-eval'. */
export function contentSecurityPolicy(opts: CspOptions = {}): string {
  const list = (values: readonly string[] | undefined) => (values && values.length > 0 ? values.join(' ') : "'none'");
  const styles = [...(opts.styles ?? []).map((s) => s.source), ...(opts.styleSrc ?? [])];
  const directives = [
    "default-src 'none'",
    ...(opts.scriptSrc?.length ? [`script-src ${list(opts.scriptSrc)}`] : []),
    ...(styles.length ? [`style-src ${list(styles)}`] : []),
    `img-src ${list(opts.imgSrc)}`,
    ...(opts.fontSrc?.length ? [`font-src ${list(opts.fontSrc)}`] : []),
    ...(opts.connectSrc?.length ? [`connect-src ${list(opts.connectSrc)}`] : []),
    "base-uri 'none'",
    `form-action ${list(opts.formAction)}`,
    "frame-ancestors 'none'",
  ];
  return directives.join('; ');
}

/** The headers of every page: its CSP, not cached (pages carry personal data and form tokens), not indexed, no referrer, no framing. */
export function pageHeaders(csp: string, opts: { index?: boolean } = {}): Record<string, string> {
  return {
    'Content-Security-Policy': csp,
    'X-Frame-Options': 'DENY',
    'Cache-Control': 'no-store',
    ...(opts.index ? {} : { 'X-Robots-Tag': 'noindex' }),
    'Referrer-Policy': 'no-referrer',
  };
}

export interface PageOptions {
  title: string;
  /** The page's inline style sheet (its hash goes in the page's CSP). */
  style?: Stylesheet;
  /** Extra elements of the head (style sheets or scripts from our own origin). */
  head?: readonly string[];
  /** Before `<main>` (a site header). */
  header?: readonly string[];
  /** The content of `<main>`. */
  body: readonly string[];
  /** After `<main>` (a footer, scripts). */
  footer?: readonly string[];
  /** false: leave out the noindex meta (public documentation). */
  noindex?: boolean;
  /**
   * false: the body goes in a plain `<div>`, for a page whose content renders its own `<main>`
   * (Swagger UI on /docs): a page has one main landmark, never one inside another.
   */
  mainLandmark?: boolean;
  lang?: string;
}

/** The document: doctype, language, charset, mobile viewport, no referrer, title, the inline style, the content. */
export function renderPage(p: PageOptions): string {
  return [
    '<!doctype html>',
    `<html lang="${escapeHtml(p.lang ?? 'en')}"><head><meta charset="utf-8">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    ...(p.noindex === false ? [] : ['<meta name="robots" content="noindex">']),
    '<meta name="referrer" content="no-referrer">',
    `<title>${escapeHtml(p.title)}</title>`,
    ...(p.style ? [`<style>${p.style.css}</style>`] : []),
    ...(p.head ?? []),
    `</head><body>${(p.header ?? []).join('\n')}${p.mainLandmark === false ? '<div>' : '<main>'}`,
    ...p.body,
    `${p.mainLandmark === false ? '</div>' : '</main>'}${(p.footer ?? []).join('\n')}</body></html>`,
  ].join('\n');
}

/** Send a page with its headers (pageHeaders, plus any given). */
export function sendPage(res: Response, status: number, html: string, headers: Record<string, string>): void {
  res.status(status).set(headers).type('html').send(html);
}
