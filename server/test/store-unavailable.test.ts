import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { tokenCacheTtlMs } from '../src/auth/token-service.ts';
import { poolSize } from '../src/store/db.ts';
import { connectionLostReason, storeUnavailableReason } from '../src/store/unavailable.ts';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import { call, type Reply } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { SshKit } from './support/ssh.ts';
import { lockAccountRow, openTestStore, type TestStore } from './support/store.ts';
import { assertUnavailable, logsSince } from './support/store-outage.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const needsPostgres = process.env.DATABASE_URL
  ? false
  : 'needs Postgres (set DATABASE_URL): the outage is made on the wire between the service and the server';

// A request the service never answers fails its test instead of holding the run.
const answered = { timeout: 60_000 };

function addKey(service: TestService, developer: Developer, publicKey: string): Promise<Reply> {
  return call(service.url, 'POST', '/api/v1/dev/keys', {
    token: developer.token,
    body: { public_key: publicKey },
  });
}

describe.skipIf(needsPostgres)(
  `when the database is unreachable${needsPostgres ? ` (${needsPostgres})` : ''}`,
  () => {
    const kit = new SshKit();
    let proxy: TcpProxy;
    let store: TestStore;
    let service: TestService;
    let developer: Developer;

    beforeAll(async () => {
      const server = new URL(process.env.DATABASE_URL ?? '');
      proxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) });
      store = await openTestStore({ port: proxy.port, acquireTimeoutMs: 1000, statementTimeoutMs: 5000 });
      service = await startTestService({}, { store });
      developer = await signUpDeveloper(service.url);
    });
    afterAll(async () => {
      await service.stop();
      await store.close();
      await proxy.close();
      kit.cleanup();
    });

    test(
      'when it refuses connections then API operations answer 503 service_unavailable with Retry-After, each logged once at warn',
      answered,
      async () => {
        await proxy.refuse();
        // The token is looked up in the store again, not answered from the cache.
        service.clock.advance(tokenCacheTtlMs);
        const from = service.logs.length;

        assertUnavailable(
          await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token }),
          'dev/me',
        );
        const challenge = await call(service.url, 'POST', '/api/v1/auth/challenges', {
          body: { public_key: kit.makeKey().publicLine },
        });
        assertUnavailable(challenge, 'auth/challenges');
        const readiness = await call(service.url, 'GET', '/readyz');
        assert.equal(readiness.status, 503);
        assert.deepEqual(readiness.body, {
          status: 'not_ready',
          checks: { store: 'failing', key_value_store: 'failing', mqtt_bridge: 'ok' },
        });

        const logged = logsSince(service, from);
        assert.deepEqual(
          logged.map((line) => line.level),
          ['warn', 'warn'],
          'one warn line per refused request, no error',
        );
        assert.ok(
          logged.every((line) => line.reason?.includes('ECONNREFUSED')),
          JSON.stringify(logged),
        );
      },
    );

    test(
      'when it takes connections again then the same service answers again, without a restart',
      answered,
      async () => {
        await proxy.restore();
        assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
        const me = await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token });
        assert.equal(me.status, 200, JSON.stringify(me.body));
        const challenge = await call(service.url, 'POST', '/api/v1/auth/challenges', {
          body: { public_key: kit.makeKey().publicLine },
        });
        assert.equal(challenge.status, 201, JSON.stringify(challenge.body));
      },
    );

    test(
      'when the connection of a request in flight is cut then that request answers 503, and the next one is served',
      answered,
      async () => {
        const lock = await lockAccountRow(store, developer.accountId);
        try {
          const adding = addKey(service, developer, kit.makeKey().publicLine);
          await lock.waiters(1);
          proxy.cut();
          assertUnavailable(await adding, 'dev/keys cut off');
        } finally {
          await lock.release();
        }
        assert.equal((await addKey(service, developer, kit.makeKey().publicLine)).status, 201);
      },
    );

    test(
      'when an administrator terminates the session of a request in flight then it answers 503, and the next one is served',
      answered,
      async () => {
        const lock = await lockAccountRow(store, developer.accountId);
        const from = service.logs.length;
        try {
          const adding = addKey(service, developer, kit.makeKey().publicLine);
          await lock.terminate(await lock.waiters(1));
          assertUnavailable(await adding, 'dev/keys terminated');
        } finally {
          await lock.release();
        }
        assert.match(logsSince(service, from)[0]?.reason ?? '', /57P01/);
        assert.equal((await addKey(service, developer, kit.makeKey().publicLine)).status, 201);
      },
    );
  },
);

describe('when the store is too slow', () => {
  const kit = new SshKit();
  let service: TestService;
  let developer: Developer;

  beforeAll(async () => {
    service = await startTestService({
      DATABASE_ACQUIRE_TIMEOUT: '500ms',
      DATABASE_STATEMENT_TIMEOUT: '2s',
    });
    developer = await signUpDeveloper(service.url);
    // Signed in: the token is checked once here and then answered from the cache.
    assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token })).status, 200);
  });
  afterAll(async () => {
    await service.stop();
    kit.cleanup();
  });

  test(
    'when more requests than the pool holds wait on a locked row then each answers 503 in time, and /readyz answers while the row is still locked',
    answered,
    async () => {
      const keys = Array.from({ length: poolSize + 2 }, () => kit.makeKey().publicLine);
      const postgres = service.store.kind === 'postgres';
      // Every connection of the pool open beforehand, so the waits below are on the lock alone.
      if (postgres) await Promise.all(keys.map(() => service.store.db.raw('select pg_sleep(0.05)')));
      const from = service.logs.length;

      const lock = await lockAccountRow(service.store, developer.accountId);
      // Should a request never time out, the lock goes after 20 s and the assertions below fail.
      let released = false;
      const lastResort = setTimeout(() => {
        released = true;
        void lock.release();
      }, 20_000);
      try {
        const adding = keys.map((key) => addKey(service, developer, key));
        if (postgres) await lock.waiters(poolSize);

        const readiness = await call(service.url, 'GET', '/readyz');
        assert.equal(released, false, '/readyz answered only once the row was released');
        assert.ok([200, 503].includes(readiness.status), `/readyz ${readiness.status}`);

        const replies = await Promise.all(adding);
        assert.equal(released, false, 'the requests were answered only once the row was released');
        replies.forEach((reply, index) => {
          assertUnavailable(reply, `request ${index}`);
        });
      } finally {
        clearTimeout(lastResort);
        await lock.release();
      }

      const logged = logsSince(service, from);
      assert.ok(
        logged.every((line) => line.level === 'warn'),
        JSON.stringify(logged),
      );
      const reasons = new Set(logged.map((line) => line.reason));
      assert.ok(reasons.has('timed out waiting for a connection'), [...reasons].join(', '));
      if (postgres) assert.ok(reasons.has('statement timeout (57014)'), [...reasons].join(', '));
    },
  );

  test('when the row is free again then the same service serves again and is ready', answered, async () => {
    assert.equal((await addKey(service, developer, kit.makeKey().publicLine)).status, 201);
    assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
  });
});

describe('when a query fails for a reason of our own', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
    // A table the sign-in needs is gone: no outage, a fault here.
    await service.store.db.schema.dropTable('sign_in_failures');
  });
  afterAll(() => service.stop());

  test('then it is still 500 internal_error, logged as an error', async () => {
    const from = service.logs.length;
    const kit = new SshKit();
    try {
      const challenge = await call(service.url, 'POST', '/api/v1/auth/challenges', {
        body: { public_key: kit.makeKey().publicLine },
      });
      assert.equal(challenge.status, 500);
      assert.equal(challenge.body.code, 'internal_error');
      assert.equal(challenge.headers['retry-after'], undefined);
    } finally {
      kit.cleanup();
    }
    assert.deepEqual(
      logsSince(service, from).map((line) => line.level),
      ['error'],
    );
  });
});

describe('which failures mean the store is unavailable', () => {
  // Failures that the tests above cannot bring about on demand, as the drivers report them.
  const unavailable: [string, unknown][] = [
    [
      'a statement timeout (57014)',
      { code: '57014', message: 'canceling statement due to statement timeout' },
    ],
    ['a crash of the server (57P02)', { code: '57P02' }],
    [
      'a server starting or stopping (57P03)',
      { code: '57P03', message: 'the database system is starting up' },
    ],
    ['a connection failure (08006)', { code: '08006' }],
    ['a refused connection (08001)', { code: '08001' }],
    ['no connection slot left (53300)', { code: '53300', message: 'sorry, too many clients already' }],
    ['a reset socket', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['a broken pipe', Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })],
    ['a connection that timed out', new Error('Connection terminated due to connection timeout')],
    ['a connection that ended', new Error('Connection terminated unexpectedly')],
    [
      'a connection that ended under a statement (knex names the statement first)',
      new Error('select * from "accounts" where "id" = $1 - Connection terminated unexpectedly'),
    ],
    [
      'a database closed to connections (FATAL 55000)',
      {
        code: '55000',
        severity: 'FATAL',
        message: 'database "svc" is not currently accepting connections',
      },
    ],
    ['an idle session ended by the server (57P05)', { code: '57P05' }],
    [
      'every address of a name refusing',
      new AggregateError([
        Object.assign(new Error('connect ECONNREFUSED ::1:5432'), { code: 'ECONNREFUSED' }),
        Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      ]),
    ],
  ];
  for (const [what, error] of unavailable) {
    test(`when the store fails with ${what} then it is unavailable (503)`, () => {
      assert.ok(storeUnavailableReason(error));
    });
  }

  const faults: [string, unknown][] = [
    ['a missing table (42P01)', { code: '42P01' }],
    ['a unique violation (23505)', { code: '23505' }],
    ['a syntax error (42601)', { code: '42601' }],
    ['a serialization failure (40001)', { code: '40001' }],
    [
      'a statement in the wrong state (ERROR 55000)',
      {
        code: '55000',
        severity: 'ERROR',
        message: 'currval of sequence "s" is not yet defined in this session',
      },
    ],
    ['a message that merely mentions a lost connection', new Error('Connection terminated unexpectedly?')],
    ['a missing file', Object.assign(new Error('ENOENT'), { code: 'ENOENT' })],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
  ];
  for (const [what, error] of faults) {
    test(`when the store fails with ${what} then it is a fault of ours (500)`, () => {
      assert.equal(storeUnavailableReason(error), undefined);
    });
  }
});

describe('which failures mean the connection is gone (a read may be sent again on a fresh one)', () => {
  const lost: [string, unknown][] = [
    ['a session terminated by an administrator (57P01)', { code: '57P01' }],
    ['a connection failure (08006)', { code: '08006' }],
    ['a reset socket', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['a connection that ended under a statement', new Error('select 1 - Connection terminated unexpectedly')],
  ];
  for (const [what, error] of lost) {
    test(`when a statement fails with ${what} then its connection is gone`, () => {
      assert.ok(connectionLostReason(error));
    });
  }
  const kept: [string, unknown][] = [
    ['a statement timeout (57014)', { code: '57014' }],
    ['no connection slot left (53300)', { code: '53300' }],
    ['a database closed to connections (FATAL 55000)', { code: '55000', severity: 'FATAL' }],
    ['a unique violation (23505)', { code: '23505' }],
  ];
  for (const [what, error] of kept) {
    test(`when a statement fails with ${what} then it is no lost connection: nothing is sent again`, () => {
      assert.equal(connectionLostReason(error), undefined);
    });
  }
});
