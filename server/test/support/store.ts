/**
 * A store for one test file: in-memory PGlite by default; with DATABASE_URL set, a database of
 * its own on that Postgres server, created here and dropped at the end, so runs never share data.
 */
import { randomBytes } from 'node:crypto';
import knex from 'knex';
import { type Db, openStore } from '../../src/store/db.ts';

export interface TestStore {
  db: Db;
  kind: 'pglite' | 'postgres';
  close(): Promise<void>;
}

export async function openTestStore(): Promise<TestStore> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    const db = openStore({});
    return { db, kind: 'pglite', close: () => db.destroy() };
  }
  const name = `svc_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = knex({ client: 'pg', connection: serverUrl, pool: { min: 0, max: 1 } });
  await admin.raw('create database ??', [name]);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const db = openStore({ databaseUrl: url.href });
  return {
    db,
    kind: 'postgres',
    async close() {
      await db.destroy();
      await admin.raw('drop database if exists ?? with (force)', [name]);
      await admin.destroy();
    },
  };
}
