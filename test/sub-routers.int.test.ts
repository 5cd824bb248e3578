import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUnder } from '../api/app.ts';
import { MCP_ROUTER_PATHS, mcpRouter } from '../api/mcp/router.ts';
import { createRateLimits } from '../api/middleware/rate-limit.ts';
import { OPERATOR_PATHS, operatorRouter } from '../api/pages/operator/router.ts';
import { WEBSITE_PATHS, websiteRouter } from '../api/pages/router.ts';
import { appFor, createTestEnv, type Served, serve, type TestEnv } from './helpers/env.ts';

/**
 * The MCP server, the website and the operator pages are consulted only for requests under the
 * paths each declares (`servedUnder`, api/app.ts), so an API request skips their layers. These
 * tests keep the declarations true: every route of each router lies under them, and requests
 * are matched as Express matches a mount path.
 */
describe('sub-routers served under their paths', () => {
  let env: TestEnv;
  let served: Served;

  beforeAll(async () => {
    env = await createTestEnv();
    served = await serve(await appFor(env));
  });
  afterAll(async () => {
    await served.close();
    await env.cleanup();
  });

  it('declares a path for every route of each router', () => {
    const deps = { ...env.rt, expectedMigrations: [] };
    const limits = createRateLimits(env.rt.redis, env.config);
    const routers = [
      { name: 'mcp', prefixes: MCP_ROUTER_PATHS, router: mcpRouter(deps, limits) },
      { name: 'website', prefixes: WEBSITE_PATHS, router: websiteRouter(deps, limits) },
      { name: 'operator', prefixes: OPERATOR_PATHS, router: operatorRouter(deps, limits) },
    ];
    for (const { name, prefixes, router } of routers) {
      const paths = router.stack.flatMap((layer) => (layer.route ? [String(layer.route.path)] : []));
      expect(paths.length, name).toBeGreaterThan(1);
      const lower = prefixes.map((p) => p.toLowerCase());
      for (const path of paths) expect(isUnder(lower, path.toLowerCase()), `${name}: ${path}`).toBe(true);
    }
  });

  it('matches a prefix whole, in any case, with or without more after a slash', () => {
    expect(isUnder(['/book'], '/book')).toBe(true);
    expect(isUnder(['/book'], '/book/q1')).toBe(true);
    expect(isUnder(['/book'], '/book/')).toBe(true);
    expect(isUnder(['/book'], '/bookings')).toBe(false);
    expect(isUnder(['/o'], '/operator')).toBe(false);
    expect(isUnder(['/o', '/operator'], '/operator/drivers')).toBe(true);
  });

  it('still reaches each router through the app, and leaves every other path to the API', async () => {
    const get = (path: string) => fetch(`${served.url}${path}`, { redirect: 'manual' });
    // Pages, in any case and with a trailing slash, as Express routes them.
    for (const path of ['/docs', '/DOCS', '/docs/']) {
      const r = await get(path);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type'), path).toContain('text/html');
    }
    const operator = await get('/operator');
    expect(operator.status).toBe(303);
    expect(operator.headers.get('location')).toContain('/operator/login');
    const metadata = await get('/.well-known/oauth-authorization-server');
    expect(metadata.status).toBe(200);
    expect(((await metadata.json()) as { token_endpoint: string }).token_endpoint).toMatch(/\/token$/);
    // A path that only starts like a page's is the API's: its JSON 404.
    for (const path of ['/bookings', '/operators', '/docsx']) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(((await r.json()) as { error: { code: string } }).error.code, path).toBe('not_found');
    }
    // An API route is answered by the API as before.
    const quote = await get('/api/public/v1/quote');
    expect(quote.status).toBe(405);
  });
});
