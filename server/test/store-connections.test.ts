/**
 * Postgres ending the service's connections: an administrator's pg_terminate_backend, a database
 * closed to connections, a server shutting down or gone. A request answers 503 with Retry-After
 * while the store cannot serve it, a read that found its pooled connection gone is sent again on a
 * fresh one, and the service serves again on its own once Postgres does.
 */
import assert from 'node:assert/strict';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { tokenCacheTtlMs } from '../src/auth/token-service.ts';
import { openStore } from '../src/store/db.ts';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import { call, eventually, type Reply } from './support/http.ts';
import {
  type PostgresCluster,
  postgresClusterMissing,
  startPostgresCluster,
} from './support/postgres-cluster.ts';
import { startTestService, type TestService } from './support/service.ts';
import { SshKit } from './support/ssh.ts';
import { openTestStore, type TestStore } from './support/store.ts';
import { assertUnavailable, logsSince } from './support/store-outage.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const needsPostgres = process.env.DATABASE_URL
  ? false
  : 'needs Postgres (set DATABASE_URL): the outage is made on the server';

// A request the service never answers fails its test instead of holding the run.
const answered = { timeout: 60_000 };

function me(service: TestService, developer: Developer): Promise<Reply> {
  // The token is looked up in the store again, not answered from the cache.
  service.clock.advance(tokenCacheTtlMs);
  return call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token });
}

function askChallenge(service: TestService, kit: SshKit): Promise<Reply> {
  return call(service.url, 'POST', '/api/v1/auth/challenges', {
    body: { public_key: kit.makeKey().publicLine },
  });
}

/** The process ids of the sessions open on `database`, seen from `admin` (connected elsewhere). */
async function sessionsOn(admin: Knex, database: string): Promise<number[]> {
  const { rows } = await admin.raw('select pid from pg_stat_activity where datname = ?', [database]);
  return rows.map((row: { pid: number }) => row.pid);
}

/** Ends every session on `database` as an administrator does, and waits until they are gone. */
async function terminateSessions(admin: Knex, database: string): Promise<number> {
  const pids = await sessionsOn(admin, database);
  await admin.raw('select pg_terminate_backend(pid) from unnest(?::int[]) as pid', [pids]);
  await eventually('the terminated sessions are gone', async () => {
    const left = await sessionsOn(admin, database);
    return pids.every((pid) => !left.includes(pid));
  });
  return pids.length;
}

describe.skipIf(needsPostgres)(
  `when an administrator ends the service's connections${needsPostgres ? ` (${needsPostgres})` : ''}`,
  () => {
    const kit = new SshKit();
    let proxy: TcpProxy;
    let admin: Knex;
    let store: TestStore;
    let database: string;
    let service: TestService;
    let developer: Developer;

    beforeAll(async () => {
      const server = new URL(process.env.DATABASE_URL ?? '');
      proxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) });
      store = await openTestStore({ port: proxy.port, acquireTimeoutMs: 1000, statementTimeoutMs: 5000 });
      database = new URL(store.databaseUrl ?? '').pathname.slice(1);
      admin = knex({ client: 'pg', connection: process.env.DATABASE_URL, pool: { min: 0, max: 1 } });
      service = await startTestService({}, { store });
      developer = await signUpDeveloper(service.url);
    });
    afterAll(async () => {
      await admin.raw('alter database ?? allow_connections true', [database]);
      await service.stop();
      await store.close();
      await admin.destroy();
      await proxy.close();
      kit.cleanup();
    });

    test(
      'when the idle pooled connections are terminated before the service has read so then reads are served on fresh ones (200, 201)',
      answered,
      async () => {
        // Several connections in the pool, all idle.
        await Promise.all(Array.from({ length: 4 }, () => store.db.raw('select pg_sleep(0.05)')));
        // The server's goodbye reaches the service only when it next sends a statement there: the
        // race that a busy service loses when a request takes a connection Postgres just ended.
        proxy.holdUntilClientSpeaks();
        assert.ok((await terminateSessions(admin, database)) >= 4);
        const from = service.logs.length;

        const probe = await me(service, developer);
        assert.equal(probe.status, 200, JSON.stringify(probe.body));
        assert.equal(probe.body.account.id, developer.accountId);
        const challenge = await askChallenge(service, kit);
        assert.equal(challenge.status, 201, JSON.stringify(challenge.body));

        // Nothing failed, so nothing for the operator to look into.
        const troubles = logsSince(service, from).filter(
          (line) => line.level !== 'info' && line.level !== 'debug',
        );
        assert.deepEqual(troubles, []);
      },
    );

    test(
      "when a write's connection was terminated then it is not sent again: 503 with Retry-After, and the next request is served",
      answered,
      async () => {
        await store.db.raw('select 1');
        proxy.holdUntilClientSpeaks();
        await terminateSessions(admin, database);
        // The exchange of a challenge begins by writing the attempt down (outside a transaction).
        const exchange = await call(service.url, 'POST', '/api/v1/auth/tokens', {
          body: { challenge_id: '0b6bd3ac-4b4f-4b6c-9d39-33ad2a76e5d8', signature: 'AAAA' },
        });
        assertUnavailable(exchange, 'auth/tokens');
        const next = await call(service.url, 'POST', '/api/v1/auth/tokens', {
          body: { challenge_id: '0b6bd3ac-4b4f-4b6c-9d39-33ad2a76e5d8', signature: 'AAAA' },
        });
        assert.equal(next.status, 401, JSON.stringify(next.body));
      },
    );

    test(
      'when the database takes no connections (ALLOW_CONNECTIONS false) and its sessions are terminated then API operations answer 503 with Retry-After, logged at warn',
      answered,
      async () => {
        await admin.raw('alter database ?? allow_connections false', [database]);
        await terminateSessions(admin, database);
        const from = service.logs.length;

        assertUnavailable(await me(service, developer), 'dev/me');
        assertUnavailable(await askChallenge(service, kit), 'auth/challenges');
        assert.equal((await call(service.url, 'GET', '/readyz')).status, 503);

        const refused = logsSince(service, from).filter((line) => line.level !== 'info');
        assert.deepEqual(
          refused.map((line) => line.level),
          ['warn', 'warn'],
          JSON.stringify(refused),
        );
        for (const line of refused) assert.match(line.reason ?? '', /not accepting connections \(55000\)/);
      },
    );

    test('when it takes connections again then the same service serves again', answered, async () => {
      await admin.raw('alter database ?? allow_connections true', [database]);
      assert.equal((await me(service, developer)).status, 200);
      assert.equal((await askChallenge(service, kit)).status, 201);
      assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
    });
  },
);

const clusterMissing = postgresClusterMissing();

describe.skipIf(clusterMissing)(
  `when the Postgres server shuts down and comes back${clusterMissing ? ` (${clusterMissing})` : ''}`,
  () => {
    const kit = new SshKit();
    let cluster: PostgresCluster;
    let store: TestStore;
    let service: TestService;
    let developer: Developer;
    /** A session of the test's own that keeps a smart shutdown waiting. */
    let lingering: Knex;

    beforeAll(async () => {
      cluster = await startPostgresCluster();
      const db = openStore({ databaseUrl: cluster.url, acquireTimeoutMs: 1000, statementTimeoutMs: 5000 });
      store = { db, kind: 'postgres', databaseUrl: cluster.url, close: () => db.destroy() };
      service = await startTestService({}, { store });
      developer = await signUpDeveloper(service.url);
      lingering = knex({ client: 'pg', connection: cluster.url, pool: { min: 0, max: 1 } });
      await lingering.raw('select 1');
    }, 60_000);
    afterAll(async () => {
      await service?.stop();
      await store?.close();
      await lingering?.destroy();
      cluster?.remove();
      kit.cleanup();
    });

    test(
      'when it is shutting down (cannot connect now, 57P03) then API operations answer 503 with Retry-After',
      answered,
      async () => {
        cluster.beginSmartShutdown();
        // The service's sessions end; the test's own keeps the server shutting down.
        await lingering.raw(
          "select pg_terminate_backend(pid) from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()",
        );
        await eventually('only the lingering session is left', async () => {
          const { rows } = await lingering.raw(
            "select count(*)::int as n from pg_stat_activity where backend_type = 'client backend'",
          );
          return rows[0].n === 1;
        });
        const from = service.logs.length;

        assertUnavailable(await me(service, developer), 'dev/me');
        assertUnavailable(await askChallenge(service, kit), 'auth/challenges');
        const refused = logsSince(service, from).filter((line) => line.level !== 'info');
        assert.equal(refused.length, 2, JSON.stringify(refused));
        for (const line of refused) assert.match(line.reason ?? '', /57P03/);
      },
    );

    test(
      'when it has stopped (connection refused) then API operations answer 503 with Retry-After',
      answered,
      async () => {
        await lingering.destroy();
        await eventually('the server has stopped', () => cluster.stopped(), 30_000);
        assertUnavailable(await me(service, developer), 'dev/me');
        assertUnavailable(await askChallenge(service, kit), 'auth/challenges');
      },
    );

    test('when it has started again then the same service serves again', answered, async () => {
      cluster.start();
      assert.equal((await me(service, developer)).status, 200);
      assert.equal((await askChallenge(service, kit)).status, 201);
    });
  },
);
