/**
 * Commands for cars (DESIGN §9): written here first, as an outbox the service publishes from,
 * and moved through their states by the cars' acknowledgements and by expiry. A command goes with
 * its car when the car is decommissioned.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('car_commands', (t) => {
    t.uuid('command_id').primary();
    t.text('device_id').notNullable().references('device_id').inTable('cars').onDelete('CASCADE');
    t.text('name').notNullable();
    t.jsonb('args').notNullable();
    // queued → sent → accepted → completed | failed | rejected | expired
    t.text('state').notNullable();
    t.text('detail');
    // Null for a command the service made itself (pairing.show_code).
    t.uuid('created_by').references('id').inTable('accounts').onDelete('SET NULL');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    // When the broker last took it (its PUBACK); null while it was never published.
    t.timestamp('sent_at', { useTz: true });
    // A car's commands, newest first, a page at a time.
    t.index(['device_id', 'created_at', 'command_id']);
  });
  // The outbox: commands not final yet, for the publisher (queued), the resend to a car that comes
  // back (sent, accepted) and the expiry sweep. Partial, so it stays as small as the work in hand.
  await db.raw(
    `create index car_commands_pending on car_commands (state, expires_at)
     where state in ('queued', 'sent', 'accepted')`,
  );
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('car_commands');
}
