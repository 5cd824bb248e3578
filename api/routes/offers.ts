import { type Static, Type } from '@sinclair/typebox';
import type { Response } from 'express';
import { type CardPlace, londonWhen, pickupArea, verifyOfferCode } from '../../shared/domain/dispatch/job-card.ts';
import { AppError } from '../../shared/errors.ts';
import { nearestDistrict } from '../../shared/geo/gazetteer.ts';
import { DateTime, StringEnum } from '../../shared/schemas/common.ts';
import { gbp } from '../../shared/services/quotes.ts';
import { escapeHtml } from '../pages/layout.ts';
import { defineRoute, type HandlerResult, type RouteDef } from '../route.ts';

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
  }),
  accept: Action('accept'),
  decline: Action('decline'),
});
export type OfferLinkResponse = Static<typeof OfferLinkResponse>;

interface OfferJobRow {
  state: (typeof OFFER_STATES)[number];
  expires_at: Date;
  tier: number;
  reference: string;
  pickup: CardPlace;
  dropoff: CardPlace;
  pickup_time: Date;
  passengers: number;
  vehicle_type: string;
  fare_pence: number | null;
}

/** Districts (and their post towns) for places stored without one: the gazetteer's district file, loaded once. */
function lookupDistrict(lat: number, lng: number): { district: string; town: string | null } | null {
  const nd = nearestDistrict(lat, lng);
  return nd ? { district: nd.district.district, town: nd.district.postTowns[0] ?? null } : null;
}

function offerPage(view: OfferLinkResponse, serviceName: string): string {
  const { offer, job } = view;
  const rows: Array<[string, string]> = [
    ['Pickup', job.pickupArea],
    ['Drop-off', job.dropoffArea],
    ['When', `${londonWhen(new Date(job.pickupTime))} (UK time)`],
    ['Passengers', String(job.passengers)],
    ['Vehicle', job.vehicleType],
    ['Fare', job.fareGBP === null ? 'shown in the app' : `£${job.fareGBP.toFixed(2)}, paid to you, 0% commission`],
    [
      'Offer',
      offer.state === 'offered' ? `open until ${londonWhen(new Date(offer.expiresAt))} (UK time)` : offer.state,
    ],
  ];
  const action =
    offer.state === 'offered'
      ? `Open the ${serviceName} driver app to accept or decline this job.`
      : offer.state === 'accepted'
        ? `This job is yours: the passenger's details are in the ${serviceName} driver app.`
        : 'This offer is closed.';
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="robots" content="noindex">',
    `<title>Job ${escapeHtml(job.bookingReference)} | ${escapeHtml(serviceName)}</title>`,
    '</head><body><main>',
    `<h1>Job ${escapeHtml(job.bookingReference)}</h1>`,
    '<dl>',
    ...rows.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`),
    '</dl>',
    `<p>${escapeHtml(action)}</p>`,
    '</main></body></html>',
  ].join('\n');
}

/**
 * mountRoutes answers every route with JSON. For a browser this one response is an HTML page
 * instead: its `send` is replaced, for this response only, by one that sends the page.
 */
function answerHtml(res: Response, html: string, headers: Record<string, string>): HandlerResult {
  const send = res.send.bind(res);
  res.send = (() => {
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    return send(html);
  }) as Response['send'];
  return { status: 200, body: null, headers };
}

/**
 * `GET /o/{code}`: the short link in a job card's SMS and WhatsApp text (CONTRACT.md section 6).
 * The code (shared/domain/dispatch/job-card.ts) carries the offer id and a MAC, so nothing is
 * stored for it and a forged or altered code is 404 without touching the database. The answer
 * has the job's areas, time, size and fare and how to accept or decline it, never the passenger's
 * personal data. A browser (Accept preferring text/html) gets a minimal page saying the same.
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
        'the job without passenger details (pickup and drop-off areas, time, passengers, vehicle, fare) and the driver API calls ' +
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
      handler: async ({ params, deps, req, res }) => {
        const notFound = new AppError('not_found', 'This job link is not valid. Open the job in the driver app.');
        const offerId = verifyOfferCode(params.code, deps.config.dataEncryptionKey);
        if (!offerId) throw notFound;
        const row = await deps
          .db('dispatch_offers as o')
          .join('bookings as b', 'b.id', 'o.booking_id')
          .where('o.id', offerId)
          .first<OfferJobRow | undefined>(
            'o.state',
            'o.expires_at',
            'o.tier',
            'b.reference',
            'b.pickup',
            'b.dropoff',
            'b.pickup_time',
            'b.passengers',
            'b.vehicle_type',
            'b.fare_pence',
          );
        if (!row) throw notFound;
        const state = row.state === 'offered' && row.expires_at.getTime() <= Date.now() ? 'expired' : row.state;
        const jobPath = `/api/public/v1/jobs/${encodeURIComponent(row.reference)}`;
        const view: OfferLinkResponse = {
          offer: { state, expiresAt: row.expires_at.toISOString(), tier: row.tier },
          job: {
            bookingReference: row.reference,
            pickupArea: pickupArea(row.pickup, { lookupDistrict }),
            dropoffArea: pickupArea(row.dropoff, { lookupDistrict }),
            pickupTime: row.pickup_time.toISOString(),
            passengers: row.passengers,
            vehicleType: row.vehicle_type,
            fareGBP: row.fare_pence === null ? null : gbp(row.fare_pence),
          },
          accept: { method: 'POST', path: `${jobPath}/accept`, auth: 'driver bearer token' },
          decline: { method: 'POST', path: `${jobPath}/decline`, auth: 'driver bearer token' },
        };
        // The offer changes (accepted, expired): never cached; the answer depends on Accept.
        const headers = { 'Cache-Control': 'no-store', Vary: 'Accept', 'X-Robots-Tag': 'noindex' };
        if (req.accepts(['application/json', 'text/html']) === 'text/html') {
          return answerHtml(res, offerPage(view, deps.config.serviceName), headers);
        }
        return { status: 200, body: view, headers };
      },
    }),
  ];
}
