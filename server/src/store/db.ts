/** The SQL store: knex over embedded PGlite (nothing set) or over Postgres (`DATABASE_URL`). */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import knex, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import { migrationSource } from './migrations/index.ts';

export type Db = Knex;

export interface StoreOptions {
  databaseUrl?: string | undefined;
  /** Folder of the embedded database; unset with no `databaseUrl` means in memory (tests). */
  pgliteDir?: string | undefined;
}

export function describeStore(options: StoreOptions): string {
  if (options.databaseUrl) {
    const url = new URL(options.databaseUrl);
    return `postgres ${url.hostname}:${url.port || 5432}${url.pathname}`;
  }
  return options.pgliteDir ? `pglite ${options.pgliteDir}` : 'pglite (in memory)';
}

export function openStore(options: StoreOptions): Db {
  if (options.databaseUrl) {
    return knex({ client: 'pg', connection: options.databaseUrl, pool: { min: 0, max: 10 } });
  }
  if (options.pgliteDir) mkdirSync(options.pgliteDir, { recursive: true });
  return knex({
    client: ClientPgLite,
    dialect: 'postgres',
    connection: options.pgliteDir ? { filename: options.pgliteDir } : {},
  } as Knex.Config);
}

export const migrationConfig: Knex.MigratorConfig = { migrationSource, tableName: 'knex_migrations' };

export async function migrateToLatest(db: Db): Promise<void> {
  await db.migrate.latest(migrationConfig);
}

export function embeddedDbDir(dataDir: string): string {
  return join(dataDir, 'db');
}
