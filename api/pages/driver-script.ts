import { type Asset, JS, makeAsset } from './assets.ts';

/**
 * The driver pages' only script (`script-src 'self'`, with Subresource Integrity): the offer
 * countdown. Each `[data-countdown]` element carries the seconds left when the server rendered
 * the page (so a phone with a wrong clock still counts right); the script shows them as m:ss in
 * its `.clock` each second, says the time left in its `aria-live="polite"` `.countdown-text`
 * every 15 seconds and for the last 10 (not every second: a screen reader would speak without
 * pause), and when it reaches zero says the offer has closed and reloads the page, which then
 * shows the offer's new state. Without the script the page says the same in words, with the
 * expiry time and a refresh link; the forms work either way.
 */
export function driverScriptSource(): string {
  return `(function () {
  'use strict';
  var timers = document.querySelectorAll('[data-countdown]');
  if (!timers.length) return;
  var now = function () { return window.performance && performance.now ? performance.now() : Date.now(); };
  var start = now();
  var reloading = false;
  function clock(s) { var m = Math.floor(s / 60); var r = s % 60; return m + ':' + (r < 10 ? '0' : '') + r; }
  function words(s) {
    if (s >= 120) return 'About ' + Math.round(s / 60) + ' minutes left to answer.';
    return s + (s === 1 ? ' second' : ' seconds') + ' left to answer.';
  }
  var items = [];
  for (var i = 0; i < timers.length; i++) {
    var el = timers[i];
    var left = Number(el.getAttribute('data-countdown'));
    if (!(left >= 0)) continue;
    items.push({ el: el, end: start + left * 1000, clock: el.querySelector('.clock'), text: el.querySelector('.countdown-text'), said: -1 });
  }
  function tick() {
    var t = now();
    var open = 0;
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      var s = Math.max(0, Math.ceil((it.end - t) / 1000));
      if (it.clock) it.clock.textContent = clock(s);
      if (s > 0) open++;
      if (it.text && s !== it.said && (s === 0 || s <= 10 || s % 15 === 0)) {
        it.said = s;
        it.text.textContent = s === 0 ? 'Time is up: this offer has closed. Updating the page.' : words(s);
      }
    }
    if (items.length && open < items.length && !reloading) {
      reloading = true;
      setTimeout(function () { window.location.reload(); }, 1500);
    }
    if (open > 0) setTimeout(tick, 1000 - ((t - start) % 1000));
  }
  tick();
})();
`;
}

let cached: Asset | null = null;

/** The script as served (built once). Its path carries its hash: `/assets/driver-<version>.js`. */
export function driverScript(): Asset {
  cached ??= makeAsset(driverScriptSource(), JS);
  return cached;
}

export const driverScriptPath = (): string => `/assets/driver-${driverScript().version}.js`;
