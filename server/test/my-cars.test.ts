/**
 * My cars (`GET /api/v1/cars`): an owner lists the cars they paired, each with online, last seen
 * and the apps its last status report listed, as simulated cars on the embedded broker reported
 * them; nobody else sees those cars; an admin lists every car and finds one by device id, as
 * `GET /api/v1/admin/cars` (which now carries the same fields) does; pages follow one another.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { pairWithShownCode, startWatchedSimulator, type WatchedSimulator } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'my-cars-admin@example.com';
const apps = [
  { app_id: 'com.example.parking', version: '1.4.2' },
  { app_id: 'com.example.hello-car', version: '1.0.0' },
];

interface ListedCar {
  device_id: string;
  brand: string;
  owner_id: string | null;
  online: boolean;
  last_seen: string | null;
  installed_apps: { app_id: string; version: string }[];
  reported_at: string | null;
}

describe('my cars', () => {
  let service: TestService;
  let admin: Developer;
  let owner: Developer;
  /** The owner's three cars, oldest first: the first reports two apps, the others none. */
  let owned: CarCredential[];
  /** A car nobody has paired. */
  let unpaired: CarCredential;
  const simulators: WatchedSimulator[] = [];

  const myCars = (token: string, query = '') => call(service.url, 'GET', `/api/v1/cars${query}`, { token });
  const idsOf = (cars: ListedCar[]) => cars.map((car) => car.device_id);

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    admin = await signUpAdmin(service, adminEmail);
    owner = await signUpDeveloper(service.url);
    const provision = async () =>
      (
        await provisionCars({ apiUrl: service.url, token: admin.token, count: 1, brand: 'brand_a' })
      )[0] as CarCredential;
    // One at a time: the list is newest first, and each car's provisioning time is its place.
    owned = [];
    for (let i = 0; i < 3; i++) owned.push(await provision());
    unpaired = await provision();
    const [withApps, ...plain] = owned as [CarCredential, ...CarCredential[]];
    simulators.push(await startWatchedSimulator(service.mqttUrl, [withApps], { installedApps: apps }));
    simulators.push(await startWatchedSimulator(service.mqttUrl, plain));
    for (const car of owned) {
      const simulator = simulators.find((s) => s.cars.some((c) => c.deviceId === car.deviceId));
      assert.ok(simulator);
      await pairWithShownCode(service.url, owner, simulator, car.deviceId);
    }
  });
  afterAll(async () => {
    await Promise.all(simulators.map((simulator) => simulator.stop()));
    await service?.stop();
  });

  test('when an owner lists their cars then they get exactly the cars they paired, newest first, each online with its last seen and the apps it reported', async () => {
    // The bridge keeps the cars' reports as they come; the pairing went by the outbox meanwhile.
    let cars: ListedCar[] = [];
    await eventually('every car is online with its report kept', async () => {
      const listed = await myCars(owner.token);
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      cars = listed.body.cars;
      return cars.length === 3 && cars.every((car) => car.online && car.reported_at !== null);
    });
    assert.deepEqual(idsOf(cars), owned.map((car) => car.deviceId).reverse());
    const [newest, , oldest] = cars as [ListedCar, ListedCar, ListedCar];
    assert.equal(oldest.brand, 'brand_a');
    assert.equal(oldest.owner_id, owner.accountId);
    assert.deepEqual(
      [...oldest.installed_apps].sort((a, b) => a.app_id.localeCompare(b.app_id)),
      [...apps].sort((a, b) => a.app_id.localeCompare(b.app_id)),
    );
    assert.deepEqual(newest.installed_apps, []);
    for (const car of cars) {
      assert.ok(
        car.last_seen && Math.abs(Date.parse(car.last_seen) - Date.now()) < 60_000,
        car.last_seen ?? '',
      );
    }
    // The same as the car's own install read says.
    const install = await call(
      service.url,
      'GET',
      `/api/v1/cars/${encodeURIComponent(oldest.device_id)}/install`,
      {
        token: owner.token,
      },
    );
    assert.deepEqual(install.body.installed_apps, oldest.installed_apps);
    assert.ok(!idsOf(cars).includes(unpaired.deviceId), 'a car the owner did not pair');
  });

  test('when a car goes offline then the list says so and keeps when it was last seen', async () => {
    const plain = simulators[1] as WatchedSimulator;
    const before = (await myCars(owner.token)).body.cars as ListedCar[];
    await plain.stop();
    const offline = new Set(plain.cars.map((car) => car.deviceId));
    let after: ListedCar[] = [];
    await eventually('the stopped cars are offline', async () => {
      after = (await myCars(owner.token)).body.cars;
      return after.filter((car) => offline.has(car.device_id)).every((car) => !car.online);
    });
    for (const car of after.filter((listed) => offline.has(listed.device_id))) {
      assert.ok(car.last_seen, 'last seen kept');
      const earlier = before.find((listed) => listed.device_id === car.device_id);
      assert.ok(Date.parse(car.last_seen) >= Date.parse(earlier?.last_seen ?? ''));
    }
    assert.equal(after.find((car) => car.device_id === owned[0]?.deviceId)?.online, true);
  });

  test('when another account lists cars then it gets none of the owner’s, nor one of them by its device id', async () => {
    const stranger = await signUpDeveloper(service.url);
    const listed = await myCars(stranger.token);
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.body, { cars: [], next_cursor: null });
    const deviceId = owned[0]?.deviceId ?? '';
    const searched = await myCars(stranger.token, `?device_id=${encodeURIComponent(deviceId)}`);
    assert.equal(searched.status, 200);
    // The same answer as for a car never provisioned: whether it exists does not leak.
    assert.deepEqual(searched.body, { cars: [], next_cursor: null });
    assert.deepEqual(
      (await myCars(stranger.token, '?device_id=brand_a%3A1HGCM82633A004352')).body,
      searched.body,
    );
    // The owner finds their own by its id.
    const own = await myCars(owner.token, `?device_id=${encodeURIComponent(deviceId)}`);
    assert.deepEqual(idsOf(own.body.cars), [deviceId]);
  });

  test('when an admin lists cars then every car is there, paired or not, and one is found by its device id, as on the admin list', async () => {
    const listed = await myCars(admin.token, '?limit=200');
    assert.equal(listed.status, 200);
    const ids = idsOf(listed.body.cars);
    for (const car of [...owned, unpaired]) assert.ok(ids.includes(car.deviceId), car.deviceId);

    for (const query of [encodeURIComponent(unpaired.deviceId), unpaired.deviceId]) {
      const found = await myCars(admin.token, `?device_id=${query}`);
      assert.equal(found.status, 200, JSON.stringify(found.body));
      assert.equal(found.body.next_cursor, null);
      assert.deepEqual(found.body.cars, [
        {
          device_id: unpaired.deviceId,
          brand: 'brand_a',
          owner_id: null,
          paired_at: null,
          provisioned_at: found.body.cars[0].provisioned_at,
          online: false,
          last_seen: null,
          installed_apps: [],
          reported_at: null,
        },
      ]);
      const adminList = await call(service.url, 'GET', `/api/v1/admin/cars?device_id=${query}`, {
        token: admin.token,
      });
      assert.deepEqual(adminList.body, found.body);
    }
    const withApps = await call(
      service.url,
      'GET',
      `/api/v1/admin/cars?device_id=${encodeURIComponent(owned[0]?.deviceId ?? '')}`,
      { token: admin.token },
    );
    assert.equal(withApps.body.cars[0].installed_apps.length, 2, JSON.stringify(withApps.body));
    assert.deepEqual((await myCars(admin.token, '?device_id=brand_a%3A1HGCM82633A004352')).body, {
      cars: [],
      next_cursor: null,
    });
  });

  test('when the owner pages through their cars then each car comes once, newest first, and the last page says so', async () => {
    const first = await myCars(owner.token, '?limit=2');
    assert.equal(first.status, 200);
    assert.equal(first.body.cars.length, 2);
    assert.equal(typeof first.body.next_cursor, 'string');
    const second = await myCars(owner.token, `?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.equal(second.body.next_cursor, null);
    assert.deepEqual(
      [...idsOf(first.body.cars), ...idsOf(second.body.cars)],
      owned.map((car) => car.deviceId).reverse(),
    );
    const exact = await myCars(owner.token, '?limit=3');
    assert.equal(exact.body.next_cursor, null, 'no empty page after a full last one');
  });

  test('when the device id, the cursor or the limit is wrong then 422 or 400 says which, and without a token 401', async () => {
    for (const [id, code] of [
      ['1HGCM82633A004352', 'missing_prefix'],
      ['brand_z:1HGCM82633A004352', 'unknown_brand'],
      ['brand_a:not-a-vin', 'invalid_native_id'],
    ] as const) {
      for (const token of [owner.token, admin.token]) {
        const reply = await myCars(token, `?device_id=${encodeURIComponent(id)}`);
        assert.equal(reply.status, 422, id);
        assert.equal(reply.body.code, code, id);
      }
    }
    const cursor = await myCars(owner.token, '?cursor=not-a-cursor');
    assert.equal(cursor.status, 400);
    assert.equal(cursor.body.code, 'invalid_cursor');
    assert.equal((await myCars(owner.token, '?limit=0')).status, 400);
    assert.equal((await myCars(owner.token, '?owner=me')).status, 400);
    assert.equal((await call(service.url, 'GET', '/api/v1/cars')).status, 401);
  });
});
