import type { Knex } from 'knex';

/**
 * Test-mode partner jobs (sandbox keys) get their own daily count: `partner_jobs.test_mode`
 * (the mode of the key that sent the job, the same as its booking's), filled in from the
 * bookings for the jobs already received, and the daily-count index leads with it so a
 * partner's live count never reads its test jobs and the other way round.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table partner_jobs add column test_mode boolean not null default false');
  await knex.raw(
    'update partner_jobs j set test_mode = true from bookings b where b.id = j.booking_id and b.test_mode',
  );
  await knex.raw('drop index partner_jobs_partner_created');
  await knex.raw(
    'create index partner_jobs_partner_created on partner_jobs (partner_id, test_mode, created_at) where partner_id is not null',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index partner_jobs_partner_created');
  await knex.raw(
    'create index partner_jobs_partner_created on partner_jobs (partner_id, created_at) where partner_id is not null',
  );
  await knex.raw('alter table partner_jobs drop column test_mode');
}
