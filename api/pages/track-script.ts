import { CANCELLABLE } from '../../shared/services/bookings.ts';
import { type Asset, JS, makeAsset } from './assets.ts';
import { NO_DRIVER_LABELS, STATUS_LABELS } from './site.ts';

/** Statuses in which the tracking page links to the pay-the-driver page (a driver is on the job, or it is done). */
export const PAYABLE_STATUSES: readonly string[] = [
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'passenger_on_board',
  'completed',
];

/** Statuses with no driver on the job: the page shows none (a job handed back is dispatched again). */
const NO_DRIVER_STATUSES: readonly string[] = ['pending', 'dispatching', 'no_driver_available', 'cancelled'];

/**
 * The tracking page's only script, served from our own origin (`script-src 'self'`): it
 * follows the booking's server-sent events (`data-events` of `#live`, the same stream as the
 * API's) and updates the server-rendered page in place: status, history, driver and vehicle,
 * ETA (and its `eta` events as the driver moves), whether dispatch still asks drivers (its
 * `dispatch` events), the pay link, and it removes the cancel
 * button once cancelling is no longer allowed.
 * Events up to the `seq` the page was rendered with are skipped. Text goes in through
 * `textContent` only (never HTML). Without it (or without EventSource) the page is what the
 * server rendered, with its refresh link. The labels and rules come from the same constants
 * as the server's rendering.
 */
export function trackScriptSource(): string {
  return `(function () {
  'use strict';
  var live = document.getElementById('live');
  if (!live || !window.EventSource || !window.JSON) return;
  var LABELS = ${JSON.stringify(STATUS_LABELS)};
  var NO_DRIVER_LABELS = ${JSON.stringify(NO_DRIVER_LABELS)};
  var CANCELLABLE = ${JSON.stringify([...CANCELLABLE])};
  var PAYABLE = ${JSON.stringify(PAYABLE_STATUSES)};
  var TERMINAL = ['completed', 'cancelled'];
  var when = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/London', weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' });
  var wall = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/London', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' });
  var zoneName = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/London', timeZoneName: 'short' });
  // As the server renders it (shared/domain/london-zone.ts): a time in the hour that happens
  // twice when BST ends names its zone ("01:30 BST", "01:30 GMT").
  function shown(at) {
    var t = wall.format(at);
    var text = when.format(at);
    if (wall.format(new Date(at.getTime() - 3600000)) !== t && wall.format(new Date(at.getTime() + 3600000)) !== t) return text;
    var parts = zoneName.formatToParts(at);
    for (var i = 0; i < parts.length; i++) if (parts[i].type === 'timeZoneName') return text + ' ' + parts[i].value;
    return text;
  }
  var seen = Number(live.getAttribute('data-seq')) || 0;
  var current = live.getAttribute('data-status');
  function el(id) { return document.getElementById(id); }
  function setText(id, text) { var e = el(id); if (e) e.textContent = text; }
  function show(id, on) { var e = el(id); if (e) e.hidden = !on; }
  function label(status) { return LABELS[status] || String(status).replace(/_/g, ' '); }
  var NO_DRIVER = ${JSON.stringify(NO_DRIVER_STATUSES)};
  var url = live.getAttribute('data-events');
  var source = null;
  var over = false;
  var delay = 3000;
  var refused = 0;
  // EventSource reconnects by itself after a dropped stream, but gives up for good on an
  // answer other than 200 (a 429 or 503 while reconnecting): then connect again, backing off,
  // up to 8 times in a row (about 5 minutes; a page whose link no longer works stops there).
  function connect() {
    source = new EventSource(url);
    source.addEventListener('open', function () { delay = 3000; refused = 0; });
    source.addEventListener('status', onStatus);
    source.addEventListener('eta', onEta);
    source.addEventListener('dispatch', onDispatch);
    source.onerror = function () {
      if (over || source.readyState !== 2) return;
      refused += 1;
      if (refused > 8) {
        setText('live', 'Live updates have stopped: refresh the page to see the latest.');
        return;
      }
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 60000);
    };
  }
  live.hidden = false;
  function showEta(minutes) {
    setText('eta', 'Your driver is about ' + minutes + (minutes === 1 ? ' minute' : ' minutes') + ' away.');
    show('eta', true);
  }
  // The driver moved: the stream sends the new ETA on its own while they are on the way.
  function onEta(message) {
    var ev;
    try { ev = JSON.parse(message.data); } catch (e) { return; }
    if (!ev) return;
    if (typeof ev.etaMinutes === 'number') showEta(ev.etaMinutes);
    else show('eta', false);
  }
  // No driver: dispatch stopped asking (or asks again) with no new status; the stream says so on its own.
  function onDispatch(message) {
    var ev;
    try { ev = JSON.parse(message.data); } catch (e) { return; }
    if (!ev || typeof ev.retrying !== 'boolean' || current !== 'no_driver_available') return;
    setText('status', NO_DRIVER_LABELS[ev.retrying ? 'retrying' : 'stopped']);
  }
  function onStatus(message) {
    var ev;
    try { ev = JSON.parse(message.data); } catch (e) { return; }
    if (!ev || typeof ev.seq !== 'number' || typeof ev.status !== 'string') return;
    var finished = TERMINAL.indexOf(ev.status) >= 0;
    if (finished) { over = true; source.close(); }
    if (ev.seq <= seen) return;
    seen = ev.seq;
    current = ev.status;
    // No driver: whether dispatch asks again before pickup (the event says), or has stopped.
    setText('status', ev.status === 'no_driver_available' && typeof ev.retrying === 'boolean'
      ? NO_DRIVER_LABELS[ev.retrying ? 'retrying' : 'stopped'] : label(ev.status));
    var history = el('history');
    if (history) {
      var item = document.createElement('li');
      var time = document.createElement('time');
      time.setAttribute('datetime', ev.at);
      time.textContent = shown(new Date(ev.at));
      item.appendChild(time);
      item.appendChild(document.createTextNode(' ' + label(ev.status)));
      history.appendChild(item);
    }
    if (ev.driver) {
      var v = ev.vehicle;
      setText('driver-name', ev.driver.name);
      setText('vehicle', v ? [v.colour, v.make, v.model].join(' ') : 'to follow');
      setText('registration', v ? v.registration : 'to follow');
      show('driver', true);
    } else if (NO_DRIVER.indexOf(ev.status) >= 0) {
      // No driver on the job (handed back, being dispatched again, cancelled): none is shown.
      show('driver', false);
    }
    if (typeof ev.etaMinutes === 'number') showEta(ev.etaMinutes);
    else show('eta', false);
    if (CANCELLABLE.indexOf(ev.status) < 0) {
      var cancel = el('cancel');
      if (cancel && cancel.parentNode) cancel.parentNode.removeChild(cancel);
    }
    show('pay', PAYABLE.indexOf(ev.status) >= 0);
    if (finished) setText('live', 'This booking has finished.');
  }
  connect();
})();
`;
}

let cached: Asset | null = null;

/** The script as served (built once). Its path carries its hash: `/assets/track-<version>.js`. */
export function trackScript(): Asset {
  cached ??= makeAsset(trackScriptSource(), JS);
  return cached;
}

export const trackScriptPath = (): string => `/assets/track-${trackScript().version}.js`;
