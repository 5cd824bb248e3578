import { Type } from '@sinclair/typebox';
import { defineRoute, type RouteDef } from '../route.ts';

const WhoAmI = Type.Object({
  authenticated: Type.Boolean({ description: 'true when a valid API key was presented' }),
  key: Type.Union([
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      prefix: Type.String({ description: 'First characters of the key' }),
      mode: Type.Union([Type.Literal('live'), Type.Literal('test')]),
      partnerId: Type.Union([Type.String(), Type.Null()]),
    }),
    Type.Null(),
  ]),
  rateLimitedBy: Type.Union([Type.Literal('key'), Type.Literal('ip')]),
});

/**
 * `GET /api/public/v1/whoami`: lets an integrator check which key the service sees (or that it
 * sees none) before sending real traffic, as Stripe's and Twilio's account endpoints do.
 */
export const whoamiRoutes: RouteDef[] = [
  defineRoute({
    method: 'get',
    path: '/api/public/v1/whoami',
    operationId: 'whoami',
    summary: 'Check the API key this request carries',
    description:
      'Answers whether a valid key was presented and which one. A present but invalid or revoked key is 401, as on every endpoint.',
    tags: ['meta'],
    auth: 'public',
    responses: { 200: { description: 'The caller as the service sees it', schema: WhoAmI } },
    handler: ({ caller }) => ({
      status: 200,
      body:
        caller.kind === 'api_key'
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
          : { authenticated: false, key: null, rateLimitedBy: 'ip' },
    }),
  }),
];
