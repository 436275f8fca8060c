/**
 * Idempotency keys (the `Idempotency-Key` header): per account and key, what the first request
 * with it was (a hash of its operation, path and body), whether it is still running, and once
 * done the answer it got, to give again for 24 hours.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('idempotency_keys', (t) => {
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('key').notNullable();
    // sha256 (hex) of the operation, its path parameters and its body as canonical JSON.
    t.text('fingerprint').notNullable();
    t.text('operation').notNullable();
    t.text('state').notNullable().checkIn(['running', 'done']);
    // The run that holds the key: a run whose key was taken over (it went stale) may not finish it.
    t.uuid('claim').notNullable();
    // The answer, once done: its status, its JSON body as sent, and the headers that matter.
    t.integer('status');
    t.text('body');
    t.text('headers');
    // When the key was claimed: the 24 hours, and the staleness of a run, count from here.
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.primary(['account_id', 'key']);
    // The sweep.
    t.index(['created_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('idempotency_keys');
}
