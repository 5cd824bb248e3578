import { createHash } from 'node:crypto';
import { expect } from 'vitest';

/** A server-rendered page as a browser gets it. */
export interface Page {
  status: number;
  headers: Headers;
  html: string;
  /** Where a redirect points (redirects are not followed). */
  location: string | null;
}

/** A browser's cookies for one site: what Set-Cookie gave, sent back on every request. */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  take(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair?.indexOf('=') ?? -1;
      if (pair && eq > 0) this.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
  }

  clear(): void {
    this.cookies.clear();
  }
}

async function asPage(res: Response): Promise<Page> {
  return { status: res.status, headers: res.headers, html: await res.text(), location: res.headers.get('location') };
}

export async function getPage(base: string, path: string, jar?: CookieJar): Promise<Page> {
  const res = await fetch(`${base}${path}`, {
    headers: { accept: 'text/html', ...(jar?.header() ? { cookie: jar.header() } : {}) },
    redirect: 'manual',
  });
  jar?.take(res.headers);
  return asPage(res);
}

/** Post a form as a browser does (application/x-www-form-urlencoded), without following the redirect. */
export async function postForm(
  base: string,
  path: string,
  fields: Record<string, string>,
  jar?: CookieJar,
): Promise<Page> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      accept: 'text/html',
      'content-type': 'application/x-www-form-urlencoded',
      ...(jar?.header() ? { cookie: jar.header() } : {}),
    },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
  jar?.take(res.headers);
  return asPage(res);
}

/** The value of the hidden form token of the form posting to `action` (the first form when none is named). */
export function csrfOf(html: string, action?: string): string {
  const forms = [...html.matchAll(/<form method="post" action="([^"]+)">([\s\S]*?)<\/form>/g)];
  const form = action ? forms.find((f) => f[1] === action) : forms[0];
  const token = /<input type="hidden" name="csrf" value="([^"]+)">/.exec(form?.[2] ?? '')?.[1];
  if (!token) throw new Error(`no form token for ${action ?? 'the first form'} in the page`);
  return token;
}

/** The `name`s of every input, select, textarea and button of the page. */
export function fieldNames(html: string): string[] {
  return [...html.matchAll(/<(?:input|select|textarea)\b[^>]*\bname="([^"]+)"/g)].map((m) => m[1] as string);
}

/** What every page of the site must be: HTML in English for phones, not cached, its inline style allowed by hash in a strict CSP. */
export function expectSafePage(p: Page, opts: { script?: boolean } = {}): void {
  expect(p.headers.get('content-type')).toMatch(/^text\/html; charset=utf-8/);
  expect(p.headers.get('cache-control')).toBe('no-store');
  expect(p.headers.get('referrer-policy')).toBe('no-referrer');
  expect(p.html).toMatch(/^<!doctype html>/);
  expect(p.html).toContain('<html lang="en">');
  expect(p.html).toContain('name="viewport"');
  expect(p.html).not.toContain('<iframe');
  // Nothing loads from another origin.
  expect(p.html).not.toMatch(/(src|href)="(https?:)?\/\//);
  const csp = p.headers.get('content-security-policy') ?? '';
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).not.toContain('unsafe-inline');
  expect(csp).not.toContain('unsafe-eval');
  const style = /<style>([\s\S]*?)<\/style>/.exec(p.html)?.[1] ?? '';
  expect(csp).toContain(`'sha256-${createHash('sha256').update(style).digest('base64')}'`);
  // No inline script: a script is always a file of our own origin.
  for (const m of p.html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)) {
    expect(m[1]).toMatch(/ src="\/[^/]/);
    expect(m[2]).toBe('');
  }
  if (opts.script === false) expect(p.html).not.toContain('<script');
}
