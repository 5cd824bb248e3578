import http from 'node:http';
import https from 'node:https';
import { unseal } from '../../shared/crypto.ts';
import { SCENARIO_FAILED_WEBHOOK_ATTEMPTS } from '../../shared/domain/sandbox.ts';
import { assertPublicHost, publicOnlyLookup } from '../../shared/net/public-address.ts';
import type { JobPayload } from '../../shared/queues/registry.ts';
import { retryDelayMs, retryPolicy, signWebhook } from '../../shared/services/webhooks.ts';
import type { WorkerContext } from '../context.ts';

/** Per-request time limit. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** While an attempt runs, the row is leased this long (longer than the request can take). */
const LEASE_SECONDS = 60;
/** A scheduled attempt that fires this early (Redis and Postgres clocks) still counts as due. */
const DUE_SLACK_SECONDS = 2;

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  booking_id: string | null;
  sequence: number | null;
  message_id: string;
  payload: unknown;
  state: 'pending' | 'delivered' | 'dead';
  attempts: number;
  /** Attempts made before the current schedule began (0, or the count at the last replay). */
  schedule_start: number;
  next_attempt_at: Date | null;
}

interface EndpointRow {
  id: string;
  url: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
  active: boolean;
}

const jobIdFor = (deliveryId: string, attempt: number) => `webhook-${deliveryId}-${attempt}`;

/**
 * A slot of an endpoint's in-flight deliveries (`maxInFlightPerEndpoint`), across every fanout
 * worker: a sorted set per endpoint of slot tokens scored by when their lease ends, so a slot
 * whose worker died frees itself when the request could no longer be running.
 */
const TAKE_SLOT_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;
/** A slot's lease: longer than a request can take (WEBHOOK_TIMEOUT_MS) and its bookkeeping. */
const SLOT_LEASE_MS = 30_000;
/**
 * A delivery that found its endpoint's slots taken looks again after SLOT_WAIT_MS, doubling with
 * each further wait up to SLOT_WAIT_MAX_MS, plus up to as much again at random (so the waiting
 * deliveries of a hanging endpoint spread out rather than poll it together).
 */
export const SLOT_WAIT_MS = 1_000;
const SLOT_WAIT_MAX_MS = 30_000;

const slotKey = (ctx: WorkerContext, endpointId: string) => `${ctx.config.queuePrefix}:fanout:in-flight:${endpointId}`;

/** Leases are timed by Redis's clock (TIME), so workers whose clocks differ agree on them. */
async function takeSlot(ctx: WorkerContext, endpointId: string, token: string): Promise<boolean> {
  const taken = await ctx.redis.eval(
    TAKE_SLOT_LUA,
    1,
    slotKey(ctx, endpointId),
    String(ctx.config.webhooks.maxInFlightPerEndpoint),
    token,
    String(SLOT_LEASE_MS),
  );
  return taken === 1;
}

/** Response bytes read (and discarded) before the connection is dropped instead. */
const MAX_RESPONSE_BYTES = 64 * 1024;

class WebhookTimeoutError extends Error {
  constructor() {
    super(`timed out after ${WEBHOOK_TIMEOUT_MS} ms`);
    this.name = 'TimeoutError';
  }
}

/** What the delivery log records for a request that got no answer. */
function describeError(err: unknown): string {
  const e = err as Error & { code?: string; errors?: unknown[] };
  if (e?.message) return e.message;
  // Trying each address of a name (IPv6 and IPv4) fails with an AggregateError without a message.
  const inner = (e?.errors ?? []).map((x) => (x as Error)?.message).filter(Boolean);
  if (inner.length > 0) return inner.join('; ');
  return e?.code ?? String(err);
}

/**
 * Keep-alive agents, one pair per address policy. With private networks not allowed, every
 * connection resolves its host through `publicOnlyLookup`, so it can only reach a public
 * address, whatever the name resolved to when it was registered (DNS rebinding). A pooled
 * socket is reused only for the same host and port, and was checked when it connected.
 */
const agents = new Map<boolean, { http: http.Agent; https: https.Agent }>();
function agentsFor(allowPrivateNetworks: boolean): { http: http.Agent; https: https.Agent } {
  let pair = agents.get(allowPrivateNetworks);
  if (!pair) {
    const opts = { keepAlive: true, ...(allowPrivateNetworks ? {} : { lookup: publicOnlyLookup() }) };
    pair = { http: new http.Agent(opts), https: new https.Agent(opts) };
    agents.set(allowPrivateNetworks, pair);
  }
  return pair;
}

/**
 * POST `body` to `url` and answer the status code; no redirect is followed (a 3xx is just
 * its code) and the whole exchange is bounded by WEBHOOK_TIMEOUT_MS. Unless private networks
 * are allowed, a host that is a non-public IP address, or a name that resolves only to such
 * addresses, fails with `refused: <address> is not a public address` before any byte is sent.
 */
export function postWebhook(
  url: string,
  headers: Record<string, string>,
  body: string,
  opts: { allowPrivateNetworks: boolean },
): Promise<number> {
  return new Promise((resolve, reject) => {
    let target: URL;
    try {
      target = new URL(url);
      if (target.protocol !== 'https:' && target.protocol !== 'http:') {
        throw new Error(`unsupported protocol ${target.protocol}`);
      }
      if (!opts.allowPrivateNetworks) assertPublicHost(target.hostname);
    } catch (err) {
      reject(err);
      return;
    }
    const pair = agentsFor(opts.allowPrivateNetworks);
    const request = target.protocol === 'https:' ? https.request : http.request;
    let answered = false;
    const req = request(
      target,
      {
        method: 'POST',
        agent: target.protocol === 'https:' ? pair.https : pair.http,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        answered = true;
        resolve(res.statusCode ?? 0);
        // The body is not used: drain a little of it (so the connection can be reused), or drop it.
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > MAX_RESPONSE_BYTES) req.destroy();
        });
        res.on('error', () => {});
        res.on('close', () => clearTimeout(timer));
      },
    );
    const timer = setTimeout(() => req.destroy(new WebhookTimeoutError()), WEBHOOK_TIMEOUT_MS);
    req.on('error', (err) => {
      if (answered) return;
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}

/**
 * The sandbox scenario `partner_webhook_fails_twice`: the first status webhook of the test-mode
 * booking (the lowest sequence delivered to this endpoint) has its first two attempts counted
 * as failed whatever the endpoint answers. They are really sent, so the integrator sees the same
 * webhook-id arrive three times (attempts 1 and 2, then the retry that counts) and can test
 * de-duplication and retries; the delivery log records why they failed.
 */
async function failedOnPurpose(ctx: WorkerContext, delivery: DeliveryRow, attempt: number): Promise<boolean> {
  // Status webhooks only (an amendment's delivery has no sequence of its own).
  if (!delivery.booking_id || delivery.sequence === null || attempt > SCENARIO_FAILED_WEBHOOK_ATTEMPTS) return false;
  const booking = await ctx
    .db('bookings')
    .where({ id: delivery.booking_id, test_mode: true, test_scenario: 'partner_webhook_fails_twice' })
    .first<{ id: string } | undefined>('id');
  if (!booking) return false;
  const earlier = await ctx
    .db('webhook_deliveries')
    .where({ booking_id: delivery.booking_id, endpoint_id: delivery.endpoint_id })
    .where((q) =>
      q
        .where('sequence', '<', delivery.sequence ?? 0)
        .orWhere((e) => e.where('sequence', delivery.sequence ?? 0).where('id', '<', delivery.id)),
    )
    .first<{ id: string } | undefined>('id');
  return !earlier;
}

/**
 * Deliver one webhook_deliveries row. The row is the source of truth and each attempt claims
 * it (attempts + 1, a lease in next_attempt_at) in one UPDATE, so a duplicated or early job
 * sends nothing. The handler runs its own schedule (shared/services/webhooks.ts retryPolicy):
 * a failed attempt is logged, next_attempt_at set, and a delayed job
 * `webhook-<id>-<next attempt>` added; after the schedule's last attempt the row is `dead`.
 * Attempts are numbered over the delivery's life, and a schedule counts those since its start
 * (`attempts - schedule_start`): a replay (replayDelivery) starts a fresh schedule with the
 * next number. The request goes through `postWebhook`, which unless
 * WEBHOOK_ALLOW_PRIVATE_NETWORKS refuses non-public addresses at connect time; a refusal is a
 * failed attempt like any other. Only infrastructure errors (database, Redis) throw, and
 * BullMQ's default retries cover those.
 */
export async function deliverWebhook(payload: JobPayload<'deliver-webhook'>, ctx: WorkerContext): Promise<void> {
  const { deliveryId, slotWaits = 0 } = payload;
  const pending = await ctx
    .db('webhook_deliveries')
    .where({ id: deliveryId, state: 'pending' })
    .first<{ endpoint_id: string; attempts: number } | undefined>('endpoint_id', 'attempts');
  if (!pending) return;
  // At most maxInFlightPerEndpoint requests to one endpoint at once: a delivery that finds
  // them all taken is not attempted (nothing is counted or logged) and looks again shortly,
  // so an endpoint that hangs cannot hold every worker slot while other partners wait.
  const token = `${deliveryId}:${Math.random().toString(36).slice(2)}`;
  if (!(await takeSlot(ctx, pending.endpoint_id, token))) {
    const wait = Math.min(SLOT_WAIT_MAX_MS, SLOT_WAIT_MS * 2 ** Math.min(slotWaits, 10));
    await ctx.queues.fanout.add(
      'deliver-webhook',
      { deliveryId, slotWaits: slotWaits + 1 },
      {
        // One id per attempt and wait: a copy of this job (a stalled one run again) adds nothing.
        jobId: `${jobIdFor(deliveryId, pending.attempts + 1)}-wait-${slotWaits + 1}`,
        delay: wait + Math.floor(Math.random() * wait),
        // A wait is not worth keeping once it has run (a hanging endpoint makes many).
        removeOnComplete: true,
      },
    );
    return;
  }
  try {
    await deliverInSlot(deliveryId, ctx);
  } finally {
    await ctx.redis.zrem(slotKey(ctx, pending.endpoint_id), token).catch((err: unknown) => {
      // Its lease frees it in SLOT_LEASE_MS.
      ctx.logger.warn({ err, deliveryId }, 'could not free a webhook endpoint slot');
    });
  }
}

/** One attempt of a delivery, holding a slot of its endpoint (`deliverWebhook`). */
export async function deliverInSlot(deliveryId: string, ctx: WorkerContext): Promise<void> {
  const policy = retryPolicy();

  const [claimed] = await ctx
    .db('webhook_deliveries')
    .where({ id: deliveryId, state: 'pending' })
    .andWhere((q) =>
      q
        .whereNull('next_attempt_at')
        .orWhere('next_attempt_at', '<=', ctx.db.raw('now() + make_interval(secs => ?)', [DUE_SLACK_SECONDS])),
    )
    .update({
      attempts: ctx.db.raw('attempts + 1'),
      next_attempt_at: ctx.db.raw('now() + make_interval(secs => ?)', [LEASE_SECONDS]),
    })
    .returning<DeliveryRow[]>('*');

  if (!claimed) {
    const row = await ctx
      .db<DeliveryRow>('webhook_deliveries')
      .where({ id: deliveryId })
      .first<(DeliveryRow & { db_now: Date }) | undefined>('*', ctx.db.raw('now() as db_now'));
    if (row?.state !== 'pending' || !row.next_attempt_at) return;
    // Not due: an attempt is in progress or scheduled. Make sure a job for that time exists
    // (it may not, if a worker died between logging an attempt and scheduling the next). Its
    // id names the attempt and its time, so this is a no-op when it exists, and not the id of
    // the job running now: a job that came early (this worker's clock ahead of Postgres's)
    // would otherwise re-add itself, which BullMQ ignores, and the delivery would wait for ever.
    // Its delay is measured on Postgres's clock, so it comes when the claim will take it.
    await ctx.queues.fanout.add(
      'deliver-webhook',
      { deliveryId },
      {
        jobId: `${jobIdFor(deliveryId, row.attempts + 1)}-at-${row.next_attempt_at.getTime()}`,
        // By Postgres's clock, which decides when it is due: this worker's may differ.
        delay: Math.max(0, row.next_attempt_at.getTime() - row.db_now.getTime()),
      },
    );
    return;
  }

  const endpoint = await ctx.db<EndpointRow>('webhook_endpoints').where({ id: claimed.endpoint_id }).first();
  if (!endpoint?.active) {
    await ctx
      .db('webhook_deliveries')
      .where({ id: deliveryId })
      .update({ state: 'dead', next_attempt_at: null, attempts: ctx.db.raw('attempts - 1') });
    ctx.logger.warn({ deliveryId }, 'webhook endpoint inactive or gone; delivery marked dead');
    return;
  }

  const attempt = claimed.attempts;
  const secrets = [unseal(endpoint.secret_sealed, ctx.config.dataEncryptionKey)];
  if (
    endpoint.previous_secret_sealed &&
    endpoint.previous_secret_expires_at &&
    endpoint.previous_secret_expires_at.getTime() > Date.now()
  ) {
    secrets.push(unseal(endpoint.previous_secret_sealed, ctx.config.dataEncryptionKey));
  }
  const body = JSON.stringify(claimed.payload);
  const started = performance.now();
  let statusCode: number | null = null;
  let error: string | null = null;
  try {
    statusCode = await postWebhook(
      endpoint.url,
      { 'content-type': 'application/json', ...signWebhook(secrets, claimed.message_id, body) },
      body,
      { allowPrivateNetworks: ctx.config.webhooks.allowPrivateNetworks },
    );
    if (statusCode < 200 || statusCode >= 300) error = `HTTP ${statusCode}`;
  } catch (err) {
    error = describeError(err);
  }
  const latencyMs = Math.round(performance.now() - started);
  if (await failedOnPurpose(ctx, claimed, attempt)) {
    error = `test scenario partner_webhook_fails_twice: attempt ${attempt} counted as failed (the endpoint answered ${
      statusCode ?? error ?? 'nothing'
    })`;
  }
  const ok = error === null;
  // The attempt's place in the current schedule (1 for a new delivery's first, and a replay's).
  const inSchedule = attempt - claimed.schedule_start;
  const dead = !ok && inSchedule >= policy.maxAttempts;
  const delay = ok || dead ? 0 : retryDelayMs(inSchedule, policy);

  await ctx.db.transaction(async (trx) => {
    await trx('webhook_delivery_attempts').insert({
      delivery_id: deliveryId,
      attempt,
      status_code: statusCode,
      latency_ms: latencyMs,
      error: error === null ? null : error.slice(0, 500),
    });
    await trx('webhook_deliveries')
      .where({ id: deliveryId })
      .update(
        ok
          ? { state: 'delivered', delivered_at: trx.fn.now(), next_attempt_at: null }
          : dead
            ? { state: 'dead', next_attempt_at: null }
            : { next_attempt_at: trx.raw('now() + make_interval(secs => ?)', [delay / 1000]) },
      );
  });

  if (ok) return;
  if (dead) {
    ctx.logger.warn({ deliveryId, attempts: attempt, error }, 'webhook delivery dead: retries exhausted');
    return;
  }
  ctx.logger.info({ deliveryId, attempt, error, retryInMs: delay }, 'webhook delivery failed; will retry');
  await ctx.queues.fanout.add('deliver-webhook', { deliveryId }, { jobId: jobIdFor(deliveryId, attempt + 1), delay });
}
