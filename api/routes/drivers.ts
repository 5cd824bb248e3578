import { AppError } from '../../shared/errors.ts';
import { DriverApplyRequest, DriverApplyResponse } from '../../shared/schemas/drivers.ts';
import { applyDriver, DriverLicenceTakenError } from '../../shared/services/drivers.ts';
import { callerTestMode } from '../middleware/auth.ts';
import { defineRoute, type RouteDef } from '../route.ts';

export const DRIVER_APPLY_PATH = '/api/public/v1/drivers/apply';

export interface DriverRoutesOptions {
  /** Applications per caller (API key, else IP) per hour. Default 10. */
  applyLimitPerHour?: number;
}

/**
 * Driver routes (CONTRACT.md section 6). `POST /api/public/v1/drivers/apply` (public): a driver
 * applies; an operator approves them with `driver approve ID`, which issues their token.
 */
export function driverRoutes(opts: DriverRoutesOptions = {}): RouteDef[] {
  const limitPerHour = opts.applyLimitPerHour ?? 10;
  return [
    defineRoute({
      method: 'post',
      path: DRIVER_APPLY_PATH,
      operationId: 'applyAsDriver',
      summary: 'Apply to drive on the network',
      description:
        'A licensed private hire or hackney driver applies with their licence, vehicle, home area and, optionally, long-distance corridors and their own payment link. ' +
        'homeCity and each corridor end must be places in the UK the geocoder resolves (a town or city, postcode, station or airport); otherwise 422 address_not_found names the field. ' +
        'An expired licence, a payment link that is not https and free text that is not application data are refused. ' +
        'Answers 201 {driverId, status: "pending_approval"}: no jobs are offered until an operator approves the driver, which issues their bearer token and starts the 90-day free trial. ' +
        'The same licensing authority and licence number applying again is 409 with code conflict. ' +
        `Limited to ${limitPerHour} applications per hour per caller (API key, else IP).`,
      tags: ['drivers'],
      auth: 'public',
      rateLimit: [{ name: 'driver-apply', points: limitPerHour, durationSeconds: 3600 }],
      idempotent: true,
      body: DriverApplyRequest,
      errors: [
        'content_rejected',
        'email_not_accepted',
        'address_not_found',
        'conflict',
        'idempotency_in_progress',
        'idempotency_key_reused',
      ],
      responses: {
        201: { description: 'The application is recorded, pending approval', schema: DriverApplyResponse },
      },
      handler: async ({ body, deps, caller, req }) => {
        try {
          const applied = await applyDriver(deps.db, body, {
            actor: caller.kind === 'api_key' ? `key:${caller.key.prefix}` : 'public',
            testMode: callerTestMode(caller),
            onContentRejected: (reasons) => req.log?.warn({ reasons }, 'content rejected'),
          });
          return { status: 201, body: applied satisfies DriverApplyResponse };
        } catch (err) {
          if (!(err instanceof DriverLicenceTakenError)) throw err;
          throw new AppError('conflict', err.message, [
            { field: '/licenceNumber', problem: 'has already applied with this licensing authority' },
          ]);
        }
      },
    }),
  ];
}
