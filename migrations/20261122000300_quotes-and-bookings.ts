import type { Knex } from 'knex';

export const BOOKING_ORIGINS = ['website', 'api', 'agent', 'partner', 'supplier', 'mcp'] as const;
export const BOOKING_STATUSES = [
  'pending',
  'dispatching',
  'driver_assigned',
  'driver_en_route',
  'driver_arrived',
  'passenger_on_board',
  'completed',
  'cancelled',
  'no_driver_available',
] as const;
export const PAYMENT_METHODS = ['cash', 'card', 'pay_link', 'bank_transfer', 'account'] as const;

const list = (values: readonly string[]) => values.map((v) => `'${v}'`).join(',');

/**
 * Quotes (fixed fare, 24 h, redeemed once), the one `bookings` table for every origin, the
 * append-only status history (with a per-booking sequence number that webhooks carry) and
 * dispatch offers (at most one accepted offer per booking, enforced by a unique index).
 * Money is integer pence.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('quotes', (t) => {
    t.uuid('id').primary().comment('UUID v7');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('redeemed_at', { useTz: true }).nullable();
    t.uuid('api_key_id').nullable().references('api_keys.id').onDelete('SET NULL');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('SET NULL');
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('SET NULL');
    t.jsonb('pickup').notNullable().comment('{query,name,kind,lat,lng}');
    t.jsonb('dropoff').notNullable();
    t.timestamp('depart_at', { useTz: true }).notNullable();
    t.text('vehicle_type').notNullable();
    t.integer('passengers').notNullable();
    t.boolean('meet_and_greet').notNullable().defaultTo(false);
    t.boolean('worldwide').notNullable().defaultTo(false);
    t.double('distance_miles').notNullable();
    t.integer('duration_minutes').notNullable();
    t.integer('fare_pence').notNullable();
    t.text('currency').notNullable().defaultTo('GBP');
    t.jsonb('applied_rules').notNullable().defaultTo('[]');
    t.jsonb('tariff_source').notNullable();
    t.jsonb('warnings').notNullable().defaultTo('[]');
    t.text('base_url').notNullable().comment('connected domain the quote was requested on');
    t.boolean('test_mode').notNullable().defaultTo(false);
    t.check('passengers between 1 and 8', [], 'quotes_passengers_check');
    t.check('fare_pence >= 0', [], 'quotes_fare_check');
  });

  await knex.schema.createTable('bookings', (t) => {
    t.uuid('id').primary();
    t.text('reference').notNullable().unique().comment('DTN-XXXXXX, Crockford base32, stored upper-case');
    t.text('origin').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.uuid('quote_id').nullable().unique().references('quotes.id').onDelete('RESTRICT');
    t.uuid('api_key_id').nullable().references('api_keys.id').onDelete('SET NULL');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('RESTRICT');
    t.uuid('supplier_id').nullable().references('suppliers.id').onDelete('RESTRICT');
    t.text('passenger_name').notNullable();
    t.text('passenger_email').nullable();
    t.text('passenger_phone').nullable();
    t.boolean('email_verified').notNullable().defaultTo(false);
    t.integer('passengers').notNullable().defaultTo(1);
    t.text('vehicle_type').notNullable().defaultTo('saloon');
    t.jsonb('pickup').notNullable();
    t.jsonb('dropoff').notNullable();
    t.timestamp('pickup_time', { useTz: true }).notNullable();
    t.integer('fare_pence').nullable().comment('null until priced (partner jobs without a fare)');
    t.text('currency').notNullable().defaultTo('GBP');
    t.jsonb('applied_rules').notNullable().defaultTo('[]');
    t.jsonb('tariff_source').nullable();
    t.text('payment_method').notNullable().defaultTo('cash');
    t.text('flight_number').nullable();
    t.text('notes').nullable();
    t.text('agent').nullable();
    t.specificType('tracking_token_hash', 'bytea').notNullable().unique();
    t.specificType('content_hash', 'bytea').nullable().comment('normalised request, for 15-minute repeat detection');
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('RESTRICT');
    t.uuid('vehicle_id').nullable().references('vehicles.id').onDelete('RESTRICT');
    t.uuid('operator_partner_id')
      .nullable()
      .references('partners.id')
      .onDelete('RESTRICT')
      .comment('tier-3 operator holding the job');
    t.smallint('dispatch_tier').nullable();
    t.double('dead_miles').nullable();
    t.integer('status_seq').notNullable().defaultTo(0).comment('last history sequence number');
    t.text('cancel_reason').nullable();
    t.boolean('test_mode').notNullable().defaultTo(false);
    t.timestamps(true, true);
    t.check(`origin in (${list(BOOKING_ORIGINS)})`, [], 'bookings_origin_check');
    t.check(`status in (${list(BOOKING_STATUSES)})`, [], 'bookings_status_check');
    t.check(`payment_method in (${list(PAYMENT_METHODS)})`, [], 'bookings_payment_method_check');
    t.check('passengers between 1 and 8', [], 'bookings_passengers_check');
    t.check('dispatch_tier between 1 and 3', [], 'bookings_tier_check');
    t.index(['status', 'pickup_time']);
    t.index(['driver_id', 'status']);
    t.index(['content_hash', 'created_at']);
  });
  await knex.raw('create index bookings_passenger_email_idx on bookings (lower(passenger_email))');

  await knex.schema.createTable('booking_status_history', (t) => {
    t.bigIncrements('id');
    t.uuid('booking_id').notNullable().references('bookings.id').onDelete('CASCADE');
    t.integer('seq').notNullable();
    t.text('status').notNullable();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('actor').notNullable().defaultTo('system');
    t.jsonb('details').notNullable().defaultTo('{}');
    t.unique(['booking_id', 'seq']);
    t.check(`status in (${list(BOOKING_STATUSES)})`, [], 'booking_status_history_status_check');
  });

  await knex.schema.createTable('dispatch_offers', (t) => {
    t.uuid('id').primary();
    t.uuid('booking_id').notNullable().references('bookings.id').onDelete('CASCADE');
    t.smallint('tier').notNullable();
    t.integer('attempt').notNullable().comment('1-based position in the dispatch sequence');
    t.uuid('driver_id').nullable().references('drivers.id').onDelete('RESTRICT');
    t.uuid('partner_id').nullable().references('partners.id').onDelete('RESTRICT');
    t.text('state').notNullable().defaultTo('offered');
    t.timestamp('offered_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('responded_at', { useTz: true }).nullable();
    t.text('decline_reason').nullable();
    t.double('driver_lat').nullable();
    t.double('driver_lng').nullable();
    t.unique(['booking_id', 'attempt']);
    t.check("state in ('offered','accepted','declined','expired','withdrawn')", [], 'dispatch_offers_state_check');
    t.check('(driver_id is null) <> (partner_id is null)', [], 'dispatch_offers_target_check');
    t.index(['driver_id', 'state']);
  });
  await knex.raw(
    "create unique index dispatch_offers_one_accepted on dispatch_offers (booking_id) where state = 'accepted'",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('dispatch_offers');
  await knex.schema.dropTable('booking_status_history');
  await knex.schema.dropTable('bookings');
  await knex.schema.dropTable('quotes');
}
