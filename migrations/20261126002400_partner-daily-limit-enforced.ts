import type { Knex } from 'knex';

/**
 * The daily job limit holds under concurrent batches.
 *
 * Each batch read the day's count, kept as many new jobs as were left and wrote them, so two
 * batches of one partner read at the same moment each kept the whole allowance: a limit of 10
 * let 20 jobs in. The counter's trigger (migration 20261125001800) now also checks the limit.
 *
 * - The statement inserting a partner's new jobs names the limit it applies in a setting local
 *   to its transaction, `dtn.daily_job_limit` (shared/services/intake.ts). The limit is the
 *   partner's own or the service's default (`DAILY_JOB_LIMIT`), which only the API knows.
 * - The trigger adds the statement's rows to the day's counter row as before. It waits for the
 *   row while another batch holds it, so the sum is of every batch committed before. If the
 *   sum is over the limit, it raises SQLSTATE `DTNDL` and the whole statement is undone; the
 *   API reads the allowance again and writes what is left.
 * - Batches far from the limit do not wait for each other any longer than before (the row is
 *   taken at the end of the statement, as it was). Rows inserted without the setting (a
 *   supplier's jobs, data loaded by hand) are counted and not checked.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create or replace function partner_job_days_count() returns trigger language plpgsql as $$
    declare
      job_limit integer := nullif(current_setting('dtn.daily_job_limit', true), '')::integer;
      most integer;
    begin
      with counted as (
        insert into partner_job_days (partner_id, test_mode, day, jobs)
          select partner_id, test_mode, (created_at at time zone 'Europe/London')::date, count(*)
          from new_jobs where partner_id is not null
          group by 1, 2, 3 order by 1, 2, 3
          on conflict (partner_id, test_mode, day) do update set jobs = partner_job_days.jobs + excluded.jobs
          returning jobs
      )
      select max(jobs) into most from counted;
      if job_limit is not null and most > job_limit then
        raise exception 'daily job limit of % reached', job_limit using errcode = 'DTNDL';
      end if;
      return null;
    end $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    create or replace function partner_job_days_count() returns trigger language plpgsql as $$
    begin
      insert into partner_job_days (partner_id, test_mode, day, jobs)
        select partner_id, test_mode, (created_at at time zone 'Europe/London')::date, count(*)
        from new_jobs where partner_id is not null
        group by 1, 2, 3 order by 1, 2, 3
        on conflict (partner_id, test_mode, day) do update set jobs = partner_job_days.jobs + excluded.jobs;
      return null;
    end $$`);
}
