import type { Knex } from 'knex';

/**
 * The daily job limit counts a partner's jobs since London midnight on every batch
 * (`dailyAllowance` in shared/services/intake.ts). Without this index the count read every job
 * the partner ever sent, heap row by heap row; with it, it reads only today's index entries.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    'create index partner_jobs_partner_created on partner_jobs (partner_id, created_at) where partner_id is not null',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index partner_jobs_partner_created');
}
