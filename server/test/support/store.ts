/**
 * A store for one test file: in-memory PGlite by default; with DATABASE_URL set, a database of
 * its own on that Postgres server, created here and dropped at the end, so runs never share data.
 * Either starts migrated, from the run's one migrated database (scripts/test/store-template.global.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import knex from 'knex';
import { inject } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { type Db, openStore, storeOpened } from '../../src/store/db.ts';

/** The run's one migrated database (scripts/test/store-template.global.ts provides it). */
export interface StoreTemplate {
  /** `dumpDataDir` of a migrated PGlite database, uncompressed tar. */
  pgliteDump: string;
  /** The same database unpacked: a data folder's `db` copied from it starts migrated. */
  pgliteDir: string;
  /** With DATABASE_URL: the migrated database each test file's database is made from. */
  postgresTemplate?: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    storeTemplate: StoreTemplate;
  }
}

export interface TestStore {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** The test database's own URL, straight to Postgres (not through `port`); unset on PGlite. */
  databaseUrl?: string;
  close(): Promise<void>;
}

export interface TestStoreOptions {
  acquireTimeoutMs?: number;
  statementTimeoutMs?: number;
  /** Reach Postgres on this local port instead (a test's proxy in front of it). */
  port?: number;
  /** An empty database, no migration run (the migrations' own tests). */
  empty?: boolean;
  /** A database on this Postgres server, whatever DATABASE_URL says (tests that need Postgres). */
  serverUrl?: string;
}

let pgliteData: Blob | undefined;
/** The migrated PGlite database, read once per test file. */
function migratedPglite(): Blob {
  pgliteData ??= new Blob([readFileSync(inject('storeTemplate').pgliteDump)]);
  return pgliteData;
}

/** The Postgres server of tests that need one: DATABASE_URL's, else the machine's own. */
export const postgresServerUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export async function openTestStore(options: TestStoreOptions = {}): Promise<TestStore> {
  const defaults = loadConfig({});
  const timeouts = {
    acquireTimeoutMs: options.acquireTimeoutMs ?? defaults.databaseAcquireTimeoutMs,
    statementTimeoutMs: options.statementTimeoutMs ?? defaults.databaseStatementTimeoutMs,
  };
  const serverUrl = options.serverUrl ?? process.env.DATABASE_URL;
  if (!serverUrl) {
    const db = openStore({ ...timeouts, pgliteData: options.empty ? undefined : migratedPglite() });
    await storeOpened(db);
    return { db, kind: 'pglite', close: () => db.destroy() };
  }
  const name = `svc_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = knex({ client: 'pg', connection: serverUrl, pool: { min: 0, max: 1 } });
  const template = options.empty ? undefined : inject('storeTemplate').postgresTemplate;
  if (template) await admin.raw('create database ?? template ??', [name, template]);
  else await admin.raw('create database ??', [name]);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const databaseUrl = url.href;
  if (options.port !== undefined) {
    url.hostname = '127.0.0.1';
    url.port = String(options.port);
  }
  const db = openStore({ databaseUrl: url.href, ...timeouts });
  return {
    db,
    kind: 'postgres',
    databaseUrl,
    async close() {
      await db.destroy();
      await admin.raw('drop database if exists ?? with (force)', [name]);
      await admin.destroy();
    },
  };
}

export interface RowLock {
  /** Postgres: waits until `count` sessions wait on a lock in the test database; their process ids. */
  waiters(count: number): Promise<number[]>;
  /** Postgres: ends those sessions as an administrator would (`pg_terminate_backend`). */
  terminate(pids: number[]): Promise<void>;
  release(): Promise<void>;
}

/**
 * Holds an account's row `FOR UPDATE` in an open transaction, so that whatever writes a row
 * referring to the account waits. On Postgres over a connection of its own, straight to the
 * server; on PGlite that transaction holds the one connection, so every query waits for it.
 */
export function lockAccountRow(store: TestStore, accountId: string): Promise<RowLock> {
  return lockRow(store, 'select id from accounts where id = ? for update', [accountId]);
}

/** Holds a car's row `FOR UPDATE`, as lockAccountRow does: whatever changes its owner waits. */
export function lockCarRow(store: TestStore, deviceId: string): Promise<RowLock> {
  return lockRow(store, 'select device_id from cars where device_id = ? for update', [deviceId]);
}

async function lockRow(store: TestStore, lockingSelect: string, bindings: string[]): Promise<RowLock> {
  const other = store.databaseUrl
    ? knex({ client: 'pg', connection: store.databaseUrl, pool: { min: 0, max: 2 } })
    : undefined;
  const trx = await (other ?? store.db).transaction();
  await trx.raw(lockingSelect, bindings);
  let released: Promise<void> | undefined;
  return {
    async waiters(count) {
      if (!other) return [];
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
        const { rows } = await other.raw(
          "select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        if (rows.length >= count) return rows.map((row: { pid: number }) => row.pid);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`fewer than ${count} sessions waited on the lock within 10 s`);
    },
    async terminate(pids) {
      await other?.raw('select pg_terminate_backend(pid) from unnest(?::int[]) as pid', [pids]);
    },
    release() {
      released ??= (async () => {
        await trx.rollback();
        await other?.destroy();
      })();
      return released;
    },
  };
}
