import { type Static, Type } from '@sinclair/typebox';
import { type CardPlace, hasMeetAndGreet, pickupArea, verifyOfferCode } from '../../shared/domain/dispatch/job-card.ts';
import type { JobPaymentMethod } from '../../shared/domain/dispatch/job-view.ts';
import { AppError } from '../../shared/errors.ts';
import { postDistrictAt } from '../../shared/geo/gazetteer.ts';
import { DateTime, StringEnum } from '../../shared/schemas/common.ts';
import { OfferedJobFields } from '../../shared/schemas/job-view.ts';
import { gbp } from '../../shared/services/quotes.ts';
import type { ApiDeps } from '../deps.ts';
import { defineRoute, type RouteDef } from '../route.ts';

export const OFFER_LINK_PATH = '/o/:code';

const OFFER_STATES = ['offered', 'accepted', 'declined', 'expired', 'withdrawn'] as const;

const Action = (verb: string) =>
  Type.Object({
    method: Type.Literal('POST'),
    path: Type.String({ description: `The driver API path that ${verb}s the job` }),
    auth: Type.Literal('driver bearer token'),
  });

export const OfferLinkResponse = Type.Object({
  offer: Type.Object({
    state: StringEnum(OFFER_STATES, { description: 'An open offer past its expiry reads expired' }),
    expiresAt: DateTime,
    tier: Type.Integer({ minimum: 1, maximum: 3, description: '1 local, 2 national network, 3 partner operator' }),
  }),
  job: Type.Object({
    bookingReference: Type.String(),
    pickupArea: Type.String({ description: 'Station, airport or town name, or postcode district and post town' }),
    dropoffArea: Type.String(),
    pickupTime: DateTime,
    passengers: Type.Integer({ minimum: 1, maximum: 8 }),
    vehicleType: Type.String(),
    fareGBP: Type.Union([Type.Number(), Type.Null()], { description: 'Paid to the driver; null when not priced' }),
    paymentMethod: OfferedJobFields.paymentMethod,
    meetAndGreet: Type.Boolean({
      description:
        'The passenger booked (and paid for) meet and greet: meet them inside the terminal, in arrivals, with a name board',
    }),
  }),
  accept: Action('accept'),
  decline: Action('decline'),
});
export type OfferLinkResponse = Static<typeof OfferLinkResponse>;

interface OfferJobRow {
  state: (typeof OFFER_STATES)[number];
  expires_at: Date;
  tier: number;
  driver_id: string | null;
  partner_id: string | null;
  booking_id: string;
  reference: string;
  pickup: CardPlace;
  dropoff: CardPlace;
  pickup_time: Date;
  passengers: number;
  vehicle_type: string;
  fare_pence: number | null;
  payment_method: JobPaymentMethod;
  applied_rules: unknown;
}

/** An offer opened by its short link: what the link answers, and whose offer it is. */
export interface FoundOffer {
  view: OfferLinkResponse;
  offerId: string;
  bookingId: string;
  /** The driver the offer went to (null for an offer to a partner operator). */
  driverId: string | null;
  partnerId: string | null;
}

/**
 * The offer and its job for a short-link code, without passenger details; null when the code
 * is forged, altered or unknown (checked before touching the database). An open offer past
 * its expiry reads `expired`. The JSON answer of `GET /o/{code}` and the driver offer page
 * (api/pages/driver-pages.ts) both come from here.
 */
export async function findOfferByCode(
  deps: Pick<ApiDeps, 'db' | 'config'>,
  code: string,
  now = new Date(),
): Promise<FoundOffer | null> {
  const offerId = verifyOfferCode(code, deps.config.dataEncryptionKey);
  if (!offerId) return null;
  const row = await deps
    .db('dispatch_offers as o')
    .join('bookings as b', 'b.id', 'o.booking_id')
    .where('o.id', offerId)
    .first<OfferJobRow | undefined>(
      'o.state',
      'o.expires_at',
      'o.tier',
      'o.driver_id',
      'o.partner_id',
      'b.id as booking_id',
      'b.reference',
      'b.pickup',
      'b.dropoff',
      'b.pickup_time',
      'b.passengers',
      'b.vehicle_type',
      'b.fare_pence',
      'b.payment_method',
      'b.applied_rules',
    );
  if (!row) return null;
  const state = row.state === 'offered' && row.expires_at.getTime() <= now.getTime() ? 'expired' : row.state;
  const jobPath = `/api/public/v1/jobs/${encodeURIComponent(row.reference)}`;
  return {
    view: {
      offer: { state, expiresAt: row.expires_at.toISOString(), tier: row.tier },
      job: {
        bookingReference: row.reference,
        pickupArea: pickupArea(row.pickup, { lookupDistrict: postDistrictAt }),
        dropoffArea: pickupArea(row.dropoff, { lookupDistrict: postDistrictAt }),
        pickupTime: row.pickup_time.toISOString(),
        passengers: row.passengers,
        vehicleType: row.vehicle_type,
        fareGBP: row.fare_pence === null ? null : gbp(row.fare_pence),
        paymentMethod: row.payment_method,
        meetAndGreet: hasMeetAndGreet(row.applied_rules),
      },
      accept: { method: 'POST', path: `${jobPath}/accept`, auth: 'driver bearer token' },
      decline: { method: 'POST', path: `${jobPath}/decline`, auth: 'driver bearer token' },
    },
    offerId,
    bookingId: row.booking_id,
    driverId: row.driver_id,
    partnerId: row.partner_id,
  };
}

/**
 * `GET /o/{code}`: the short link in a job card's SMS and WhatsApp text (CONTRACT.md section 6).
 * The code (shared/domain/dispatch/job-card.ts) carries the offer id and a MAC, so nothing is
 * stored for it and a forged or altered code is 404 without touching the database. The answer
 * has the job's areas, time, size and fare and how to accept or decline it, never the passenger's
 * personal data. A browser (Accept preferring text/html) gets the driver offer page instead, with
 * accept and decline for the signed-in driver: the website router answers it before this route.
 */
export function offerRoutes(): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: OFFER_LINK_PATH,
      operationId: 'openOfferLink',
      summary: 'Open a job offer from the short link in a job card',
      description:
        'The link a driver receives by SMS and WhatsApp when a job is offered to them. Answers the offer (state, expiry, tier), ' +
        'the job without passenger details (pickup and drop-off areas, time, passengers, vehicle, fare, meet and greet) and the driver API calls ' +
        'that accept or decline it with the driver bearer token. An unknown, altered or truncated code is 404 not_found. ' +
        'With an Accept header preferring text/html the same is answered as an HTML page (text/html). ' +
        'Limited per caller like every public endpoint (API key, else IP).',
      tags: ['drivers'],
      auth: 'public',
      params: Type.Object({
        code: Type.String({ description: 'The code from the job card link (32 characters, base64url)' }),
      }),
      errors: ['not_found'],
      responses: { 200: { description: 'The offer and its job', schema: OfferLinkResponse } },
      handler: async ({ params, deps }) => {
        const found = await findOfferByCode(deps, params.code);
        if (!found) throw new AppError('not_found', 'This job link is not valid. Open the job in the driver app.');
        // The offer changes (accepted, expired): never cached; the answer depends on Accept
        // (a browser gets the driver offer page, api/pages/driver-pages.ts, before this route).
        return {
          status: 200,
          body: found.view,
          headers: { 'Cache-Control': 'no-store', Vary: 'Accept', 'X-Robots-Tag': 'noindex' },
        };
      },
    }),
  ];
}
