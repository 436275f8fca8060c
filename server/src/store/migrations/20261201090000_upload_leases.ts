/**
 * Uploads in progress are held by a lease: the PUT receiving them names its claim (which also
 * names its partial file) and renews the lease while bytes flow, so that a receiver that died
 * (a crash, a kill, a replica gone) lets the URL go once the lease lapses, on any replica. A row
 * marked receiving before this migration has no claim, so it is free.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('uploads', (t) => {
    t.uuid('receiving_claim');
    t.timestamp('lease_expires_at', { useTz: true });
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('uploads', (t) => {
    t.dropColumn('receiving_claim');
    t.dropColumn('lease_expires_at');
  });
}
