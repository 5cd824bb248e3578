import type { Response } from 'express';
import { contentSecurityPolicy, escapeHtml, pageHeaders, renderPage, sendPage, stylesheet } from '../layout.ts';

/**
 * The operator pages' shell: the site's page skeleton (`renderPage`) with a style sheet of their
 * own (wider than the passenger pages, for lists; the same colours, contrast of at least 4.5:1,
 * light and dark, visible focus, 2.75 rem touch targets), a skip link, the navigation with the
 * sign-out button, and no script at all.
 */
export const OPERATOR_STYLE = stylesheet(
  [
    ':root{color-scheme:light dark;--fg:#1a1a1a;--bg:#fff;--muted:#4f4f4f;--accent:#0b5cad;--on-accent:#fff;--bad:#a4161a;--ok:#116b2e;--line:#c8c8c8;--panel:#f4f6f8}',
    '@media (prefers-color-scheme:dark){:root{--fg:#f2f2f2;--bg:#121212;--muted:#c2c2c2;--accent:#8cc4ff;--on-accent:#0b1a2a;--bad:#ff8a8a;--ok:#7fdc9a;--line:#555;--panel:#1e2226}}',
    '*{box-sizing:border-box}',
    'body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}',
    '.skip{position:absolute;left:-999px;top:0;background:var(--bg);padding:.5rem 1rem}.skip:focus{left:0}',
    '.bar{display:flex;flex-wrap:wrap;align-items:center;gap:.25rem 1rem;padding:.5rem 1rem;border-bottom:1px solid var(--line)}',
    '.bar strong{margin-right:auto}.bar nav ul{display:flex;flex-wrap:wrap;gap:.25rem .5rem;list-style:none;margin:0;padding:0}',
    '.bar nav a{display:inline-block;padding:.55rem .5rem;min-height:2.75rem}.bar nav a[aria-current=page]{font-weight:700;text-decoration-thickness:3px}',
    '.bar form{margin:0}',
    'main{max-width:64rem;margin:0 auto;padding:1.25rem 1rem 2.5rem}',
    'h1{font-size:1.5rem;line-height:1.25;margin:0 0 1rem}h2{font-size:1.2rem;margin:1.75rem 0 .5rem}h3{font-size:1.05rem;margin:0 0 .5rem}',
    'p{margin:.5rem 0}a{color:var(--accent)}',
    'dl{display:grid;grid-template-columns:minmax(8rem,auto) 1fr;gap:.25rem 1rem;margin:0 0 .5rem}dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}',
    '.card{border:1px solid var(--line);border-radius:.5rem;padding:1rem;margin:0 0 1rem;background:var(--panel)}',
    '.actions{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end;margin-top:.75rem}.actions form{margin:0}',
    'label{display:block;font-weight:600;margin:.75rem 0 .25rem}.inline label{margin-top:0}',
    '.hint{display:block;color:var(--muted);font-size:.9rem;margin:0 0 .25rem}',
    'input[type=text],input[type=email],input[type=password],input[type=url],input[type=number]{width:100%;max-width:28rem;font:inherit;padding:.55rem .65rem;min-height:2.75rem;border:2px solid var(--line);border-radius:.4rem;background:var(--bg);color:var(--fg)}',
    '.inline{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}.inline input[type=number]{width:7rem}',
    '.choice{display:flex;align-items:center;gap:.5rem;font-weight:400;min-height:2.75rem;margin:.25rem 0}.choice input{width:1.25rem;height:1.25rem;margin:0}',
    'button{font:inherit;font-weight:700;padding:.55rem 1rem;min-height:2.75rem;border-radius:.4rem;border:2px solid var(--accent);background:var(--accent);color:var(--on-accent);cursor:pointer}',
    'button.secondary{background:transparent;color:var(--accent)}button.danger{background:var(--bad);border-color:var(--bad);color:var(--bg)}',
    'a:focus-visible,button:focus-visible,input:focus-visible{outline:3px solid var(--fg);outline-offset:2px}',
    '.alert{border:3px solid var(--bad);border-radius:.5rem;padding:.75rem 1rem;margin:0 0 1.25rem}.alert h2{margin:0 0 .35rem;font-size:1.1rem}.alert ul{margin:0;padding-left:1.25rem}',
    '.done{border-color:var(--ok)}',
    '.secret{font-family:ui-monospace,monospace;font-weight:700;overflow-wrap:anywhere;user-select:all}',
    '.mono{font-family:ui-monospace,monospace}.muted{color:var(--muted)}',
    '.scroll{overflow-x:auto}table{border-collapse:collapse;min-width:100%}caption{text-align:left;color:var(--muted);padding:0 0 .35rem}',
    'td,th{padding:.45rem .5rem .45rem 0;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}',
    '.filters{display:flex;flex-wrap:wrap;gap:.25rem .75rem;list-style:none;padding:0;margin:0 0 1rem}.filters a{display:inline-block;padding:.5rem .25rem;min-height:2.75rem}.filters a[aria-current=page]{font-weight:700}',
    '.counts{display:grid;grid-template-columns:repeat(auto-fill,minmax(12rem,1fr));gap:.75rem;list-style:none;padding:0;margin:0}',
    '.counts li{border:1px solid var(--line);border-radius:.5rem;padding:.75rem 1rem;background:var(--panel)}.counts strong{display:block;font-size:1.6rem}',
    '.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}',
  ].join('\n'),
);

/** Operator pages load nothing and may post only to this origin. */
export function operatorCsp(): string {
  return contentSecurityPolicy({ styles: [OPERATOR_STYLE], formAction: ["'self'"] });
}

export const NAV = [
  { href: '/operator', label: 'Overview' },
  { href: '/operator/drivers', label: 'Drivers' },
  { href: '/operator/partners', label: 'Partners and keys' },
  { href: '/operator/webhooks', label: 'Dead webhooks' },
  { href: '/operator/queues', label: 'Queues' },
] as const;

export interface ShellOptions {
  serviceName: string;
  title: string;
  /** The signed-in operator and the sign-out form's token; null on the sign-in page. */
  signedIn: { name: string; csrf: string } | null;
  /** Which navigation entry is this page. */
  current?: string;
  body: readonly string[];
}

export function operatorPage(o: ShellOptions): string {
  const nav = o.signedIn
    ? [
        '<nav aria-label="Operator pages"><ul>',
        ...NAV.map(
          (n) =>
            `<li><a href="${n.href}"${n.href === o.current ? ' aria-current="page"' : ''}>${escapeHtml(n.label)}</a></li>`,
        ),
        '</ul></nav>',
        `<form method="post" action="/operator/logout"><input type="hidden" name="csrf" value="${escapeHtml(o.signedIn.csrf)}"><button type="submit" class="secondary">Sign out<span class="sr-only"> ${escapeHtml(o.signedIn.name)}</span></button></form>`,
      ]
    : [];
  return renderPage({
    title: `${o.title} | ${o.serviceName} operators`,
    style: OPERATOR_STYLE,
    header: [
      '<a class="skip" href="#content">Skip to content</a>',
      '<header class="bar">',
      `<strong>${escapeHtml(o.serviceName)} operators</strong>`,
      ...nav,
      '</header>',
    ],
    body: ['<div id="content" tabindex="-1"></div>', ...o.body],
  });
}

export function sendOperatorPage(res: Response, status: number, html: string): void {
  sendPage(res, status, html, pageHeaders(operatorCsp()));
}

/** A notice above a page's content: a success (`role="status"`) or a problem (`role="alert"`). */
export function notice(kind: 'done' | 'problem', lines: readonly string[], title?: string): string {
  if (lines.length === 0) return '';
  const role = kind === 'done' ? 'status' : 'alert';
  return [
    `<div class="alert${kind === 'done' ? ' done' : ''}" role="${role}">`,
    ...(title ? [`<h2>${escapeHtml(title)}</h2>`] : []),
    ...(lines.length === 1
      ? [`<p>${escapeHtml(lines[0])}</p>`]
      : ['<ul>', ...lines.map((l) => `<li>${escapeHtml(l)}</li>`), '</ul>']),
    '</div>',
  ].join('\n');
}

/** A form posting to `action` with the session's token: the fields, then its button. */
export function postForm(
  action: string,
  csrf: string,
  fields: readonly string[],
  button: string,
  opts: { className?: string; buttonClass?: string } = {},
): string {
  return [
    `<form method="post" action="${escapeHtml(action)}">`,
    `<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">`,
    ...(opts.className ? [`<div class="${opts.className}">`] : []),
    ...fields,
    `<button type="submit"${opts.buttonClass ? ` class="${opts.buttonClass}"` : ''}>${button}</button>`,
    ...(opts.className ? ['</div>'] : []),
    '</form>',
  ].join('\n');
}
