/**
 * An owner's cars, newest first, a page at a time (`GET /api/v1/cars`): read from an index of
 * their own rather than by filtering every car of the fleet.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(
    `create index cars_owner on cars (owner_id, provisioned_at, device_id) where owner_id is not null`,
  );
}

export async function down(db: Knex): Promise<void> {
  await db.raw('drop index cars_owner');
}

/** Only adds an index: the previous release runs beside it. */
export const oldestRelease = '0.1.0';
