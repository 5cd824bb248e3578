import type { Knex } from 'knex';
import { mailboxKey } from '../shared/domain/email-acceptance.ts';
import { normalisePhone } from '../shared/services/bookings.ts';

/**
 * Operators' blocks are stored by the key the bookings' block check now matches on.
 *
 * A block on bad@gmail.com used to match only that text, lower-cased: b.ad@gmail.com,
 * bad+x@gmail.com, bad@googlemail.com and bad@ｇmail.com (full-width g, accepted as gmail.com)
 * all booked past it; and a block on +447700900123 missed "+44 (0)7700 900123", which became
 * +4407700900123. Blocks are now stored and compared by:
 *
 * - e-mail: its mailbox (`mailboxKey` in shared/domain/email-acceptance.ts): the canonical
 *   address (IDNA-canonical domain), without a `+tag`, and at gmail.com/googlemail.com without
 *   dots in the local part and with googlemail.com as gmail.com;
 * - phone: E.164 with the UK trunk 0 after +44 dropped (`normalisePhone`).
 *
 * This rewrites the rows already there to those keys (in TypeScript, with the very functions
 * the check uses, so the two cannot disagree; blocks are operator-made and few). Rows that
 * collapse to one key become one: the row already holding the key is kept if there is one, else
 * the oldest; the others' reasons are added to its own. A value the phone rules cannot read is left
 * as it is. The original spellings are not kept, so `down` leaves the rows as they are.
 */
export async function up(knex: Knex): Promise<void> {
  const rows = await knex('blocked_contacts')
    .orderBy('id')
    .select<{ id: string; kind: string; value: string; reason: string | null }[]>('id', 'kind', 'value', 'reason');
  const groups = new Map<string, typeof rows>();
  for (const row of rows) {
    const key = `${row.kind}:${blockKey(row.kind, row.value)}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  for (const [key, group] of groups) {
    const value = key.slice(key.indexOf(':') + 1);
    const keeper = group.find((r) => r.value === value) ?? (group[0] as (typeof rows)[number]);
    const others = group.filter((r) => r !== keeper);
    if (keeper.value === value && others.length === 0) continue;
    const reasons = [...new Set([keeper, ...others].flatMap((r) => (r.reason ? [r.reason] : [])))];
    // The others go first: the keeper's new value is unique on (kind, value) only without them.
    if (others.length > 0)
      await knex('blocked_contacts')
        .whereIn(
          'id',
          others.map((r) => r.id),
        )
        .delete();
    await knex('blocked_contacts')
      .where({ id: keeper.id })
      .update({ value, reason: reasons.length > 0 ? reasons.join('; ') : null });
  }
}

/** The key a blocked contact is stored by. */
export function blockKey(kind: string, value: string): string {
  if (kind === 'email') return mailboxKey(value);
  try {
    return normalisePhone(value);
  } catch {
    return value;
  }
}

export async function down(): Promise<void> {
  // The rows' earlier spellings are gone; the re-keyed rows are valid blocks either way.
}
