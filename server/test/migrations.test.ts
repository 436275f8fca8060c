import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { migrateToLatest, migrationConfig } from '../src/store/db.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const tables = [
  'accounts',
  'admin_codes',
  'app_rollouts',
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
  'broker_credentials',
  'svc_migration_releases',
  'webhook_endpoints',
  'webhook_events',
  'webhook_deliveries',
  'webhook_attempts',
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
    store = await openTestStore({ empty: true });
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

  test('when a store from before key states is migrated then its oldest signing key goes on as the current one and any other is retired', async () => {
    await migrateToLatest(store.db);
    await store.db.migrate.down({ ...migrationConfig, name: '20261225090000_signing_key_states' });
    await store.db('signing_keys').delete();
    // Two replicas that started at once before states could each have made a key.
    for (const [kid, createdAt] of [
      ['second', '2026-11-21T10:00:01Z'],
      ['first', '2026-11-21T10:00:00Z'],
    ]) {
      await store.db('signing_keys').insert({
        kid,
        public_jwk: JSON.stringify({ kid }),
        private_jwk: JSON.stringify({ kid }),
        created_at: new Date(String(createdAt)),
      });
    }
    await migrateToLatest(store.db);
    const rows = await store
      .db('signing_keys')
      .orderBy('kid')
      .select('kid', 'state', 'activated_at', 'retired_at');
    assert.deepEqual(
      rows.map((row) => [row.kid, row.state, row.activated_at !== null, row.retired_at !== null]),
      [
        ['first', 'current', true, false],
        ['second', 'retired', true, true],
      ],
    );
    // The store itself keeps to one current key.
    await assert.rejects(store.db('signing_keys').where({ kid: 'second' }).update({ state: 'current' }));
  });

  test(`when the store is ${process.env.DATABASE_URL ? 'Postgres' : 'PGlite'} then that is what ran them`, async () => {
    assert.equal(store.kind, process.env.DATABASE_URL ? 'postgres' : 'pglite');
    const version = await store.db.raw('select version() as v');
    assert.match(version.rows[0].v, store.kind === 'pglite' ? /PGlite/ : /^PostgreSQL/);
  });
});
