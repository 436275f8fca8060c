/**
 * Every operation the contract marks admin (tag `Admin`) checks the caller before anything else:
 * 401 without a credential, 403 for a developer, whatever the request holds and whether the
 * operation is built yet.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { routes } from '../../generated/routes.ts';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminOperations = Object.entries(routes).filter(([, route]) => route.adminOnly);

/** The operation's path with each parameter filled, once sensibly and once with rubbish. */
function pathOf(openapiPath: string, value: string): string {
  return openapiPath.replace(/\{[^}]+\}/g, encodeURIComponent(value));
}

describe('admin operations', () => {
  let service: TestService;
  let developer: Developer;

  beforeAll(async () => {
    service = await startTestService();
    developer = await signUpDeveloper(service.url);
  });
  afterAll(() => service.stop());

  test('when the contract is read then it marks admin operations (the walk below is not empty)', () => {
    assert.ok(adminOperations.length >= 3, adminOperations.map(([id]) => id).join(', '));
  });

  for (const [operationId, route] of adminOperations) {
    const method = route.method.toUpperCase();
    const requests = [
      {
        what: 'a good-looking request',
        path: pathOf(route.openapiPath, 'brand_a:1HGCM82633A004352'),
        raw: '{}',
      },
      { what: 'a malformed body', path: pathOf(route.openapiPath, 'x'), raw: '{"device_id": ' },
      {
        what: 'an unknown query parameter',
        path: `${pathOf(route.openapiPath, 'x')}?nonsense=1`,
        raw: '[1]',
      },
      {
        what: 'a bad device id',
        path: `${pathOf(route.openapiPath, 'x')}?device_id=nope`,
        raw: '{"device_id":"nope","brand":"brand_z"}',
      },
    ];

    test(`when ${operationId} (${method} ${route.openapiPath}) is called without a credential then 401, whatever the request`, async () => {
      for (const request of requests) {
        const reply = await call(service.url, method, request.path, {
          raw: method === 'GET' ? undefined : request.raw,
        });
        assert.equal(reply.status, 401, `${request.what}: ${JSON.stringify(reply.body)}`);
        assert.equal(reply.body.code, 'unauthorized');
      }
    });

    test(`when ${operationId} (${method} ${route.openapiPath}) is called by a developer then 403, whatever the request`, async () => {
      for (const request of requests) {
        const reply = await call(service.url, method, request.path, {
          token: developer.token,
          raw: method === 'GET' ? undefined : request.raw,
        });
        assert.equal(reply.status, 403, `${request.what}: ${JSON.stringify(reply.body)}`);
        assert.equal(reply.body.code, 'admins_only');
        assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
      }
    });
  }
});
