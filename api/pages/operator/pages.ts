import type { Request, Response } from 'express';
import type { Db } from '../../../shared/db/knex.ts';
import { NAME_MAX, NameError, nameProblem, visibleText } from '../../../shared/domain/names.ts';
import { checkEndpointUrl, EndpointUrlError, endpointUrlRules } from '../../../shared/net/public-address.ts';
import { issueApiKey, listApiKeys, revokeApiKeyAs } from '../../../shared/services/api-keys.ts';
import { presenceIndex } from '../../../shared/services/dispatch.ts';
import {
  approveDriver,
  DRIVER_STATUSES,
  DriverAlreadyApprovedError,
  type DriverListing,
  DriverNotSuspendableError,
  type DriverStatus,
  extendDriverTrial,
  listDrivers,
  MAX_TRIAL_EXTENSION_DAYS,
  rejectDriver,
  suspendDriver,
} from '../../../shared/services/drivers.ts';
import { createPartner, extendPartnerTrial, listPartners } from '../../../shared/services/partners.ts';
import {
  listDeadDeliveries,
  replayDelivery,
  WebhookConflictError,
  WebhookNotFoundError,
} from '../../../shared/services/webhooks.ts';
import type { ApiDeps } from '../../deps.ts';
import { escapeHtml } from '../layout.ts';
import { sendMessagePage, timeElement, VEHICLE_LABELS } from '../site.ts';
import { notice, operatorPage, postForm, sendOperatorPage } from './layout.ts';
import { refuseForm } from './login.ts';
import { actorOf, sessionFormToken, sessionFormValid, sessionOf } from './session.ts';

/**
 * The operator pages behind sign-in: an overview, driver applications (approve, reject,
 * suspend, trial extension), partners and their API keys (create a partner or a key, shown
 * once; revoke a key; trial extension), and dead-lettered webhook deliveries (replay). Every
 * change goes through the same service as the CLI's command (bin/admin.ts), with the operator
 * as the audit log's actor (`operator:<id>`), and is logged with the operator id, never a
 * secret. Changes that are not shown once answer 303 back to their list (post/redirect/get),
 * which says what was done; a new partner's secrets and a new key are a page of their own,
 * the one time they are shown.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DAILY_LIMIT_MAX = 1_000_000;

type Body = Record<string, unknown>;
const bodyOf = (req: Request): Body => (req.body ?? {}) as Body;
const str = (v: unknown): string => (typeof v === 'string' ? v.trim() : '');
const idOf = (raw: unknown): string | null => (typeof raw === 'string' && UUID.test(raw) ? raw.toLowerCase() : null);
const date = (iso: string | Date | null): string => (iso === null ? 'not set' : timeElement(new Date(iso)));

type DriverFilter = DriverStatus | 'all';
const FILTERS: Array<{ value: DriverFilter; label: string }> = [
  { value: 'pending_approval', label: 'Pending applications' },
  { value: 'approved', label: 'Approved' },
  { value: 'suspended', label: 'Suspended' },
  { value: 'rejected', label: 'Rejected' },
  { value: 'all', label: 'All' },
];
const filterOf = (raw: unknown): DriverFilter =>
  raw === 'all' || (DRIVER_STATUSES as readonly unknown[]).includes(raw) ? (raw as DriverFilter) : 'pending_approval';
const STATUS_TEXT: Record<DriverStatus, string> = {
  pending_approval: 'Pending approval',
  approved: 'Approved',
  rejected: 'Rejected',
  suspended: 'Suspended',
};

/**
 * A partner's or key's name refused by the services' rule (`nameProblem`: one line of visible
 * text, at most NAME_MAX characters), as a sentence for the form; null when it is fine.
 */
function namePageProblem(name: string, field = 'The name'): string | null {
  const problem = nameProblem(name);
  return problem === null ? null : `${field} ${problem}.`;
}

/** `days` of a trial form: a whole number from 1 to 3650, else null. */
function daysOf(raw: unknown): number | null {
  const text = str(raw);
  if (!/^\d{1,4}$/.test(text)) return null;
  const n = Number(text);
  return n >= 1 && n <= MAX_TRIAL_EXTENSION_DAYS ? n : null;
}

function trialForm(action: string, csrf: string, idBase: string, hidden: readonly string[] = []): string {
  return postForm(
    action,
    csrf,
    [
      ...hidden,
      `<div><label for="${idBase}-days">Extend the free trial by (days)</label>`,
      `<input id="${idBase}-days" name="days" type="number" inputmode="numeric" min="1" max="${MAX_TRIAL_EXTENSION_DAYS}" step="1" required value="30"></div>`,
    ],
    'Extend trial',
    { className: 'inline', buttonClass: 'secondary' },
  );
}

export interface OperatorPages {
  overview(req: Request, res: Response): Promise<void>;
  drivers(req: Request, res: Response): Promise<void>;
  driverAction(action: 'approve' | 'reject' | 'suspend' | 'trial'): (req: Request, res: Response) => Promise<void>;
  partners(req: Request, res: Response): Promise<void>;
  createPartner(req: Request, res: Response): Promise<void>;
  createKey(req: Request, res: Response): Promise<void>;
  revokeKey(req: Request, res: Response): Promise<void>;
  partnerTrial(req: Request, res: Response): Promise<void>;
  webhooks(req: Request, res: Response): Promise<void>;
  replay(req: Request, res: Response): Promise<void>;
}

interface PartnerForm {
  name: string;
  dailyLimit: string;
  webhookUrl: string;
  canSetFares: boolean;
}
const EMPTY_PARTNER: PartnerForm = { name: '', dailyLimit: '', webhookUrl: '', canSetFares: false };

export function operatorPages(deps: ApiDeps): OperatorPages {
  const { config } = deps;
  const db: Db = deps.db;
  const serviceName = config.serviceName;

  function send(req: Request, res: Response, status: number, title: string, current: string, body: string[]) {
    const session = sessionOf(res);
    const csrf = sessionFormToken(req, res, deps);
    sendOperatorPage(
      res,
      status,
      operatorPage({ serviceName, title, signedIn: { name: session.operator.name, csrf }, current, body }),
    );
  }

  function notFound(res: Response, what: string, back: string) {
    sendMessagePage(
      res,
      serviceName,
      404,
      `No such ${what}`,
      [`There is no ${what} with this id.`],
      [`<p><a href="${back}">Back</a></p>`],
    );
  }

  function invalid(res: Response, message: string, back: string) {
    sendMessagePage(res, serviceName, 400, 'Please check the form', [message], [`<p><a href="${back}">Back</a></p>`]);
  }

  /** The form's token, checked; false (and a 403 page sent) when it is missing or wrong. */
  function checked(req: Request, res: Response): boolean {
    if (sessionFormValid(req, res, deps, bodyOf(req).csrf)) return true;
    req.log?.warn({ operatorId: sessionOf(res).operator.id }, 'operator form refused: missing or wrong form token');
    refuseForm(res, serviceName);
    return false;
  }

  function redirect(res: Response, to: string) {
    res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' });
    res.redirect(303, to);
  }

  const log = (req: Request, res: Response, fields: Record<string, unknown>, msg: string) =>
    req.log?.info({ operatorId: sessionOf(res).operator.id, ...fields }, msg);

  // -------------------------------------------------------------------------------------------
  // Overview

  async function overview(req: Request, res: Response) {
    const count = async (q: Promise<Array<{ n: string | number }>>) => Number((await q)[0]?.n ?? 0);
    const [pending, approved, partners, keys, dead] = await Promise.all([
      count(db('drivers').where({ status: 'pending_approval' }).count({ n: '*' })),
      count(db('drivers').where({ status: 'approved' }).count({ n: '*' })),
      count(db('partners').count({ n: '*' })),
      count(db('api_keys').whereNull('revoked_at').count({ n: '*' })),
      count(db('webhook_deliveries').where({ state: 'dead' }).count({ n: '*' })),
    ]);
    let queueRows: string[];
    try {
      const counts = await Promise.all(
        Object.entries(deps.queues).map(
          async ([name, q]) => [name, await q.getJobCounts('waiting', 'active', 'delayed', 'failed')] as const,
        ),
      );
      queueRows = counts.map(
        ([name, c]) =>
          `<tr><th scope="row">${escapeHtml(name)}</th><td>${c.waiting ?? 0}</td><td>${c.active ?? 0}</td><td>${c.delayed ?? 0}</td><td>${c.failed ?? 0}</td></tr>`,
      );
    } catch (err) {
      req.log?.warn({ err }, 'queue counts unavailable');
      queueRows = ['<tr><td colspan="5">Queue counts are unavailable: Redis did not answer.</td></tr>'];
    }
    const tile = (n: number | string, label: string, href: string) =>
      `<li><strong>${n}</strong><a href="${href}">${escapeHtml(label)}</a></li>`;
    // Live drivers in the presence index (sandbox drivers have their own index and are not counted).
    const taking = await presenceIndex(deps.redis, deps.config)
      .count(Date.now())
      .catch((err: unknown) => {
        req.log?.warn({ err }, 'presence count unavailable');
        return null;
      });
    send(req, res, 200, 'Overview', '/operator', [
      `<h1>Hello, ${escapeHtml(sessionOf(res).operator.name)}</h1>`,
      '<h2 id="counts-h">At a glance</h2>',
      '<ul class="counts" aria-labelledby="counts-h">',
      tile(pending, 'Driver applications pending', '/operator/drivers'),
      tile(approved, 'Approved drivers', '/operator/drivers?status=approved'),
      tile(
        taking ?? '?',
        taking === null ? 'Drivers taking jobs (Redis did not answer)' : 'Drivers taking jobs now',
        '/operator/drivers?status=approved',
      ),
      tile(partners, 'Partners', '/operator/partners'),
      tile(keys, 'Active API keys', '/operator/partners'),
      tile(dead, 'Dead webhook deliveries', '/operator/webhooks'),
      '</ul>',
      '<h2>Queues</h2>',
      '<div class="scroll" role="region" aria-label="Queue counts" tabindex="0"><table>',
      '<caption>Jobs per queue now. The <a href="/operator/queues">queue board</a> shows and retries them.</caption>',
      '<thead><tr><th scope="col">Queue</th><th scope="col">Waiting</th><th scope="col">Active</th><th scope="col">Delayed</th><th scope="col">Failed</th></tr></thead>',
      '<tbody>',
      ...queueRows,
      '</tbody></table></div>',
    ]);
  }

  // -------------------------------------------------------------------------------------------
  // Drivers

  async function driverDone(done: unknown, rawId: unknown): Promise<string> {
    const id = idOf(rawId);
    if (!id || typeof done !== 'string') return '';
    const d = await db('drivers')
      .where({ id })
      .first<
        { name: string; status: DriverStatus; token_prefix: string | null; trial_ends_at: Date | null } | undefined
      >('name', 'status', 'token_prefix', 'trial_ends_at');
    if (!d) return '';
    const name = d.name;
    const trial = d.trial_ends_at ? d.trial_ends_at.toISOString().slice(0, 10) : 'not set';
    // Each notice only when the driver's status still says so: the URL alone proves nothing.
    const lines: Record<string, [DriverStatus | null, string]> = {
      approved: [
        'approved',
        `Approved ${name}. Their driver token${d.token_prefix ? ` (${d.token_prefix}…)` : ''} was sent to them by SMS and e-mail; it is not shown here. Free trial until ${trial}.`,
      ],
      'already-approved': [
        'approved',
        `${name} was already approved: nothing was changed, and no new token was issued or sent.`,
      ],
      rejected: ['rejected', `Rejected the application of ${name}. They have no token.`],
      suspended: ['suspended', `Suspended ${name}: their token stopped working and they are offline.`],
      trial: [null, `The free trial of ${name} now ends ${trial}.`],
    };
    const entry = Object.hasOwn(lines, done) ? lines[done] : undefined;
    if (!entry || (entry[0] !== null && entry[0] !== d.status)) return '';
    return notice('done', [entry[1]]);
  }

  function driverCard(
    d: DriverListing,
    vehicle: Record<string, unknown> | undefined,
    csrf: string,
    filter: DriverFilter,
    /** Approved drivers only: their live position's last report, null when not taking jobs; undefined when unknown. */
    presence: { lastSeenAt: number } | null | undefined,
  ): string {
    const back = `<input type="hidden" name="back" value="${escapeHtml(filter)}">`;
    const who = `<span class="sr-only"> ${escapeHtml(d.name)}</span>`;
    const base = `/operator/drivers/${d.id}`;
    const actions: string[] = [];
    if (d.status !== 'approved') {
      actions.push(
        postForm(
          `${base}/approve`,
          csrf,
          [back],
          `${d.status === 'pending_approval' ? 'Approve' : 'Approve again'}${who}`,
        ),
      );
    }
    if (d.status === 'pending_approval' || d.status === 'approved') {
      actions.push(
        d.status === 'pending_approval'
          ? postForm(`${base}/reject`, csrf, [back], `Reject${who}`, { buttonClass: 'danger' })
          : postForm(`${base}/suspend`, csrf, [back], `Suspend${who}`, { buttonClass: 'danger' }),
      );
    }
    if (d.status !== 'rejected') actions.push(trialForm(`${base}/trial`, csrf, `trial-${d.id}`, [back]));
    const v = vehicle as
      | {
          make: string;
          model: string;
          colour: string;
          registration: string;
          class: string;
          seats: number;
          wheelchair_accessible: boolean;
        }
      | undefined;
    return [
      `<article class="card" id="driver-${d.id}" aria-labelledby="driver-${d.id}-h">`,
      `<h3 id="driver-${d.id}-h">${escapeHtml(d.name)}</h3>`,
      '<dl>',
      `<dt>Status</dt><dd>${escapeHtml(STATUS_TEXT[d.status])}</dd>`,
      ...(d.status === 'approved'
        ? [
            `<dt>Taking jobs</dt><dd>${
              presence === undefined
                ? 'unknown: Redis did not answer'
                : presence === null
                  ? 'no'
                  : `yes, last location report ${date(new Date(presence.lastSeenAt))}`
            }</dd>`,
          ]
        : []),
      `<dt>Applied</dt><dd>${date(d.createdAt)}</dd>`,
      `<dt>Mobile</dt><dd>${escapeHtml(d.phone)}</dd>`,
      `<dt>E-mail</dt><dd>${escapeHtml(d.email)}</dd>`,
      `<dt>Licence</dt><dd>${escapeHtml(d.licenceNumber)}, ${escapeHtml(d.licensingAuthority)}, expires ${escapeHtml(d.licenceExpiry)}</dd>`,
      `<dt>Based in</dt><dd>${escapeHtml(d.homeCity)}${d.nationalNetwork ? ' (national network)' : ''}</dd>`,
      `<dt>Vehicle</dt><dd>${
        v
          ? `${escapeHtml(`${v.colour} ${v.make} ${v.model}`)}, <span class="mono">${escapeHtml(v.registration)}</span>, ${escapeHtml(VEHICLE_LABELS[v.class] ?? v.class)}, ${v.seats} seats${v.wheelchair_accessible ? ', wheelchair accessible' : ''}`
          : 'none recorded'
      }</dd>`,
      ...(d.partnerId ? [`<dt>Fleet of</dt><dd class="mono">${escapeHtml(d.partnerId)}</dd>`] : []),
      ...(d.approvedAt ? [`<dt>Approved</dt><dd>${date(d.approvedAt)}</dd>`] : []),
      `<dt>Free trial until</dt><dd>${date(d.trialEndsAt)}</dd>`,
      `<dt>Id</dt><dd class="mono">${escapeHtml(d.id)}</dd>`,
      '</dl>',
      `<div class="actions">${actions.join('\n')}</div>`,
      '</article>',
    ].join('\n');
  }

  async function drivers(req: Request, res: Response) {
    const filter = filterOf(req.query.status);
    const list = await listDrivers(db, filter === 'all' ? {} : { status: filter });
    const vehicles = list.length
      ? await db('vehicles')
          .whereIn(
            'driver_id',
            list.map((d) => d.id),
          )
          .where({ active: true })
          .orderBy('created_at')
          .select('driver_id', 'make', 'model', 'colour', 'registration', 'class', 'seats', 'wheelchair_accessible')
      : [];
    const byDriver = new Map<string, Record<string, unknown>>(vehicles.map((v) => [v.driver_id as string, v]));
    // Each driver's presence from their mode's index: sandbox drivers report into one of their own.
    const approved = list.filter((d) => d.status === 'approved');
    const positionsIn = async (testMode: boolean) => {
      const ids = approved.filter((d) => d.testMode === testMode).map((d) => d.id);
      return ids.length ? presenceIndex(deps.redis, deps.config, testMode).positions(ids, Date.now()) : new Map();
    };
    const live = await Promise.all([positionsIn(false), positionsIn(true)])
      .then(([real, sandbox]) => new Map([...real, ...sandbox]))
      .catch((err: unknown) => {
        req.log?.warn({ err }, 'driver presence unavailable');
        return null;
      });
    const done = await driverDone(req.query.done, req.query.id);
    const csrf = sessionFormToken(req, res, deps);
    const label = FILTERS.find((f) => f.value === filter)?.label ?? '';
    send(req, res, 200, `Drivers: ${label}`, '/operator/drivers', [
      '<h1>Drivers</h1>',
      done,
      '<nav aria-label="Driver status"><ul class="filters">',
      ...FILTERS.map(
        (f) =>
          `<li><a href="/operator/drivers?status=${f.value}"${f.value === filter ? ' aria-current="page"' : ''}>${escapeHtml(f.label)}</a></li>`,
      ),
      '</ul></nav>',
      `<h2>${escapeHtml(label)} (${list.length})</h2>`,
      ...(list.length === 0
        ? ['<p>None.</p>']
        : list.map((d) =>
            driverCard(d, byDriver.get(d.id), csrf, filter, live ? (live.get(d.id) ?? null) : undefined),
          )),
      '<p class="muted">Approving sends the driver their app token by SMS and e-mail and starts the 90-day free trial; approving a suspended or rejected driver again issues a new token. An approved driver is not approved twice here (a new token for a lost one: <span class="mono">driver approve ID</span> in the CLI). Rejecting or suspending ends their token.</p>',
    ]);
  }

  function driverAction(action: 'approve' | 'reject' | 'suspend' | 'trial') {
    return async (req: Request, res: Response) => {
      const id = idOf(req.params.id);
      const back = filterOf(bodyOf(req).back);
      const list = `/operator/drivers?status=${back}`;
      if (!checked(req, res)) return;
      if (!id) return notFound(res, 'driver', list);
      const session = sessionOf(res);
      const actor = actorOf(session);
      let done: string;
      if (action === 'trial') {
        const days = daysOf(bodyOf(req).days);
        if (days === null) {
          return invalid(res, `The number of days must be a whole number from 1 to ${MAX_TRIAL_EXTENSION_DAYS}.`, list);
        }
        const extended = await extendDriverTrial(db, id, days, actor);
        if (!extended) return notFound(res, 'driver', list);
        log(req, res, { driverId: id, days, trialEndsAt: extended.trialEndsAt }, 'operator extended a driver trial');
        done = 'trial';
      } else if (action === 'approve') {
        // Only a driver who is not approved yet: a second submit of the form (a double-click, a
        // resubmitted page) issues and sends no second token. The CLI re-issues one on purpose.
        let approved: Awaited<ReturnType<typeof approveDriver>>;
        try {
          approved = await approveDriver(db, id, actor, { reissue: false });
        } catch (err) {
          if (!(err instanceof DriverAlreadyApprovedError)) throw err;
          log(req, res, { driverId: id }, 'operator approval skipped: the driver is already approved');
          return redirect(res, `${list}&done=already-approved&id=${id}`);
        }
        if (!approved) return notFound(res, 'driver', list);
        log(req, res, { driverId: id, tokenPrefix: approved.token.slice(0, 14) }, 'operator approved a driver');
        done = 'approved';
      } else {
        let changed: Awaited<ReturnType<typeof rejectDriver | typeof suspendDriver>>;
        try {
          changed = action === 'reject' ? await rejectDriver(db, id, actor) : await suspendDriver(db, id, actor);
        } catch (err) {
          if (err instanceof DriverNotSuspendableError) {
            return invalid(
              res,
              `This driver is ${err.status.replace(/_/g, ' ')}: only an approved driver can be suspended.`,
              list,
            );
          }
          throw err;
        }
        if (!changed) return notFound(res, 'driver', list);
        log(
          req,
          res,
          { driverId: id },
          action === 'reject' ? 'operator rejected a driver' : 'operator suspended a driver',
        );
        done = action === 'reject' ? 'rejected' : 'suspended';
      }
      redirect(res, `${list}&done=${done}&id=${id}`);
    };
  }

  // -------------------------------------------------------------------------------------------
  // Partners and keys

  async function partnersPage(
    req: Request,
    res: Response,
    status: number,
    opts: { form?: PartnerForm; problems?: string[]; done?: string; nameProblem?: string | null } = {},
  ) {
    const [partners, keys] = await Promise.all([listPartners(db), listApiKeys(db)]);
    const csrf = sessionFormToken(req, res, deps);
    const form = opts.form ?? EMPTY_PARTNER;
    const keysOf = (partnerId: string | null) => keys.filter((k) => k.partnerId === partnerId);
    const keyTable = (owner: string, list: typeof keys) =>
      list.length === 0
        ? '<p>No keys.</p>'
        : [
            `<div class="scroll" role="region" aria-label="API keys of ${escapeHtml(owner)}" tabindex="0"><table>`,
            `<caption>API keys of ${escapeHtml(owner)}</caption>`,
            '<thead><tr><th scope="col">Prefix</th><th scope="col">Name</th><th scope="col">Mode</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Revoked</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead><tbody>',
            ...list.map(
              (k) =>
                `<tr><td class="mono">${escapeHtml(k.prefix)}…</td><td>${escapeHtml(k.name)}</td><td>${escapeHtml(k.mode)}</td><td>${date(k.createdAt)}</td><td>${k.lastUsedAt ? date(k.lastUsedAt) : 'never'}</td><td>${k.revokedAt ? date(k.revokedAt) : 'no'}</td><td>${
                  k.revokedAt
                    ? ''
                    : postForm(
                        `/operator/keys/${k.id}/revoke`,
                        csrf,
                        [],
                        `Revoke<span class="sr-only"> key ${escapeHtml(k.prefix)}</span>`,
                        {
                          buttonClass: 'danger',
                        },
                      )
                }</td></tr>`,
            ),
            '</tbody></table></div>',
          ].join('\n');
    const keyForm = (action: string, idBase: string, owner: string) =>
      postForm(
        action,
        csrf,
        [
          `<div><label for="${idBase}-name">New key's name<span class="sr-only"> for ${escapeHtml(owner)}</span></label>`,
          `<input id="${idBase}-name" name="name" type="text" required maxlength="${NAME_MAX}"></div>`,
          `<label class="choice"><input type="checkbox" name="test" value="1"> Test mode (sandbox)</label>`,
        ],
        'Create key',
        { className: 'inline', buttonClass: 'secondary' },
      );
    const partnerCards = partners.map((p) =>
      [
        `<article class="card" id="partner-${p.id}" aria-labelledby="partner-${p.id}-h">`,
        `<h3 id="partner-${p.id}-h">${escapeHtml(p.name)}</h3>`,
        '<dl>',
        `<dt>Id</dt><dd class="mono">${escapeHtml(p.id)}</dd>`,
        `<dt>Status</dt><dd>${escapeHtml(p.status)}</dd>`,
        `<dt>Created</dt><dd>${date(p.createdAt)}</dd>`,
        `<dt>Sets its own fares</dt><dd>${p.canSetFares ? 'yes' : 'no'}</dd>`,
        `<dt>Daily job limit</dt><dd>${p.dailyLimit ?? 'default'}</dd>`,
        `<dt>Webhook</dt><dd>${p.webhookUrl ? escapeHtml(p.webhookUrl) : 'none'}</dd>`,
        ...(p.isOperator
          ? [`<dt>Fleet</dt><dd>${escapeHtml(p.fleetClasses.join(', '))}, ${p.fleetCapacity} at once</dd>`]
          : []),
        `<dt>Free trial until</dt><dd>${date(p.trialEndsAt)}</dd>`,
        '</dl>',
        keyTable(p.name, keysOf(p.id)),
        '<div class="actions">',
        keyForm(`/operator/partners/${p.id}/keys`, `key-${p.id}`, p.name),
        trialForm(`/operator/partners/${p.id}/trial`, csrf, `trial-${p.id}`),
        '</div>',
        '</article>',
      ].join('\n'),
    );
    const problems = opts.problems ?? [];
    send(req, res, status, `${problems.length ? 'Error: ' : ''}Partners and keys`, '/operator/partners', [
      '<h1>Partners and API keys</h1>',
      opts.done ?? '',
      notice('problem', problems, 'The partner was not created'),
      ...(problems.length ? ['<p><a href="#partner-name">Correct the form</a></p>'] : []),
      `<h2>Partners (${partners.length})</h2>`,
      ...(partners.length === 0 ? ['<p>No partners yet.</p>'] : partnerCards),
      '<h2>Keys without a partner</h2>',
      '<div class="card">',
      keyTable('no partner', keysOf(null)),
      `<div class="actions">${keyForm('/operator/keys', 'key-none', 'no partner')}</div>`,
      '</div>',
      '<h2 id="new-partner">New partner</h2>',
      postForm(
        '/operator/partners',
        csrf,
        [
          '<label for="partner-name">Name</label>',
          ...(opts.nameProblem
            ? [`<span class="hint" id="partner-name-problem"><strong>${escapeHtml(opts.nameProblem)}</strong></span>`]
            : []),
          // A refused name is shown again without its control and formatting characters (they
          // are what was refused, and are not echoed into the page).
          `<input id="partner-name" name="name" type="text" required maxlength="${NAME_MAX}" value="${escapeHtml(
            opts.nameProblem ? visibleText(form.name) : form.name,
          )}"${opts.nameProblem ? ' aria-invalid="true" aria-describedby="partner-name-problem"' : ''}>`,
          '<label for="partner-limit">Daily job limit</label>',
          '<span class="hint" id="partner-limit-hint">Leave empty for the default.</span>',
          `<input id="partner-limit" name="dailyLimit" type="number" inputmode="numeric" min="1" step="1" aria-describedby="partner-limit-hint" value="${escapeHtml(form.dailyLimit)}">`,
          '<label for="partner-webhook">Webhook URL</label>',
          '<span class="hint" id="partner-webhook-hint">Where booking status updates are sent (https). Optional.</span>',
          `<input id="partner-webhook" name="webhookUrl" type="url" inputmode="url" aria-describedby="partner-webhook-hint" value="${escapeHtml(form.webhookUrl)}">`,
          `<label class="choice"><input type="checkbox" name="canSetFares" value="1"${form.canSetFares ? ' checked' : ''}> May set its own fares</label>`,
          '<p class="hint">Its API key, signing secret and webhook secret are shown once, on the next page.</p>',
        ],
        'Create partner',
      ),
      '<p class="muted">Tier-3 partner operators with a fleet are made with the CLI: <span class="mono">partner create … --operator</span>.</p>',
    ]);
  }

  function partnersDone(
    done: unknown,
    rawId: unknown,
    lines: { trialEndsAt?: string; name?: string; prefix?: string },
  ) {
    if (done === 'revoked')
      return notice('done', [`Revoked key ${lines.prefix ?? String(rawId)}…; it no longer works.`]);
    if (done === 'trial')
      return notice('done', [`The free trial of ${lines.name ?? 'the partner'} now ends ${lines.trialEndsAt ?? ''}.`]);
    return '';
  }

  async function partners(req: Request, res: Response) {
    const id = idOf(req.query.id);
    let done = '';
    if (id && req.query.done === 'revoked') {
      const k = await db('api_keys').where({ id }).first<{ prefix: string } | undefined>('prefix');
      if (k) done = partnersDone('revoked', id, { prefix: k.prefix });
    } else if (id && req.query.done === 'trial') {
      const p = await db('partners')
        .where({ id })
        .first<{ name: string; trial_ends_at: Date | null } | undefined>('name', 'trial_ends_at');
      if (p?.trial_ends_at)
        done = partnersDone('trial', id, { name: p.name, trialEndsAt: p.trial_ends_at.toISOString().slice(0, 10) });
    }
    await partnersPage(req, res, 200, { done });
  }

  async function createPartnerHandler(req: Request, res: Response) {
    if (!checked(req, res)) return;
    const b = bodyOf(req);
    const form: PartnerForm = {
      name: str(b.name),
      dailyLimit: str(b.dailyLimit),
      webhookUrl: str(b.webhookUrl),
      canSetFares: b.canSetFares === '1',
    };
    const problems: string[] = [];
    // The services' rule for names (the CLI's too), before spaces are tidied: a tab or a line
    // break is refused here as it is there, not turned into a space.
    const nameRefused = form.name === '' ? 'Enter the partner’s name.' : namePageProblem(form.name);
    if (nameRefused) problems.push(nameRefused);
    else form.name = form.name.replace(/\s+/g, ' ');
    let dailyLimit: number | null = null;
    if (form.dailyLimit !== '') {
      const n = /^\d{1,7}$/.test(form.dailyLimit) ? Number(form.dailyLimit) : 0;
      if (n < 1 || n > DAILY_LIMIT_MAX)
        problems.push('The daily job limit must be a whole number of at least 1, or empty.');
      else dailyLimit = n;
    }
    let webhookUrl: string | null = null;
    if (form.webhookUrl !== '') {
      try {
        webhookUrl = checkEndpointUrl(form.webhookUrl, endpointUrlRules(config));
      } catch (err) {
        if (!(err instanceof EndpointUrlError)) throw err;
        problems.push(`The webhook URL ${err.problem}.`);
      }
    }
    if (problems.length > 0) return partnersPage(req, res, 400, { form, problems, nameProblem: nameRefused });
    const session = sessionOf(res);
    let created: Awaited<ReturnType<typeof createPartner>>;
    try {
      created = await createPartner(db, config, {
        name: form.name,
        canSetFares: form.canSetFares,
        dailyLimit,
        webhookUrl,
        actor: actorOf(session),
      });
    } catch (err) {
      if (!(err instanceof NameError)) throw err;
      const problem = `The name ${err.problem}.`;
      return partnersPage(req, res, 400, { form, problems: [problem], nameProblem: problem });
    }
    log(req, res, { partnerId: created.id, webhook: webhookUrl !== null }, 'operator created a partner');
    send(req, res, 201, 'Partner created', '/operator/partners', [
      `<h1>Partner ${escapeHtml(form.name)} created</h1>`,
      notice('done', [
        'Copy these secrets now and give them to the partner securely: they are shown this once and cannot be shown again.',
      ]),
      '<dl>',
      `<dt>Partner id</dt><dd class="mono">${escapeHtml(created.id)}</dd>`,
      `<dt>API key</dt><dd class="secret" id="api-key">${escapeHtml(created.apiKey)}</dd>`,
      `<dt>Signing secret</dt><dd class="secret" id="signing-secret">${escapeHtml(created.signingSecret)}</dd>`,
      `<dt>Webhook secret</dt><dd${created.webhookSecret ? ' class="secret" id="webhook-secret"' : ''}>${created.webhookSecret ? escapeHtml(created.webhookSecret) : 'none (no webhook URL)'}</dd>`,
      '</dl>',
      `<p><a href="/operator/partners#partner-${created.id}">Back to partners and keys</a></p>`,
    ]);
  }

  async function createKey(req: Request, res: Response) {
    if (!checked(req, res)) return;
    const b = bodyOf(req);
    const partnerParam = req.params.id;
    const partnerId = partnerParam === undefined ? null : idOf(partnerParam);
    if (partnerParam !== undefined && !partnerId) return notFound(res, 'partner', '/operator/partners');
    const raw = str(b.name);
    if (raw === '') {
      return invalid(res, `Enter a name for the key (at most ${NAME_MAX} characters).`, '/operator/partners');
    }
    // The services' rule for names (the CLI's too), before spaces are tidied.
    const refused = namePageProblem(raw, 'The key’s name');
    if (refused) return invalid(res, refused, '/operator/partners');
    const name = raw.replace(/\s+/g, ' ');
    const session = sessionOf(res);
    let created: Awaited<ReturnType<typeof issueApiKey>>;
    try {
      created = await issueApiKey(db, {
        serviceCode: config.serviceCode,
        name,
        partnerId,
        mode: b.test === '1' ? 'test' : 'live',
        actor: actorOf(session),
      });
    } catch (err) {
      if (!(err instanceof NameError)) throw err;
      return invalid(res, `The key’s name ${err.problem}.`, '/operator/partners');
    }
    if (!created) return notFound(res, 'partner', '/operator/partners');
    log(req, res, { keyId: created.id, prefix: created.prefix, partnerId }, 'operator created an API key');
    send(req, res, 201, 'API key created', '/operator/partners', [
      `<h1>API key ${escapeHtml(name)} created</h1>`,
      notice('done', ['Copy the key now: it is shown this once and cannot be shown again (only its hash is stored).']),
      '<dl>',
      `<dt>Key</dt><dd class="secret" id="api-key">${escapeHtml(created.key)}</dd>`,
      `<dt>Prefix</dt><dd class="mono">${escapeHtml(created.prefix)}</dd>`,
      `<dt>Id</dt><dd class="mono">${escapeHtml(created.id)}</dd>`,
      '</dl>',
      `<p><a href="/operator/partners${partnerId ? `#partner-${partnerId}` : ''}">Back to partners and keys</a></p>`,
    ]);
  }

  async function revokeKey(req: Request, res: Response) {
    if (!checked(req, res)) return;
    const id = idOf(req.params.id);
    const revoked = id ? await revokeApiKeyAs(db, id, actorOf(sessionOf(res))) : null;
    if (!id || !revoked) return notFound(res, 'API key', '/operator/partners');
    log(req, res, { keyId: id }, 'operator revoked an API key');
    redirect(res, `/operator/partners?done=revoked&id=${id}`);
  }

  async function partnerTrial(req: Request, res: Response) {
    if (!checked(req, res)) return;
    const id = idOf(req.params.id);
    if (!id) return notFound(res, 'partner', '/operator/partners');
    const days = daysOf(bodyOf(req).days);
    if (days === null) {
      return invalid(
        res,
        `The number of days must be a whole number from 1 to ${MAX_TRIAL_EXTENSION_DAYS}.`,
        '/operator/partners',
      );
    }
    const extended = await extendPartnerTrial(db, id, days, actorOf(sessionOf(res)));
    if (!extended) return notFound(res, 'partner', '/operator/partners');
    log(req, res, { partnerId: id, days, trialEndsAt: extended.trialEndsAt }, 'operator extended a partner trial');
    redirect(res, `/operator/partners?done=trial&id=${id}`);
  }

  // -------------------------------------------------------------------------------------------
  // Dead webhooks

  /**
   * The notice after a replay (`?done=replayed&id=…`), said only of a delivery that exists and
   * was replayed (its audit entry), in the words of its state now: the URL alone proves nothing.
   */
  async function replayedNotice(done: unknown, rawId: unknown): Promise<string> {
    const id = idOf(rawId);
    if (!id || done !== 'replayed') return '';
    const d = await db('webhook_deliveries as d')
      .where('d.id', id)
      .whereExists((q) =>
        q
          .select(db.raw('1'))
          .from('audit_log as a')
          .where({ 'a.subject_type': 'webhook_delivery', 'a.subject_id': id, 'a.action': 'webhook.replay' }),
      )
      .first<{ state: string } | undefined>('d.state');
    if (!d) return '';
    const lines: Record<string, string> = {
      pending: `Delivery ${id} is queued for one more attempt (same webhook-id), then retried on a fresh schedule if it fails.`,
      delivered: `Delivery ${id} was replayed and has been delivered.`,
      dead: `Delivery ${id} was replayed, and its retries failed again: it is dead.`,
    };
    const line = lines[d.state];
    return line ? notice('done', [line]) : '';
  }

  async function webhooks(req: Request, res: Response) {
    const dead = await listDeadDeliveries(db);
    const csrf = sessionFormToken(req, res, deps);
    const done = await replayedNotice(req.query.done, req.query.id);
    send(req, res, 200, 'Dead webhook deliveries', '/operator/webhooks', [
      '<h1>Dead webhook deliveries</h1>',
      done,
      '<p>Status updates whose retries (at least 24 hours) all failed. Replaying sends one more attempt at once with the same webhook-id; if it fails, it is retried on a fresh schedule (as long as a new delivery’s) before it is dead again.</p>',
      `<h2>Dead (${dead.length})</h2>`,
      ...(dead.length === 0
        ? ['<p>None.</p>']
        : dead.map((d) =>
            [
              `<article class="card" id="delivery-${d.id}" aria-labelledby="delivery-${d.id}-h">`,
              `<h3 id="delivery-${d.id}-h">${escapeHtml(d.eventType)}${d.bookingReference ? ` for ${escapeHtml(d.bookingReference)}` : ''}</h3>`,
              '<dl>',
              `<dt>Endpoint</dt><dd>${escapeHtml(d.endpointUrl)}</dd>`,
              `<dt>Sequence</dt><dd>${d.sequence ?? '–'}</dd>`,
              `<dt>Attempts</dt><dd>${d.attempts}</dd>`,
              `<dt>Last error</dt><dd>${escapeHtml(d.lastError ?? 'none recorded')}</dd>`,
              `<dt>Created</dt><dd>${date(d.createdAt)}</dd>`,
              `<dt>Id</dt><dd class="mono">${escapeHtml(d.id)}</dd>`,
              '</dl>',
              `<div class="actions">${postForm(`/operator/webhooks/${d.id}/replay`, csrf, [], `Replay<span class="sr-only"> delivery ${escapeHtml(d.id)}</span>`)}</div>`,
              '</article>',
            ].join('\n'),
          )),
    ]);
  }

  async function replay(req: Request, res: Response) {
    if (!checked(req, res)) return;
    const id = idOf(req.params.id);
    if (!id) return notFound(res, 'webhook delivery', '/operator/webhooks');
    try {
      await replayDelivery(db, id, actorOf(sessionOf(res)));
    } catch (err) {
      if (err instanceof WebhookNotFoundError) return notFound(res, 'webhook delivery', '/operator/webhooks');
      if (err instanceof WebhookConflictError) {
        return sendMessagePage(
          res,
          serviceName,
          409,
          'This delivery is not dead',
          [err.message],
          ['<p><a href="/operator/webhooks">Back to dead deliveries</a></p>'],
        );
      }
      throw err;
    }
    log(req, res, { deliveryId: id }, 'operator replayed a webhook delivery');
    redirect(res, `/operator/webhooks?done=replayed&id=${id}`);
  }

  return {
    overview,
    drivers,
    driverAction,
    partners,
    createPartner: createPartnerHandler,
    createKey,
    revokeKey,
    partnerTrial,
    webhooks,
    replay,
  };
}
