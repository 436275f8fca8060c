/**
 * Upgrades and rollbacks as an operator goes through them (docs/operating.md): `npm run migrate`
 * alone, the release each replica reports, and an older build started on a database a newer one
 * migrated: it starts when the database says it may, and is refused in one line when not.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { silentLogger } from '../src/logger.ts';
import { release } from '../src/release.ts';
import { embeddedDbDir, migrateToLatest, openStore, storeOpened } from '../src/store/db.ts';
import { migrations } from '../src/store/migrations/index.ts';
import { IncompatibleDatabase, migrate } from '../src/store/migrator.ts';
import { exitOf, seedDataDir, serviceArgs, startServiceProcess } from './support/service-process.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const repoRoot = join(import.meta.dirname, '../..');

/** A command run to its end with the service's settings: its exit code and what it wrote. */
async function run(command: string, args: string[], env: Record<string, string>) {
  const { DATABASE_URL: _embedded, ...inherited } = process.env;
  const child = spawn(command, args, {
    cwd: repoRoot,
    env: { ...inherited, PORT: '0', METRICS_PORT: '0', MQTT_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return { code: await exitOf(child), stdout, stderr };
}

function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** What a newer build leaves in the embedded database of `dataDir`: its migration, and the release it serves from. */
async function migrateAsNewerBuild(dataDir: string, migration: string, oldestRelease: string) {
  // From the run's migrated database: made and migrated here, it took a PGlite initdb and every
  // migration in the test's own process.
  seedDataDir(dataDir);
  const db = openStore({ pgliteDir: embeddedDbDir(dataDir) });
  try {
    await storeOpened(db);
    await migrateToLatest(db);
    await db('knex_migrations').insert({ name: migration, batch: 99, migration_time: new Date() });
    await db('svc_migration_releases').insert({ name: migration, oldest_release: oldestRelease });
  } finally {
    await db.destroy();
  }
}

// The first three share nothing (each its own data folder and processes) and run at once.
describe.concurrent('when an operator runs npm run migrate on a new data folder', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-migrate-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  test('then it exits 0 having logged each migration with its duration, and a second run says the database is up to date', async () => {
    const first = await run('npm', ['run', 'migrate', '--silent'], { DATA_DIR: dataDir });
    assert.equal(first.code, 0, first.stderr);
    const applied = jsonLines(first.stderr).filter((line) => line.message === 'migration applied');
    assert.deepEqual(
      applied.map((line) => line.migration),
      migrations.map(([name]) => name),
    );
    for (const line of applied) assert.equal(typeof line.durationMs, 'number');

    const second = await run('npm', ['run', 'migrate', '--silent'], { DATA_DIR: dataDir });
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(
      jsonLines(second.stderr).map((line) => line.message),
      ['migrations: the database is up to date'],
    );
  });
});

describe.concurrent('when an older build starts on a database whose newest migration still serves its release', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-older-build-'));
  const future = '29991231000000_future_expand';
  let service: Awaited<ReturnType<typeof startServiceProcess>>;
  let stderr = '';

  beforeAll(async () => {
    await migrateAsNewerBuild(dataDir, future, release);
    service = await startServiceProcess({ dataDir });
    service.child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
  });
  afterAll(async () => {
    await service?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('then it starts, logs the migration it does not know by name, and reports its release in the banner, /healthz and /metrics', async () => {
    assert.match(service.banner, new RegExp(`^svc ${release.replaceAll('.', '\\.')} is running`));
    const health = await fetch(`${service.url}/healthz`);
    assert.deepEqual(await health.json(), { status: 'ok', version: release });
    const metricsUrl = /metrics\s+(http:\/\/\S+)/.exec(service.banner)?.[1];
    assert.ok(metricsUrl, service.banner);
    const metrics = await (await fetch(metricsUrl)).text();
    assert.match(metrics, new RegExp(`^svc_build_info\\{version="${release}"\\} 1$`, 'm'));
    const unknown = jsonLines(stderr).find((line) => Array.isArray(line.migrations));
    assert.ok(unknown, stderr);
    assert.equal(unknown.level, 'warn');
    assert.deepEqual(unknown.migrations, [future]);
  });
});

describe.concurrent('when an older build starts on a database whose newest migration serves only newer releases', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-older-build-'));
  const future = '29991231000000_future_contract';

  beforeAll(() => migrateAsNewerBuild(dataDir, future, '999.0.0'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  // Each takes the data folder's lock: one after the other.
  test.sequential('then it exits 2 with one JSON line naming the migration and what to do, and no stack trace', async () => {
    const started = await run(process.execPath, serviceArgs(), { DATA_DIR: dataDir });
    assert.equal(started.code, 2, started.stderr);
    assert.equal(started.stdout, '');
    const lines = jsonLines(started.stderr);
    assert.equal(lines.length, 1, started.stderr);
    const [line] = lines;
    assert.equal(line?.level, 'error');
    assert.equal(line?.migration, future);
    assert.match(String(line?.message), new RegExp(`migration ${future}`));
    assert.match(
      String(line?.message),
      /start release 999\.0\.0 or newer, or restore the backup taken before the upgrade/,
    );
    assert.doesNotMatch(started.stderr, /\n\s+at |corrupt/);
  });

  test.sequential('then npm run migrate is refused in the same line and changes nothing', async () => {
    const migrated = await run('npm', ['run', 'migrate', '--silent'], { DATA_DIR: dataDir });
    assert.equal(migrated.code, 2, migrated.stderr);
    const lines = jsonLines(migrated.stderr);
    assert.equal(lines.length, 1, migrated.stderr);
    assert.equal(lines[0]?.migration, future);
  });
});

describe('migrate, on the store the suite runs on', () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await openTestStore();
  });
  afterAll(() => store.close());

  test('when it has run then every migration records the oldest release it serves', async () => {
    await migrate(store.db, { logger: silentLogger });
    const rows = await store.db('svc_migration_releases').orderBy('name').select('name', 'oldest_release');
    assert.deepEqual(
      rows.map((row) => [row.name, row.oldest_release]),
      migrations.map(([name, migration]) => [name, migration.oldestRelease ?? release]),
    );
  });

  test('when a build that lacks the newest migration migrates, then it runs if the migration said it serves its release, and is refused otherwise', async () => {
    await migrate(store.db, { logger: silentLogger });
    const older = migrations.slice(0, -1);
    const newest = migrations.at(-1)?.[0];
    await store.db('svc_migration_releases').where({ name: newest }).update({ oldest_release: '0.0.1' });
    const warnings: unknown[] = [];
    const logger = { ...silentLogger, warn: (_message: string, fields?: unknown) => warnings.push(fields) };
    assert.deepEqual(await migrate(store.db, { logger, migrations: older, release: '0.0.1' }), {
      applied: [],
    });
    assert.deepEqual(warnings, [{ migrations: [newest], release: '0.0.1' }]);

    await assert.rejects(
      migrate(store.db, { logger: silentLogger, migrations: older, release: '0.0.0' }),
      (error: unknown) => error instanceof IncompatibleDatabase && error.migration === newest,
    );
    await store.db('svc_migration_releases').where({ name: newest }).delete();
    await assert.rejects(
      migrate(store.db, { logger: silentLogger, migrations: older, release: '0.0.1' }),
      /no record says still serves this release: start the release that migrated the database/,
    );
  });
});
