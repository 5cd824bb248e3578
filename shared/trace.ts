import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The request a piece of work started from, carried across the hop from the API to the workers:
 * the API runs each request inside its context (api/middleware/request-log.ts); an outbox row
 * written in it records the request id (`outboxRow`); the relay puts it on the BullMQ job
 * (under TRACE_KEY, beside the payload); the worker runs the job inside the same context and
 * logs with it, so jobs that job enqueues carry it on. One `requestId` then finds a booking's
 * request, its dispatch, its job card and its webhooks in the logs.
 */
export interface Trace {
  requestId: string;
}

const storage = new AsyncLocalStorage<Trace>();

/** The job data key the relay adds and the worker takes off before checking the payload. */
export const TRACE_KEY = '_requestId';

export function withTrace<T>(trace: Trace, fn: () => T): T {
  return storage.run(trace, fn);
}

export function currentRequestId(): string | null {
  return storage.getStore()?.requestId ?? null;
}

/** Job data as the relay sends it: the payload, and the request id when there is one. */
export function tracedData(payload: unknown, requestId: string | null): unknown {
  if (!requestId || typeof payload !== 'object' || payload === null || Array.isArray(payload)) return payload;
  return { ...payload, [TRACE_KEY]: requestId };
}

/** The payload and request id of job data (the reverse of `tracedData`). */
export function untracedData(data: unknown): { payload: unknown; requestId: string | null } {
  if (typeof data !== 'object' || data === null || Array.isArray(data) || !Object.hasOwn(data, TRACE_KEY)) {
    return { payload: data, requestId: null };
  }
  const { [TRACE_KEY]: requestId, ...payload } = data as Record<string, unknown>;
  return { payload, requestId: typeof requestId === 'string' ? requestId : null };
}
