/**
 * Admins are claimed, not assumed: an account whose email is listed in SVC_ADMIN_EMAILS becomes an
 * admin only after it redeems the one-time code the service printed for that email.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('accounts', (t) => {
    t.timestamp('admin_claimed_at', { useTz: true });
  });
  await db.schema.createTable('admin_codes', (t) => {
    t.text('email').primary();
    t.text('code_hash').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('admin_codes');
  await db.schema.alterTable('accounts', (t) => {
    t.dropColumn('admin_claimed_at');
  });
}
