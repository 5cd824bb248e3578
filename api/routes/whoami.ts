import { WhoAmI } from '../../shared/schemas/meta.ts';
import { defineRoute, type RouteDef } from '../route.ts';

/**
 * `GET /api/public/v1/whoami`: lets an integrator check which key the service sees (or that it
 * sees none) before sending real traffic, as Stripe's and Twilio's account endpoints do.
 */
export const whoamiRoutes: RouteDef[] = [
  defineRoute({
    method: 'get',
    path: '/api/public/v1/whoami',
    operationId: 'whoami',
    summary: 'Check the API key (or driver token) this request carries',
    description:
      'Answers whether a valid key was presented and which one (or, for a driver token, which driver). A present but invalid or revoked key or token is 401, as on every endpoint.',
    tags: ['meta'],
    auth: 'public',
    responses: { 200: { description: 'The caller as the service sees it', schema: WhoAmI } },
    handler: ({ caller }) => ({
      status: 200,
      body: (caller.kind === 'api_key'
        ? {
            authenticated: true,
            key: {
              id: caller.key.id,
              name: caller.key.name,
              prefix: caller.key.prefix,
              mode: caller.key.mode,
              partnerId: caller.key.partnerId,
            },
            rateLimitedBy: 'key',
          }
        : caller.kind === 'driver'
          ? {
              authenticated: true,
              key: null,
              driver: { id: caller.driver.id, name: caller.driver.name },
              rateLimitedBy: 'driver',
            }
          : { authenticated: false, key: null, rateLimitedBy: 'ip' }) satisfies WhoAmI,
    }),
  }),
];
