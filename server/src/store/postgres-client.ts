/**
 * knex's Postgres client, made to survive connections that Postgres ended while they sat in the
 * pool (an administrator's pg_terminate_backend, a restart, a cut network).
 *
 * - A connection on which a statement found its connection gone is never used again, and neither
 *   is any pooled connection that has not served a statement since: the pool makes fresh ones.
 *   (knex drops a connection only once node-postgres has seen its end, which a busy process may
 *   see only when it sends the next statement.)
 * - A read built with the query builder (`select`, `first`, `pluck`) outside a transaction that
 *   fails so is sent once more, on a fresh connection. Nothing else is: a write may have been
 *   committed before its connection went, and a statement inside a transaction belongs to a
 *   transaction that is gone with its connection. Their requests answer 503 (store/unavailable.ts).
 */
import { createRequire } from 'node:module';
import type { Knex } from 'knex';
import type { Logger } from '../logger.ts';
import { connectionLostReason } from './unavailable.ts';

const require = createRequire(import.meta.url);
const KnexPostgresClient = require('knex/lib/dialects/postgres/index.js') as typeof Knex.Client;

/** Query builder methods that only read: sending one again changes nothing. */
const readMethods = new Set(['select', 'first', 'pluck']);

interface PooledConnection {
  /** When this connection last proved alive (made, or a statement answered), on the client's count. */
  svcAliveAt?: number;
}

/** A knex client class for Postgres; each store makes its own, since the pool's memory is in it. */
export function postgresClient(logger: Logger | undefined): typeof Knex.Client {
  /** A count that orders "proved alive" and "found a connection gone". */
  let moment = 0;
  /** When a statement last found its connection gone; pooled connections older than it are dropped. */
  let lostAt = 0;
  /** Failures of statements that were sent on a connection found gone (not of making one). */
  const sentOnLostConnection = new WeakSet<object>();

  return class PostgresClient extends KnexPostgresClient {
    override async acquireRawConnection(): Promise<PooledConnection> {
      const connection: PooledConnection = await super.acquireRawConnection();
      connection.svcAliveAt = ++moment;
      return connection;
    }

    override async validateConnection(connection: PooledConnection): Promise<boolean> {
      return (connection.svcAliveAt ?? 0) > lostAt;
    }

    // Also the query of a transaction's client, which knex makes from this prototype.
    override query(connection: PooledConnection & { __knex__disposed?: unknown }, obj: unknown) {
      return (super.query(connection, obj) as Promise<unknown>).then(
        (response) => {
          connection.svcAliveAt = ++moment;
          return response;
        },
        (error: unknown) => {
          if (connectionLostReason(error)) {
            lostAt = ++moment;
            sentOnLostConnection.add(error as object);
            connection.__knex__disposed ??= error;
          }
          throw error;
        },
      );
    }

    override runner(builder: { _method?: string }) {
      const runner = super.runner(builder);
      // A transaction's client is marked `transacting`.
      const inTransaction = (this as { transacting?: boolean }).transacting === true;
      if (inTransaction || !readMethods.has(builder._method ?? '')) return runner;
      const run = runner.run.bind(runner);
      runner.run = async () => {
        try {
          return await run();
        } catch (error) {
          // A connection that could not be made is no reason to try making another at once.
          if (!sentOnLostConnection.has(error as object)) throw error;
          const reason = connectionLostReason(error);
          logger?.info('store connection lost: the read is sent again on a fresh connection', {
            reason,
          });
          return super.runner(builder).run();
        }
      };
      return runner;
    }
  };
}
