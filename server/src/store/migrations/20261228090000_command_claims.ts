/**
 * Commands are published by whichever replica claims them (commands/command-outbox.ts): `due_at`
 * says a command is to be published (again) from then on, and null that nothing is asked of the
 * publisher; `claimed_by`/`claimed_until` say which publisher holds it, for how long, so that two
 * replicas never send it at once. A row written by the previous release, which knows neither,
 * is due from when it was written (the default), so both releases can run side by side.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('car_commands', (t) => {
    t.timestamp('due_at', { useTz: true }).defaultTo(db.fn.now());
    t.text('claimed_by');
    t.timestamp('claimed_until', { useTz: true });
  });
  // What the previous release sent is sent again when its car or the broker comes back, as before.
  await db('car_commands').whereNot({ state: 'queued' }).update({ due_at: null });
  // The publisher's queue: only what is due, so it stays as small as the work in hand.
  await db.raw(
    `create index car_commands_due on car_commands (due_at, created_at, command_id)
     where due_at is not null`,
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw('drop index car_commands_due');
  await db.schema.alterTable('car_commands', (t) => {
    t.dropColumn('due_at');
    t.dropColumn('claimed_by');
    t.dropColumn('claimed_until');
  });
}

/** Only adds, with defaults the previous release's writes fill: it runs beside this build. */
export const oldestRelease = '0.1.0';
