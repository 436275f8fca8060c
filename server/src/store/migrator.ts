/**
 * Runs the migrations for `npm start`, `npm run serve` and `npm run migrate`: each one that runs
 * is logged with its duration, and each applied one's oldest release still served is recorded
 * (svc_migration_releases). Before anything runs, a database migrated by a newer build is looked
 * at: this build starts on it only if every migration it does not know still serves this
 * release, and is refused otherwise with a line that says what to do (docs/operating.md,
 * "Upgrades and rollbacks").
 */
import type { Knex } from 'knex';
import type { Logger } from '../logger.ts';
import { compareReleases, release as thisRelease } from '../release.ts';
import { migrations as knownMigrations, type Migration, type MigrationList } from './migrations/index.ts';

const migrationsTable = 'knex_migrations';
const releasesTable = 'svc_migration_releases';

/** A database migrated further than this build may go: a setup mistake, refused with this message. */
export class IncompatibleDatabase extends Error {
  override readonly name = 'IncompatibleDatabase';
  readonly migration: string;
  /** `oldestRelease`: the oldest release the migration still serves; undefined when nothing recorded it. */
  constructor(migration: string, oldestRelease: string | undefined, release: string) {
    const [serves, forward] = oldestRelease
      ? [`and which serves release ${oldestRelease} and newer only`, `release ${oldestRelease} or newer`]
      : ['and which no record says still serves this release', 'the release that migrated the database'];
    super(
      `the database has migration ${migration}, which this build (release ${release}) does not know ${serves}: start ${forward}, or restore the backup taken before the upgrade to go back to release ${release}.`,
    );
    this.migration = migration;
  }
}

export interface MigrateOptions {
  logger: Logger;
  /** The migrations this build knows, in order; by default its own (tests give fewer). */
  migrations?: MigrationList;
  /** This build's release; by default server/package.json's. */
  release?: string;
}

/** What ran: the names of the migrations applied now, in order. */
export interface Migrated {
  applied: string[];
}

/** Each migration as knex runs it, logged with its duration once it has run. */
function loggedSource(migrations: MigrationList, logger: Logger): Knex.MigrationSource<[string, Migration]> {
  const logged =
    (name: string, direction: 'up' | 'down', run: (db: Knex) => Promise<void>) => async (db: Knex) => {
      const started = performance.now();
      await run(db);
      const durationMs = Math.round(performance.now() - started);
      logger.info(direction === 'up' ? 'migration applied' : 'migration reverted', {
        migration: name,
        durationMs,
      });
    };
  return {
    getMigrations: async () => migrations,
    getMigrationName: ([name]) => name,
    getMigration: async ([name, migration]) => ({
      up: logged(name, 'up', (db) => migration.up(db)),
      down: logged(name, 'down', (db) => migration.down(db)),
    }),
  };
}

/** The names knex lists as applied, oldest first; none on a new database. */
async function appliedMigrations(db: Knex): Promise<string[]> {
  if (!(await db.schema.hasTable(migrationsTable))) return [];
  const rows: { name: string }[] = await db(migrationsTable).orderBy('id').select('name');
  return rows.map((row) => row.name);
}

/**
 * Refuses a database with a migration this build does not know unless the database says that
 * migration still serves this release; returns the unknown ones it may run beside.
 */
async function checkUnknownMigrations(db: Knex, known: Set<string>, release: string): Promise<string[]> {
  const unknown = (await appliedMigrations(db)).filter((name) => !known.has(name));
  if (unknown.length === 0) return [];
  const records = new Map<string, string>();
  if (await db.schema.hasTable(releasesTable)) {
    const rows: { name: string; oldest_release: string }[] = await db(releasesTable)
      .whereIn('name', unknown)
      .select('name', 'oldest_release');
    for (const row of rows) records.set(row.name, row.oldest_release);
  }
  for (const name of unknown) {
    const oldest = records.get(name);
    if (oldest === undefined || compareReleases(release, oldest) < 0)
      throw new IncompatibleDatabase(name, oldest, release);
  }
  return unknown;
}

/**
 * Brings the database to this build's newest migration. Throws IncompatibleDatabase, before
 * changing anything, when a newer build migrated it beyond what this release may run on.
 */
export async function migrate(db: Knex, options: MigrateOptions): Promise<Migrated> {
  const { logger } = options;
  const migrations = options.migrations ?? knownMigrations;
  const release = options.release ?? thisRelease;
  const unknown = await checkUnknownMigrations(db, new Set(migrations.map(([name]) => name)), release);
  if (unknown.length > 0) {
    logger.warn('the database has migrations this build does not know; they still serve its release', {
      migrations: unknown,
      release,
    });
  }
  const started = performance.now();
  const [, applied]: [number, string[]] = await db.migrate.latest({
    migrationSource: loggedSource(migrations, logger),
    tableName: migrationsTable,
    // Checked above: the ones this build does not know say they serve it.
    disableMigrationsListValidation: unknown.length > 0,
  });
  await recordReleases(db, migrations, release);
  if (applied.length > 0)
    logger.info('migrations done', {
      applied: applied.length,
      durationMs: Math.round(performance.now() - started),
    });
  else logger.info('migrations: the database is up to date', { migrations: migrations.length });
  return { applied };
}

/**
 * Writes, for every migration of this build the database has, the oldest release it serves,
 * unless written already (by this build or another of the same migrations): the record an older
 * build reads. Rows from before the record existed are filled in here too.
 */
async function recordReleases(db: Knex, migrations: MigrationList, release: string): Promise<void> {
  const applied = new Set(await appliedMigrations(db));
  const rows = migrations
    .filter(([name]) => applied.has(name))
    .map(([name, migration]) => ({ name, oldest_release: migration.oldestRelease ?? release }));
  if (rows.length === 0 || !(await db.schema.hasTable(releasesTable))) return;
  await db(releasesTable).insert(rows).onConflict('name').ignore();
}
