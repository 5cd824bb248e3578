import { type Static, Type } from '@sinclair/typebox';
import { StringEnum } from './common.ts';

/** `GET /api/public/v1/whoami` response. */
export const WhoAmI = Type.Object({
  authenticated: Type.Boolean({ description: 'true when a valid API key or driver token was presented' }),
  key: Type.Union([
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      prefix: Type.String({ description: 'First characters of the key' }),
      mode: StringEnum(['live', 'test'] as const),
      partnerId: Type.Union([Type.String(), Type.Null()]),
    }),
    Type.Null(),
  ]),
  driver: Type.Optional(
    Type.Object(
      { id: Type.String(), name: Type.String() },
      { description: 'The driver whose token was presented (only then)' },
    ),
  ),
  rateLimitedBy: StringEnum(['key', 'driver', 'ip'] as const),
});
export type WhoAmI = Static<typeof WhoAmI>;
