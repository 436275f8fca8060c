/**
 * What the operator's commands beside the service share (`rotate-key-encryption-key`,
 * `sync-broker-credentials`): the settings, the store they work on, and one-line refusals.
 */
import { existsSync } from 'node:fs';
import { type Config, ConfigError, readConfig } from './config.ts';
import { DataDirInUse, lockDataDir } from './store/data-dir-lock.ts';
import {
  type Db,
  describeStore,
  embeddedDbDir,
  migrationConfig,
  openStore,
  storeOpened,
} from './store/db.ts';
import { databaseUrlProblem, storeUnavailableReason } from './store/unavailable.ts';

/** A mistake the operator fixes: one line, exit 2, no stack. */
export function refuse(message: string): never {
  process.stderr.write(`svc: ${message}\n`);
  process.exit(2);
}

/** The settings; a warning about one (a former name, …) goes to stderr, beside the command's output. */
export function loadConfigOrRefuse(): Config {
  try {
    const { config, warnings } = readConfig();
    for (const warning of warnings) process.stderr.write(`svc: warning: ${warning}\n`);
    return config;
  } catch (error) {
    if (error instanceof ConfigError) refuse(error.message);
    throw error;
  }
}

/**
 * The service's store, migrated as this build needs it. The embedded store is one process's: the
 * command refuses while the service runs on it.
 */
export async function openCommandStore(config: Config): Promise<{ db: Db; close(): Promise<void> }> {
  let lock: ReturnType<typeof lockDataDir> | undefined;
  if (!config.databaseUrl) {
    // Never made here: an operator who names the wrong folder learns so instead of getting a new,
    // empty database (and a new key-encryption key) there.
    if (!existsSync(embeddedDbDir(config.dataDir))) {
      refuse(
        `DATA_DIR=${config.dataDir} holds no svc database: name the folder the service runs on, or set DATABASE_URL`,
      );
    }
    try {
      lock = lockDataDir(config.dataDir);
    } catch (error) {
      if (error instanceof DataDirInUse) refuse(error.message);
      throw error;
    }
  }
  const db = openStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
  });
  let pending: unknown[];
  try {
    await storeOpened(db);
    [, pending] = await db.migrate.list(migrationConfig);
  } catch (error) {
    await db.destroy().catch(() => undefined);
    lock?.release();
    const problem = config.databaseUrl ? databaseUrlProblem(config.databaseUrl, error) : undefined;
    if (problem) refuse(problem);
    const reason = storeUnavailableReason(error);
    if (reason) {
      refuse(
        `the database at ${describeStore(config)} cannot be reached (${reason}): check that Postgres runs at DATABASE_URL`,
      );
    }
    throw error;
  }
  if (pending.length > 0) {
    await db.destroy();
    lock?.release();
    refuse('the database has migrations of this build still to run: start the service once first');
  }
  return {
    db,
    async close() {
      await db.destroy();
      lock?.release();
    },
  };
}
