import type { Knex } from 'knex';

/**
 * The daily job limit reads one counter row instead of counting the day's jobs.
 *
 * Before, every batch counted the partner's `partner_jobs` rows since London midnight
 * (`dailyAllowance` in shared/services/intake.ts). That read grows with the day: with 23,000
 * jobs already in, the count took 10 ms of Postgres time per batch, and a busy partner's
 * 100,000th job of the day would cost four times that.
 *
 * - partner_job_days: jobs received per partner, mode (test or live) and Europe/London day.
 * - A statement-level trigger on partner_jobs adds each statement's new rows to it. Every way a
 *   row is written is counted: the batch insert, a single job, a repeat that wrote nothing (no
 *   rows, no change). The day is the London date of the row's `created_at`, as the count was.
 * - The counter row is locked from the end of the inserting statement to its commit, so
 *   concurrent batches of one partner queue only for each other's commit.
 * - Filled in from the jobs already received; the index that served the count goes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table partner_job_days (
      partner_id uuid not null references partners (id) on delete cascade,
      test_mode boolean not null,
      day date not null,
      jobs integer not null check (jobs >= 0),
      primary key (partner_id, test_mode, day)
    )`);
  await knex.raw(`
    create function partner_job_days_count() returns trigger language plpgsql as $$
    begin
      insert into partner_job_days (partner_id, test_mode, day, jobs)
        select partner_id, test_mode, (created_at at time zone 'Europe/London')::date, count(*)
        from new_jobs where partner_id is not null
        group by 1, 2, 3 order by 1, 2, 3
        on conflict (partner_id, test_mode, day) do update set jobs = partner_job_days.jobs + excluded.jobs;
      return null;
    end $$`);
  await knex.raw(`
    create trigger partner_jobs_count_days after insert on partner_jobs
      referencing new table as new_jobs for each statement execute function partner_job_days_count()`);
  await knex.raw(`
    insert into partner_job_days (partner_id, test_mode, day, jobs)
      select partner_id, test_mode, (created_at at time zone 'Europe/London')::date, count(*)
      from partner_jobs where partner_id is not null group by 1, 2, 3`);
  await knex.raw('drop index partner_jobs_partner_created');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    'create index partner_jobs_partner_created on partner_jobs (partner_id, test_mode, created_at) where partner_id is not null',
  );
  await knex.raw('drop trigger partner_jobs_count_days on partner_jobs');
  await knex.raw('drop function partner_job_days_count()');
  await knex.raw('drop table partner_job_days');
}
