/**
 * The vehicle read routes before a car has reported anything, and who may read them: the owner
 * and admins; anyone else gets the same 404 as for a car never provisioned. What they show once
 * the car has reported is in bridge.test.ts.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const reads = ['status', 'location', 'install'] as const;
const path = (deviceId: string, read: string) => `/api/v1/cars/${encodeURIComponent(deviceId)}/${read}`;

describe('vehicle reads', () => {
  let service: TestService;
  let admin: Developer;
  let developer: Developer;
  const deviceId = 'brand_b:reads-car-1';

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: 'root@example.com' });
    admin = await signUpAdmin(service, 'root@example.com');
    developer = await signUpDeveloper(service.url);
    const made = await call(service.url, 'POST', '/api/v1/admin/cars', {
      token: admin.token,
      body: { device_id: deviceId, brand: 'brand_b' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
  });
  afterAll(() => service.stop());

  test('when a provisioned car has reported nothing yet then status and install say so, and location is 404 no_location_yet', async () => {
    const status = await call(service.url, 'GET', path(deviceId, 'status'), { token: admin.token });
    assert.equal(status.status, 200, JSON.stringify(status.body));
    assert.deepEqual(status.body, {
      device_id: deviceId,
      brand: 'brand_b',
      online: false,
      last_seen: null,
      state: {},
      reported_at: null,
    });
    const install = await call(service.url, 'GET', path(deviceId, 'install'), { token: admin.token });
    assert.equal(install.status, 200, JSON.stringify(install.body));
    assert.deepEqual(install.body, {
      device_id: deviceId,
      brand: 'brand_b',
      host_version: null,
      installed_apps: [],
      reported_at: null,
    });
    const location = await call(service.url, 'GET', path(deviceId, 'location'), { token: admin.token });
    assert.equal(location.status, 404);
    assert.equal(location.body.code, 'no_location_yet');
  });

  test('when a car was never provisioned then every read is 404 car_not_found', async () => {
    for (const read of reads) {
      const reply = await call(service.url, 'GET', path('brand_b:never-made', read), { token: admin.token });
      assert.equal(reply.status, 404, read);
      assert.equal(reply.body.code, 'car_not_found', read);
    }
  });

  test('when a developer who neither owns the car nor is an admin reads it then 404 car_not_found, not 403: the car might as well not exist', async () => {
    for (const read of reads) {
      const reply = await call(service.url, 'GET', path(deviceId, read), { token: developer.token });
      assert.equal(reply.status, 404, read);
      assert.equal(reply.body.code, 'car_not_found', read);
      const never = await call(service.url, 'GET', path('brand_b:never-made', read), {
        token: developer.token,
      });
      assert.equal(never.body.detail, reply.body.detail.replace(deviceId, 'brand_b:never-made'));
    }
  });

  test("when the car's owner reads it then 200, as for an admin", async () => {
    // Pairing (which makes owners) comes with the commands; the column it fills is here already.
    const owner = await signUpDeveloper(service.url);
    await service.store.db('cars').where({ device_id: deviceId }).update({ owner_id: owner.accountId });
    try {
      const status = await call(service.url, 'GET', path(deviceId, 'status'), { token: owner.token });
      assert.equal(status.status, 200, JSON.stringify(status.body));
      assert.equal(status.body.device_id, deviceId);
      const install = await call(service.url, 'GET', path(deviceId, 'install'), { token: owner.token });
      assert.equal(install.status, 200);
    } finally {
      await service.store.db('cars').where({ device_id: deviceId }).update({ owner_id: null });
    }
  });

  test('when the device id is malformed then 422 with its code, on every read', async () => {
    for (const [id, code] of [
      ['1HGCM82633A004352', 'missing_prefix'],
      ['brand_z:1HGCM82633A004352', 'unknown_brand'],
      ['brand_a:not-a-vin', 'invalid_native_id'],
    ] as const) {
      for (const read of reads) {
        const reply = await call(service.url, 'GET', path(id, read), { token: admin.token });
        assert.equal(reply.status, 422, `${read} ${id}`);
        assert.equal(reply.body.code, code, `${read} ${id}`);
      }
    }
  });

  test('when nobody is signed in then 401, and no read answers 501 any more', async () => {
    for (const read of reads) {
      const reply = await call(service.url, 'GET', path(deviceId, read));
      assert.equal(reply.status, 401, read);
    }
  });
});
