/**
 * Staged rollouts of app versions (issue 27): at most one under way per app (`active` or
 * `paused`), kept after it ends as the record of what happened. And two indexes the app updater
 * asks through: the cars that run an app (their last status report lists it) and an app's install
 * commands.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('app_rollouts', (t) => {
    t.uuid('id').primary();
    t.text('app_id').notNullable().references('mini_apps.id').onDelete('CASCADE');
    t.uuid('version_id').notNullable().references('mini_app_versions.id').onDelete('CASCADE');
    // The version live when the rollout started: the cars outside it keep it, and a rollback
    // moves the others back to it. Null for an app's first version.
    t.uuid('previous_version_id').references('mini_app_versions.id').onDelete('SET NULL');
    t.integer('percent').notNullable();
    // Null: every brand the version's manifest lists.
    t.jsonb('brands');
    t.text('state').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.index(['app_id', 'created_at']);
  });
  await db.raw(
    `create unique index app_rollouts_one_under_way on app_rollouts (app_id)
     where state in ('active', 'paused')`,
  );
  await db.raw(
    'create index car_status_reports_apps on car_status_reports using gin (installed_apps jsonb_path_ops)',
  );
  await db.raw(
    `create index car_commands_app_installs on car_commands ((args->>'app_id'), device_id, created_at)
     where name = 'app.install'`,
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw('drop index car_commands_app_installs');
  await db.raw('drop index car_status_reports_apps');
  await db.schema.dropTable('app_rollouts');
}

/** Only adds: the previous release runs beside it (it knows no rollout, and moves no car). */
export const oldestRelease = '0.1.0';
