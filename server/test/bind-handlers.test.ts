import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type OperationId, routes } from '../../generated/routes.ts';
import type { Principal } from '../src/auth/principal.ts';
import { unauthorized } from '../src/errors.ts';
import { type BindOptions, bindHandlers, type Handlers } from '../src/http/bind-handlers.ts';
import { problemMiddleware } from '../src/http/errors.ts';
import { silentLogger } from '../src/logger.ts';

// A handler this test does not care about fails loudly.
function untested(operationId: OperationId) {
  return () => {
    throw new Error(`${operationId} is not part of this test`);
  };
}

const calls: { operationId: string; params: unknown; body: unknown }[] = [];

const handlers = {
  ...(Object.fromEntries(
    Object.keys(routes).map((id) => [id, untested(id as OperationId)]),
  ) as unknown as Handlers),
  getHealth: (_request, { principal }) => {
    seenPrincipals.push(principal);
    return { status: 200, body: { status: 'ok' } };
  },
  getCarStatus: ({ params }, { principal }) => {
    seenPrincipals.push(principal);
    calls.push({ operationId: 'getCarStatus', params, body: undefined });
    return {
      status: 200,
      body: {
        device_id: params.device_id,
        brand: 'brand_a',
        online: false,
        last_seen: null,
        state: {},
        reported_at: null,
      },
    };
  },
  removeSshKey: ({ params }) => {
    calls.push({ operationId: 'removeSshKey', params, body: undefined });
    return { status: 204 };
  },
  addSshKey: ({ body }) => {
    calls.push({ operationId: 'addSshKey', params: undefined, body });
    return {
      status: 409,
      body: {
        type: '/problems/conflict',
        title: 'Conflict',
        status: 409,
        detail: 'already',
        code: 'conflict',
      },
    };
  },
} satisfies Handlers;

const caller = { accountId: 'a1', email: 'ada@example.com' } as Principal;
const seenPrincipals: unknown[] = [];

const options: BindOptions = {
  authenticate: async (req) => {
    if (req.get('authorization') !== 'Bearer good') throw unauthorized();
    return caller;
  },
};

const auth = { authorization: 'Bearer good' };

describe('bindHandlers', () => {
  let base = '';
  let server: ReturnType<ReturnType<typeof express>['listen']>;

  beforeAll(async () => {
    const app = express();
    app.use(express.json());
    app.use(bindHandlers(express.Router(), handlers, options));
    app.use(problemMiddleware({ logger: silentLogger, jsonLimitBytes: 1024 }));
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise((resolve) => server.close(resolve)));

  test('when an operation is called then its handler answers with the status and JSON body it returned', async () => {
    const response = await fetch(`${base}/healthz`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { status: 'ok' });
    assert.equal(seenPrincipals.at(-1), undefined);
  });

  test('when a secured operation is called without a credential then the handler is not reached', async () => {
    const before = calls.length;
    const response = await fetch(`${base}/api/v1/cars/brand_a%3A1HGCM82633A004352/status`);
    assert.equal(response.status, 401);
    assert.equal(calls.length, before);
  });

  test('when the device id in the path is URL-encoded then the handler gets it decoded', async () => {
    const response = await fetch(`${base}/api/v1/cars/brand_a%3A1HGCM82633A004352/status`, { headers: auth });
    assert.equal(response.status, 200);
    assert.equal(seenPrincipals.at(-1), caller);
    const body = (await response.json()) as { device_id: string };
    assert.equal(body.device_id, 'brand_a:1HGCM82633A004352');
    assert.deepEqual({ ...(calls.at(-1)?.params as object) }, { device_id: 'brand_a:1HGCM82633A004352' });
  });

  test('when a handler returns no body then the response is empty', async () => {
    const response = await fetch(`${base}/api/v1/dev/keys/3c1e2d4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f`, {
      method: 'DELETE',
      headers: auth,
    });
    assert.equal(response.status, 204);
    assert.equal(await response.text(), '');
  });

  test('when a handler answers with an error status then the body is problem+json', async () => {
    const response = await fetch(`${base}/api/v1/dev/keys`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ public_key: 'ssh-ed25519 AAAA' }),
    });
    assert.equal(response.status, 409);
    assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.deepEqual(calls.at(-1)?.body, { public_key: 'ssh-ed25519 AAAA' });
  });

  test('when the contract has an operation then a request of its method to its path reaches its handler, and HEAD reaches GET', async () => {
    const reached: string[] = [];
    const recording = Object.fromEntries(
      Object.keys(routes).map((id) => [
        id,
        () => {
          reached.push(id);
          return { status: 204 };
        },
      ]),
    ) as unknown as Handlers;
    const app = express();
    app.use(
      bindHandlers(express.Router(), recording, { authenticate: async () => ({ ...caller, isAdmin: true }) }),
    );
    app.use(problemMiddleware({ logger: silentLogger, jsonLimitBytes: 1024 }));
    const listening = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => listening.once('listening', resolve));
    const at = `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
    try {
      for (const [operationId, route] of Object.entries(routes)) {
        // A value for each parameter that no static path of the contract spells.
        const path = route.expressPath.replace(/:(\w+)/g, (_match, name: string) => `p-${name}`);
        for (const method of route.method === 'get' ? ['GET', 'HEAD'] : [route.method.toUpperCase()]) {
          reached.length = 0;
          const answer = await fetch(`${at}${path}`, { method, headers: auth });
          assert.equal(answer.status, 204, `${method} ${path}`);
          assert.deepEqual(reached, [operationId], `${method} ${path}`);
        }
      }
    } finally {
      listening.close();
    }
  });
});
