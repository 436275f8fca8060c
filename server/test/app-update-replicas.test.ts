/**
 * App updates on replicas sharing one Postgres database: when a version is published, the
 * replica that took the request and two more look at the same cars at once, and still every car
 * is sent the update once. (On PGlite there is one connection, so the looks cannot overlap: the
 * test runs on Postgres, which CI gives it.)
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars, type Simulator, startSimulator } from '@svc/car-simulator';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type AppUpdater, createAppUpdater } from '../src/app-updates/app-updater.ts';
import { systemClock } from '../src/clock.ts';
import { createCommandLifecycle } from '../src/commands/command-lifecycle.ts';
import { createCommandMetrics } from '../src/commands/command-metrics.ts';
import { silentLogger } from '../src/logger.ts';
import { type Db, openStore } from '../src/store/db.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, publishMiniApp } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const onPostgres = Boolean(process.env.DATABASE_URL);
const adminEmail = 'update-replicas-admin@example.com';
const appId = 'com.example.replicated-update';
const quiet = { write: () => true };

/** Another replica's app updater, on a connection pool of its own as another process would have. */
function otherReplica(databaseUrl: string): { db: Db; updater: AppUpdater } {
  const db = openStore({ databaseUrl });
  const lifecycle = createCommandLifecycle({
    db,
    clock: systemClock,
    metrics: createCommandMetrics(new Registry()),
  });
  return {
    db,
    updater: createAppUpdater({
      db,
      clock: systemClock,
      logger: silentLogger,
      lifecycle,
      ratePerSecond: 1000,
    }),
  };
}

describe.skipIf(!onPostgres)('app updates on replicas of one database', () => {
  let store: TestStore;
  let service: TestService;
  let admin: Developer;
  let developer: Developer;
  let cars: CarCredential[];
  let simulator: Simulator;
  const others: { db: Db; updater: AppUpdater }[] = [];

  beforeAll(async () => {
    store = await openTestStore();
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { store, clockRuns: true });
    admin = await signUpAdmin(service, adminEmail);
    developer = await signUpDeveloper(service.url);
    cars = await provisionCars({ apiUrl: service.url, token: admin.token, count: 30, brand: 'brand_a' });
  });
  afterAll(async () => {
    await simulator?.stop();
    for (const other of others) {
      await other.updater.stop();
      await other.db.destroy();
    }
    await service?.stop();
    await store?.close();
  });

  test('when a version is published and three replicas look at the cars at once then each car is sent it once', async () => {
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    simulator = await startSimulator({
      mqttUrl: service.mqttUrl,
      cars,
      installedApps: [{ app_id: appId, version: '1.0.0' }],
      statusEveryMs: 60_000,
      telemetryEveryMs: 60_000,
      output: quiet,
      warnings: quiet,
    });
    await eventually('the cars reported the app', async () => {
      const rows = await store
        .db('car_status_reports')
        .whereRaw('installed_apps @> ?::jsonb', [JSON.stringify([{ app_id: appId, version: '1.0.0' }])]);
      return rows.length === cars.length;
    });
    assert.ok(store.databaseUrl);
    others.push(otherReplica(store.databaseUrl), otherReplica(store.databaseUrl));

    const versionId = await publishMiniApp(service.url, developer, admin, appId, '1.1.0', 'approved');
    const published = call(service.url, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
      token: developer.token,
      body: { to: 'published' },
    });
    // The other replicas hear of it as the request is answered (their sweep, in production).
    for (const other of others) other.updater.wake(appId);
    assert.equal((await published).status, 200);
    for (const other of others) other.updater.wake(appId);

    await eventually(
      'every car runs 1.1.0',
      () => simulator.cars.every((car) => car.installedApps.some((app) => app.version === '1.1.0')),
      20_000,
    );
    const installs = await store
      .db('car_commands')
      .where({ name: 'app.install' })
      .whereRaw("args->>'app_id' = ? and args->>'version' = ?", [appId, '1.1.0'])
      .select('device_id');
    const perCar = new Map<string, number>();
    for (const { device_id } of installs) perCar.set(device_id, (perCar.get(device_id) ?? 0) + 1);
    assert.equal(perCar.size, cars.length, 'every car was sent the update');
    assert.deepEqual(
      [...perCar].filter(([, sent]) => sent > 1),
      [],
      'no car was sent it twice',
    );
    // And the service has it from the cars' own reports.
    await eventually('the service has their reports', async () => {
      const install = await call(service.url, 'GET', carPath(cars[0]?.deviceId ?? '', 'install'), {
        token: admin.token,
      });
      return install.body.installed_apps[0]?.version === '1.1.0';
    });
  });
});
