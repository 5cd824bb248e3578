import type { Knex } from 'knex';

/**
 * Drivers and their vehicles. A driver is offered nothing until an operator approves them
 * (status `approved`); approval issues the bearer token, stored as a SHA-256 hash.
 * `last_*` columns are the last known presence; the live index is in Redis.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('drivers', (t) => {
    t.uuid('id').primary();
    t.text('name').notNullable();
    t.text('phone').notNullable();
    t.text('email').notNullable();
    t.text('status').notNullable().defaultTo('pending_approval');
    t.text('licensing_authority').notNullable();
    t.text('licence_number').notNullable();
    t.date('licence_expiry').notNullable();
    t.text('home_city').notNullable();
    t.double('home_lat').notNullable();
    t.double('home_lng').notNullable();
    t.double('operating_radius_miles').notNullable();
    t.boolean('national_network').notNullable().defaultTo(false);
    t.jsonb('corridors').notNullable().defaultTo('[]').comment('[{from:{name,lat,lng}, to:{...}, bufferMiles}]');
    t.integer('max_concurrent_jobs').notNullable().defaultTo(1);
    t.text('payment_link').nullable();
    t.uuid('partner_id')
      .nullable()
      .references('partners.id')
      .onDelete('SET NULL')
      .comment('fleet driver of a partner operator');
    t.specificType('token_hash', 'bytea').nullable().unique();
    t.text('token_prefix').nullable();
    t.text('map_api_key_sealed').nullable();
    t.timestamp('approved_at', { useTz: true }).nullable();
    t.timestamp('trial_ends_at', { useTz: true }).nullable();
    t.boolean('available').notNullable().defaultTo(false);
    t.double('last_lat').nullable();
    t.double('last_lng').nullable();
    t.timestamp('last_seen_at', { useTz: true }).nullable();
    t.boolean('test_mode').notNullable().defaultTo(false);
    t.timestamps(true, true);
    t.unique(['licensing_authority', 'licence_number']);
    t.check("status in ('pending_approval','approved','rejected','suspended')", [], 'drivers_status_check');
    t.check('operating_radius_miles > 0 and operating_radius_miles <= 500', [], 'drivers_radius_check');
    t.check('max_concurrent_jobs between 1 and 10', [], 'drivers_max_jobs_check');
    t.index(['status']);
  });

  await knex.schema.createTable('vehicles', (t) => {
    t.uuid('id').primary();
    t.uuid('driver_id').notNullable().references('drivers.id').onDelete('CASCADE');
    t.text('make').notNullable();
    t.text('model').notNullable();
    t.text('colour').notNullable();
    t.text('registration').notNullable();
    t.text('class').notNullable();
    t.integer('seats').notNullable();
    t.boolean('wheelchair_accessible').notNullable().defaultTo(false);
    t.boolean('active').notNullable().defaultTo(true);
    t.timestamps(true, true);
    t.check(
      "class in ('saloon','estate','executive','luxury','5seater','6seater','7seater','mpv','wav')",
      [],
      'vehicles_class_check',
    );
    t.check('seats between 1 and 16', [], 'vehicles_seats_check');
    t.index(['driver_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('vehicles');
  await knex.schema.dropTable('drivers');
}
