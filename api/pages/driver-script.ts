import { type Asset, JS, makeAsset } from './assets.ts';

/**
 * The driver pages' only script (`script-src 'self'`, with Subresource Integrity).
 *
 * The offer countdown. Each `[data-countdown]` element carries the seconds left when the server
 * rendered the page (so a phone with a wrong clock still counts right); the script shows them as
 * m:ss in its `.clock` each second, says the time left in its `aria-live="polite"`
 * `.countdown-text` every 15 seconds and for the last 10 (not every second: a screen reader would
 * speak without pause), and when it reaches zero says the offer has closed and reloads the page,
 * which then shows the offer's new state. Without the script the page says the same in words,
 * with the expiry time and a refresh link; the forms work either way.
 *
 * Taking jobs (`[data-availability]` on the jobs page). "Start taking jobs here" asks the
 * browser for the location, puts it in the form and sends it; a refusal or a failure is said in
 * the section's status line. While the state is on, the location is watched and posted
 * (`report=1`, `Accept: application/json`, the form token in the body) every
 * `data-report-seconds` and soon (5 s at most) when it moves more than 200 m, as a driver app's
 * presence reports: one at a time, and never a fix older than three periods. A report answered
 * 409 (the driver stopped elsewhere, or the presence timed out), 401 or 403 (signed out, the
 * form token gone) stops the reports and says so.
 */
export function driverScriptSource(): string {
  return `(function () {
  'use strict';
  countdowns();
  availability();

  function availability() {
    var section = document.querySelector('[data-availability]');
    if (!section || !navigator.geolocation) return;
    var status = section.querySelector('.availability-status');
    var say = function (text) { if (status) status.textContent = text; };
    var latField = section.querySelector('form input[name="lat"]');
    var start = latField ? latField.form : null;
    var options = { enableHighAccuracy: true, timeout: 20000, maximumAge: 15000 };
    var refused = function (err) {
      return err && err.code === 1
        ? 'This browser did not share your location: allow it for this site, then start again.'
        : 'Your location could not be found: check that location is on, then try again.';
    };
    if (start) {
      start.addEventListener('submit', function (event) {
        if (start.elements.lat.value !== '') return;
        event.preventDefault();
        say('Finding your location…');
        navigator.geolocation.getCurrentPosition(function (pos) {
          start.elements.lat.value = String(pos.coords.latitude);
          start.elements.lng.value = String(pos.coords.longitude);
          start.submit();
        }, function (err) { say(refused(err)); }, options);
      });
    }
    if (section.getAttribute('data-availability') !== 'on') return;
    var every = Math.max(1, Number(section.getAttribute('data-report-seconds')) || 30) * 1000;
    var action = section.getAttribute('data-action');
    var csrf = section.getAttribute('data-csrf');
    var latest = null;
    var sent = null;
    var lastTry = 0;
    var busy = false;
    var later = null;
    var stopped = false;
    var watch = null;
    function metres(a, b) {
      var rad = Math.PI / 180;
      var x = (b.lng - a.lng) * rad * Math.cos(((a.lat + b.lat) / 2) * rad);
      var y = (b.lat - a.lat) * rad;
      return Math.sqrt(x * x + y * y) * 6371000;
    }
    function stop(text) {
      stopped = true;
      if (watch !== null) navigator.geolocation.clearWatch(watch);
      say(text);
    }
    // One report at a time, at most one every 5 s for a move and one per period otherwise, and
    // never a fix older than three periods (the GPS stopped: presence then times out by itself).
    function report(moved) {
      var t = Date.now();
      if (stopped || busy || !latest) return;
      if (t - latest.at > 3 * every) { say('Your location is not updating: check that location is on.'); return; }
      var wait = (moved ? 5000 : every - 1000) - (t - lastTry);
      if (wait > 0) {
        // A move reported too soon after the last report goes when the 5 s are up.
        if (moved && !later) later = setTimeout(function () { later = null; report(true); }, wait);
        return;
      }
      busy = true;
      lastTry = t;
      var at = latest;
      fetch(action, {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
        body: 'csrf=' + encodeURIComponent(csrf) + '&available=1&report=1&lat=' + at.lat + '&lng=' + at.lng
      }).then(function (res) {
        busy = false;
        if (res.ok) { sent = at; say(''); return; }
        if (res.status === 409) return stop('You are no longer taking jobs: you stopped (here, on another page or in your app), or your location stopped reaching us. Reload this page to start again.');
        if (res.status === 401 || res.status === 403) return stop('You are signed out, so you stopped taking jobs: open this page again and sign in.');
        say('Your location could not be sent just now: trying again.');
      }, function () {
        busy = false;
        say('No connection: your location will be sent when it is back.');
      });
    }
    watch = navigator.geolocation.watchPosition(function (pos) {
      latest = { lat: pos.coords.latitude, lng: pos.coords.longitude, at: Date.now() };
      report(!sent || metres(sent, latest) > 200);
    }, function (err) { say(refused(err)); }, options);
    setInterval(function () { report(false); }, every);
  }

  function countdowns() {
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
  }
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
