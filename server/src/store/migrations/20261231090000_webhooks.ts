/**
 * Webhooks (issue 28): the endpoints an account registered, the events written for them in the
 * transaction of the change they tell of, each event's delivery to each endpoint (the outbox the
 * deliverer works through), and each delivery's attempts (the delivery log).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('webhook_endpoints', (t) => {
    t.uuid('id').primary();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.text('description').notNullable();
    // A JSON array of event types; asked with `@>`.
    t.jsonb('events').notNullable();
    t.boolean('enabled').notNullable();
    t.text('disabled_reason');
    t.timestamp('disabled_at', { useTz: true });
    // The first failed attempt since the last delivered one: the endpoint is disabled when this is
    // far enough behind.
    t.timestamp('failing_since', { useTz: true });
    // The signing secret, sealed with the key-encryption key (store/key-encryption.ts); after a
    // rotation the previous one signs beside it until `previous_secret_expires_at`.
    t.text('secret_ciphertext').notNullable();
    t.text('secret_key_id').notNullable();
    t.text('secret_algorithm').notNullable();
    t.text('previous_secret_ciphertext');
    t.text('previous_secret_key_id');
    t.text('previous_secret_algorithm');
    t.timestamp('previous_secret_expires_at', { useTz: true });
    // A deliverer delivers to one endpoint at a time, on one replica, in the events' order: its
    // claim says whose turn it is and lapses if that replica dies.
    t.text('claimed_by');
    t.timestamp('claimed_until', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.index(['account_id', 'created_at']);
  });

  await db.schema.createTable('webhook_events', (t) => {
    // `evt_` and 32 hex digits: sent as `webhook-id`, the same on every attempt.
    t.text('id').primary();
    t.text('type').notNullable();
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    // The exact bytes signed and sent, so that every attempt sends the same body.
    t.text('body').notNullable();
    t.timestamp('occurred_at', { useTz: true }).notNullable();
    t.index(['occurred_at']);
  });

  await db.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary();
    t.uuid('endpoint_id').notNullable().references('webhook_endpoints.id').onDelete('CASCADE');
    t.text('event_id').notNullable().references('webhook_events.id').onDelete('CASCADE');
    t.text('state').notNullable();
    t.integer('attempts').notNullable();
    t.timestamp('next_attempt_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['endpoint_id', 'created_at']);
  });
  // The order events happened in, across one transaction's several: first attempts go out in it.
  await db.raw('alter table webhook_deliveries add column position bigint generated always as identity');
  await db.raw(
    `create index webhook_deliveries_due on webhook_deliveries (endpoint_id, next_attempt_at, position)
     where state = 'pending'`,
  );

  await db.schema.createTable('webhook_attempts', (t) => {
    t.uuid('delivery_id').notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.timestamp('attempted_at', { useTz: true }).notNullable();
    t.integer('status');
    t.integer('duration_ms').notNullable();
    t.text('response').notNullable();
    t.text('error');
    t.index(['delivery_id', 'attempted_at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('webhook_attempts');
  await db.schema.dropTable('webhook_deliveries');
  await db.schema.dropTable('webhook_events');
  await db.schema.dropTable('webhook_endpoints');
}

/** Only adds tables: the previous release runs beside it (it writes no events). */
export const oldestRelease = '0.1.0';
