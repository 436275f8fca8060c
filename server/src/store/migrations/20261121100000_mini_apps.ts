/** Mini-apps: presigned uploads, apps claimed by their first submission, versions and their review state. */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  // Secrets the service makes for itself on first start (the upload-URL HMAC key).
  await db.schema.createTable('service_secrets', (t) => {
    t.text('name').primary();
    t.text('value').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
  });

  await db.schema.createTable('uploads', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.bigInteger('size').notNullable();
    t.text('sha256').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    // Set while a PUT streams in, so that two PUTs of one URL cannot both write.
    t.timestamp('receiving_since', { useTz: true });
    t.timestamp('stored_at', { useTz: true });
    t.timestamp('submitted_at', { useTz: true });
    t.index(['account_id']);
  });

  await db.schema.createTable('mini_apps', (t) => {
    t.text('id').primary();
    t.uuid('owner_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.index(['owner_id']);
  });

  await db.schema.createTable('mini_app_versions', (t) => {
    t.uuid('id').primary();
    t.text('app_id').notNullable().references('mini_apps.id').onDelete('CASCADE');
    t.text('version').notNullable();
    t.text('review_state').notNullable();
    t.text('reason');
    t.jsonb('manifest').notNullable();
    t.bigInteger('package_size').notNullable();
    t.text('package_sha256').notNullable();
    t.uuid('upload_id').notNullable().references('uploads.id');
    t.timestamp('submitted_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.unique(['app_id', 'version']);
    t.index(['review_state', 'submitted_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('mini_app_versions');
  await db.schema.dropTable('mini_apps');
  await db.schema.dropTable('uploads');
  await db.schema.dropTable('service_secrets');
}
