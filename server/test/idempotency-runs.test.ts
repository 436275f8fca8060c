/**
 * The Idempotency-Key mechanism on its own, over a real store and real HTTP, with an operation
 * whose handler the test holds and releases at will (a stand-in for transferCar): two requests
 * with one key at once, failures that must let a retry run, refusals that must not, and a run
 * that hangs past the point where its key is taken over. What the real operations do with a key
 * is in idempotency.test.ts.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, beforeEach, describe, test } from 'vitest';
import { type OperationId, routes } from '../../generated/routes.ts';
import type { Principal } from '../src/auth/principal.ts';
import { ForbiddenError, TooManyRequestsError, UnavailableError, unauthorized } from '../src/errors.ts';
import { bindHandlers, type Handlers, type OperationResponse } from '../src/http/bind-handlers.ts';
import { problemMiddleware } from '../src/http/errors.ts';
import { withIdempotencyKeys } from '../src/http/idempotency.ts';
import { ProblemError } from '../src/http/problem.ts';
import { createIdempotencyService, staleRunMs } from '../src/idempotency/idempotency-service.ts';
import { silentLogger } from '../src/logger.ts';
import { migrateToLatest } from '../src/store/db.ts';
import { call, eventually, type Reply } from './support/http.ts';
import { TestClock } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';

type Answer = OperationResponse<'transferCar'>;

/** A promise the test settles. */
function held<T>() {
  let settle!: (value: T | Promise<T>) => void;
  const promise = new Promise<T>((resolve) => {
    settle = resolve;
  });
  return { promise, settle };
}

const carFor = (ownerId: string) => ({
  device_id: 'brand_b:held-car',
  brand: 'brand_b' as const,
  owner_id: ownerId,
  paired_at: '2026-11-21T10:00:00.000Z',
  provisioned_at: '2026-11-20T08:00:00.000Z',
});

describe('Idempotency-Key runs', () => {
  let store: TestStore;
  let server: ReturnType<ReturnType<typeof express>['listen']>;
  let base = '';
  const clock = new TestClock();
  const accounts = { ada: randomUUID(), bob: randomUUID() };

  /** What the operation does this time; each run is counted. */
  let operation: (run: number) => Promise<Answer>;
  let runs = 0;

  const transfer = (
    who: keyof typeof accounts,
    key: string,
    body: unknown = { to_user: accounts.bob },
    deviceId = 'brand_b:held-car',
  ): Promise<Reply> =>
    call(base, 'POST', `/api/v1/cars/${encodeURIComponent(deviceId)}/transfer`, {
      token: who,
      body,
      headers: { 'idempotency-key': key },
    });

  beforeAll(async () => {
    store = await openTestStore();
    await migrateToLatest(store.db);
    await store.db('accounts').insert(
      Object.entries(accounts).map(([name, id]) => ({
        id,
        email: `${name}@example.com`,
        name,
        created_at: clock.clock(),
      })),
    );
    const untested = (operationId: OperationId) => () => {
      throw new Error(`${operationId} is not part of this test`);
    };
    const handlers = {
      ...(Object.fromEntries(
        Object.keys(routes).map((id) => [id, untested(id as OperationId)]),
      ) as unknown as Handlers),
      transferCar: () => operation(++runs),
    } satisfies Handlers;
    const keys = createIdempotencyService({ db: store.db, clock: clock.clock });
    const app = express();
    app.use(express.json());
    app.use(
      bindHandlers(express.Router(), withIdempotencyKeys(handlers, keys), {
        authenticate: async (req) => {
          const name = req.get('authorization')?.replace('Bearer ', '') as keyof typeof accounts;
          if (!accounts[name]) throw unauthorized();
          return { accountId: accounts[name], email: `${name}@example.com` } as Principal;
        },
      }),
    );
    app.use(problemMiddleware({ logger: silentLogger, jsonLimitBytes: 1024 }));
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await store?.close();
  });
  beforeEach(() => {
    runs = 0;
    operation = async () => ({ status: 200, body: carFor(accounts.bob) });
  });

  test('when two requests with one key come at once then one runs and the other is 409 idempotency_key_in_use; once done, a retry gets its answer', async () => {
    const gate = held<void>();
    const entered = held<void>();
    operation = async () => {
      entered.settle();
      await gate.promise;
      return { status: 200, body: carFor(accounts.bob) };
    };
    const first = transfer('ada', 'at-once');
    try {
      await entered.promise;
      const second = await transfer('ada', 'at-once');
      assert.equal(second.status, 409, JSON.stringify(second.body));
      assert.equal(second.body.code, 'idempotency_key_in_use');
    } finally {
      gate.settle();
    }
    const answered = await first;
    assert.equal(answered.status, 200);
    assert.equal(answered.headers['idempotent-replayed'], undefined);
    const retry = await transfer('ada', 'at-once');
    assert.equal(retry.status, 200);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.deepEqual(retry.body, answered.body);
    assert.equal(runs, 1);
  });

  test('when five requests with one key race then exactly one runs: the four others are 409', async () => {
    const gate = held<void>();
    operation = async () => {
      await gate.promise;
      return { status: 200, body: carFor(accounts.bob) };
    };
    const answered: Reply[] = [];
    const racing = Array.from({ length: 5 }, () =>
      transfer('ada', 'race').then((reply) => {
        answered.push(reply);
        return reply;
      }),
    );
    try {
      await eventually('four of the five are answered', () => answered.length === 4);
      assert.deepEqual(
        answered.map((reply) => reply.body.code),
        Array(4).fill('idempotency_key_in_use'),
      );
      assert.equal(runs, 1);
    } finally {
      gate.settle();
    }
    const statuses = (await Promise.all(racing)).map((reply) => reply.status).sort();
    assert.deepEqual(statuses, [200, 409, 409, 409, 409]);
  });

  test('when the operation fails on the service side (500, 501, 503) then nothing is kept and a retry with the key runs again', async () => {
    const failures: (() => never)[] = [
      () => {
        throw new Error('a bug');
      },
      () => {
        throw new ProblemError(501, 'not_implemented', 'Not yet.');
      },
      () => {
        throw new UnavailableError('broker_unavailable', 'The broker does not answer.');
      },
    ];
    for (const [i, fail] of failures.entries()) {
      const key = `fails-${i}`;
      operation = async (run) => (run === 1 ? fail() : { status: 200, body: carFor(accounts.bob) });
      runs = 0;
      const failed = await transfer('ada', key);
      assert.ok(failed.status >= 500, `${i}: ${failed.status}`);
      assert.equal(await store.db('idempotency_keys').where({ key }).first(), undefined);
      const retry = await transfer('ada', key);
      assert.equal(retry.status, 200, `${i}: ${JSON.stringify(retry.body)}`);
      assert.equal(retry.headers['idempotent-replayed'], undefined);
      assert.equal(runs, 2);
    }
  });

  test('when the operation refuses (a 4xx) then the refusal is kept and a retry gets it again without running; "try later" (429) is not kept', async () => {
    operation = async () => {
      throw new ForbiddenError('not_owner', 'Only the owner may transfer it.');
    };
    const refused = await transfer('ada', 'refused');
    assert.equal(refused.status, 403);
    operation = async () => ({ status: 200, body: carFor(accounts.bob) });
    const retry = await transfer('ada', 'refused');
    assert.equal(retry.status, 403);
    assert.match(String(retry.headers['content-type']), /^application\/problem\+json/);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.deepEqual(retry.body, refused.body);
    assert.equal(runs, 1);

    operation = async (run) => {
      if (run === 2) throw new TooManyRequestsError('too_many', 'Slow down.', 7);
      return { status: 200, body: carFor(accounts.bob) };
    };
    const limited = await transfer('ada', 'limited');
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '7');
    const after = await transfer('ada', 'limited');
    assert.equal(after.status, 200);
    assert.equal(runs, 3);
  });

  test('when the same key comes with another body or another path then 422 idempotency_key_reused and nothing runs', async () => {
    assert.equal(
      (await transfer('ada', 'one-request', { to_user: accounts.bob, brand: 'brand_b' })).status,
      200,
    );
    const otherBody = await transfer('ada', 'one-request', { to_user: accounts.ada });
    assert.equal(otherBody.status, 422, JSON.stringify(otherBody.body));
    assert.equal(otherBody.body.code, 'idempotency_key_reused');
    const otherPath = await transfer(
      'ada',
      'one-request',
      { to_user: accounts.bob, brand: 'brand_b' },
      'brand_b:another-car',
    );
    assert.equal(otherPath.status, 422);
    assert.equal(otherPath.body.code, 'idempotency_key_reused');
    // The same body with its keys in another order is the same request.
    const reordered = await transfer('ada', 'one-request', { brand: 'brand_b', to_user: accounts.bob });
    assert.equal(reordered.headers['idempotent-replayed'], 'true');
    assert.equal(runs, 1);
  });

  test("when another account sends the same key then it is that account's own key: its request runs", async () => {
    assert.equal((await transfer('ada', 'shared-key')).status, 200);
    const bobs = await transfer('bob', 'shared-key');
    assert.equal(bobs.status, 200);
    assert.equal(bobs.headers['idempotent-replayed'], undefined);
    const bobsOther = await transfer('bob', 'shared-key', { to_user: accounts.ada });
    assert.equal(bobsOther.body.code, 'idempotency_key_reused');
    assert.equal(runs, 2);
  });

  test("when a run hangs then its key is 409 for 5 minutes, then taken over by a retry; the hung run's late answer is not the one kept", async () => {
    const gate = held<void>();
    const entered = held<void>();
    operation = async (run) => {
      if (run === 1) {
        entered.settle();
        await gate.promise;
        return { status: 200, body: carFor(accounts.ada) };
      }
      return { status: 200, body: carFor(accounts.bob) };
    };
    const hung = transfer('ada', 'hangs');
    try {
      await entered.promise;
      clock.advance(staleRunMs);
      assert.equal((await transfer('ada', 'hangs')).status, 409);
      clock.advance(1);
      // Another request with the stale key is still refused: the key is bound to its request.
      const other = await transfer('ada', 'hangs', { to_user: accounts.ada });
      assert.equal(other.body.code, 'idempotency_key_reused');
      const takeover = await transfer('ada', 'hangs');
      assert.equal(takeover.status, 200);
      assert.equal(takeover.body.owner_id, accounts.bob);
    } finally {
      gate.settle();
    }
    assert.equal((await hung).body.owner_id, accounts.ada);
    const retry = await transfer('ada', 'hangs');
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.body.owner_id, accounts.bob);
    assert.equal(runs, 2);
  });

  test('when an answer had a Location header then the replay has it too, but not the headers of the moment', async () => {
    operation = async () => ({
      status: 200,
      body: carFor(accounts.bob),
      headers: { Location: '/api/v1/cars/brand_b%3Aheld-car', 'X-Request-Moment': 'first' },
    });
    const first = await transfer('ada', 'with-location');
    assert.equal(first.headers['x-request-moment'], 'first');
    const retry = await transfer('ada', 'with-location');
    assert.equal(retry.headers.location, '/api/v1/cars/brand_b%3Aheld-car');
    assert.equal(retry.headers['x-request-moment'], undefined);
    assert.equal(runs, 1);
  });

  test('when no key is sent then every request runs', async () => {
    const plain = () =>
      call(base, 'POST', '/api/v1/cars/brand_b%3Aheld-car/transfer', {
        token: 'ada',
        body: { to_user: accounts.bob },
      });
    assert.equal((await plain()).status, 200);
    assert.equal((await plain()).status, 200);
    assert.equal(runs, 2);
  });
});
