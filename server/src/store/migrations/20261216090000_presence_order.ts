/**
 * The `at` of the presence message a car's `online` comes from, so that presence messages that
 * arrive out of order (an old connection's last will after a new connection's `online`) leave
 * the newest in place rather than the last to arrive.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('car_presence', (t) => {
    // Null until the car's first presence message (a status alone makes the row).
    t.timestamp('presence_at', { useTz: true });
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('car_presence', (t) => {
    t.dropColumn('presence_at');
  });
}
