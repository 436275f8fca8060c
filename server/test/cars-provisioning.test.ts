/**
 * Provisioning: an admin makes a car and its broker credential (shown once; only its hash is kept,
 * under `mqtt:auth:{deviceId}`), rotates and decommissions it; brand connectors likewise. The
 * same tests run with the key-value store in SQL and in Redis.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { call } from './support/http.ts';
import { redisMissing, testRedisUrl as redisUrl } from './support/redis.ts';
import { startTestService, type TestService } from './support/service.ts';

const redisSkipped = await redisMissing();
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
let serial = 0;
/** A VIN of brand_a no other test (or earlier run, in Redis) has used. */
function newVin(): string {
  serial += 1;
  const tail = `${Date.now().toString(36).toUpperCase()}${serial}`.replace(/[IOQ]/g, 'X');
  return `1HGCM${tail}`.padEnd(17, '0').slice(0, 17);
}

for (const store of ['sql', 'redis'] as const) {
  const skipped = store === 'redis' ? redisSkipped : undefined;
  describe.skipIf(skipped)(
    `provisioning, key-value store in ${store}${skipped ? ` (${skipped})` : ''}`,
    () => {
      let service: TestService;
      let admin: Developer;
      let developer: Developer;
      let redis: Redis | undefined;

      /** The stored value under `mqtt:auth:{username}`, wherever this store keeps it. */
      async function storedCredential(username: string): Promise<{ secret_sha256: string } | undefined> {
        const key = `mqtt:auth:${username}`;
        const value =
          store === 'redis'
            ? await redis?.get(key)
            : (await service.store.db('key_values').where({ key }).first())?.value;
        return value ? JSON.parse(value) : undefined;
      }

      const asAdmin = (method: string, path: string, body?: unknown) =>
        call(service.url, method, path, { token: admin.token, body });

      beforeAll(async () => {
        service = await startTestService({
          SVC_ADMIN_EMAILS: 'root@example.com',
          ...(store === 'redis' ? { REDIS_URL: redisUrl } : {}),
        });
        admin = await signUpAdmin(service, 'root@example.com');
        developer = await signUpDeveloper(service.url);
        if (store === 'redis') redis = new Redis(redisUrl);
      });
      afterAll(async () => {
        redis?.disconnect();
        await service.stop();
      });

      test('when an admin provisions a car then 201 gives the car and a credential shown once, and only its hash is kept', async () => {
        const deviceId = `brand_a:${newVin()}`;
        const made = await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        assert.deepEqual(made.body.car, {
          device_id: deviceId,
          brand: 'brand_a',
          owner_id: null,
          paired_at: null,
          provisioned_at: made.body.car.provisioned_at,
        });
        const { client_id, username, password } = made.body.mqtt;
        assert.equal(client_id, deviceId);
        assert.equal(username, deviceId);
        assert.match(password, /^mq_[A-Za-z0-9_-]{32}$/);
        const stored = await storedCredential(deviceId);
        assert.equal(stored?.secret_sha256, sha256(password));
        assert.ok(!JSON.stringify(stored).includes(password), 'the password itself is not stored');

        const listed = await asAdmin('GET', `/api/v1/admin/cars?device_id=${encodeURIComponent(deviceId)}`);
        assert.equal(listed.status, 200);
        // Listed with what a list shows of a car: never connected, nothing reported yet.
        const never = { online: false, last_seen: null, installed_apps: [], reported_at: null };
        assert.deepEqual(listed.body, { cars: [{ ...made.body.car, ...never }], next_cursor: null });
        // A `:` is allowed in a query, as people type it.
        const typed = await asAdmin('GET', `/api/v1/admin/cars?device_id=${deviceId}`);
        assert.equal(typed.status, 200, JSON.stringify(typed.body));
        assert.deepEqual(typed.body, listed.body);
        assert.ok(!JSON.stringify(listed.body).includes(password), 'the list never shows the password');
      });

      test('when the car is provisioned again then 409 and its credential is unchanged', async () => {
        const deviceId = `brand_a:${newVin()}`;
        const first = await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
        const again = await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
        assert.equal(again.status, 409);
        assert.equal(again.body.code, 'car_exists');
        assert.equal((await storedCredential(deviceId))?.secret_sha256, sha256(first.body.mqtt.password));
      });

      test('when the device id is malformed or its brand disagrees then 422 with its code, and nothing is kept', async () => {
        for (const [body, code] of [
          [{ device_id: '1HGCM82633A004352', brand: 'brand_a' }, 'missing_prefix'],
          [{ device_id: 'brand_z:1HGCM82633A004352', brand: 'brand_a' }, 'unknown_brand'],
          [{ device_id: 'brand_a:not-a-vin', brand: 'brand_a' }, 'invalid_native_id'],
          [{ device_id: 'brand_a:1HGCM82633A004399', brand: 'brand_b' }, 'brand_mismatch'],
        ] as const) {
          const refused = await asAdmin('POST', '/api/v1/admin/cars', body);
          assert.equal(refused.status, 422, JSON.stringify(body));
          assert.equal(refused.body.code, code);
          assert.equal(await storedCredential(body.device_id), undefined);
        }
      });

      test('when a developer who is not an admin provisions a car then 403 and nothing is made', async () => {
        const deviceId = `brand_a:${newVin()}`;
        const refused = await call(service.url, 'POST', '/api/v1/admin/cars', {
          token: developer.token,
          body: { device_id: deviceId, brand: 'brand_a' },
        });
        assert.equal(refused.status, 403);
        assert.equal(await storedCredential(deviceId), undefined);
      });

      test('when the credential is rotated then the new password is the one kept, and 404 for a car never provisioned', async () => {
        const deviceId = `brand_a:${newVin()}`;
        const made = await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
        const rotated = await asAdmin(
          'POST',
          `/api/v1/admin/cars/${encodeURIComponent(deviceId)}/credential`,
        );
        assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
        assert.equal(rotated.body.username, deviceId);
        assert.notEqual(rotated.body.password, made.body.mqtt.password);
        assert.equal((await storedCredential(deviceId))?.secret_sha256, sha256(rotated.body.password));

        const unknown = await asAdmin(
          'POST',
          `/api/v1/admin/cars/${encodeURIComponent(`brand_a:${newVin()}`)}/credential`,
        );
        assert.equal(unknown.status, 404);
        assert.equal(unknown.body.code, 'car_not_found');
      });

      test('when a car is decommissioned then its credential and record are gone, and it may be provisioned anew', async () => {
        const deviceId = `brand_a:${newVin()}`;
        await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
        const path = `/api/v1/admin/cars/${encodeURIComponent(deviceId)}`;
        assert.equal((await asAdmin('DELETE', path)).status, 204);
        assert.equal(await storedCredential(deviceId), undefined);
        const listed = await asAdmin('GET', `/api/v1/admin/cars?device_id=${encodeURIComponent(deviceId)}`);
        assert.deepEqual(listed.body.cars, []);
        assert.equal((await asAdmin('DELETE', path)).status, 404);
        const again = await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
        assert.equal(again.status, 201);
      });

      test('when cars are listed a page at a time then each car comes once, newest first, and a made-up cursor is 400', async () => {
        const made: string[] = [];
        for (let i = 0; i < 5; i += 1) {
          // The clock stands still unless moved: each of these is newer than every car before it.
          service.clock.advance(1000);
          const deviceId = `brand_a:${newVin()}`;
          await asAdmin('POST', '/api/v1/admin/cars', { device_id: deviceId, brand: 'brand_a' });
          made.push(deviceId);
        }
        const seen: string[] = [];
        let cursor: string | null = null;
        do {
          const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : '';
          const page = await asAdmin('GET', `/api/v1/admin/cars?limit=2${query}`);
          assert.equal(page.status, 200, JSON.stringify(page.body));
          assert.ok(page.body.cars.length <= 2);
          seen.push(...page.body.cars.map((car: { device_id: string }) => car.device_id));
          cursor = page.body.next_cursor;
        } while (cursor);
        assert.equal(new Set(seen).size, seen.length, 'no car comes twice');
        assert.deepEqual(seen.slice(0, 5), [...made].reverse(), 'the newest come first');

        const forge = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
        for (const cursor of [
          'not-a-cursor',
          forge(['+275760-09-13T00:00:00.000Z', 'brand_a:1HGCM82633A004352']),
          forge(['2026-11-21T10:00:00.000Z', "x' or 1=1 --"]),
          forge({ at: 1 }),
        ]) {
          const bad = await asAdmin('GET', `/api/v1/admin/cars?cursor=${encodeURIComponent(cursor)}`);
          assert.equal(bad.status, 400, cursor);
          assert.equal(bad.body.code, 'invalid_cursor');
        }
      });

      test('when an admin makes a brand connector then it is listed, rotated and removed, and a taken name is 409', async () => {
        const name = `fleet-${serial++}-${Date.now().toString(36)}`;
        const made = await asAdmin('POST', '/api/v1/admin/connectors', { brand: 'brand_b', name });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        const username = `connector:brand_b:${name}`;
        assert.equal(made.body.connector.username, username);
        assert.deepEqual(
          { client_id: made.body.mqtt.client_id, username: made.body.mqtt.username },
          { client_id: username, username },
        );
        assert.equal((await storedCredential(username))?.secret_sha256, sha256(made.body.mqtt.password));

        const taken = await asAdmin('POST', '/api/v1/admin/connectors', { brand: 'brand_b', name });
        assert.equal(taken.status, 409);
        assert.equal(taken.body.code, 'connector_exists');

        const listed = await asAdmin('GET', '/api/v1/admin/connectors');
        assert.ok(listed.body.connectors.some((c: { username: string }) => c.username === username));

        const rotated = await asAdmin('POST', `/api/v1/admin/connectors/brand_b/${name}/credential`);
        assert.equal(rotated.status, 201);
        assert.equal((await storedCredential(username))?.secret_sha256, sha256(rotated.body.password));

        assert.equal((await asAdmin('DELETE', `/api/v1/admin/connectors/brand_b/${name}`)).status, 204);
        assert.equal(await storedCredential(username), undefined);
        assert.equal((await asAdmin('DELETE', `/api/v1/admin/connectors/brand_b/${name}`)).status, 404);
      });
    },
  );
}
