import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { migrateToLatest, migrationConfig } from '../src/store/db.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const tables = [
  'accounts',
  'admin_codes',
  'ssh_keys',
  'login_challenges',
  'access_tokens',
  'sign_in_failures',
  'signing_keys',
  'service_secrets',
  'uploads',
  'mini_apps',
  'mini_app_versions',
  'cars',
  'brand_connectors',
  'key_values',
  'car_status_reports',
  'car_presence',
  'car_locations',
  'car_telemetry',
  'car_commands',
  'pairing_codes',
  'idempotency_keys',
];

async function existingTables(store: TestStore): Promise<string[]> {
  const result = await store.db.raw(
    'select table_name from information_schema.tables where table_schema = current_schema() and table_name <> all(?) order by 1',
    [['knex_migrations', 'knex_migrations_lock']],
  );
  return result.rows.map((row: { table_name: string }) => row.table_name).sort();
}

describe('migrations', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await openTestStore();
  });
  afterAll(() => store.close());

  test('when they run up, down and up again then every table is made, dropped and made again', async () => {
    await migrateToLatest(store.db);
    assert.deepEqual(await existingTables(store), [...tables].sort());

    await store.db.migrate.rollback(migrationConfig, true);
    assert.deepEqual(await existingTables(store), []);

    await migrateToLatest(store.db);
    assert.deepEqual(await existingTables(store), [...tables].sort());
    const [, pending] = await store.db.migrate.list(migrationConfig);
    assert.equal(pending.length, 0);
  });

  test(`when the store is ${process.env.DATABASE_URL ? 'Postgres' : 'PGlite'} then that is what ran them`, async () => {
    assert.equal(store.kind, process.env.DATABASE_URL ? 'postgres' : 'pglite');
    const version = await store.db.raw('select version() as v');
    assert.match(version.rows[0].v, store.kind === 'pglite' ? /PGlite/ : /^PostgreSQL/);
  });
});
