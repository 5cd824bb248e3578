import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * `GET /docs`: Swagger UI over the live OpenAPI document, its files served by our own routes
 * from node_modules (no CDN), under a CSP that allows exactly them.
 */
let env: TestEnv;
let api: Served;
const BASES = 'https://directtaxi.example,https://book.directtaxi.example';

beforeAll(async () => {
  env = await createTestEnv({ env: { PUBLIC_BASE_URLS: BASES } });
  api = await serve(await appFor(env));
});
afterAll(async () => {
  await api?.close();
  await env?.cleanup();
});

const swaggerDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const swaggerVersion = (JSON.parse(readFileSync(path.join(swaggerDir, 'package.json'), 'utf8')) as { version: string })
  .version;

describe('GET /docs', () => {
  it('is an HTML page loading Swagger UI only from our own origin, under a CSP that allows it and nothing inline', async () => {
    const res = await fetch(`${api.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html; charset=utf-8/);
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<html lang="en">');
    expect(html).toContain('<div id="swagger-ui" data-spec="/api/public/openapi.json"></div>');
    // Swagger UI renders its own <main>: the page must not wrap it in another.
    expect(html).not.toContain('<main');

    const scripts = [...html.matchAll(/<script src="([^"]+)"[^>]*><\/script>/g)].map((m) => m[1] as string);
    const sheets = [...html.matchAll(/<link rel="stylesheet" href="([^"]+)">/g)].map((m) => m[1] as string);
    expect(scripts).toEqual([
      `/docs/assets/${swaggerVersion}/swagger-ui-bundle.js`,
      expect.stringMatching(/^\/assets\/docs-[0-9a-f]{10}\.js$/),
    ]);
    expect(sheets).toEqual([`/docs/assets/${swaggerVersion}/swagger-ui.css`]);
    // Nothing from another origin, no inline script.
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(html).not.toMatch(/<script>/);

    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toMatch(/style-src 'sha256-[^']+' 'self'/);
    expect(csp).toContain("img-src 'self' data:");
    // "Try it out" may call the API on any connected domain.
    expect(csp).toContain("connect-src 'self' https://directtaxi.example https://book.directtaxi.example");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).toContain("frame-ancestors 'none'");

    for (const src of scripts) {
      const asset = await fetch(`${api.url}${src}`);
      expect(asset.status, src).toBe(200);
      expect(asset.headers.get('content-type'), src).toBe('text/javascript; charset=utf-8');
      expect(asset.headers.get('cache-control'), src).toBe('public, max-age=31536000, immutable');
      expect((await asset.text()).length).toBeGreaterThan(100);
    }
    const css = await fetch(`${api.url}${sheets[0]}`);
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(await css.text()).toContain('.swagger-ui');

    // The start-up script renders the document the page names.
    const init = await (await fetch(`${api.url}${scripts[1]}`)).text();
    expect(init).toContain('SwaggerUIBundle(');
    expect(init).toContain("root.getAttribute('data-spec')");
    const doc = await fetch(`${api.url}/api/public/openapi.json`);
    expect(doc.status).toBe(200);
    expect(((await doc.json()) as { openapi: string }).openapi).toBe('3.1.0');
  });

  it('serves the bundle as installed, gzipped when asked, and nothing else of the package', async () => {
    const bundlePath = `/docs/assets/${swaggerVersion}/swagger-ui-bundle.js`;
    const onDisk = readFileSync(path.join(swaggerDir, 'swagger-ui-bundle.js'));
    // fetch() decompresses by itself: ask through node:http semantics by reading raw bytes.
    const plain = await fetch(`${api.url}${bundlePath}`, { headers: { 'accept-encoding': 'identity' } });
    expect(Buffer.from(await plain.arrayBuffer()).equals(onDisk)).toBe(true);
    const http = await import('node:http');
    const gz = await new Promise<{ encoding: string | undefined; body: Buffer }>((resolve, reject) => {
      http
        .get(`${api.url}${bundlePath}`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ encoding: res.headers['content-encoding'] as string | undefined, body: Buffer.concat(chunks) }),
          );
        })
        .on('error', reject);
    });
    expect(gz.encoding).toBe('gzip');
    expect(gz.body.length).toBeLessThan(onDisk.length / 2);
    expect(gunzipSync(gz.body).equals(onDisk)).toBe(true);

    // Only the listed files of the installed version.
    for (const p of [
      `/docs/assets/${swaggerVersion}/index.html`,
      `/docs/assets/${swaggerVersion}/swagger-initializer.js`,
      `/docs/assets/${swaggerVersion}/..%2Fpackage.json`,
      `/docs/assets/0.0.1/swagger-ui-bundle.js`,
      '/assets/docs-0000000000.js',
    ]) {
      expect((await fetch(`${api.url}${p}`)).status, p).toBe(404);
    }
  });
});
