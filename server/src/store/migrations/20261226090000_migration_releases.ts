/**
 * For each migration applied, the oldest release of the service that still runs on the database
 * it leaves (docs/operating.md, "Upgrades and rollbacks"): what lets an older build start on a
 * database a newer one migrated, or refuse it with a line that says why. Written by the migrator
 * (store/migrator.ts), beside knex's own list of what ran.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('svc_migration_releases', (t) => {
    t.text('name').primary();
    t.text('oldest_release').notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('svc_migration_releases');
}
