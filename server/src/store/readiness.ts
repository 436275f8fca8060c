/**
 * Whether the store answers, known within about a second whatever the load: on Postgres over a
 * connection of its own, so a pool held by slow requests cannot hold the check too; on PGlite
 * (one connection for everything) by giving up after that second.
 */
import { type Db, openOwnConnection, storeClosed } from './db.ts';

export const readinessTimeoutMs = 1000;

export interface StoreReadiness {
  /** True when the store answered `sql` (by default `select 1`) within `readinessTimeoutMs`. */
  check(sql?: string): Promise<boolean>;
  close(): Promise<void>;
}

export async function within<T>(ms: number, work: PromiseLike<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

export function createStoreReadiness(db: Db): StoreReadiness {
  let own: Db | undefined;
  const connection = () => {
    own ??= openOwnConnection(db, {
      acquireTimeoutMs: readinessTimeoutMs,
      statementTimeoutMs: readinessTimeoutMs,
    });
    return own ?? db;
  };
  return {
    async check(sql = 'select 1') {
      if (storeClosed(db)) return false;
      try {
        await within(readinessTimeoutMs, connection().raw(sql));
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      await own?.destroy();
      own = undefined;
    },
  };
}
