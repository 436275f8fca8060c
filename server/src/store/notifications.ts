/**
 * Postgres notifications (`LISTEN`/`NOTIFY`), the way work written on one replica wakes the
 * others at once (graphile-worker's habit): a `NOTIFY` sent inside a transaction reaches the
 * listeners when it commits, and never when it rolls back.
 *
 * A listener holds a connection of its own, outside the pool (a pooled connection would be handed
 * to requests). When it is lost (a restart, a failover) it connects again, after a pause that
 * grows to `maxRetryMs`, and says `heard` once it listens again: what was notified meanwhile was
 * lost, so the listener looks for itself. A store outage is the requests' to report (each logs
 * its 503 at warn); the listener warns only when it stays lost for `quietMs`, which it should not
 * while the store answers.
 */
import pg from 'pg';
import type { Logger } from '../logger.ts';
import type { Db } from './db.ts';

const firstRetryMs = 500;
const maxRetryMs = 10_000;
const quietMs = 30_000;

export interface Listening {
  close(): Promise<void>;
}

/** Sends `payload` on `channel` when the transaction `trx` commits (at once outside one). */
export async function notify(trx: Db, channel: string, payload: string): Promise<void> {
  await trx.raw('select pg_notify(?, ?)', [channel, payload]);
}

/** Whether the store is Postgres (PGlite, in one process, has no one else to tell). */
export function hasNotifications(db: Db): boolean {
  const { connection } = db.client.config;
  return !(typeof connection === 'object' && connection !== null && 'pglite' in connection);
}

/**
 * Calls `heard(payload)` for each notification on `channel`, and with no payload each time the
 * listener (re)connects. Postgres only (see `hasNotifications`).
 */
export function listen(
  db: Db,
  channel: string,
  heard: (payload: string | undefined) => void,
  logger: Logger,
): Listening {
  const { connection } = db.client.config;
  const settings: pg.ClientConfig =
    typeof connection === 'string'
      ? { connectionString: connection }
      : { ...(connection as pg.ClientConfig) };
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let retryMs = firstRetryMs;
  /** Since when the listener has been lost (Date.now()), and whether that was said at warn. */
  let lostSince: number | undefined;
  let warned = false;

  function again(): void {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, retryMs);
    retry.unref();
    retryMs = Math.min(retryMs * 2, maxRetryMs);
  }

  async function connect(): Promise<void> {
    const next = new pg.Client({ ...settings, statement_timeout: 0 });
    client = next;
    let ended = false;
    const gone = (error?: Error) => {
      if (ended) return;
      ended = true;
      next.removeAllListeners('notification');
      next.end().catch(() => {});
      if (closed) return;
      const detail = { channel, error: error?.message };
      if (lostSince === undefined) {
        lostSince = Date.now();
        logger.debug('store: notifications lost; listening again once the database answers', detail);
      } else if (!warned && Date.now() - lostSince >= quietMs) {
        warned = true;
        logger.warn(
          'store: notifications lost for 30 s: commands made on other replicas wait for the command sweep',
          detail,
        );
      }
      again();
    };
    next.on('error', gone);
    next.on('end', () => gone());
    next.on('notification', (message) => {
      if (message.channel === channel) heard(message.payload);
    });
    try {
      await next.connect();
      await next.query(`listen ${pg.escapeIdentifier(channel)}`);
    } catch (error) {
      gone(error as Error);
      return;
    }
    if (closed) {
      await next.end().catch(() => {});
      return;
    }
    retryMs = firstRetryMs;
    if (warned) logger.info('store: notifications heard again', { channel });
    lostSince = undefined;
    warned = false;
    heard(undefined);
  }

  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
