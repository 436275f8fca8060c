/**
 * App updates and staged rollouts (issue 27), on the embedded broker with simulated cars that
 * install what they are sent and report it: publishing a version moves every car running an
 * earlier one (on the brands its manifest lists); a rollout reaches its share of the cars, the
 * same cars as it grows, and pauses, completes or rolls back; a car away during a release gets it
 * when it comes back; every move that the rollout's state does not allow is refused.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars, type Simulator, startSimulator } from '@svc/car-simulator';
import { afterAll, afterEach, beforeAll, describe, test } from 'vitest';
import { carTopic, carTopicQos, carTopicRetain } from '../../generated/mqtt.ts';
import { cohortPoint } from '../src/mini-apps/cohort.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import {
  type BareCar,
  carPath,
  commandsOf,
  connectBareCar,
  installsOf as installsOfApp,
  publishMiniApp,
  reportedVersion,
} from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'rollouts-admin@example.com';
const quiet = { write: () => true };

function idAt(cars: readonly CarCredential[], index: number): string {
  const car = cars.at(index);
  assert.ok(car, `no car at ${index}`);
  return car.deviceId;
}

describe('app updates and rollouts', () => {
  let service: TestService;
  let admin: Developer;
  let developer: Developer;
  let brandA: CarCredential[];
  let brandB: CarCredential[];
  const simulators: Simulator[] = [];

  /** Simulated cars running `apps`, connected until the test file ends (or stopped by the test). */
  async function drive(cars: CarCredential[], apps: { app_id: string; version: string }[]) {
    const simulator = await startSimulator({
      mqttUrl: service.mqttUrl,
      cars,
      installedApps: apps,
      statusEveryMs: 60_000,
      telemetryEveryMs: 60_000,
      reconnectPeriodMs: 100,
      output: quiet,
      warnings: quiet,
    });
    simulators.push(simulator);
    return simulator;
  }

  const versionOn = (simulator: Simulator, deviceId: string, appId: string) =>
    simulator.cars.find((car) => car.deviceId === deviceId)?.installedApps.find((app) => app.app_id === appId)
      ?.version;

  /** Waits until every car of `simulator` runs what `expected` says of it. */
  async function untilCarsRun(simulator: Simulator, appId: string, expected: (deviceId: string) => string) {
    await eventually(
      `every car runs the version it should of ${appId}`,
      () =>
        simulator.cars.every((car) => versionOn(simulator, car.deviceId, appId) === expected(car.deviceId)),
      20_000,
    );
  }

  const reported = (deviceId: string, appId: string) =>
    reportedVersion(service.url, admin.token, deviceId, appId);
  const installsOf = (deviceId: string, appId: string) =>
    installsOfApp(service.url, admin.token, deviceId, appId);

  const moveVersion = (versionId: string, body: unknown, who: Developer = developer) =>
    call(service.url, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
      token: who.token,
      body,
    });

  const rollout = (appId: string, who: Developer = developer) =>
    call(service.url, 'GET', `/api/v1/mini-apps/${appId}/rollout`, { token: who.token });

  const moveRollout = (appId: string, body: unknown, who: Developer = developer) =>
    call(service.url, 'POST', `/api/v1/mini-apps/${appId}/rollout/moves`, { token: who.token, body });

  /** An approved version `version` of the app, rolled out to `percent` % of its cars. */
  async function startRollout(appId: string, version: string, percent: number, brands?: string[]) {
    const versionId = await publishMiniApp(service.url, developer, admin, appId, version, 'approved');
    const started = await moveVersion(versionId, {
      to: 'rolling_out',
      rollout: { percent, ...(brands ? { brands } : {}) },
    });
    assert.equal(started.status, 200, JSON.stringify(started.body));
    assert.equal(started.body.review_state, 'rolling_out');
    return versionId;
  }

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    admin = await signUpAdmin(service, adminEmail);
    developer = await signUpDeveloper(service.url);
    brandA = await provisionCars({ apiUrl: service.url, token: admin.token, count: 24, brand: 'brand_a' });
    brandB = await provisionCars({ apiUrl: service.url, token: admin.token, count: 6, brand: 'brand_b' });
  });
  // Each test's cars go offline with it: the next test connects the same cars afresh.
  afterEach(async () => {
    for (const simulator of simulators.splice(0)) await simulator.stop();
  });
  afterAll(() => service?.stop());

  test('when a new version is published then every car running an earlier one is moved to it, only on the brands its manifest lists', async () => {
    const appId = 'com.example.updates';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    const fleet = await drive([...brandA, ...brandB], [{ app_id: appId, version: '1.0.0' }]);
    await eventually(
      'the cars reported their apps',
      async () => (await reported(idAt(brandB, 0), appId)) === '1.0.0',
    );

    await publishMiniApp(service.url, developer, admin, appId, '1.1.0', 'published', { brands: ['brand_a'] });

    const brandAIds = new Set(brandA.map((car) => car.deviceId));
    await untilCarsRun(fleet, appId, (deviceId) => (brandAIds.has(deviceId) ? '1.1.0' : '1.0.0'));
    await eventually(
      'the service has their reports',
      async () => (await reported(idAt(brandA, 0), appId)) === '1.1.0',
    );
    // Nothing was sent to the brand the manifest leaves out, and each car was sent one install.
    for (const car of brandB) assert.equal((await installsOf(car.deviceId, appId)).length, 0);
    for (const car of brandA) assert.equal((await installsOf(car.deviceId, appId)).length, 1, car.deviceId);
  });

  test('when a version rolls out to 25 % then its share of the cars gets it, the same cars and more at 60 %, none while paused, and a rollback moves them back and the version can no longer be installed', async () => {
    const appId = 'com.example.staged';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    const fleet = await drive(brandA, [{ app_id: appId, version: '1.0.0' }]);
    await eventually(
      'the cars reported their apps',
      async () => (await reported(idAt(brandA, -1), appId)) === '1.0.0',
    );
    const inShare = (percent: number) => (deviceId: string) =>
      cohortPoint(appId, deviceId) < percent ? '2.0.0' : '1.0.0';

    const versionId = await startRollout(appId, '2.0.0', 25);
    await untilCarsRun(fleet, appId, inShare(25));
    const first = brandA.filter((car) => inShare(25)(car.deviceId) === '2.0.0').length;
    await eventually('the progress counts them installed', async () => {
      const { body } = await rollout(appId);
      return body.progress.installed === first && body.progress.eligible === first;
    });
    const status = await rollout(appId);
    assert.equal(status.status, 200);
    assert.equal(status.body.version, '2.0.0');
    assert.equal(status.body.previous_version, '1.0.0');
    assert.equal(status.body.state, 'active');
    // The car outside the share still runs 1.0.0, published.
    const mine = await call(service.url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    const states = mine.body.mini_apps
      .find((app: { id: string }) => app.id === appId)
      .versions.map((v: { version: string; review_state: string }) => `${v.version} ${v.review_state}`);
    assert.deepEqual(states.sort(), ['1.0.0 published', '2.0.0 rolling_out']);

    assert.equal((await moveRollout(appId, { move: 'pause' })).body.state, 'paused');
    const whilePaused = await moveRollout(appId, { move: 'set_percent', percent: 60 });
    assert.equal(whilePaused.status, 409);
    assert.equal(whilePaused.body.code, 'rollout_paused');
    assert.equal((await moveRollout(appId, { move: 'resume' })).body.state, 'active');
    const grown = await moveRollout(appId, { move: 'set_percent', percent: 60 });
    assert.equal(grown.status, 200, JSON.stringify(grown.body));
    assert.equal(grown.body.percent, 60);
    await untilCarsRun(fleet, appId, inShare(60));

    const lower = await moveRollout(appId, { move: 'set_percent', percent: 30 });
    assert.equal(lower.status, 409);
    assert.equal(lower.body.code, 'percent_only_grows');

    const back = await moveRollout(appId, { move: 'rollback' });
    assert.equal(back.status, 200, JSON.stringify(back.body));
    assert.equal(back.body.state, 'rolled_back');
    await untilCarsRun(fleet, appId, () => '1.0.0');
    const refused = await commandsOf(service.url).send(admin.token, idAt(brandA, 0), {
      name: 'app.install',
      args: { app_id: appId, version: '2.0.0' },
    });
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'version_not_published');
    const ended = await moveRollout(appId, { move: 'resume' });
    assert.equal(ended.status, 409);
    assert.equal(ended.body.code, 'rollout_ended');
    const version = await moveVersion(versionId, { to: 'published' });
    assert.equal(version.status, 409, 'a rolled-back version is not published again');
  });

  test('when a rollout completes then every car gets the version, it is published and the one before superseded; a car away meanwhile gets it when it comes back', async () => {
    const appId = 'com.example.complete';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    const [away, ...present] = brandA as [CarCredential, ...CarCredential[]];
    const fleet = await drive(present, [{ app_id: appId, version: '1.0.0' }]);
    const awayCar = await drive([away], [{ app_id: appId, version: '1.0.0' }]);
    await eventually(
      'the cars reported their apps',
      async () => (await reported(away.deviceId, appId)) === '1.0.0',
    );
    await awayCar.stop();
    await eventually('the car is offline', async () => {
      const status = await call(service.url, 'GET', carPath(away.deviceId, 'status'), { token: admin.token });
      return status.body.online === false;
    });

    await startRollout(appId, '1.1.0', 10);
    const completed = await moveRollout(appId, { move: 'complete' });
    assert.equal(completed.status, 200, JSON.stringify(completed.body));
    assert.equal(completed.body.state, 'completed');
    assert.equal(completed.body.percent, 100);
    await untilCarsRun(fleet, appId, () => '1.1.0');
    const mine = await call(service.url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    const app = mine.body.mini_apps.find((one: { id: string }) => one.id === appId);
    assert.equal(app.live_version, '1.1.0');
    assert.deepEqual(
      app.versions
        .map((v: { version: string; review_state: string }) => `${v.version} ${v.review_state}`)
        .sort(),
      ['1.0.0 superseded', '1.1.0 published'],
    );
    assert.equal((await installsOf(away.deviceId, appId)).length, 0, 'nothing was sent to the car away');

    const back = await drive([away], [{ app_id: appId, version: '1.0.0' }]);
    await untilCarsRun(back, appId, () => '1.1.0');
  });

  test("when app.install names no version then the car is sent the version it should run: its rollout cohort's, else the live one", async () => {
    const appId = 'com.example.unversioned';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    await startRollout(appId, '1.1.0', 50);
    for (const car of brandA.slice(0, 8)) {
      const sent = await commandsOf(service.url).send(admin.token, car.deviceId, {
        name: 'app.install',
        args: { app_id: appId },
      });
      assert.equal(sent.status, 202, JSON.stringify(sent.body));
      assert.equal(sent.body.args.version, cohortPoint(appId, car.deviceId) < 50 ? '1.1.0' : '1.0.0');
    }
    // A car outside the cohort is not given the rolling-out version by name either.
    const outside = brandA.find((car) => cohortPoint(appId, car.deviceId) >= 50);
    assert.ok(outside, 'some car is outside the cohort');
    const refused = await commandsOf(service.url).send(admin.token, outside.deviceId, {
      name: 'app.install',
      args: { app_id: appId, version: '1.1.0' },
    });
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'version_not_released_to_car');
  });

  test('when a move does not fit the rollout then it is refused: one rollout at a time, the developer alone moves it, a percentage with set_percent only', async () => {
    const appId = 'com.example.refusals';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    const none = await rollout(appId);
    assert.equal(none.status, 404);
    assert.equal(none.body.code, 'no_rollout');
    await startRollout(appId, '1.1.0', 10);

    const second = await publishMiniApp(service.url, developer, admin, appId, '1.2.0', 'approved');
    for (const body of [{ to: 'published' }, { to: 'rolling_out', rollout: { percent: 5 } }]) {
      const refused = await moveVersion(second, body);
      assert.equal(refused.status, 409, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 'rollout_in_progress');
    }
    const noRollout = await moveVersion(second, { to: 'rolling_out' });
    assert.equal(noRollout.status, 422);
    assert.equal(noRollout.body.code, 'rollout_required');
    const stray = await moveVersion(second, { to: 'published', rollout: { percent: 5 } });
    assert.equal(stray.status, 422);
    assert.equal(stray.body.code, 'rollout_not_expected');

    // An admin may stop a rollout, not spread it.
    const byAdmin = await moveRollout(appId, { move: 'set_percent', percent: 50 }, admin);
    assert.equal(byAdmin.status, 403);
    assert.equal(byAdmin.body.code, 'not_your_move');
    assert.equal((await moveRollout(appId, { move: 'complete' }, admin)).status, 403);
    const pausedByAdmin = await moveRollout(appId, { move: 'pause' }, admin);
    assert.equal(pausedByAdmin.status, 200, JSON.stringify(pausedByAdmin.body));
    assert.equal((await moveRollout(appId, { move: 'resume' }, admin)).status, 403);
    assert.equal((await moveRollout(appId, { move: 'resume' })).body.state, 'active');
    assert.equal((await rollout(appId, admin)).status, 200, 'an admin reads it');
    const stranger = await signUpDeveloper(service.url);
    assert.equal((await rollout(appId, stranger)).status, 404);
    assert.equal((await moveRollout(appId, { move: 'pause' }, stranger)).status, 404);

    const percentWithPause = await moveRollout(appId, { move: 'pause', percent: 20 });
    assert.equal(percentWithPause.status, 422);
    assert.equal(percentWithPause.body.code, 'percent_not_expected');
    const noPercent = await moveRollout(appId, { move: 'set_percent' });
    assert.equal(noPercent.status, 422);
    assert.equal(noPercent.body.code, 'percent_required');
    assert.equal((await moveRollout(appId, { move: 'resume' })).body.code, 'rollout_not_paused');

    const otherBrand = await publishMiniApp(
      service.url,
      developer,
      admin,
      'com.example.refusals-b',
      '1.0.0',
      'approved',
      {
        brands: ['brand_a'],
      },
    );
    const unlisted = await moveVersion(otherBrand, {
      to: 'rolling_out',
      rollout: { percent: 10, brands: ['brand_b'] },
    });
    assert.equal(unlisted.status, 422);
    assert.equal(unlisted.body.code, 'brand_not_in_manifest');
  });
});

describe('an update that expires while its car is away', () => {
  let service: TestService;
  let admin: Developer;
  let developer: Developer;
  const appId = 'com.example.expiring';

  // The test moves the clock past the update's hour: the tokens live longer than that.
  beforeAll(async () => {
    service = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail, SVC_TOKEN_TTL: '1d' },
      { clockRuns: true },
    );
    admin = await signUpAdmin(service, adminEmail);
    developer = await signUpDeveloper(service.url);
  });
  afterAll(() => service?.stop());

  const reported = (deviceId: string) => reportedVersion(service.url, admin.token, deviceId, appId);
  const installsOf = (deviceId: string) => installsOfApp(service.url, admin.token, deviceId, appId);

  test('when an update expires while its car is away then it is sent again when the car comes back, and one the car failed is not sent again', async () => {
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    const [credential] = (await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 1,
      brand: 'brand_a',
    })) as [CarCredential];
    const { deviceId } = credential;
    const reportRunning = async (car: BareCar) => {
      const nativeId = deviceId.slice(deviceId.indexOf(':') + 1);
      await car.client.publishAsync(
        carTopic('brand_a', nativeId, 'status'),
        JSON.stringify({
          device_id: deviceId,
          brand: 'brand_a',
          reported_at: new Date().toISOString(),
          host_version: '2.14.0',
          state: { ignition: false, doors_locked: true },
          installed_apps: [{ app_id: appId, version: '1.0.0' }],
        }),
        { qos: carTopicQos.status, retain: carTopicRetain.status },
      );
    };
    const installsReceived = (car: BareCar) =>
      car.received.filter((command) => command.name === 'app.install' && command.args.app_id === appId);

    const car = await connectBareCar(service.mqttUrl, credential);
    await reportRunning(car);
    await eventually('the car reported the app', async () => (await reported(deviceId)) === '1.0.0');
    await publishMiniApp(service.url, developer, admin, appId, '1.1.0');
    await eventually('the car was sent the update', () => installsReceived(car).length === 1);
    // The car goes away without a word, and the update expires meanwhile.
    await car.end();
    service.clock.advance(2 * 60 * 60 * 1000);
    await eventually('the update expired', async () => (await installsOf(deviceId))[0]?.state === 'expired');

    const back = await connectBareCar(service.mqttUrl, credential);
    await eventually('the update was sent again', () => installsReceived(back).length === 1);
    const [again] = installsReceived(back);
    assert.deepEqual(again?.args, { app_id: appId, version: '1.1.0' });

    // The car fails it: it is not sent a third time, even when it comes back once more.
    await back.ack(again?.command_id ?? '', 'failed', 'not enough storage');
    await eventually('the failure is recorded', async () =>
      (await installsOf(deviceId)).some((command: { state: string }) => command.state === 'failed'),
    );
    await back.end();
    const last = await connectBareCar(service.mqttUrl, credential);
    await reportRunning(last);
    await eventually('the car is online again', async () => {
      const status = await call(service.url, 'GET', carPath(deviceId, 'status'), { token: admin.token });
      return status.body.online === true;
    });
    // What it is sent next is the newer version, not the failed one again.
    await publishMiniApp(service.url, developer, admin, appId, '1.2.0');
    await eventually('the car was sent the newer version', () => installsReceived(last).length > 0);
    assert.deepEqual(
      installsReceived(last).map((command) => (command.args as { version?: string }).version),
      ['1.2.0'],
    );
    await last.end();
  });
});
