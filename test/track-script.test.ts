/**
 * The tracking page's live script, run as a browser runs it (node:vm, with a minimal DOM and
 * an EventSource the test drives): what the passenger sees change as the stream's events come.
 */
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { NO_DRIVER_LABELS } from '../api/pages/site.ts';
import { trackScriptSource } from '../api/pages/track-script.ts';

interface FakeElement {
  id: string;
  hidden: boolean;
  textContent: string;
  attrs: Record<string, string>;
  getAttribute(name: string): string | null;
}

function page(attrs: Record<string, string>, statusText: string) {
  const els = new Map<string, FakeElement>();
  const el = (id: string, text = '', a: Record<string, string> = {}): void => {
    els.set(id, {
      id,
      hidden: true,
      textContent: text,
      attrs: a,
      getAttribute: (name) => a[name] ?? null,
    });
  };
  el('live', 'This page updates by itself.', attrs);
  el('status', statusText);
  el('eta');
  el('driver');
  el('pay');
  const history: string[] = [];
  els.set('history', {
    id: 'history',
    hidden: false,
    textContent: '',
    attrs: {},
    getAttribute: () => null,
    // the script appends <li><time>…</time> label</li>: the test keeps each item's text
    appendChild: (li: { parts: Array<{ textContent: string }> }) => {
      history.push(li.parts.map((x) => x.textContent).join(''));
    },
  } as FakeElement);
  const listeners = new Map<string, (m: { data: string }) => void>();
  class FakeEventSource {
    readyState = 1;
    onerror: (() => void) | null = null;
    constructor(readonly url: string) {}
    addEventListener(name: string, fn: (m: { data: string }) => void): void {
      listeners.set(name, fn);
    }
    close(): void {
      this.readyState = 2;
    }
  }
  const window = { EventSource: FakeEventSource, JSON };
  runInNewContext(trackScriptSource(), {
    window,
    EventSource: FakeEventSource,
    JSON,
    Intl,
    Date,
    Number,
    String,
    Math,
    setTimeout,
    document: {
      getElementById: (id: string) => els.get(id) ?? null,
      createElement: () => {
        const node = {
          textContent: '',
          parts: [] as Array<{ textContent: string }>,
          setAttribute: () => {},
          appendChild: (child: { textContent: string }) => node.parts.push(child),
        };
        return node;
      },
      createTextNode: (text: string) => ({ textContent: text }),
    },
  });
  return {
    status: () => els.get('status')?.textContent,
    history: () => history,
    emit(event: string, data: unknown): void {
      const fn = listeners.get(event);
      if (!fn) throw new Error(`the script does not listen for \`${event}\``);
      fn({ data: JSON.stringify(data) });
    },
  };
}

describe('tracking page live script', () => {
  it('changes "still looking" to "make other plans" when dispatch stops asking, with no new status', () => {
    const p = page(
      { 'data-events': '/events', 'data-seq': '3', 'data-status': 'no_driver_available' },
      NO_DRIVER_LABELS.retrying,
    );
    // Replayed history up to the rendered seq changes nothing.
    p.emit('status', { status: 'no_driver_available', seq: 3, at: new Date().toISOString(), retrying: true });
    expect(p.status()).toBe(NO_DRIVER_LABELS.retrying);
    p.emit('dispatch', { retrying: false, at: new Date().toISOString() });
    expect(p.status()).toBe(NO_DRIVER_LABELS.stopped);
  });

  it('ignores a dispatch event once the booking has moved on (a driver found)', () => {
    const p = page({ 'data-events': '/events', 'data-seq': '3', 'data-status': 'no_driver_available' }, 'x');
    p.emit('status', { status: 'driver_assigned', seq: 4, at: new Date().toISOString(), driver: { name: 'Sam O.' } });
    expect(p.status()).toBe('Driver assigned');
    p.emit('dispatch', { retrying: false, at: new Date().toISOString() });
    expect(p.status()).toBe('Driver assigned');
  });

  // found in review: the server names the zone in the hour that happens twice; the live script did not
  it('names BST or GMT in a history time in the hour that happens twice, and no zone otherwise', () => {
    const p = page({ 'data-events': '/events', 'data-seq': '0', 'data-status': 'pending' }, 'x');
    // 25 October 2026: 01:30 BST is 00:30Z, 01:30 GMT is 01:30Z
    p.emit('status', { status: 'dispatching', seq: 1, at: '2026-10-25T00:30:00Z' });
    p.emit('status', { status: 'no_driver_available', seq: 2, at: '2026-10-25T01:30:00Z', retrying: true });
    p.emit('status', { status: 'dispatching', seq: 3, at: '2026-10-25T03:30:00Z' });
    const [bst, gmt, later] = p.history();
    expect(bst).toMatch(/01:30 BST /);
    expect(gmt).toMatch(/01:30 GMT /);
    expect(later).toMatch(/03:30 [A-Z]/);
    expect(later).not.toMatch(/GMT|BST/);
  });
});
