/**
 * @svc/sdk's createSvcClient against the service and a simulated car: pairing, a command, and the
 * car's reads come back as the v4 models (camelCase, the car's own state keys as it sent them),
 * and the service's refusals as SvcProblem with their codes.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { createSvcClient, type SvcClient, SvcProblem } from '@svc/sdk';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { startWatchedSimulator, type WatchedSimulator } from './support/commands.ts';
import { eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'sdk-admin@example.com';

describe('createSvcClient against the service', () => {
  let service: TestService;
  let owner: Developer;
  let simulator: WatchedSimulator;
  let car: CarCredential;
  let svc: SvcClient;

  beforeAll(async () => {
    // The service's clock follows real time, as the simulated car's does.
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    const admin = await signUpAdmin(service, adminEmail);
    owner = await signUpDeveloper(service.url);
    [car] = (await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 1,
      brand: 'brand_a',
    })) as [CarCredential];
    simulator = await startWatchedSimulator(service.mqttUrl, [car]);
    svc = createSvcClient({ baseUrl: service.url, token: owner.token });
  });
  afterAll(async () => {
    await simulator?.stop();
    await service?.stop();
  });

  test('when the owner pairs with the code the car shows then the car comes back paired to them', async () => {
    const asked = await svc.cars.pair(car.deviceId);
    assert.equal(asked.outcome, 'code_sent');
    assert.equal(asked.outcome === 'code_sent' && asked.pairingCode.deviceId, car.deviceId);
    await eventually('the car shows a pairing code', () => simulator.codesShownBy(car.deviceId).length > 0);
    const code = simulator.codesShownBy(car.deviceId).at(-1);
    const paired = await svc.cars.pair(car.deviceId, { code });
    assert.equal(paired.outcome, 'paired');
    assert.equal(paired.outcome === 'paired' && paired.car.ownerId, owner.accountId);
  });

  test('when the owner locks the doors then the command completes and the status shows it, keys as the car sent them', async () => {
    const sent = await svc.cars.commands.send(car.deviceId, { name: 'doors.lock' });
    assert.equal(sent.deviceId, car.deviceId);
    assert.equal(sent.name, 'doors.lock');
    await eventually(
      'the command completes',
      async () => (await svc.cars.commands.get(car.deviceId, sent.commandId)).state === 'completed',
    );
    const page = await svc.cars.commands.list(car.deviceId, { limit: 50 });
    assert.ok(page.commands.some((command) => command.commandId === sent.commandId));

    await eventually('the status shows the doors locked', async () => {
      const status = await svc.cars.status(car.deviceId);
      return status.online && status.state.doors_locked === true;
    });
    const status = await svc.cars.status(car.deviceId);
    assert.equal(status.deviceId, car.deviceId);
    assert.equal(status.brand, 'brand_a');
    assert.equal(typeof status.lastSeen, 'string');
    assert.equal(typeof status.reportedAt, 'string');
    assert.ok(!('device_id' in status));

    const install = await svc.cars.install(car.deviceId);
    assert.equal(install.deviceId, car.deviceId);
    assert.ok(Array.isArray(install.installedApps));
  });

  test('when the developer reads their own things then they come back as models', async () => {
    const me = await svc.me();
    assert.equal(me.account.id, owner.accountId);
    assert.equal(me.token.source, 'web_session');
    assert.equal(typeof me.token.expiresAt, 'string');
    assert.deepEqual(await svc.miniApps.mine(), []);
    assert.deepEqual(await svc.keys.list(), []);
    const limits = await svc.miniApps.limits();
    assert.ok(limits.maxPackageBytes > 0);
  });

  test('when the service refuses then the SvcProblem carries its code, status and detail', async () => {
    const missing = await svc.cars.status('brand_b:never-made').catch((error: unknown) => error);
    assert.ok(missing instanceof SvcProblem);
    assert.equal(missing.status, 404);
    assert.equal(missing.code, 'car_not_found');
    assert.ok(missing.detail.length > 0);

    const lowercase = await svc.cars.status('brand_a:1hgcm82633a004352').catch((error: unknown) => error);
    assert.ok(lowercase instanceof SvcProblem);
    assert.equal(lowercase.status, 422);
    assert.equal(lowercase.code, 'invalid_native_id');

    const anonymous = createSvcClient({ baseUrl: service.url });
    const unauthorized = await anonymous.me().catch((error: unknown) => error);
    assert.ok(unauthorized instanceof SvcProblem);
    assert.equal(unauthorized.code, 'unauthorized');
  });
});
