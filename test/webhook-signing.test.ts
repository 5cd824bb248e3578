import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newWebhookSecret } from '../shared/services/partners.ts';
import {
  attemptsToCover,
  retryDelayMs,
  retryPolicy,
  signWebhook,
  verifyWebhook,
  WEBHOOK_RETRY_WINDOW_MS,
} from '../shared/services/webhooks.ts';

/** Standard Webhooks signing, cross-checked with the reference `standardwebhooks` package. */
const body = JSON.stringify({ type: 'booking.status', data: { bookingReference: 'DTN-7K3F01', sequence: 3 } });
const msgId = 'msg_01930000-0000-7000-8000-000000000000';

describe('webhook signing', () => {
  it('signs what the reference library verifies', () => {
    const secret = newWebhookSecret();
    const headers = signWebhook([secret], msgId, body);
    expect(headers['webhook-id']).toBe(msgId);
    expect(headers['webhook-timestamp']).toMatch(/^\d+$/);
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body));
    // Another secret does not verify; a changed body does not verify.
    expect(() => new Webhook(newWebhookSecret()).verify(body, { ...headers })).toThrow();
    expect(() => new Webhook(secret).verify(`${body} `, { ...headers })).toThrow();
  });

  it('verifies what the reference library signs, and only that', () => {
    const secret = newWebhookSecret();
    const now = new Date();
    const signature = new Webhook(secret).sign(msgId, now, body);
    const headers = {
      'webhook-id': msgId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': signature,
    };
    expect(signWebhook([secret], msgId, body, now)['webhook-signature']).toBe(signature);
    expect(verifyWebhook(headers, body, [secret])).toBe(true);
    expect(verifyWebhook(headers, Buffer.from(body), [secret])).toBe(true);
    expect(verifyWebhook(new Headers(headers), body, [secret])).toBe(true);
    expect(verifyWebhook({ 'Webhook-Id': msgId, ...headers }, body, [secret])).toBe(true);
    expect(verifyWebhook(headers, `${body} `, [secret])).toBe(false);
    expect(verifyWebhook(headers, body, [newWebhookSecret()])).toBe(false);
    expect(verifyWebhook({ ...headers, 'webhook-id': 'msg_other' }, body, [secret])).toBe(false);
    expect(verifyWebhook({ ...headers, 'webhook-signature': 'v2,abc' }, body, [secret])).toBe(false);
    expect(verifyWebhook({ ...headers, 'webhook-timestamp': 'soon' }, body, [secret])).toBe(false);
    const { 'webhook-signature': _, ...unsigned } = headers;
    expect(verifyWebhook(unsigned, body, [secret])).toBe(false);
  });

  it('sends both signatures during a rotation; either secret verifies', () => {
    const oldSecret = newWebhookSecret();
    const newSecret = newWebhookSecret();
    const headers = signWebhook([newSecret, oldSecret], msgId, body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const s of [oldSecret, newSecret]) {
      expect(() => new Webhook(s).verify(body, { ...headers })).not.toThrow();
      expect(verifyWebhook(headers, body, [s])).toBe(true);
    }
    expect(verifyWebhook(headers, body, [newWebhookSecret(), oldSecret])).toBe(true);
    expect(verifyWebhook(headers, body, [newWebhookSecret()])).toBe(false);
  });

  it('refuses timestamps outside the tolerance, either side', () => {
    const secret = newWebhookSecret();
    const signedAt = new Date('2026-11-22T12:00:00Z');
    const headers = signWebhook([secret], msgId, body, signedAt);
    const at = (s: number) => new Date(signedAt.getTime() + s * 1000);
    expect(verifyWebhook(headers, body, [secret], 300, at(299))).toBe(true);
    expect(verifyWebhook(headers, body, [secret], 300, at(-299))).toBe(true);
    expect(verifyWebhook(headers, body, [secret], 300, at(301))).toBe(false);
    expect(verifyWebhook(headers, body, [secret], 300, at(-301))).toBe(false);
    expect(verifyWebhook(headers, body, [secret], 600, at(500))).toBe(true);
    // The reference library agrees that an old message is refused.
    expect(() => new Webhook(secret).verify(body, { ...headers })).toThrow(/too old/i);
  });
});

describe('webhook retry schedule', () => {
  it('covers at least 24 hours with the default policy: 36 attempts', () => {
    const policy = retryPolicy({});
    expect(policy).toEqual({ baseMs: 1000, capMs: 3_600_000, maxAttempts: 36 });
    expect(attemptsToCover(WEBHOOK_RETRY_WINDOW_MS, 1000, 3_600_000)).toBe(36);
    const delays = Array.from({ length: policy.maxAttempts - 1 }, (_, i) => retryDelayMs(i + 1, policy, 0));
    expect(delays.slice(0, 4)).toEqual([1000, 2000, 4000, 8000]);
    expect(Math.max(...delays)).toBe(3_600_000);
    expect(delays.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(WEBHOOK_RETRY_WINDOW_MS);
    // Without the last delay it would not: no more attempts than needed.
    expect(delays.slice(0, -1).reduce((a, b) => a + b, 0)).toBeLessThan(WEBHOOK_RETRY_WINDOW_MS);
  });

  it('adds up to 25 % jitter, never less than the base schedule', () => {
    const policy = retryPolicy({});
    expect(retryDelayMs(3, policy, 0)).toBe(4000);
    expect(retryDelayMs(3, policy, 0.999)).toBeLessThan(5000);
    expect(retryDelayMs(30, policy, 1)).toBe(4_500_000);
  });

  it('can be shortened through the environment', () => {
    expect(retryPolicy({ WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_RETRY_MAX_ATTEMPTS: '4' })).toMatchObject({
      baseMs: 20,
      maxAttempts: 4,
    });
  });
});
