import type { Knex } from 'knex';

/** The request an outbox row was written in (shared/trace.ts), carried onto its job for the logs. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table outbox add column request_id text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table outbox drop column request_id');
}
