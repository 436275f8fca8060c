/**
 * Cars and their broker credentials. `key_values` is the key-value store of embedded mode (Redis
 * holds the same keys when REDIS_URL is set): `mqtt:auth:{username}` → the credential's hash.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('cars', (t) => {
    t.text('device_id').primary();
    t.text('brand').notNullable();
    t.timestamp('provisioned_at', { useTz: true }).notNullable();
    t.uuid('owner_id').references('id').inTable('accounts').onDelete('SET NULL');
    t.timestamp('paired_at', { useTz: true });
    // Newest first, a page at a time.
    t.index(['provisioned_at', 'device_id']);
  });
  await db.schema.createTable('brand_connectors', (t) => {
    t.text('brand').notNullable();
    t.text('name').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.primary(['brand', 'name']);
  });
  await db.schema.createTable('key_values', (t) => {
    t.text('key').primary();
    t.text('value').notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('key_values');
  await db.schema.dropTable('brand_connectors');
  await db.schema.dropTable('cars');
}
