/** The lists CI splits the test files by on Node 20: those that open a store (on Postgres), and the others. */
import assert from 'node:assert/strict';
import { test } from 'vitest';
import { otherSuites, storeDependentSuites, storeSuites, suitesReadingDatabaseUrl } from '../store-suites.ts';

test('when the store suites are listed then the files that start a test service or open a store are in it, and the store-free ones are not', () => {
  const suites = storeSuites();
  // Directly (startTestService), through a support module (describeBrokerAcl), and from another workspace.
  for (const file of [
    'server/test/accounts.test.ts',
    'server/test/broker-acl.test.ts',
    'cli/test/owners-e2e.test.ts',
  ])
    assert.ok(suites.includes(file), file);
  // `npm start` as a child process (embedded whatever DATABASE_URL says), and files with no service at all.
  for (const file of [
    'server/test/main.test.ts',
    'scripts/test/spec-lint.test.ts',
    'client/test/device-id.test.ts',
  ])
    assert.ok(!suites.includes(file), file);
});

test('when the other suites are listed then together with the store suites they are every test file, each once', () => {
  const stores = storeSuites();
  const others = otherSuites();
  assert.ok(others.includes('server/test/main.test.ts'));
  assert.equal(others.filter((file) => stores.includes(file)).length, 0, 'no file is in both lists');
  assert.ok(stores.length + others.length > 90, `${stores.length} + ${others.length} files`);
});

test('when the suites reading DATABASE_URL are listed then the store suites on Postgres anyway are left out, and only they', () => {
  const reading = suitesReadingDatabaseUrl();
  assert.ok(!reading.includes('server/test/restore-from-backup.test.ts'));
  assert.ok(!reading.includes('server/test/keys-at-rest.test.ts'));
  assert.ok(reading.includes('server/test/store-connections.test.ts'), 'its outage needs DATABASE_URL');
  assert.deepEqual(
    storeSuites().filter((file) => !reading.includes(file)),
    ['server/test/keys-at-rest.test.ts', 'server/test/restore-from-backup.test.ts'],
  );
});

test('when the store-dependent suites are listed then those whose tests change with the store are in it, and those that only start a service are not', () => {
  const dependent = storeDependentSuites();
  for (const file of ['server/test/store-connections.test.ts', 'server/test/command-replicas.test.ts'])
    assert.ok(dependent.includes(file), file);
  for (const file of ['server/test/accounts.test.ts', 'cli/test/owners-e2e.test.ts'])
    assert.ok(!dependent.includes(file), file);
});
