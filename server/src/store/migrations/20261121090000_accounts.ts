/** Accounts, their SSH keys, sign-in challenges, access tokens and failed sign-in attempts. */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('accounts', (t) => {
    t.uuid('id').primary();
    t.text('email').notNullable().unique();
    t.text('name').notNullable();
    t.text('password_hash');
    t.timestamp('created_at', { useTz: true }).notNullable();
  });

  await db.schema.createTable('ssh_keys', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('public_key').notNullable();
    t.text('fingerprint').notNullable().unique();
    t.text('title').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('last_used_at', { useTz: true });
    t.index(['account_id']);
  });

  await db.schema.createTable('login_challenges', (t) => {
    t.uuid('id').primary();
    t.text('fingerprint').notNullable();
    t.text('message').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('consumed_at', { useTz: true });
    t.index(['expires_at']);
  });

  await db.schema.createTable('access_tokens', (t) => {
    t.uuid('id').primary();
    t.text('token_hash').notNullable().unique();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    // Removing a key ends the tokens it minted, and only those.
    t.uuid('ssh_key_id').references('ssh_keys.id').onDelete('CASCADE');
    t.text('source').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.index(['account_id']);
    t.index(['expires_at']);
  });

  await db.schema.createTable('sign_in_failures', (t) => {
    t.bigIncrements('id');
    t.text('subject').notNullable();
    t.timestamp('at', { useTz: true }).notNullable();
    t.index(['subject', 'at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('sign_in_failures');
  await db.schema.dropTable('access_tokens');
  await db.schema.dropTable('login_challenges');
  await db.schema.dropTable('ssh_keys');
  await db.schema.dropTable('accounts');
}
