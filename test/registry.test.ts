import { describe, expect, it } from 'vitest';
import { assertHandlers, assertJobId, assertPayload, JOBS, QUEUE_NAMES } from '../shared/queues/registry.ts';
import { ROLE_HANDLERS } from '../workers/roles.ts';

describe('job registry', () => {
  it('has a handler for every job and no handler without a job', () => {
    for (const queue of QUEUE_NAMES) expect(() => assertHandlers(queue, ROLE_HANDLERS[queue])).not.toThrow();
    for (const job of Object.values(JOBS)) expect(QUEUE_NAMES).toContain(job.queue);
  });

  it('refuses to start a role with a missing or foreign handler', () => {
    expect(() => assertHandlers('notify', {})).toThrow(/no handler for send-message/);
    expect(() => assertHandlers('billing', { 'send-message': async () => {} })).toThrow(
      /not in its queue: send-message/,
    );
  });

  it('checks payloads as unknown data', () => {
    const messageId = '01930000-0000-7000-8000-000000000000';
    expect(assertPayload('send-message', { messageId })).toEqual({ messageId });
    expect(() => assertPayload('send-message', { messageId: 42 })).toThrow(/messageId/);
    expect(() => assertPayload('send-message', { messageId, email: 'ada@example.org' })).toThrow(
      /email is not allowed/,
    );
  });

  it('allows only BullMQ-safe deterministic job ids', () => {
    expect(assertJobId('dispatch-0193-3')).toBe('dispatch-0193-3');
    expect(() => assertJobId('a:b')).toThrow();
    expect(() => assertJobId('12345')).toThrow();
    expect(() => assertJobId('')).toThrow();
  });
});
