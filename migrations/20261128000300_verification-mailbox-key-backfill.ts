import type { Knex } from 'knex';

/**
 * The mailbox key of verifications written before `mailbox_key` existed (migration
 * 20261127000100 left them null). The passenger's standing reads a confirmed mailbox by this key,
 * so without it an address confirmed before that deployment was confirmed only as typed:
 * `ada+t1@gmail.com` confirmed, `ada@gmail.com` still asked to confirm.
 *
 * `mailboxKey` (shared/domain/email-acceptance.ts) written in SQL, over `email`, which is stored
 * in canonical form: without a `+tag` (unless the local part starts with `+`), and at gmail.com
 * and googlemail.com without dots and as gmail.com. Frozen here as it was when written, as a
 * migration must be; the test compares it with the function. Rows that have a key are left alone,
 * so running it again changes nothing.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    with parts as (
      select id,
             substring(email from '^(.*)@[^@]*$') as local,
             substring(email from '@([^@]*)$') as domain
        from email_verifications
       where mailbox_key is null and email like '_%@%'
    ), untagged as (
      select id, domain,
             case when position('+' in local) > 1 then left(local, position('+' in local) - 1) else local end as local
        from parts
    )
    update email_verifications v
       set mailbox_key = case when u.domain in ('gmail.com', 'googlemail.com')
                              then replace(u.local, '.', '') || '@gmail.com'
                              else u.local || '@' || u.domain end
      from untagged u
     where v.id = u.id`);
}

export async function down(): Promise<void> {
  // The keys are correct for the rows whatever the schema: nothing to undo.
}
