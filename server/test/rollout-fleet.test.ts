/**
 * A rollout end to end with the car simulator as a developer runs it (`svc-car-sim --app …`, here
 * in this process through its runCli): 50 cars of two brands run an app; a new version for brand_a
 * only rolls out to 20 %, then 100 %, while five cars are away; they get it when they come back,
 * and again when restarted on the version they had; then it is rolled back. At each step every car ends on the version the rollout says, and no car
 * of the brand the manifest leaves out is ever sent it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CarCredential, provisionCars, runCli } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { cohortPoint } from '../src/mini-apps/cohort.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { publishMiniApp, reportedVersion } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'rollout-fleet-admin@example.com';
const appId = 'com.example.fleet-rollout';

/** One `svc-car-sim` run: what its cars showed, and a Ctrl-C that waits for it to end. */
interface SimulatorRun {
  shown: string[];
  stop(): Promise<number>;
}

describe('a rollout to a simulated fleet', () => {
  let service: TestService;
  let admin: Developer;
  let developer: Developer;
  let dir: string;
  let fleet: CarCredential[];
  let away: CarCredential[];
  let brandB: CarCredential[];
  const runs: SimulatorRun[] = [];

  /** `svc-car-sim --credentials FILE --app <appId>@1.0.0`, until stopped; resolves once its cars are online. */
  async function simulate(name: string, cars: CarCredential[]): Promise<SimulatorRun> {
    const path = join(dir, `${name}.json`);
    writeFileSync(
      path,
      JSON.stringify(cars.map((car) => ({ device_id: car.deviceId, password: car.password }))),
    );
    const shown: string[] = [];
    let stderr = '';
    const stop = new AbortController();
    let online: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      online = resolve;
    });
    const exited = runCli(
      [
        '--credentials',
        path,
        '--mqtt-url',
        service.mqttUrl,
        '--app',
        `${appId}@1.0.0`,
        '--status-every',
        '1m',
      ],
      {
        stdout: { write: (text: string) => shown.push(...text.split('\n').filter(Boolean)) > 0 },
        stderr: {
          write: (text: string) => {
            stderr += text;
            if (stderr.includes('Ctrl-C to stop')) online();
            return true;
          },
        },
        env: {},
        stop: stop.signal,
      },
    );
    await Promise.race([
      started,
      exited.then((code) => assert.fail(`svc-car-sim exited ${code}: ${stderr}`)),
    ]);
    const run = {
      shown,
      stop: () => {
        stop.abort();
        return exited;
      },
    };
    runs.push(run);
    return run;
  }

  /** The version of the app each car last reported, as the service has it. */
  const reported = (deviceId: string) => reportedVersion(service.url, admin.token, deviceId, appId);

  async function untilEveryCarRuns(cars: CarCredential[], expected: (deviceId: string) => string) {
    let wrong: string[] = [];
    try {
      await eventually(
        'every car reports the version the rollout says',
        async () => {
          wrong = [];
          for (const car of cars) {
            const version = await reported(car.deviceId);
            if (version !== expected(car.deviceId)) wrong.push(`${car.deviceId}: ${version}`);
          }
          return wrong.length === 0;
        },
        30_000,
      );
    } catch (error) {
      throw new Error(`${(error as Error).message}; still wrong: ${wrong.join(', ')}`);
    }
  }

  const moveRollout = async (body: unknown) => {
    const moved = await call(service.url, 'POST', `/api/v1/mini-apps/${appId}/rollout/moves`, {
      token: developer.token,
      body,
    });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    return moved.body;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-rollout-fleet-'));
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    admin = await signUpAdmin(service, adminEmail);
    developer = await signUpDeveloper(service.url);
    const brandA = await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 40,
      brand: 'brand_a',
    });
    brandB = await provisionCars({ apiUrl: service.url, token: admin.token, count: 10, brand: 'brand_b' });
    away = brandA.slice(0, 5);
    fleet = [...brandA.slice(5), ...brandB];
  });
  afterAll(async () => {
    for (const run of runs) await run.stop();
    await service?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('when 2.0.0 for brand_a rolls out to 20 %, then 100 % while five cars are away, then back, then is rolled back, then every car runs what the rollout says at each step and no brand_b car is sent it', async () => {
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    const main = await simulate('fleet', fleet);
    const garage = await simulate('away', away);
    const everyCar = [...fleet, ...away];
    await untilEveryCarRuns(everyCar, () => '1.0.0');
    await garage.stop();

    const isBrandA = (deviceId: string) => deviceId.startsWith('brand_a:');
    const versionId = await publishMiniApp(service.url, developer, admin, appId, '2.0.0', 'approved', {
      brands: ['brand_a'],
    });
    const released = await call(service.url, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
      token: developer.token,
      body: { to: 'rolling_out', rollout: { percent: 20 } },
    });
    assert.equal(released.status, 200, JSON.stringify(released.body));
    const inTwenty = (deviceId: string) => isBrandA(deviceId) && cohortPoint(appId, deviceId) < 20;
    await untilEveryCarRuns(fleet, (deviceId) => (inTwenty(deviceId) ? '2.0.0' : '1.0.0'));
    assert.ok(
      fleet.some((car) => inTwenty(car.deviceId)),
      'some car is in the first 20 %',
    );

    await moveRollout({ move: 'set_percent', percent: 100 });
    await untilEveryCarRuns(fleet, (deviceId) => (isBrandA(deviceId) ? '2.0.0' : '1.0.0'));
    for (const car of away)
      assert.equal(await reported(car.deviceId), '1.0.0', 'a car away gets nothing yet');

    const back = await simulate('away-again', away);
    await untilEveryCarRuns(away, () => '2.0.0');
    const status = await call(service.url, 'GET', `/api/v1/mini-apps/${appId}/rollout`, {
      token: developer.token,
    });
    assert.deepEqual(status.body.progress, {
      eligible: 40,
      waiting: 0,
      queued: 0,
      sent: 0,
      installed: 40,
      failed: 0,
      expired: 0,
    });

    // The five are started again as they were first (svc-car-sim keeps no versions): they report
    // 1.0.0 after having completed 2.0.0, and are sent it again.
    await back.stop();
    const again = await simulate('away-restarted', away);
    // The service still has their last report (2.0.0) until the new one comes: the cars' own
    // words say when they installed it again.
    await eventually(
      'the restarted cars install 2.0.0 again',
      () => again.shown.filter((line) => line.includes(` installs ${appId} 2.0.0`)).length === away.length,
      30_000,
    );
    await untilEveryCarRuns(away, () => '2.0.0');

    const rolledBack = await moveRollout({ move: 'rollback' });
    assert.equal(rolledBack.state, 'rolled_back');
    await untilEveryCarRuns(everyCar, () => '1.0.0');
    // After a rollback the counts follow the cars back: every one of the rollout's is on 1.0.0.
    await eventually('the progress counts them back', async () => {
      const { body } = await call(service.url, 'GET', `/api/v1/mini-apps/${appId}/rollout`, {
        token: developer.token,
      });
      return body.progress.installed === 40 && body.progress.eligible === 40;
    });

    // The cars said what they installed; none of brand_b ever installed 2.0.0.
    const installs = [...main.shown, ...back.shown, ...again.shown].filter((line) =>
      line.includes(` installs ${appId} 2.0.0`),
    );
    assert.equal(installs.length, 45, 'each brand_a car installed it once, the five restarted twice');
    assert.ok(
      installs.every((line) => line.startsWith('car brand_a:')),
      installs.join('\n'),
    );
    for (const car of brandB) assert.equal(await reported(car.deviceId), '1.0.0');
  });
});
