/** The SQL store: knex over embedded PGlite (nothing set) or over Postgres (`DATABASE_URL`). */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import knex, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import { type Logger, silentLogger } from '../logger.ts';
import { migrationSource } from './migrations/index.ts';
import { migrate } from './migrator.ts';
import { postgresClient } from './postgres-client.ts';

export type Db = Knex;

/** Connections to Postgres one process holds at most for requests. */
export const poolSize = 10;

export interface StoreOptions {
  databaseUrl?: string | undefined;
  /** Folder of the embedded database; unset with no `databaseUrl` means in memory (tests). */
  pgliteDir?: string | undefined;
  /**
   * What a new embedded database starts with, as PGlite's `dumpDataDir` wrote it: tests start each
   * store from one database migrated once per run.
   */
  pgliteData?: Blob | undefined;
  /** How long a query waits for a connection, a new Postgres connection included; unset: knex's minute. */
  acquireTimeoutMs?: number | undefined;
  /** Postgres's `statement_timeout`; unset: none. PGlite cannot interrupt a statement. */
  statementTimeoutMs?: number | undefined;
  /** Where knex's own warnings go; unset: nowhere. */
  logger?: Logger | undefined;
}

export function describeStore(options: StoreOptions): string {
  if (options.databaseUrl) {
    const url = new URL(options.databaseUrl);
    return `postgres ${url.hostname}:${url.port || 5432}${url.pathname}`;
  }
  return options.pgliteDir ? `pglite ${options.pgliteDir}` : 'pglite (in memory)';
}

/**
 * Knex's warnings go to the operator's log. The two it repeats for every request while the store
 * is down, each with a stack trace, go at debug: the error middleware already logs every request
 * the store fails, once, at warn.
 */
function storeLog(logger: Logger | undefined): Knex.Config['log'] {
  const repeated = /^(Acquire connection error|Connection Error):/;
  return {
    warn(message: unknown) {
      // Repeated ones still reach the log, below the operator's default level.
      if (repeated.test(String(message))) logger?.debug('store', { detail: String(message) });
      else logger?.warn('store', { detail: String(message) });
    },
    error(message: unknown) {
      logger?.error('store', { detail: String(message) });
    },
    deprecate(method: string, alternative: string) {
      logger?.warn('store', { detail: `${method} is deprecated: use ${alternative}` });
    },
    debug() {},
  };
}

/** The service's store, as its settings say: Postgres at DATABASE_URL, or PGlite in DATA_DIR. */
export function openServiceStore(
  config: {
    databaseUrl?: string | undefined;
    dataDir: string;
    databaseAcquireTimeoutMs: number;
    databaseStatementTimeoutMs: number;
  },
  logger: Logger,
): Db {
  return openStore({
    databaseUrl: config.databaseUrl,
    pgliteDir: config.databaseUrl ? undefined : embeddedDbDir(config.dataDir),
    acquireTimeoutMs: config.databaseAcquireTimeoutMs,
    statementTimeoutMs: config.databaseStatementTimeoutMs,
    logger,
  });
}

/**
 * The embedded store's buffer pool. PGlite's Postgres touches its whole pool when it starts, so the
 * pool is resident from the first second: at initdb's 128 MB it was most of the service's memory
 * at rest (304 MiB resident for PGlite alone, 178 MiB with 16 MB). A page not in the pool is read
 * from the operating system's file cache, a system call away: 3,000 single-row inserts and a scan
 * of a 55 MB table took as long either way (docs/adr/0056).
 */
const pgliteSharedBuffers = '16MB';

export function openStore(options: StoreOptions): Db {
  const log = storeLog(options.logger);
  const acquire =
    options.acquireTimeoutMs === undefined ? {} : { acquireConnectionTimeout: options.acquireTimeoutMs };
  if (options.databaseUrl) {
    return knex({
      client: postgresClient(options.logger),
      connection: {
        connectionString: options.databaseUrl,
        // A database that takes no new connection (a host that drops packets) fails the request
        // within the acquire timeout instead of holding it.
        ...(options.acquireTimeoutMs === undefined
          ? {}
          : { connectionTimeoutMillis: options.acquireTimeoutMs }),
        ...(options.statementTimeoutMs === undefined
          ? {}
          : { statement_timeout: options.statementTimeoutMs }),
      },
      pool: { min: 0, max: poolSize },
      ...acquire,
      log,
    });
  }
  if (options.pgliteDir) mkdirSync(options.pgliteDir, { recursive: true });
  // knex-pglite takes its database as `connection.pglite`, which knex's types do not know of.
  const pglite = {
    // Options only in the first argument: PGlite reads none beside a data folder that is undefined,
    // and a test's store then started empty, whatever `pgliteData` said.
    pglite: new PGlite({
      dataDir: options.pgliteDir,
      ...(options.pgliteData ? { loadDataDir: options.pgliteData } : {}),
      startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${pgliteSharedBuffers}`],
    }),
  } as Knex.StaticConnectionConfig;
  return knex({
    client: ClientPgLite,
    dialect: 'postgres',
    connection: pglite,
    ...acquire,
    log,
  } as Knex.Config);
}

/**
 * Resolves once the store can take queries. PGlite takes seconds to start, and that start must
 * not count against the first query's acquire timeout.
 */
export async function storeOpened(db: Db): Promise<void> {
  const { connection } = db.client.config as { connection?: { pglite?: PGlite } };
  await connection?.pglite?.waitReady;
}

export interface ConnectionLimits {
  /** Longest wait for the connection, a new one included; unset: knex's minute. */
  acquireTimeoutMs?: number;
  /** Postgres's `statement_timeout`; unset: none. */
  statementTimeoutMs?: number;
}

/**
 * One connection of a Postgres store's own, outside the requests' pool and its timeouts, with
 * limits of its own. Undefined for PGlite, which has one connection only.
 */
export function openOwnConnection(db: Db, limits: ConnectionLimits): Db | undefined {
  const { client, connection, log } = db.client.config;
  if (typeof connection === 'object' && connection !== null && 'pglite' in connection) return undefined;
  const settings = typeof connection === 'string' ? { connectionString: connection } : connection;
  return knex({
    // The store's own client class: a connection found gone on either makes both pools start afresh.
    client,
    connection: {
      ...settings,
      // node-postgres reads 0 as none.
      connectionTimeoutMillis: limits.acquireTimeoutMs ?? 0,
      statement_timeout: limits.statementTimeoutMs ?? 0,
    },
    pool: { min: 0, max: 1 },
    ...(limits.acquireTimeoutMs === undefined ? {} : { acquireConnectionTimeout: limits.acquireTimeoutMs }),
    log,
  });
}

/** Whether this process has closed the store (`destroy`): then nothing can be served from it. */
export function storeClosed(db: Db): boolean {
  // knex drops its pool on destroy and keeps no other mark of it.
  return (db.client as { pool?: unknown }).pool === undefined;
}

export const migrationConfig: Knex.MigratorConfig = { migrationSource, tableName: 'knex_migrations' };

/** The migrations run with nothing logged (tests); the service runs them through `migrate` (migrator.ts). */
export async function migrateToLatest(db: Db): Promise<void> {
  await migrate(db, { logger: silentLogger });
}

export function embeddedDbDir(dataDir: string): string {
  return join(dataDir, 'db');
}
