/** The list of test files CI runs again on Postgres: every one that opens a store, and only those. */
import assert from 'node:assert/strict';
import { test } from 'vitest';
import { storeSuites } from '../store-suites.ts';

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
