import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';
import { randomBase62, sha256 } from '../crypto.ts';
import type { Db, Queryable } from '../db/knex.ts';
import { uuidv7 } from '../ids.ts';

/**
 * Operator accounts and their sessions (the operator pages, `/operator`).
 *
 * Passwords are hashed with scrypt (N = 2^15, r = 8, p = 1, 32 MiB; a random 16-byte salt per
 * password), stored as `$scrypt$ln=15,r=8,p=1$<salt>$<hash>` (base64, no padding) so the cost
 * can rise later without breaking stored hashes. Checking a password always runs one scrypt,
 * also for an unknown or disabled e-mail (against a throw-away hash of the same cost), and
 * compares with `timingSafeEqual`: the answer and its time do not tell whether an address has
 * an account.
 *
 * A session is 32 random bytes (base64url) in the browser's cookie; only its SHA-256 is stored.
 * Sessions last 12 hours from sign-in; signing out or disabling the operator ends them.
 */

export const SESSION_TTL_MS = 12 * 3600_000;
/** A session's last_seen_at is written at most this often. */
const SEEN_EVERY_MS = 60_000;

const COST = { ln: 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_BYTES = 16;
/** Above scrypt's 128 * N * r bytes for the largest cost accepted when verifying (ln 17). */
const MAX_MEM = 256 * 1024 * 1024;
const HASH_FORMAT = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

export const EMAIL_MAX = 254;
const EMAIL = /^[^@\s]{1,64}@[^@\s]{1,189}$/;
export const NAME_MAX = 100;

/** A generated password: 24 base62 characters (about 142 random bits). */
export const GENERATED_PASSWORD_LENGTH = 24;
/** Longest password checked (scrypt would take any length; the form has a limit anyway). */
export const PASSWORD_MAX = 256;

export class OperatorInputError extends Error {}

export interface OperatorIdentity {
  id: string;
  email: string;
  name: string;
}

export interface OperatorSession {
  /** The session row's id (not secret: the form tokens of the session are bound to it). */
  id: string;
  operator: OperatorIdentity;
  expiresAt: Date;
}

function derive(password: string, salt: Buffer, ln: number, r: number, p: number): Promise<Buffer> {
  const opts: ScryptOptions = { N: 2 ** ln, r, p, maxmem: MAX_MEM };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, opts, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, COST.ln, COST.r, COST.p);
  return `$scrypt$ln=${COST.ln},r=${COST.r},p=${COST.p}$${b64(salt)}$${b64(key)}`;
}

/** Whether `password` matches `stored` (constant-time comparison of the scrypt outputs). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = HASH_FORMAT.exec(stored);
  if (!m) return false;
  const [ln, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (ln < 10 || ln > 17 || r < 1 || r > 32 || p < 1 || p > 16) return false;
  const expected = Buffer.from(m[5] as string, 'base64');
  const key = await derive(password, Buffer.from(m[4] as string, 'base64'), ln, r, p);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash nobody knows the password of, at the current cost, for unknown e-mails. */
let decoy: Promise<string> | null = null;
const decoyHash = () => {
  decoy ??= hashPassword(randomBase62(GENERATED_PASSWORD_LENGTH));
  return decoy;
};

export function normaliseOperatorEmail(raw: string): string {
  return raw.trim().toLowerCase();
}

function checkedEmail(raw: string): string {
  const email = normaliseOperatorEmail(raw);
  if (email.length > EMAIL_MAX || !EMAIL.test(email)) throw new OperatorInputError('email must be an e-mail address');
  return email;
}

/**
 * Create an operator with a generated password, returned once (only its hash is stored).
 * Throws OperatorInputError for a malformed e-mail or name, or an e-mail already in use.
 */
export async function createOperator(
  db: Db,
  opts: { email: string; name?: string | undefined; actor: string },
): Promise<{ id: string; email: string; name: string; password: string }> {
  const email = checkedEmail(opts.email);
  const name = (opts.name ?? '').trim().replace(/\s+/g, ' ') || (email.split('@')[0] as string);
  if (name.length > NAME_MAX) throw new OperatorInputError(`name must be at most ${NAME_MAX} characters`);
  const password = randomBase62(GENERATED_PASSWORD_LENGTH);
  const passwordHash = await hashPassword(password);
  const id = uuidv7();
  try {
    await db.transaction(async (trx) => {
      await trx('operators').insert({ id, email, name, password_hash: passwordHash });
      await trx('audit_log').insert({
        actor: opts.actor,
        action: 'operator.create',
        subject_type: 'operator',
        subject_id: id,
        details: JSON.stringify({ name }),
      });
    });
  } catch (err) {
    if ((err as { code?: string }).code === '23505') {
      throw new OperatorInputError('an operator with this e-mail address already exists');
    }
    throw err;
  }
  return { id, email, name, password };
}

export interface OperatorListing {
  id: string;
  email: string;
  name: string;
  createdAt: string;
  disabledAt: string | null;
}

export async function listOperators(db: Queryable): Promise<OperatorListing[]> {
  const rows = await db('operators')
    .orderBy('created_at')
    .select<Array<{ id: string; email: string; name: string; created_at: Date; disabled_at: Date | null }>>(
      'id',
      'email',
      'name',
      'created_at',
      'disabled_at',
    );
  return rows.map((r) => ({
    id: r.id,
    email: r.email,
    name: r.name,
    createdAt: r.created_at.toISOString(),
    disabledAt: r.disabled_at?.toISOString() ?? null,
  }));
}

/** Disable an operator: they cannot sign in and their sessions end at once. Null if unknown. */
export async function disableOperator(
  db: Db,
  id: string,
  actor: string,
): Promise<{ id: string; disabledAt: string } | null> {
  return db.transaction(async (trx) => {
    const [row] = await trx('operators')
      .where({ id })
      .update({ disabled_at: trx.raw('coalesce(disabled_at, now())') })
      .returning<Array<{ disabled_at: Date }>>(['disabled_at']);
    if (!row) return null;
    const ended = await trx('operator_sessions').where({ operator_id: id }).delete();
    await trx('audit_log').insert({
      actor,
      action: 'operator.disable',
      subject_type: 'operator',
      subject_id: id,
      details: JSON.stringify({ sessionsEnded: ended }),
    });
    return { id, disabledAt: row.disabled_at.toISOString() };
  });
}

/**
 * The active operator with this e-mail and password, or null. Always runs one scrypt and one
 * constant-time comparison, whether or not the e-mail has an account.
 */
export async function authenticateOperator(
  db: Queryable,
  email: string,
  password: string,
): Promise<OperatorIdentity | null> {
  const row =
    email.length > EMAIL_MAX
      ? undefined
      : await db('operators')
          .where({ email: normaliseOperatorEmail(email) })
          .whereNull('disabled_at')
          .first<{ id: string; email: string; name: string; password_hash: string } | undefined>(
            'id',
            'email',
            'name',
            'password_hash',
          );
  const candidate = password.length > PASSWORD_MAX ? '' : password;
  const ok = await verifyPassword(candidate, row?.password_hash ?? (await decoyHash()));
  if (!row || !ok || password.length > PASSWORD_MAX) return null;
  return { id: row.id, email: row.email, name: row.name };
}

const SESSION_TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** Start a session for a signed-in operator: the cookie's token (shown to the browser only). */
export async function startOperatorSession(
  db: Db,
  operatorId: string,
): Promise<{ id: string; token: string; expiresAt: Date }> {
  const token = randomBytes(32).toString('base64url');
  const id = uuidv7();
  const expiresAt = new Date(Date.now() + SESSION_TTL_MS);
  await db.transaction(async (trx) => {
    // Expired sessions are of no use to anyone: they go when someone signs in.
    await trx('operator_sessions').where('expires_at', '<', trx.fn.now()).delete();
    await trx('operator_sessions').insert({
      id,
      operator_id: operatorId,
      token_hash: sha256(token),
      expires_at: expiresAt,
    });
    await trx('audit_log').insert({
      actor: `operator:${operatorId}`,
      action: 'operator.sign_in',
      subject_type: 'operator',
      subject_id: operatorId,
    });
  });
  return { id, token, expiresAt };
}

/** The live session a cookie's token belongs to (not expired, operator not disabled), or null. */
export async function findOperatorSession(db: Queryable, token: string): Promise<OperatorSession | null> {
  if (!SESSION_TOKEN.test(token)) return null;
  const row = await db('operator_sessions as s')
    .join('operators as o', 'o.id', 's.operator_id')
    .where('s.token_hash', sha256(token))
    .where('s.expires_at', '>', db.fn.now())
    .whereNull('o.disabled_at')
    .first<
      { id: string; expires_at: Date; last_seen_at: Date; operator_id: string; email: string; name: string } | undefined
    >('s.id', 's.expires_at', 's.last_seen_at', 's.operator_id', 'o.email', 'o.name');
  if (!row) return null;
  if (Date.now() - row.last_seen_at.getTime() > SEEN_EVERY_MS) {
    await db('operator_sessions').where({ id: row.id }).update({ last_seen_at: db.fn.now() });
  }
  return {
    id: row.id,
    operator: { id: row.operator_id, email: row.email, name: row.name },
    expiresAt: row.expires_at,
  };
}

/** End the session of this token (signing out). Whether there was one. */
export async function endOperatorSession(db: Db, token: string): Promise<boolean> {
  if (!SESSION_TOKEN.test(token)) return false;
  const [row] = await db('operator_sessions')
    .where({ token_hash: sha256(token) })
    .delete()
    .returning<Array<{ operator_id: string }>>(['operator_id']);
  if (!row) return false;
  await db('audit_log').insert({
    actor: `operator:${row.operator_id}`,
    action: 'operator.sign_out',
    subject_type: 'operator',
    subject_id: row.operator_id,
  });
  return true;
}
