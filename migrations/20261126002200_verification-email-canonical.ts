import type { Knex } from 'knex';
import { normaliseEmail } from '../shared/domain/email-acceptance.ts';

/**
 * Verified addresses in the canonical form the bookings now compare by.
 *
 * `normaliseEmail` (shared/domain/email-acceptance.ts) now gives an internationalised domain
 * the one spelling IDNA gives it: `ada@xn--mnchen-3ya.de` is `ada@münchen.de`, and full-width
 * letters are folded (`ada@ｅxample.org` is `ada@example.org`). Verification rows written
 * before kept the older spelling, so a passenger verified as `ada@xn--mnchen-3ya.de` would be
 * unverified again (and held to 8 priced requests an hour) under the new comparison. This
 * rewrites those rows (only addresses with a non-ASCII or `xn--` domain can change; every
 * other address is already canonical), with the very function the comparison uses. The
 * counts of e-mails sent per address follow, as they are these rows. `down` leaves them: the
 * canonical spelling is as good under the older comparison (it lower-cased only).
 */
export async function up(knex: Knex): Promise<void> {
  const rows = await knex('email_verifications')
    .whereRaw(`email ~ '[^\\x01-\\x7e]' or email like '%xn--%'`)
    .distinct<{ email: string }[]>('email');
  for (const { email } of rows) {
    const canonical = normaliseEmail(email);
    if (canonical !== email) await knex('email_verifications').where({ email }).update({ email: canonical });
  }
}

export async function down(): Promise<void> {
  // The canonical spelling stays: see above.
}
