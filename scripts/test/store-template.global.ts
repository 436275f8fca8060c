/**
 * vitest's global setup: one migrated database per run, which every test file's store starts from
 * instead of making a database and running every migration again. On PGlite (the default) it is a
 * dump of the data folder, loaded into each file's in-memory store and unpacked into the data folder
 * of each service process a test starts; with DATABASE_URL, a database each file's is made from
 * (`CREATE DATABASE … TEMPLATE`).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import knex from 'knex';
import type { TestProject } from 'vitest/node';
import type { StoreTemplate } from '../../server/test/support/store.ts';

/** Where a service process started by a test finds the migrated PGlite data folder. */
export const pgliteTemplateVariable = 'SVC_TEST_PGLITE_TEMPLATE';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Imported here, not at the top: the store's modules import @svc/sdk, whose build the global
  // setup before this one makes on a clean clone, and vitest imports every setup file before it
  // runs the first.
  const { migrateToLatest, openStore, storeOpened } = await import('../../server/src/store/db.ts');
  const folder = mkdtempSync(join(tmpdir(), 'svc-store-template-'));
  const template: StoreTemplate = {
    pgliteDump: join(folder, 'pglite.tar'),
    pgliteDir: join(folder, 'pglite'),
  };

  const db = openStore({});
  await storeOpened(db);
  await migrateToLatest(db);
  const { pglite } = db.client.config.connection as { pglite: import('@electric-sql/pglite').PGlite };
  const dump = await pglite.dumpDataDir('none');
  await db.destroy();
  writeFileSync(template.pgliteDump, Buffer.from(await dump.arrayBuffer()));
  mkdirSync(template.pgliteDir);
  // The dump names its members from the root (`/base/…`); tar strips the leading slash.
  execFileSync('tar', ['-xf', template.pgliteDump, '-C', template.pgliteDir], { stdio: 'ignore' });

  const serverUrl = process.env.DATABASE_URL;
  let admin: knex.Knex | undefined;
  if (serverUrl) {
    const name = `svc_test_template_${randomBytes(4).toString('hex')}`;
    admin = knex({ client: 'pg', connection: serverUrl, pool: { min: 0, max: 1 } });
    await admin.raw('create database ??', [name]);
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    const migrated = openStore({ databaseUrl: url.href });
    await migrateToLatest(migrated);
    // A template takes no connection while databases are made from it.
    await migrated.destroy();
    template.postgresTemplate = name;
  }

  project.provide('storeTemplate', template);
  // Service processes (server/test/support/service-process.ts) are also started by benchmarks,
  // outside vitest, so they learn of the template from the environment the test workers inherit.
  process.env[pgliteTemplateVariable] = template.pgliteDir;
  return async () => {
    if (admin && template.postgresTemplate) {
      await admin.raw('drop database if exists ?? with (force)', [template.postgresTemplate]);
      await admin.destroy();
    }
    rmSync(folder, { recursive: true, force: true });
  };
}
