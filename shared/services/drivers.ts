import { randomBase62, sha256 } from '../crypto.ts';
import { appendStatus } from '../db/bookings.ts';
import type { Db, Queryable, Tx } from '../db/knex.ts';
import { enqueueJob } from '../db/outbox.ts';
import { type ScreenField, screenFields } from '../domain/content-screen.ts';
import {
  EMAIL_PROBLEM_MESSAGES,
  isDisposableDomain,
  isWellFormedEmail,
  normaliseEmail,
} from '../domain/email-acceptance.ts';
import type { VehicleType } from '../domain/tariffs/types.ts';
import { AppError, contentRejected, detailsText, type ErrorDetail } from '../errors.ts';
import { defaultGazetteer } from '../geo/gazetteer.ts';
import type { Geocoder, Place } from '../geo/types.ts';
import { uuidv7 } from '../ids.ts';
import { normalisePhone } from './bookings.ts';
import { queueDriverText, queueMessage } from './messages.ts';
import { recordTrialLapse } from './trial-lapses.ts';
import { withdrawOpenOffers } from './withdraw-offers.ts';

/**
 * Drivers (CONTRACT.md section 6, SPEC.md 2.10): a driver applies, an operator approves them,
 * and approval issues the driver's bearer token and starts the 90-day free trial. Only the
 * token's SHA-256 is stored (with its first 14 characters as a visible prefix), so a token is
 * shown once, when it is issued; approving again issues a new one and the old one stops working.
 * A suspended or rejected driver has no token: nothing they present authenticates.
 */

export const DRIVER_STATUSES = ['pending_approval', 'approved', 'rejected', 'suspended'] as const;
export type DriverStatus = (typeof DRIVER_STATUSES)[number];

/** Driver tokens: `dtn_drv_` and 40 base62 characters (about 238 random bits). */
export const DRIVER_TOKEN_PREFIX = 'dtn_drv_';
const DRIVER_TOKEN = /^dtn_drv_[0-9A-Za-z]{40}$/;
const TOKEN_PREFIX_LENGTH = 14;

/** New drivers' free trial (SPEC.md 2.10), counted from their first approval. */
export const DRIVER_TRIAL_DAYS = 90;
/** The longest single trial extension an operator can give. */
export const MAX_TRIAL_EXTENSION_DAYS = 3650;

/** Who an authenticated driver token belongs to. */
export interface DriverIdentity {
  id: string;
  name: string;
  status: DriverStatus;
  /** Set for a fleet driver of a partner operator. */
  partnerId: string | null;
  /** A sandbox driver (applied with a test key, or one of the simulator's fleet): offered test-mode bookings only. */
  testMode?: boolean;
  /** SHA-256 of the token this request was signed in with (never logged): replacing the token checks it is still current. */
  tokenHash?: Buffer;
}

export interface DriverApplication {
  name: string;
  phone: string;
  email: string;
  licensingAuthority: string;
  licenceNumber: string;
  /** YYYY-MM-DD. */
  licenceExpiry: string;
  vehicle: {
    make: string;
    model: string;
    colour: string;
    registration: string;
    class: VehicleType;
    seats: number;
    wheelchairAccessible: boolean;
  };
  homeCity: string;
  operatingRadiusMiles: number;
  nationalNetwork?: { corridors: Array<{ from: string; to: string; bufferMiles: number }> } | undefined;
  paymentLink?: string | undefined;
}

export interface ApplyOptions {
  /** Who applied, for the audit log: `key:<prefix>` or `public`. */
  actor: string;
  /** Resolves homeCity and corridor ends; default the offline gazetteer. */
  geocoder?: Geocoder;
  /** A sandbox (test-mode key) application: the driver is created in test mode. */
  testMode?: boolean;
  /** The clock, for the licence-expiry check. */
  now?: Date;
  /** Told which screen rules refused the free text (for logs; never the text itself). */
  onContentRejected?: (reasons: string[]) => void;
}

/** A place as stored on the driver: its resolved name and point. */
export interface StoredPlace {
  name: string;
  lat: number;
  lng: number;
}
export interface StoredCorridor {
  from: StoredPlace;
  to: StoredPlace;
  bufferMiles: number;
}

/**
 * Only an approved driver is suspended (again, if already suspended): an application is turned
 * down with `rejectDriver`, and a rejected driver has nothing to suspend. Checked under the
 * driver's row lock, so an approval or rejection racing the suspension cannot slip between.
 */
export class DriverNotSuspendableError extends Error {
  constructor(
    readonly driverId: string,
    readonly status: DriverStatus,
  ) {
    super(
      `driver ${driverId} is ${status.replace(/_/g, ' ')}: only an approved driver can be suspended${status === 'pending_approval' ? ' (reject the application instead)' : ''}`,
    );
    this.name = 'DriverNotSuspendableError';
  }
}

/** The licensing authority has already seen this licence number apply (answered 409). */
export class DriverLicenceTakenError extends Error {
  constructor(
    readonly licensingAuthority: string,
    readonly licenceNumber: string,
  ) {
    super(
      `A driver with licence ${licenceNumber} from ${licensingAuthority} has already applied. If that application is yours, wait for it to be reviewed or contact us.`,
    );
    this.name = 'DriverLicenceTakenError';
  }
}

const LONDON_DAY = new Intl.DateTimeFormat('en-CA', {
  timeZone: 'Europe/London',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
});

const collapse = (s: string) => s.trim().replace(/\s+/g, ' ');
/** Licence numbers compare without case or spaces ("phd 1234" is "PHD1234"). */
const normaliseLicence = (s: string) => s.trim().replace(/\s+/g, '').toUpperCase();

/** Free text of an application, screened as the booking routes screen theirs. */
function screenApplication(a: DriverApplication): ScreenField[] {
  const fields: ScreenField[] = [
    { pointer: '/name', kind: 'name', value: a.name },
    { pointer: '/licensingAuthority', kind: 'name', value: a.licensingAuthority },
    { pointer: '/licenceNumber', kind: 'reference', value: a.licenceNumber },
    { pointer: '/vehicle/make', kind: 'name', value: a.vehicle.make },
    { pointer: '/vehicle/model', kind: 'name', value: a.vehicle.model },
    { pointer: '/vehicle/colour', kind: 'name', value: a.vehicle.colour },
    { pointer: '/vehicle/registration', kind: 'reference', value: a.vehicle.registration },
    { pointer: '/homeCity', kind: 'address', value: a.homeCity },
    { pointer: '/paymentLink', kind: 'link', value: a.paymentLink },
  ];
  (a.nationalNetwork?.corridors ?? []).forEach((c, i) => {
    fields.push(
      { pointer: `/nationalNetwork/corridors/${i}/from`, kind: 'address', value: c.from },
      { pointer: `/nationalNetwork/corridors/${i}/to`, kind: 'address', value: c.to },
    );
  });
  return fields;
}

function httpsUrl(raw: string): string | null {
  try {
    const u = new URL(raw.trim());
    if (u.protocol !== 'https:' || u.hostname === '' || u.username !== '' || u.password !== '') return null;
    return u.toString();
  } catch {
    return null;
  }
}

/**
 * Record a driver's application: the driver (status `pending_approval`) with their home point
 * and corridors geocoded, their active vehicle, and an audit entry, in one transaction.
 *
 * Refuses with AppError: `content_rejected` (free text that is not application data),
 * `invalid_input` (phone, expired licence, payment link not https, a WAV that is not wheelchair
 * accessible), `email_not_accepted` (malformed or disposable address), `address_not_found`
 * (homeCity or a corridor end the geocoder cannot place in the UK). Throws
 * DriverLicenceTakenError when the authority and licence number have already applied.
 */
export async function applyDriver(
  db: Db,
  input: DriverApplication,
  opts: ApplyOptions,
): Promise<{ driverId: string; status: 'pending_approval' }> {
  const screened = screenFields(screenApplication(input));
  if (!screened.ok) {
    opts.onContentRejected?.(screened.reasons);
    throw contentRejected(screened.details);
  }

  const invalid: ErrorDetail[] = [];
  let phone = '';
  try {
    phone = normalisePhone(input.phone);
  } catch {
    invalid.push({ field: '/phone', problem: 'must be a mobile number such as +447700900123' });
  }
  // Job cards go by SMS: a UK landline (+44 other than 7) would take offers it never hears of.
  if (phone.startsWith('+44') && !phone.startsWith('+447')) {
    invalid.push({ field: '/phone', problem: 'must be a mobile number (07…): job offers are sent by text message' });
  }
  const today = LONDON_DAY.format(opts.now ?? new Date());
  if (input.licenceExpiry < today) {
    invalid.push({ field: '/licenceExpiry', problem: 'is in the past: the licence has expired' });
  }
  let paymentLink: string | null = null;
  if (input.paymentLink !== undefined && input.paymentLink.trim() !== '') {
    paymentLink = httpsUrl(input.paymentLink);
    if (paymentLink === null) invalid.push({ field: '/paymentLink', problem: 'must be an https URL' });
  }
  if (input.vehicle.class === 'wav' && !input.vehicle.wheelchairAccessible) {
    invalid.push({ field: '/vehicle/wheelchairAccessible', problem: 'must be true for class wav' });
  }
  const licensingAuthority = collapse(input.licensingAuthority);
  const licenceNumber = normaliseLicence(input.licenceNumber);
  if (licensingAuthority === '') invalid.push({ field: '/licensingAuthority', problem: 'must not be blank' });
  if (licenceNumber === '') invalid.push({ field: '/licenceNumber', problem: 'must not be blank' });
  if (collapse(input.name) === '') invalid.push({ field: '/name', problem: 'must not be blank' });
  if (invalid.length > 0) {
    throw new AppError('invalid_input', `The application is not valid: ${detailsText(invalid)}.`, invalid);
  }

  const email = normaliseEmail(input.email);
  if (!isWellFormedEmail(email)) {
    throw new AppError('email_not_accepted', EMAIL_PROBLEM_MESSAGES.malformed, [
      { field: '/email', problem: 'malformed' },
    ]);
  }
  if (isDisposableDomain(email.slice(email.lastIndexOf('@') + 1))) {
    throw new AppError('email_not_accepted', EMAIL_PROBLEM_MESSAGES.disposable, [
      { field: '/email', problem: 'disposable' },
    ]);
  }

  const geocoder = opts.geocoder ?? defaultGazetteer();
  const wanted: Array<{ field: string; query: string }> = [{ field: '/homeCity', query: input.homeCity }];
  (input.nationalNetwork?.corridors ?? []).forEach((c, i) => {
    wanted.push(
      { field: `/nationalNetwork/corridors/${i}/from`, query: c.from },
      { field: `/nationalNetwork/corridors/${i}/to`, query: c.to },
    );
  });
  const resolved = await Promise.all(wanted.map((w) => geocoder.geocode(w.query)));
  const missing: ErrorDetail[] = [];
  const places: Place[] = [];
  resolved.forEach((r, i) => {
    const field = (wanted[i] as { field: string }).field;
    if (r.ok) places.push(r.place);
    else {
      missing.push({
        field,
        problem: r.reason === 'outside_uk' ? 'is outside the UK: drivers are based and work in the UK' : r.message,
      });
    }
  });
  if (missing.length > 0) {
    throw new AppError(
      'address_not_found',
      `Could not locate ${missing.map((m) => m.field).join(' and ')}: use a UK town or city, postcode, station or airport.`,
      missing,
    );
  }
  const stored = (p: Place): StoredPlace => ({ name: p.name, lat: p.lat, lng: p.lng });
  const home = places[0] as Place;
  const corridors: StoredCorridor[] = (input.nationalNetwork?.corridors ?? []).map((c, i) => ({
    from: stored(places[1 + 2 * i] as Place),
    to: stored(places[2 + 2 * i] as Place),
    bufferMiles: c.bufferMiles,
  }));

  const driverId = uuidv7();
  try {
    await db.transaction(async (trx) => {
      // One application per licence in each mode (a sandbox application never takes a live
      // driver's licence): serialise applications for the same licence, then look.
      const testMode = opts.testMode ?? false;
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [
        `driver-licence:${testMode ? 'test' : 'live'}:${licensingAuthority.toLowerCase()}:${licenceNumber}`,
      ]);
      const taken = await trx('drivers')
        .whereRaw('lower(licensing_authority) = ?', [licensingAuthority.toLowerCase()])
        .andWhere({ licence_number: licenceNumber, test_mode: testMode })
        .first('id');
      if (taken) throw new DriverLicenceTakenError(licensingAuthority, licenceNumber);
      await trx('drivers').insert({
        id: driverId,
        name: collapse(input.name),
        phone,
        email,
        status: 'pending_approval',
        licensing_authority: licensingAuthority,
        licence_number: licenceNumber,
        licence_expiry: input.licenceExpiry,
        home_city: home.name,
        home_lat: home.lat,
        home_lng: home.lng,
        operating_radius_miles: input.operatingRadiusMiles,
        national_network: corridors.length > 0,
        corridors: JSON.stringify(corridors),
        payment_link: paymentLink,
        test_mode: opts.testMode ?? false,
      });
      await trx('vehicles').insert({
        id: uuidv7(),
        driver_id: driverId,
        make: collapse(input.vehicle.make),
        model: collapse(input.vehicle.model),
        colour: collapse(input.vehicle.colour),
        registration: collapse(input.vehicle.registration).toUpperCase(),
        class: input.vehicle.class,
        seats: input.vehicle.seats,
        wheelchair_accessible: input.vehicle.wheelchairAccessible,
        active: true,
      });
      await trx('audit_log').insert({
        actor: opts.actor,
        action: 'driver.apply',
        subject_type: 'driver',
        subject_id: driverId,
        details: JSON.stringify({
          licensingAuthority,
          homeCity: home.name,
          vehicleClass: input.vehicle.class,
          corridors: corridors.length,
          testMode: opts.testMode ?? false,
        }),
      });
    });
  } catch (err) {
    // The unique (licensing_authority, licence_number) index, should the lock ever be bypassed.
    if ((err as { code?: string }).code === '23505')
      throw new DriverLicenceTakenError(licensingAuthority, licenceNumber);
    throw err;
  }
  return { driverId, status: 'pending_approval' };
}

/** A driver as operators see it (`driver list`): never the token or its hash. */
export interface DriverListing {
  id: string;
  name: string;
  phone: string;
  email: string;
  status: DriverStatus;
  licensingAuthority: string;
  licenceNumber: string;
  licenceExpiry: string;
  homeCity: string;
  vehicleClass: VehicleType | null;
  nationalNetwork: boolean;
  partnerId: string | null;
  createdAt: string;
  approvedAt: string | null;
  trialEndsAt: string | null;
  /** A sandbox driver (applied with a test key, or the simulator's): offered test-mode bookings only. */
  testMode: boolean;
}

interface DriverListRow {
  id: string;
  name: string;
  phone: string;
  email: string;
  status: DriverStatus;
  licensing_authority: string;
  licence_number: string;
  licence_expiry: string;
  home_city: string;
  vehicle_class: VehicleType | null;
  national_network: boolean;
  partner_id: string | null;
  created_at: Date;
  approved_at: Date | null;
  trial_ends_at: Date | null;
  test_mode: boolean;
}

/** Drivers, oldest application first, optionally of one status. */
export async function listDrivers(db: Queryable, opts: { status?: DriverStatus } = {}): Promise<DriverListing[]> {
  const q = db('drivers as d')
    .select<DriverListRow[]>(
      'd.id',
      'd.name',
      'd.phone',
      'd.email',
      'd.status',
      'd.licensing_authority',
      'd.licence_number',
      'd.licence_expiry',
      'd.home_city',
      'd.national_network',
      'd.partner_id',
      'd.created_at',
      'd.approved_at',
      'd.trial_ends_at',
      'd.test_mode',
      db.raw(
        '(select v.class from vehicles v where v.driver_id = d.id and v.active order by v.created_at desc limit 1) as vehicle_class',
      ),
    )
    .orderBy([{ column: 'd.created_at' }, { column: 'd.id' }]);
  if (opts.status) q.where('d.status', opts.status);
  const rows = await q;
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    phone: r.phone,
    email: r.email,
    status: r.status,
    licensingAuthority: r.licensing_authority,
    licenceNumber: r.licence_number,
    licenceExpiry: r.licence_expiry,
    homeCity: r.home_city,
    vehicleClass: r.vehicle_class,
    nationalNetwork: r.national_network,
    partnerId: r.partner_id,
    createdAt: r.created_at.toISOString(),
    approvedAt: r.approved_at?.toISOString() ?? null,
    trialEndsAt: r.trial_ends_at?.toISOString() ?? null,
    testMode: r.test_mode,
  }));
}

async function audit(db: Queryable, actor: string, action: string, id: string, details: Record<string, unknown>) {
  await db('audit_log').insert({
    actor,
    action,
    subject_type: 'driver',
    subject_id: id,
    details: JSON.stringify(details),
  });
}

export interface ApprovedDriver {
  id: string;
  status: 'approved';
  /** The bearer token, shown once. */
  token: string;
  trialEndsAt: string;
}

/**
 * `approveDriver` with `reissue: false` found the driver approved already (another submit of the
 * same form got there first): nothing was changed or sent.
 */
export class DriverAlreadyApprovedError extends Error {
  constructor(readonly driverId: string) {
    super(`driver ${driverId} is already approved: no new token was issued`);
    this.name = 'DriverAlreadyApprovedError';
  }
}

/**
 * Approve a driver and issue their bearer token. The trial (90 days) starts at the first
 * approval and is kept if already set; approving again (e.g. a lost phone, or reinstating a
 * suspended driver) issues a new token, and the previous one stops working. Null if unknown.
 *
 * With `reissue: false` (the operator pages, where a double-click or a resubmitted form posts
 * twice) only a driver who is not approved is approved: the UPDATE itself carries the condition,
 * so of two approvals sent together exactly one issues a token and sends it (the other waits for
 * the first's row lock, then finds the driver approved); it throws DriverAlreadyApprovedError,
 * having changed and sent nothing. The CLI's `driver approve` re-issues (the default).
 */
export async function approveDriver(
  db: Db,
  id: string,
  actor: string,
  opts: { reissue?: boolean } = {},
): Promise<ApprovedDriver | null> {
  const reissue = opts.reissue ?? true;
  const { token, prefix } = newDriverToken();
  return db.transaction(async (trx) => {
    const target = trx('drivers').where({ id });
    if (!reissue) target.whereNot({ status: 'approved' });
    const [row] = await target
      .update({
        status: 'approved',
        token_hash: sha256(token),
        token_prefix: prefix,
        approved_at: trx.raw('coalesce(approved_at, now())'),
        trial_ends_at: trx.raw(
          `coalesce(trial_ends_at, coalesce(approved_at, now()) + interval '${DRIVER_TRIAL_DAYS} days')`,
        ),
        updated_at: trx.fn.now(),
      })
      .returning<
        Array<{
          status: DriverStatus;
          trial_ends_at: Date;
          name: string;
          phone: string;
          email: string;
          test_mode: boolean;
        }>
      >(['status', 'trial_ends_at', 'name', 'phone', 'email', 'test_mode']);
    if (!row) {
      if (!reissue && (await trx('drivers').where({ id }).first('id'))) throw new DriverAlreadyApprovedError(id);
      return null;
    }
    const trialEndsAt = row.trial_ends_at.toISOString();
    await audit(trx, actor, 'driver.approve', id, { tokenPrefix: prefix, trialEndsAt });
    // The token goes to the driver by SMS and e-mail, with the approval; the notify worker
    // removes it from our record of the messages once they are delivered.
    const trialDay = trialEndsAt.slice(0, 10);
    const common = { purpose: 'driver_token', driverId: id, testMode: row.test_mode } as const;
    await queueMessage(trx, {
      ...common,
      channel: 'sms',
      recipient: row.phone,
      body: `Direct Taxi Network: you are approved to drive. Your driver app token: ${token} (keep it private). Free trial until ${trialDay}.`,
    });
    await queueMessage(trx, {
      ...common,
      channel: 'email',
      recipient: row.email,
      subject: 'You are approved to drive with Direct Taxi Network',
      body: [
        `Hello ${row.name},`,
        '',
        'You are approved to drive with Direct Taxi Network. Fares are paid to you, never to us.',
        `Your free trial runs until ${trialDay}; after it, the software fee is £20 in a week when your earnings pass £500, and nothing otherwise.`,
        '',
        `Your driver app token (keep it private; it is not stored anywhere you can read it again):`,
        token,
        '',
        'If you lose it, ask an operator to approve you again: a new token replaces it.',
      ].join('\n'),
    });
    return { id, status: 'approved' as const, token, trialEndsAt };
  });
}

/** Token replacements a driver may make in an hour (each sends an SMS and an e-mail). */
export const TOKEN_REPLACEMENTS_PER_HOUR = 5;

/** A new driver bearer token and its visible prefix. */
function newDriverToken(): { token: string; prefix: string } {
  const token = `${DRIVER_TOKEN_PREFIX}${randomBase62(40)}`;
  return { token, prefix: token.slice(0, TOKEN_PREFIX_LENGTH) };
}

/**
 * An approved driver replaces their own token (a lost or shared phone): the old token stops
 * working at once, and with it every web session signed in with it (a session's MAC covers the
 * token's hash: `api/pages/driver-session.ts`), on every device.
 *
 * The new token goes by e-mail only, never in the answer and never by SMS: whoever asks may be
 * the person holding the lost phone (the old token, the SMS inbox), and must not be handed the
 * token that shuts them out. The SMS is a notice only, so a driver who did not ask learns of it.
 * `currentTokenHash` is the hash of the token the request was signed in with: a request still
 * carrying a token already replaced (sent together with the replacement, or a stale session)
 * replaces nothing. Null unless the driver is approved and that token is still theirs.
 */
export async function replaceDriverToken(
  db: Db,
  id: string,
  actor: string,
  currentTokenHash: Buffer,
): Promise<{ id: string; tokenPrefix: string } | null> {
  const { token, prefix } = newDriverToken();
  return db.transaction(async (trx) => {
    // Each replacement sends an SMS and an e-mail: a few an hour, counted under the driver's
    // row lock so replacements sent together are counted one after another.
    const driver = await trx('drivers')
      .where({ id, status: 'approved', token_hash: currentTokenHash })
      .forUpdate()
      .first<{ id: string }>('id');
    if (!driver) return null;
    const recent = await trx('audit_log')
      .where({ subject_type: 'driver', subject_id: id, action: 'driver.token_replace' })
      .where('at', '>', trx.raw("now() - interval '1 hour'"))
      .orderBy('at')
      .select<{ at: Date; retry_after: number }[]>(
        'at',
        // Seconds until the oldest of the hour's replacements drops out, on the database's clock (the one `at` is on).
        trx.raw("greatest(1, ceil(extract(epoch from (at + interval '1 hour' - now()))))::int as retry_after"),
      );
    if (recent.length >= TOKEN_REPLACEMENTS_PER_HOUR) {
      throw new AppError(
        'rate_limited',
        `Your token was replaced ${TOKEN_REPLACEMENTS_PER_HOUR} times in the last hour; wait before replacing it again, or contact us.`,
        [],
        { 'Retry-After': String((recent[0] as { retry_after: number }).retry_after) },
      );
    }
    const [row] = await trx('drivers')
      .where({ id, status: 'approved', token_hash: currentTokenHash })
      .update({ token_hash: sha256(token), token_prefix: prefix, updated_at: trx.fn.now() })
      .returning<Array<{ name: string; phone: string; email: string; test_mode: boolean }>>([
        'name',
        'phone',
        'email',
        'test_mode',
      ]);
    if (!row) return null;
    await audit(trx, actor, 'driver.token_replace', id, { tokenPrefix: prefix });
    const common = { purpose: 'driver_token', driverId: id, testMode: row.test_mode } as const;
    await queueMessage(trx, {
      ...common,
      channel: 'sms',
      recipient: row.phone,
      body: 'Direct Taxi Network: your driver app token was replaced and every device signed out. The new token is in your e-mail. Not you? Contact us.',
    });
    await queueMessage(trx, {
      ...common,
      channel: 'email',
      recipient: row.email,
      subject: 'Your Direct Taxi Network driver token was replaced',
      body: [
        `Hello ${row.name},`,
        '',
        'Your driver app token was replaced: the old one no longer works, and every device signed in with it is signed out.',
        '',
        'Your new driver app token (keep it private; it is sent only here, and is not stored anywhere you can read it again):',
        token,
        '',
        'If you did not ask for this, contact us: someone may have your phone or your old token.',
      ].join('\n'),
    });
    return { id, tokenPrefix: prefix };
  });
}

/** What a driver held when disabled: the jobs given back to dispatch, and rides under way. */
export interface ReleasedJobs {
  /** Bookings the driver had accepted (or been offered) and had not yet picked up: dispatched again. */
  jobsHandedBack: string[];
  /** Bookings with the passenger on board: left with the driver (the ride is under way). */
  ridesInProgress: string[];
}

/**
 * The jobs a driver being suspended or rejected holds go back to dispatch, in the same
 * transaction: open offers are withdrawn, and accepted jobs not yet picked up are handed back
 * as the driver could do (`handBackJob`): the booking returns to `dispatching`, its history
 * says why, and the next dispatch step is queued. Otherwise the passenger would wait for a
 * driver whose token no longer works and who will not come. A ride with the passenger on board
 * is left as it is: it is under way, and an operator records how it ended if the driver cannot.
 */
async function releaseJobs(trx: Tx, driverId: string, why: string): Promise<ReleasedJobs> {
  const now = new Date();
  // The bookings first, in id order, then their offers: the order every other path takes
  // (booking first), so a driver accepting at this moment waits, or is waited for, and the
  // job they just accepted is found held and handed back.
  const locked = await trx('bookings as b')
    .where((q) =>
      q
        .where('b.driver_id', driverId)
        .whereIn('b.status', [...DRIVER_HELD_STATUSES, 'passenger_on_board'])
        .orWhereExists((o) =>
          o
            .select(trx.raw('1'))
            .from('dispatch_offers as o')
            .whereRaw('o.booking_id = b.id')
            .where({ 'o.driver_id': driverId, 'o.state': 'offered' }),
        ),
    )
    .orderBy('b.id')
    .forUpdate()
    .select<{ id: string; reference: string; status: string; driver_id: string | null; test_mode: boolean }[]>(
      'b.id',
      'b.reference',
      'b.status',
      'b.driver_id',
      'b.test_mode',
    );
  const held = locked.filter((b) => b.driver_id === driverId);
  // The next candidate at once, not when the withdrawn offer would have run out.
  const offered = await withdrawOpenOffers(trx, { column: 'driver_id', id: driverId }, locked, now, 'released');
  const handedBack = held.filter((b) => DRIVER_HELD_STATUSES.includes(b.status));
  for (const b of handedBack) {
    await trx('dispatch_offers')
      .where({ booking_id: b.id, driver_id: driverId, state: 'accepted' })
      .update({ state: 'declined', responded_at: now, decline_reason: `handed back: ${why}` });
    await trx('bookings')
      .where({ id: b.id })
      .update({ driver_id: null, vehicle_id: null, dead_miles: null, updated_at: now });
    await appendStatus(trx, b.id, 'dispatching', 'operator', { handedBack: true, reason: why });
    await enqueueJob(
      trx,
      'dispatch-booking',
      { bookingId: b.id },
      { jobId: `dispatch-${b.id}-released-${now.getTime()}` },
    );
  }
  // The driver may be on the way: told at once, by SMS and WhatsApp as a job card, that the job
  // is no longer theirs (their token stops working, so their app cannot show it). Not billed to
  // them (billing counts job cards, cancellations and changes only).
  if (handedBack.length > 0) {
    const driver = await trx('drivers').where({ id: driverId }).first<{ phone: string } | undefined>('phone');
    for (const b of driver ? handedBack : []) {
      await queueDriverText(trx, {
        recipient: (driver as { phone: string }).phone,
        body: `Direct Taxi Network: job ${b.reference} has been taken back from you (${why}). Do not go to the pickup: it is offered to other drivers.`,
        purpose: 'job_taken_back',
        bookingId: b.id,
        driverId,
        testMode: b.test_mode,
      });
    }
  }
  return {
    jobsHandedBack: [...offered, ...handedBack].map((b) => b.reference),
    ridesInProgress: held.filter((b) => b.status === 'passenger_on_board').map((b) => b.reference),
  };
}

/** Accepted and not yet picked up: what a driver may hand back, and what a disabled driver gives back. */
const DRIVER_HELD_STATUSES: readonly string[] = ['driver_assigned', 'driver_en_route', 'driver_arrived'];

/**
 * Set a driver's status to rejected or suspended: their token is cleared, they go offline,
 * and the jobs they hold go back to dispatch (`releaseJobs`).
 */
async function disable<S extends 'rejected' | 'suspended'>(
  db: Db,
  id: string,
  actor: string,
  status: S,
): Promise<({ id: string; status: S } & ReleasedJobs) | null> {
  return db.transaction(async (trx) => {
    // The driver's row FOR NO KEY UPDATE, then their bookings, then the row's update. That lock
    // holds off a dispatch step's check of the driver (FOR NO KEY UPDATE, `stillOfferable`
    // in dispatch.ts), but not the key-share lock a foreign key to the driver takes: an accept,
    // a cancellation's text or an amendment's, each holding its booking, would wait for this
    // row while this waited for their booking (a deadlock, ended by failing one of them, when
    // this took the row FOR UPDATE or updated it first). The update comes last because it
    // clears `token_hash`, which has a unique index, so it takes the row FOR UPDATE; by then
    // the bookings are this transaction's, and nothing holding a key-share lock on the row
    // waits for them.
    const before = await trx('drivers')
      .where({ id })
      .forNoKeyUpdate()
      .first<{ status: DriverStatus } | undefined>('status');
    if (!before) return null;
    if (status === 'suspended' && before.status !== 'approved' && before.status !== 'suspended') {
      throw new DriverNotSuspendableError(id, before.status);
    }
    const released = await releaseJobs(trx, id, `driver ${status} by an operator`);
    await trx('drivers').where({ id }).update({
      status,
      token_hash: null,
      token_prefix: null,
      available: false,
      updated_at: trx.fn.now(),
    });
    await audit(trx, actor, status === 'rejected' ? 'driver.reject' : 'driver.suspend', id, {
      from: before.status,
      ...released,
    });
    return { id, status, ...released };
  });
}

/** Reject an application (or withdraw an approval): the driver has no token. Null if unknown. */
export function rejectDriver(
  db: Db,
  id: string,
  actor: string,
): Promise<({ id: string; status: 'rejected' } & ReleasedJobs) | null> {
  return disable(db, id, actor, 'rejected');
}

/**
 * Suspend a driver: never offered jobs, marked unavailable, their token stops working at once,
 * and the jobs they hold go back to dispatch (`releaseJobs`). `approveDriver` reinstates them
 * with a new token. Null if unknown; DriverNotSuspendableError unless approved (or suspended).
 */
export function suspendDriver(
  db: Db,
  id: string,
  actor: string,
): Promise<({ id: string; status: 'suspended' } & ReleasedJobs) | null> {
  return disable(db, id, actor, 'suspended');
}

/**
 * Extend a driver's free trial by `days` (1 to 3650) from its current end, or from today when
 * it has already ended (the weeks between stay billed: `trial_lapses`). A driver not yet approved gets the standard trial from today plus the
 * extension, which their approval then keeps. Null if unknown.
 */
export async function extendDriverTrial(
  db: Db,
  id: string,
  days: number,
  actor = 'system',
): Promise<{ id: string; trialEndsAt: string } | null> {
  if (!Number.isInteger(days) || days < 1 || days > MAX_TRIAL_EXTENSION_DAYS) {
    throw new RangeError(`days must be a whole number from 1 to ${MAX_TRIAL_EXTENSION_DAYS}`);
  }
  return db.transaction(async (trx) => {
    // A trial that had ended starts again today: the time between is kept as a lapse, whose weeks stay billed.
    await recordTrialLapse(
      trx,
      { table: 'drivers', id },
      `coalesce(trial_ends_at, approved_at + interval '${DRIVER_TRIAL_DAYS} days')`,
    );
    const [row] = await trx('drivers')
      .where({ id })
      .update({
        trial_ends_at: trx.raw(
          `greatest(coalesce(trial_ends_at, coalesce(approved_at, now()) + interval '${DRIVER_TRIAL_DAYS} days'), now()) + make_interval(days => ?)`,
          [days],
        ),
        updated_at: trx.fn.now(),
      })
      .returning<Array<{ trial_ends_at: Date }>>(['trial_ends_at']);
    if (!row) return null;
    const trialEndsAt = row.trial_ends_at.toISOString();
    await audit(trx, actor, 'driver.trial_extend', id, { days, trialEndsAt });
    return { id, trialEndsAt };
  });
}

/**
 * The approved driver a bearer token belongs to, or null (malformed, unknown, superseded, or
 * the driver is not approved). Looked up by the token's SHA-256, so the comparison never
 * touches the token itself.
 */
export async function authenticateDriver(db: Queryable, token: string): Promise<DriverIdentity | null> {
  if (!DRIVER_TOKEN.test(token)) return null;
  const tokenHash = sha256(token);
  const row = await db('drivers')
    .where({ token_hash: tokenHash, status: 'approved' })
    .first<IdentityRow | undefined>(...IDENTITY_COLUMNS);
  return row ? driverIdentityOf(row, tokenHash) : null;
}

/** The columns of a signed-in driver's identity (`driverIdentityOf`). */
export const IDENTITY_COLUMNS = ['id', 'name', 'status', 'partner_id', 'test_mode'] as const;
export interface IdentityRow {
  id: string;
  name: string;
  status: DriverStatus;
  partner_id: string | null;
  test_mode: boolean;
}

/** The identity of a driver signed in (by token or web session) with the token whose hash is `tokenHash`. */
export function driverIdentityOf(row: IdentityRow, tokenHash: Buffer): DriverIdentity {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    partnerId: row.partner_id,
    testMode: row.test_mode,
    tokenHash,
  };
}
