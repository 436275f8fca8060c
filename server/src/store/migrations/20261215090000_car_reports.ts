/**
 * What cars report over MQTT, as the bridge stores it: the last status report, presence and last
 * seen, the last location fix, and the telemetry history. Every row belongs to a provisioned car
 * and goes with it when the car is decommissioned.
 */
import type { Knex } from 'knex';

function carColumn(t: Knex.CreateTableBuilder) {
  return t.text('device_id').notNullable().references('device_id').inTable('cars').onDelete('CASCADE');
}

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('car_status_reports', (t) => {
    carColumn(t).primary();
    t.text('host_version').notNullable();
    t.jsonb('installed_apps').notNullable();
    t.jsonb('state').notNullable();
    t.timestamp('reported_at', { useTz: true }).notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable();
  });
  await db.schema.createTable('car_presence', (t) => {
    carColumn(t).primary();
    // False until the car says `online`: a car that only ever sent status is not known to be connected.
    t.boolean('online').notNullable().defaultTo(false);
    // The last live message of any kind (a retained replay is no sighting); null when none yet.
    t.timestamp('last_seen', { useTz: true });
  });
  await db.schema.createTable('car_locations', (t) => {
    carColumn(t).primary();
    t.double('latitude').notNullable();
    t.double('longitude').notNullable();
    t.double('accuracy_m');
    t.double('heading_deg');
    t.double('speed_kmh');
    t.timestamp('recorded_at', { useTz: true }).notNullable();
  });
  await db.schema.createTable('car_telemetry', (t) => {
    t.bigIncrements('id');
    carColumn(t);
    t.timestamp('recorded_at', { useTz: true }).notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable();
    t.double('latitude').notNullable();
    t.double('longitude').notNullable();
    t.double('accuracy_m');
    t.double('heading_deg');
    t.double('speed_kmh');
    t.double('odometer_km');
    t.double('battery_percent');
    // One car's track, in time order.
    t.index(['device_id', 'recorded_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('car_telemetry');
  await db.schema.dropTable('car_locations');
  await db.schema.dropTable('car_presence');
  await db.schema.dropTable('car_status_reports');
}
