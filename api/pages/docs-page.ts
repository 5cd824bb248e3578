import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Request, Response } from 'express';
import type { ApiDeps } from '../deps.ts';
import { type Asset, CSS, JS, makeAsset, makeLargeAsset, sendAsset } from './assets.ts';
import { contentSecurityPolicy, escapeHtml, pageHeaders, renderPage, sendPage, stylesheet } from './layout.ts';

/**
 * `GET /docs`: the OpenAPI document (`/api/public/openapi.json`, generated from the routes,
 * listing this domain as its server) rendered by Swagger UI. Swagger UI's files come from the
 * `swagger-ui-dist` package in node_modules, served by our own routes under a path carrying the
 * package version (cached for a year); nothing loads from a CDN. Its start-up is a small script
 * of ours from our own origin, so the page runs under `script-src 'self'` with no inline script.
 */

export const DOCS_PATH = '/docs';
export const SWAGGER_ASSET_PATH = '/docs/assets/:version/:file';

const SWAGGER_DIR = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
/** The only files of the package that are served, and their types. */
const SWAGGER_FILES: Record<string, string> = {
  'swagger-ui.css': CSS,
  'swagger-ui-bundle.js': JS,
};

let swaggerVersion: string | null = null;
async function versionOfSwagger(): Promise<string> {
  swaggerVersion ??= (JSON.parse(await readFile(path.join(SWAGGER_DIR, 'package.json'), 'utf8')) as { version: string })
    .version;
  return swaggerVersion;
}

const swaggerAssets = new Map<string, Promise<Asset>>();
function swaggerAsset(file: string): Promise<Asset> {
  let asset = swaggerAssets.get(file);
  if (!asset) {
    const type = SWAGGER_FILES[file] as string;
    asset = readFile(path.join(SWAGGER_DIR, file)).then((body) => makeLargeAsset(body, type));
    // A failed read is tried again by the next request.
    asset.catch(() => swaggerAssets.delete(file));
    swaggerAssets.set(file, asset);
  }
  return asset;
}

/** Swagger UI's start: render the document named by `data-spec` into `#swagger-ui`. */
const DOCS_SCRIPT = makeAsset(
  `(function () {
  'use strict';
  var root = document.getElementById('swagger-ui');
  if (!root || !window.SwaggerUIBundle) return;
  window.ui = window.SwaggerUIBundle({
    url: root.getAttribute('data-spec'),
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
})();
`,
  JS,
);
export const DOCS_SCRIPT_FILE = `docs-${DOCS_SCRIPT.version}.js`;
export const docsScript = (): Asset => DOCS_SCRIPT;

const STYLE = stylesheet(
  [
    'body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1a1a1a;background:#fff}',
    '.intro{max-width:1460px;margin:0 auto;padding:1rem 20px 0}',
    '.intro h1{font-size:1.4rem;margin:0 0 .35rem}.intro p{margin:.25rem 0}.intro a{color:#0b5cad}',
  ].join('\n'),
);

function docsPage(serviceName: string, version: string, specPath: string): string {
  const asset = (file: string) => `/docs/assets/${encodeURIComponent(version)}/${file}`;
  return renderPage({
    title: `API documentation | ${serviceName}`,
    style: STYLE,
    noindex: false,
    // Swagger UI renders the main landmark itself (`<main id="operations">`).
    mainLandmark: false,
    head: [`<link rel="stylesheet" href="${asset('swagger-ui.css')}">`],
    header: [
      '<header class="intro">',
      `<h1>${escapeHtml(serviceName)} API</h1>`,
      `<p>The OpenAPI 3.1 document: <a href="${escapeHtml(specPath)}">${escapeHtml(specPath)}</a> (this domain), <a href="/api/public/v1/openapi.json">/api/public/v1/openapi.json</a> (every connected domain).</p>`,
      '</header>',
    ],
    body: [
      `<div id="swagger-ui" data-spec="${escapeHtml(specPath)}"></div>`,
      '<noscript><p class="intro">The interactive documentation needs JavaScript; the links above are the whole document.</p></noscript>',
    ],
    footer: [
      `<script src="${asset('swagger-ui-bundle.js')}" defer></script>`,
      `<script src="/assets/${DOCS_SCRIPT_FILE}" integrity="${DOCS_SCRIPT.integrity}" defer></script>`,
    ],
  });
}

export function docsHandlers(deps: ApiDeps, limits: { page: (req: Request, res: Response) => Promise<void> }) {
  const { config } = deps;
  // "Try it out" calls the API on this domain (the document's server), which may be any connected domain.
  const origins = [...new Set(config.publicBaseUrls.map((u) => new URL(u).origin))];
  const headers = {
    ...pageHeaders(
      contentSecurityPolicy({
        styles: [STYLE],
        styleSrc: ["'self'"],
        scriptSrc: ["'self'"],
        connectSrc: ["'self'", ...origins],
        imgSrc: ["'self'", 'data:'],
      }),
      { index: true },
    ),
    'Cache-Control': 'no-cache',
  };
  return {
    async page(req: Request, res: Response): Promise<void> {
      await limits.page(req, res);
      sendPage(res, 200, docsPage(config.serviceName, await versionOfSwagger(), '/api/public/openapi.json'), headers);
    },
    /** `/docs/assets/{version}/{file}`: one of Swagger UI's files, for the version installed; anything else is 404. */
    async asset(req: Request, res: Response, next: (err?: unknown) => void): Promise<void> {
      const file = String(req.params.file);
      if (req.params.version !== (await versionOfSwagger()) || !Object.hasOwn(SWAGGER_FILES, file)) return next();
      sendAsset(req, res, await swaggerAsset(file), { immutable: true });
    },
  };
}
