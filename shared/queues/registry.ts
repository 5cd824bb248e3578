import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { VEHICLE_TYPES } from '../domain/tariffs/types.ts';
import { compileSchema } from '../schemas/validate.ts';

/**
 * The job registry: every queue, every job name, its queue and its payload schema, in one
 * place. Names are kebab-case and part of the wire contract: queues outlive deploys, so a
 * name is never reused for a different payload. Payloads carry ids, never personal data;
 * Postgres owns state. Each worker role consumes exactly one queue of the same name, and
 * `assertHandlers` (called when a role starts) refuses to start a role whose handlers do not
 * match this registry.
 */
export const QUEUE_NAMES = ['pricing', 'dispatch', 'notify', 'fanout', 'billing'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

/**
 * Process roles: one per queue, plus the outbox relay (reads Postgres, writes BullMQ) and the
 * driver simulator (simulated drivers serving test-mode bookings through the driver API).
 */
export const WORKER_ROLES = [...QUEUE_NAMES, 'outbox-relay', 'simulator'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

const Uuid = Type.String({ format: 'uuid' });
const IsoWeek = Type.String({ pattern: '^[0-9]{4}-W[0-9]{2}$' });

/**
 * A synchronous price request (request and reply: the API waits for the result). The one job
 * that carries inputs rather than ids: a quote has no row until it is priced. It holds no
 * personal data (addresses of places, not of people) and its job is removed a minute after it
 * completes. A driver's own map key is looked up by the worker, never put in Redis.
 */
export const PriceQuoteRequest = Type.Object(
  {
    pickup: Type.String({ minLength: 1, maxLength: 300 }),
    dropoff: Type.String({ minLength: 1, maxLength: 300 }),
    departAt: Type.String({ format: 'date-time' }),
    passengers: Type.Integer({ minimum: 1, maximum: 8 }),
    vehicleType: Type.Union(VEHICLE_TYPES.map((v) => Type.Literal(v))),
    meetAndGreet: Type.Boolean(),
    worldwide: Type.Boolean(),
    /** Price on this approved rate card instead of the council tariff. */
    rateCardId: Type.Optional(Uuid),
    /** Quote made through this driver: their own map-provider key is used when stored. */
    driverId: Type.Optional(Uuid),
  },
  { additionalProperties: false },
);
export type PriceQuoteRequest = Static<typeof PriceQuoteRequest>;

export const JOBS = {
  /** Price a journey (geocode, route, tariff) and return the result to the waiting caller. */
  'price-quote': { queue: 'pricing', payload: PriceQuoteRequest },
  /** Several journeys priced in one request and reply: requests that arrive together share a job. */
  'price-quotes': {
    queue: 'pricing',
    payload: Type.Object(
      { requests: Type.Array(PriceQuoteRequest, { minItems: 1, maxItems: 200 }) },
      { additionalProperties: false },
    ),
  },
  /** Start dispatching a booking (at pickup minus the dispatch lead time). */
  'dispatch-booking': { queue: 'dispatch', payload: Type.Object({ bookingId: Uuid }, { additionalProperties: false }) },
  /** An offer's time is up: expire it if still open and offer the booking to the next candidate. */
  'offer-expired': { queue: 'dispatch', payload: Type.Object({ offerId: Uuid }, { additionalProperties: false }) },
  /** Tell whoever holds a cancelled booking (offered or assigned driver) and withdraw live offers. */
  'booking-cancelled': {
    queue: 'dispatch',
    payload: Type.Object({ bookingId: Uuid }, { additionalProperties: false }),
  },
  /** Deliver one row of outbound_messages (e-mail, SMS or WhatsApp) exactly once. */
  'send-message': { queue: 'notify', payload: Type.Object({ messageId: Uuid }, { additionalProperties: false }) },
  /**
   * POST one webhook_deliveries row (Standard Webhooks signed) to its endpoint; the handler
   * schedules its own retries (`webhook-<deliveryId>-<attempt>`) and marks the row dead when
   * they run out (shared/services/webhooks.ts).
   */
  'deliver-webhook': {
    queue: 'fanout',
    payload: Type.Object(
      {
        deliveryId: Uuid,
        /** How many times this attempt has found its endpoint's slots taken (the wait grows with it). */
        slotWaits: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
      },
      { additionalProperties: false },
    ),
  },
  /**
   * The weekly invoice run (a job scheduler fires it every Monday 02:00 Europe/London): issue
   * the invoices of `week`, by default the week that ended before the run was due, then charge
   * every invoice still to be charged.
   */
  'run-weekly-billing': {
    queue: 'billing',
    payload: Type.Object({ week: Type.Optional(IsoWeek) }, { additionalProperties: false }),
  },
  /** Charge the invoices of a week (or of every week) that are issued or whose charge failed. */
  'charge-invoices': {
    queue: 'billing',
    payload: Type.Object({ week: Type.Optional(IsoWeek) }, { additionalProperties: false }),
  },
} as const satisfies Record<string, { queue: QueueName; payload: TSchema }>;

export type JobName = keyof typeof JOBS;
export type JobPayload<N extends JobName> = Static<(typeof JOBS)[N]['payload']>;
export type JobsOf<Q extends QueueName> = {
  [N in JobName]: (typeof JOBS)[N]['queue'] extends Q ? N : never;
}[JobName];

const validators = new Map(
  (Object.keys(JOBS) as JobName[]).map((name) => [name, compileSchema(JOBS[name].payload)] as const),
);

export function isJobName(name: string): name is JobName {
  return Object.hasOwn(JOBS, name);
}

export class InvalidPayloadError extends Error {
  constructor(name: string, problems: string) {
    super(`payload of job ${name} is invalid: ${problems}`);
    this.name = 'InvalidPayloadError';
  }
}

/** Treat job data as unknown: check it against the schema its producer used. */
export function assertPayload<N extends JobName>(name: N, data: unknown): JobPayload<N> {
  const validate = validators.get(name);
  if (!validate) throw new InvalidPayloadError(name, 'unknown job name');
  const problems = validate(data);
  if (problems.length > 0)
    throw new InvalidPayloadError(name, problems.map((p) => `${p.field} ${p.problem}`).join('; '));
  return data as JobPayload<N>;
}

export function queueOf(name: JobName): QueueName {
  return JOBS[name].queue;
}

/**
 * BullMQ job ids must not contain `:` and must not be all digits (it reserves those for its
 * own counter ids). Deterministic ids are what make re-adding a job a no-op.
 */
export function assertJobId(id: string): string {
  if (id.includes(':') || /^\d+$/.test(id) || id.length === 0 || id.length > 200) {
    throw new Error(`invalid job id "${id}": no ':', not all digits, 1 to 200 characters`);
  }
  return id;
}

/** Start-up check: the handlers a role brings match the registry exactly. */
export function assertHandlers(queue: QueueName, handlers: Record<string, unknown>): void {
  const expected = (Object.keys(JOBS) as JobName[]).filter((n) => JOBS[n].queue === queue);
  const missing = expected.filter((n) => typeof handlers[n] !== 'function');
  const unknown = Object.keys(handlers).filter((n) => !isJobName(n) || JOBS[n].queue !== queue);
  if (missing.length || unknown.length) {
    throw new Error(
      `worker role ${queue}: ${missing.length ? `no handler for ${missing.join(', ')}` : ''}${
        missing.length && unknown.length ? '; ' : ''
      }${unknown.length ? `handlers for jobs not in its queue: ${unknown.join(', ')}` : ''}`,
    );
  }
}
