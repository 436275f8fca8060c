/**
 * Who sees a car and who may end or move its ownership: the owner and admins see what it
 * reported, anyone else gets the 404 of a car that does not exist; unpair (owner or admin) and
 * transfer (owner only, one at a time). Owners are made straight in the store (support/cars.ts):
 * pairing has tests of its own.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, deviceIds, makeOwner, ownerOf, provisionCar } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { bridgeConnection, connectCar, type PlainBroker, startPlainBroker } from './support/mqtt.ts';
import { startTestService, type TestService } from './support/service.ts';
import { lockCarRow } from './support/store.ts';

const reads = ['status', 'location', 'install'] as const;
const at = '2026-11-21T09:59:00.000Z';
const newDeviceId = deviceIds('owners');

describe('owners', () => {
  let broker: PlainBroker;
  let service: TestService;
  let admin: Developer;
  let owner: Developer;
  let stranger: Developer;
  let buyer: Developer;

  const post = (who: Developer, deviceId: string, what: 'unpair' | 'transfer', body?: unknown) =>
    call(service.url, 'POST', carPath(deviceId, what), { token: who.token, body });
  const read = (who: Developer, deviceId: string, what: string) =>
    call(service.url, 'GET', carPath(deviceId, what), { token: who.token });

  /** A provisioned car owned by `who`. */
  async function ownedCar(who: Developer) {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    await makeOwner(service, deviceId, who);
    return deviceId;
  }

  /** Every read and every ownership route answers `who` as for a car that does not exist. */
  async function assertHiddenFrom(who: Developer, deviceId: string) {
    const answers = [
      ...(await Promise.all(reads.map((what) => read(who, deviceId, what)))),
      await post(who, deviceId, 'unpair'),
      await post(who, deviceId, 'transfer', { to_user: who.accountId }),
    ];
    for (const reply of answers) {
      assert.equal(reply.status, 404, JSON.stringify(reply.body));
      assert.equal(reply.body.code, 'car_not_found');
      assert.equal(reply.body.detail, `No car ${deviceId} is provisioned, or you may not see it.`);
    }
  }

  beforeAll(async () => {
    broker = await startPlainBroker();
    service = await startTestService(
      { SVC_ADMIN_EMAILS: 'root@example.com' },
      {
        bridge: {
          brokerConnection: bridgeConnection(broker),
          telemetryBatch: { maxRows: 100, maxDelayMs: 20 },
        },
      },
    );
    admin = await signUpAdmin(service, 'root@example.com');
    [owner, stranger, buyer] = await Promise.all([
      signUpDeveloper(service.url),
      signUpDeveloper(service.url),
      signUpDeveloper(service.url),
    ]);
  });
  afterAll(async () => {
    await service?.stop();
    await broker?.close();
  });

  test('when a car has reported then its owner reads status, location and install as an admin does, and a stranger gets the 404 of a car never provisioned', async () => {
    const deviceId = await ownedCar(owner);
    const car = await connectCar(broker, deviceId, at);
    try {
      await car.publish('status', {
        device_id: deviceId,
        brand: 'brand_b',
        reported_at: at,
        host_version: '2.14.0',
        state: { ignition: false },
        installed_apps: [{ app_id: 'com.example.parking', version: '1.4.2' }],
      });
      await car.publish('telemetry', {
        device_id: deviceId,
        brand: 'brand_b',
        recorded_at: at,
        location: { latitude: 48.1371, longitude: 11.5754 },
      });
      await eventually('the fix shows', async () => (await read(admin, deviceId, 'location')).status === 200);
    } finally {
      await car.end();
    }
    for (const what of reads) {
      const byAdmin = await read(admin, deviceId, what);
      const byOwner = await read(owner, deviceId, what);
      assert.equal(byOwner.status, 200, `${what}: ${JSON.stringify(byOwner.body)}`);
      assert.deepEqual(byOwner.body, byAdmin.body, what);
      const byStranger = await read(stranger, deviceId, what);
      const neverMade = await read(stranger, 'brand_b:never-made', what);
      assert.equal(byStranger.status, 404, what);
      assert.equal(byStranger.body.code, 'car_not_found', what);
      assert.equal(byStranger.body.detail, neverMade.body.detail.replace('brand_b:never-made', deviceId));
    }
    assert.equal(
      (await read(owner, deviceId, 'install')).body.installed_apps[0].app_id,
      'com.example.parking',
    );
  });

  test('when the owner unpairs the car then 200 without owner, and the car is hidden from them from then on', async () => {
    const deviceId = await ownedCar(owner);
    const reply = await post(owner, deviceId, 'unpair');
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.device_id, deviceId);
    assert.equal(reply.body.owner_id, null);
    assert.equal(reply.body.paired_at, null);
    assert.equal(await ownerOf(service, deviceId), null);
    await assertHiddenFrom(owner, deviceId);
  });

  test("when an admin unpairs someone's car then 200 without owner; unpairing it again is 409 car_not_paired", async () => {
    const deviceId = await ownedCar(owner);
    const reply = await post(admin, deviceId, 'unpair', { brand: 'brand_b' });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.owner_id, null);
    const again = await post(admin, deviceId, 'unpair');
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'car_not_paired');
    await assertHiddenFrom(owner, deviceId);
  });

  test('when anyone but the owner or an admin unpairs a car then 404, paired or not, and the owner keeps it', async () => {
    const deviceId = await ownedCar(owner);
    await assertHiddenFrom(stranger, deviceId);
    assert.equal(await ownerOf(service, deviceId), owner.accountId);
    const unpaired = newDeviceId();
    await provisionCar(service, admin, unpaired);
    await assertHiddenFrom(stranger, unpaired);
  });

  test('when the owner transfers the car then 200 with the new owner; the old owner gets 404 everywhere and the new one sees it', async () => {
    const deviceId = await ownedCar(owner);
    service.clock.advance(60_000);
    const reply = await post(owner, deviceId, 'transfer', { to_user: buyer.accountId, brand: 'brand_b' });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.owner_id, buyer.accountId);
    assert.equal(reply.body.paired_at, new Date(service.clock.now).toISOString());
    await assertHiddenFrom(owner, deviceId);
    for (const what of ['status', 'install']) {
      assert.equal((await read(buyer, deviceId, what)).status, 200, what);
    }
    const back = await post(buyer, deviceId, 'transfer', { to_user: owner.accountId });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(await ownerOf(service, deviceId), owner.accountId);
  });

  test('when an admin who is not the owner transfers a car then 403 not_owner and nothing moves', async () => {
    const deviceId = await ownedCar(owner);
    const reply = await post(admin, deviceId, 'transfer', { to_user: admin.accountId });
    assert.equal(reply.status, 403);
    assert.equal(reply.body.code, 'not_owner');
    assert.match(reply.body.detail, /unpair/);
    assert.equal(await ownerOf(service, deviceId), owner.accountId);
  });

  test('when the new owner is no account then 422 unknown_account and nothing moves', async () => {
    const deviceId = await ownedCar(owner);
    const reply = await post(owner, deviceId, 'transfer', {
      to_user: '00000000-0000-4000-8000-000000000000',
    });
    assert.equal(reply.status, 422);
    assert.equal(reply.body.code, 'unknown_account');
    assert.equal(await ownerOf(service, deviceId), owner.accountId);
  });

  test('when the owner transfers the car to themselves then 200 and nothing changes, not even when it was paired', async () => {
    const deviceId = await ownedCar(owner);
    const before = (await service.store.db('cars').where({ device_id: deviceId }).first()).paired_at;
    service.clock.advance(60_000);
    for (const toUser of [owner.accountId, owner.accountId.toUpperCase()]) {
      const reply = await post(owner, deviceId, 'transfer', { to_user: toUser });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      assert.equal(reply.body.owner_id, owner.accountId);
      assert.equal(reply.body.paired_at, before.toISOString(), `to ${toUser}`);
    }
  });

  test('when an admin transfers a car nobody owns then 409 car_not_paired, not advice to unpair it', async () => {
    const deviceId = await ownedCar(owner);
    await post(owner, deviceId, 'unpair');
    const reply = await post(admin, deviceId, 'transfer', { to_user: owner.accountId });
    assert.equal(reply.status, 409, JSON.stringify(reply.body));
    assert.equal(reply.body.code, 'car_not_paired');
    assert.equal(await ownerOf(service, deviceId), null);
  });

  test('when the owner transfers the car to two accounts at once then one transfer wins and the other is 404: the car is no longer theirs', async () => {
    const deviceId = await ownedCar(owner);
    // Both wait on the car's row (on Postgres; on PGlite on the one connection), then go together.
    const lock = await lockCarRow(service.store, deviceId);
    let replies: Awaited<ReturnType<typeof post>>[];
    try {
      const both = Promise.all([
        post(owner, deviceId, 'transfer', { to_user: buyer.accountId }),
        post(owner, deviceId, 'transfer', { to_user: stranger.accountId }),
      ]);
      await lock.waiters(2);
      await lock.release();
      replies = await both;
    } finally {
      await lock.release();
    }
    const statuses = replies.map((reply) => reply.status).sort();
    assert.deepEqual(statuses, [200, 404], JSON.stringify(replies.map((reply) => reply.body)));
    const winner = replies.find((reply) => reply.status === 200)?.body.owner_id;
    assert.equal(await ownerOf(service, deviceId), winner);
  });

  test('when the request is malformed then unpair and transfer say so: 422 for the device id, 400 for a new owner that is no account id', async () => {
    const deviceId = await ownedCar(owner);
    const mismatch = await post(owner, deviceId, 'unpair', { brand: 'brand_a' });
    assert.equal(mismatch.status, 422);
    assert.equal(mismatch.body.code, 'brand_mismatch');
    const badId = await post(owner, 'brand_a:not-a-vin', 'transfer', { to_user: buyer.accountId });
    assert.equal(badId.status, 422);
    assert.equal(badId.body.code, 'invalid_native_id');
    const notUuid = await post(owner, deviceId, 'transfer', { to_user: 'bob' });
    assert.equal(notUuid.status, 400);
    const anonymous = await call(service.url, 'POST', carPath(deviceId, 'unpair'));
    assert.equal(anonymous.status, 401);
    assert.equal(await ownerOf(service, deviceId), owner.accountId);
  });
});
