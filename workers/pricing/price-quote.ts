import type { JobPayload } from '../../shared/queues/registry.ts';
import type { PriceQuoteResult } from '../../shared/services/pricer.ts';
import type { WorkerContext } from '../context.ts';

/**
 * Price a journey for a caller waiting on the reply. Input problems (an address that cannot
 * be located, a party the vehicle cannot seat) are answers, not failures: they come back as
 * `{ok: false, error}` so the API can give the caller the stable code.
 */
export async function priceQuote(payload: JobPayload<'price-quote'>, ctx: WorkerContext): Promise<PriceQuoteResult> {
  return ctx.pricer().price(payload);
}

/** Price a batch of journeys (requests that reached the API together); answers in the same order. */
export async function priceQuotes(
  payload: JobPayload<'price-quotes'>,
  ctx: WorkerContext,
): Promise<PriceQuoteResult[]> {
  const pricer = ctx.pricer();
  return Promise.all(payload.requests.map((r) => pricer.price(r)));
}
