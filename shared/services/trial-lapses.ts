import type { Tx } from '../db/knex.ts';

/**
 * Before a trial is extended: when it had ended, keep the time from its end to now as a lapse
 * (`trial_lapses`), since the extension starts it again today and the weeks that started in
 * between stay billed (`PRICING` in shared/services/billing.ts). `trialEnd` is the owner's trial
 * end as SQL over its row (its `trial_ends_at`, else the default from approval or creation).
 * Locks the owner's row for the rest of the transaction.
 */
export async function recordTrialLapse(
  trx: Tx,
  owner: { table: 'drivers' | 'partners'; id: string },
  trialEnd: string,
): Promise<void> {
  const column = owner.table === 'drivers' ? 'driver_id' : 'partner_id';
  await trx.raw(
    `insert into trial_lapses (${column}, starts_at, ends_at)
     select id, trial_end, now()
       from (select id, ${trialEnd} as trial_end from ${owner.table} where id = ? for update) o
      where trial_end < now()`,
    [owner.id],
  );
}
