/**
 * An upload names the app and version it is for, so that what submit would refuse is refused
 * before the bytes arrive; a package refused at submit is deleted, and its upload says so.
 * Rows made before this have neither, and are checked at submit only, as before.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('uploads', (t) => {
    t.text('app_id');
    t.text('version');
    t.timestamp('refused_at', { useTz: true });
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('uploads', (t) => {
    t.dropColumn('app_id');
    t.dropColumn('version');
    t.dropColumn('refused_at');
  });
}
