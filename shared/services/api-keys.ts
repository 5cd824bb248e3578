import { randomBase62, sha256 } from '../crypto.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { assertName } from '../domain/names.ts';
import { AppError } from '../errors.ts';
import { uuidv7 } from '../ids.ts';

/**
 * API keys: `<code>_<mode>_<32 base62>` (e.g. `dtn_live_…`, about 190 random bits). Only the
 * SHA-256 of the key is stored, with its first 14 characters as a visible prefix so
 * operators can tell keys apart. The key itself is shown once, at creation.
 */
export type KeyMode = 'live' | 'test';

export interface ApiKeyIdentity {
  id: string;
  name: string;
  prefix: string;
  mode: KeyMode;
  partnerId: string | null;
  /** The key's partner is suspended: it may look up and finish what it has, not book anew. */
  partnerSuspended: boolean;
}

export interface ApiKeyListing {
  id: string;
  prefix: string;
  name: string;
  mode: KeyMode;
  partnerId: string | null;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

const PREFIX_LENGTH = 14;

export function keyPattern(serviceCode: string): RegExp {
  return new RegExp(`^${serviceCode}_(live|test)_[0-9A-Za-z]{32}$`);
}

export async function createApiKey(
  db: Queryable,
  opts: { serviceCode: string; name: string; partnerId?: string | null; mode?: KeyMode },
): Promise<{ id: string; key: string; prefix: string }> {
  const mode = opts.mode ?? 'live';
  const key = `${opts.serviceCode}_${mode}_${randomBase62(32)}`;
  const id = uuidv7();
  const prefix = key.slice(0, PREFIX_LENGTH);
  await db('api_keys').insert({
    id,
    name: opts.name,
    prefix,
    key_hash: sha256(key),
    mode,
    partner_id: opts.partnerId ?? null,
  });
  return { id, key, prefix };
}

/** The identity behind a presented key, or null when it is unknown or revoked. */
export async function findApiKey(db: Queryable, key: string): Promise<ApiKeyIdentity | null> {
  const row = await db('api_keys as k')
    .leftJoin('partners as p', 'p.id', 'k.partner_id')
    .where({ 'k.key_hash': sha256(key) })
    .whereNull('k.revoked_at')
    .first<
      | {
          id: string;
          name: string;
          prefix: string;
          mode: KeyMode;
          partner_id: string | null;
          partner_status: string | null;
        }
      | undefined
    >('k.id', 'k.name', 'k.prefix', 'k.mode', 'k.partner_id', 'p.status as partner_status');
  if (!row) return null;
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    mode: row.mode,
    partnerId: row.partner_id,
    partnerSuspended: row.partner_id !== null && row.partner_status !== 'active',
  };
}

/**
 * A suspended partner's key makes no new booking or quote redemption (`admin partner suspend`):
 * 403, as its job intake is. Lookups, cancellations and the jobs it holds still work.
 */
export function assertMayBook(key: ApiKeyIdentity | null | undefined): void {
  if (key?.partnerSuspended) {
    throw new AppError(
      'forbidden',
      'This partner account is suspended: it cannot make bookings. Look-ups and cancellations still work; contact us to restore it.',
    );
  }
}

const TOUCH_EVERY_MS = 60_000;
/** Per database handle: when this process last recorded each key's use. */
const touchedAt = new WeakMap<Queryable, Map<string, number>>();

/**
 * Record use at most once a minute per key, so a busy key costs no write per request: the
 * statement itself skips a key used in the last minute (whichever process recorded it), and
 * this process does not even send it for a key it recorded less than a minute ago.
 */
export async function touchApiKey(db: Queryable, id: string, now = Date.now()): Promise<void> {
  let seen = touchedAt.get(db);
  if (!seen) {
    seen = new Map();
    touchedAt.set(db, seen);
  }
  const last = seen.get(id);
  if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
  if (seen.size >= 10_000) {
    for (const [k, at] of seen) if (now - at >= TOUCH_EVERY_MS) seen.delete(k);
  }
  seen.set(id, now);
  try {
    await db('api_keys')
      .where({ id })
      .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', db.raw("now() - interval '1 minute'")))
      .update({ last_used_at: db.fn.now() });
  } catch (err) {
    // Not recorded: the next request tries again.
    if (seen.get(id) === now) seen.delete(id);
    throw err;
  }
}

export async function listApiKeys(db: Queryable): Promise<ApiKeyListing[]> {
  const rows = await db('api_keys').orderBy('created_at').select<
    Array<{
      id: string;
      prefix: string;
      name: string;
      mode: KeyMode;
      partner_id: string | null;
      created_at: Date;
      revoked_at: Date | null;
      last_used_at: Date | null;
    }>
  >('id', 'prefix', 'name', 'mode', 'partner_id', 'created_at', 'revoked_at', 'last_used_at');
  return rows.map((r) => ({
    id: r.id,
    prefix: r.prefix,
    name: r.name,
    mode: r.mode,
    partnerId: r.partner_id,
    createdAt: r.created_at.toISOString(),
    revokedAt: r.revoked_at?.toISOString() ?? null,
    lastUsedAt: r.last_used_at?.toISOString() ?? null,
  }));
}

/**
 * Revoke a key, saying whether this call revoked it (`changed`): the UPDATE only touches a key
 * not yet revoked, so of two revocations sent together exactly one changes it (the other waits
 * for its row lock, then finds it revoked). Null if unknown.
 */
async function revoke(db: Queryable, id: string): Promise<{ revokedAt: Date; changed: boolean } | null> {
  const [changed] = await db('api_keys')
    .where({ id })
    .whereNull('revoked_at')
    .update({ revoked_at: db.fn.now() })
    .returning<Array<{ revoked_at: Date }>>(['revoked_at']);
  if (changed) return { revokedAt: changed.revoked_at, changed: true };
  const row = await db('api_keys').where({ id }).first<{ revoked_at: Date | null } | undefined>('revoked_at');
  return row?.revoked_at ? { revokedAt: row.revoked_at, changed: false } : null;
}

/** Revoke a key; revoking a revoked key keeps its first revocation time. Null if unknown. */
export async function revokeApiKey(db: Queryable, id: string): Promise<{ id: string; revokedAt: string } | null> {
  const revoked = await revoke(db, id);
  return revoked ? { id, revokedAt: revoked.revokedAt.toISOString() } : null;
}

/**
 * An operator's new API key (the CLI's `key create`, the operator pages): for a partner when
 * `partnerId` is given (null when that partner does not exist), written to the audit log with
 * its prefix. The key is returned once. A name that is not one line of visible text of at most
 * 100 characters (`nameProblem`, shared/domain/names.ts) throws `NameError`, creating nothing.
 */
export async function issueApiKey(
  db: Db,
  opts: { serviceCode: string; name: string; partnerId: string | null; mode: KeyMode; actor: string },
): Promise<{ id: string; key: string; prefix: string } | null> {
  assertName(opts.name);
  return db.transaction(async (trx) => {
    if (opts.partnerId && !(await trx('partners').where({ id: opts.partnerId }).first('id'))) return null;
    const created = await createApiKey(trx, {
      serviceCode: opts.serviceCode,
      name: opts.name,
      partnerId: opts.partnerId,
      mode: opts.mode,
    });
    await trx('audit_log').insert({
      actor: opts.actor,
      action: 'key.create',
      subject_type: 'api_key',
      subject_id: created.id,
      details: JSON.stringify({ prefix: created.prefix, partnerId: opts.partnerId }),
    });
    return created;
  });
}

/**
 * An operator revokes a key (`revokeApiKey`), written to the audit log when this call revoked it:
 * revoking a revoked key again (a second click, the CLI after the page) answers the same and
 * writes nothing. Null if unknown.
 */
export async function revokeApiKeyAs(
  db: Db,
  id: string,
  actor: string,
): Promise<{ id: string; revokedAt: string } | null> {
  return db.transaction(async (trx) => {
    const revoked = await revoke(trx, id);
    if (!revoked) return null;
    if (revoked.changed) {
      await trx('audit_log').insert({ actor, action: 'key.revoke', subject_type: 'api_key', subject_id: id });
    }
    return { id, revokedAt: revoked.revokedAt.toISOString() };
  });
}
