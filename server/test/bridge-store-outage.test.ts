/**
 * Postgres restarting under the bridge: the service's connections are terminated and new ones
 * refused for a while (what a restart looks like to a client), while cars send status (QoS 1) and
 * telemetry. Status waits and is stored once the store is back, never acknowledged unstored;
 * telemetry waits in a bounded buffer and what overflows it is counted; the service never stops.
 */
import assert from 'node:assert/strict';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { deviceIds } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import {
  bridgeConnection,
  connectCar,
  type PlainBroker,
  startPlainBroker,
  type TestCar,
} from './support/mqtt.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const needsPostgres = process.env.DATABASE_URL
  ? false
  : 'needs Postgres (set DATABASE_URL): the outage is made on the wire between the service and the server';

const newDeviceId = deviceIds('outage');
const minute = (n: number) => new Date(Date.parse('2026-11-21T08:00:00Z') + n * 60_000).toISOString();

const statusReport = (deviceId: string, n: number) => ({
  device_id: deviceId,
  brand: 'brand_b',
  reported_at: minute(n),
  host_version: `2.0.${n}`,
  state: { ignition: true },
  installed_apps: [],
});
const fix = (deviceId: string, n: number) => ({
  device_id: deviceId,
  brand: 'brand_b',
  recorded_at: minute(n),
  location: { latitude: 48 + n / 1000, longitude: 11.5 },
});

describe.skipIf(needsPostgres)(
  `when Postgres restarts while cars report${needsPostgres ? ` (${needsPostgres})` : ''}`,
  () => {
    let broker: PlainBroker;
    let proxy: TcpProxy;
    let store: TestStore;
    let service: TestService;
    let admin: Developer;
    let server: Knex;

    const counted = async (suffix: string, outcome: string) =>
      sample(await scrape(service), 'svc_mqtt_messages_total', { suffix, outcome });
    const dropped = async (reason: string) =>
      sample(await scrape(service), 'svc_mqtt_dropped_total', { reason });

    /** What a restart does: every session of the service's database ends, and connecting fails until it is back. */
    async function restartBegins(): Promise<void> {
      await proxy.refuse();
      await server.raw(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = ? and pid <> pg_backend_pid()',
        [new URL(store.databaseUrl ?? '').pathname.slice(1)],
      );
    }

    async function provisionedCars(count: number): Promise<TestCar[]> {
      const cars: TestCar[] = [];
      for (let i = 0; i < count; i += 1) {
        const deviceId = newDeviceId();
        const made = await call(service.url, 'POST', '/api/v1/admin/cars', {
          token: admin.token,
          body: { device_id: deviceId, brand: 'brand_b' },
        });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        cars.push(await connectCar(broker, deviceId, minute(0)));
      }
      return cars;
    }

    beforeAll(async () => {
      broker = await startPlainBroker();
      const postgres = new URL(process.env.DATABASE_URL ?? '');
      server = knex({ client: 'pg', connection: postgres.href, pool: { min: 0, max: 1 } });
      proxy = await startTcpProxy({ host: postgres.hostname, port: Number(postgres.port || 5432) });
      store = await openTestStore({ port: proxy.port, acquireTimeoutMs: 1000, statementTimeoutMs: 5000 });
      service = await startTestService(
        { SVC_ADMIN_EMAILS: 'root@example.com' },
        {
          store,
          bridge: {
            brokerConnection: bridgeConnection(broker),
            telemetryBatch: { maxRows: 10, maxDelayMs: 20, maxWaitingRows: 50 },
          },
        },
      );
      admin = await signUpAdmin(service, 'root@example.com');
    });
    afterAll(async () => {
      await proxy?.restore().catch(() => {});
      await service?.stop();
      await store?.close();
      await proxy?.close();
      await server?.destroy();
      await broker?.close();
    });

    test('then every status sent meanwhile is stored once it is back, none dropped, and new reports are stored', async () => {
      const cars = await provisionedCars(3);
      const storedBefore = await counted('status', 'stored');
      const failedBefore = await dropped('handler_failed');
      const from = service.logs.length;
      try {
        await restartBegins();
        const reports = 5;
        for (let n = 1; n <= reports; n += 1) {
          for (const car of cars) await car.publish('status', statusReport(car.deviceId, n));
        }
        await eventually('the bridge finds the store unavailable', () =>
          service.logs
            .slice(from)
            .some(
              (line) =>
                JSON.parse(line).message ===
                'mqtt: the store is unavailable; messages wait and are tried again',
            ),
        );
        assert.equal((await call(service.url, 'GET', '/healthz')).status, 200, 'the service is up');
        assert.equal((await call(service.url, 'GET', '/readyz')).status, 503, 'and says the store fails');

        await proxy.restore();
        await eventually(
          'every status is stored',
          async () => (await counted('status', 'stored')) === storedBefore + cars.length * reports,
          30_000,
        );
        assert.equal(await dropped('handler_failed'), failedBefore, 'nothing dropped for the outage');
        for (const car of cars) {
          const stored = await store.db('car_status_reports').where({ device_id: car.deviceId }).first();
          assert.equal(stored.host_version, `2.0.${reports}`, 'the last status sent is the one kept');
        }

        for (const car of cars) await car.publish('status', statusReport(car.deviceId, reports + 1));
        await eventually(
          'a new status is stored',
          async () => (await counted('status', 'stored')) === storedBefore + cars.length * (reports + 1),
        );
        assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
      } finally {
        await proxy.restore().catch(() => {});
        for (const car of cars) await car.end();
      }
    });

    test('then telemetry waits in a bounded buffer: what it holds is stored once the store is back, what overflows is counted as dropped', async () => {
      const [car] = await provisionedCars(1);
      assert.ok(car);
      const storedBefore = await counted('telemetry', 'stored');
      const overflowBefore = await dropped('store_unavailable');
      const from = service.logs.length;
      const sent = 120;
      try {
        await restartBegins();
        for (let n = 1; n <= sent; n += 1) await car.publish('telemetry', fix(car.deviceId, n));
        await eventually(
          'the overflow is counted',
          async () => (await dropped('store_unavailable')) > overflowBefore,
        );
        assert.ok(
          service.logs
            .slice(from)
            .some((line) => JSON.parse(line).message === 'mqtt: telemetry waits: the store is unavailable'),
        );

        await proxy.restore();
        await eventually(
          'every fix is stored or counted as dropped',
          async () =>
            (await counted('telemetry', 'stored')) -
              storedBefore +
              (await dropped('store_unavailable')) -
              overflowBefore ===
            sent,
          30_000,
        );
        // The newest fixes are the ones kept: the car's location is its last.
        const location = await store.db('car_locations').where({ device_id: car.deviceId }).first();
        assert.equal(location.recorded_at.toISOString(), minute(sent));
        const history = await store
          .db('car_telemetry')
          .where({ device_id: car.deviceId })
          .count('* as rows')
          .first();
        assert.equal(Number(history?.rows), (await counted('telemetry', 'stored')) - storedBefore);

        await car.publish('telemetry', fix(car.deviceId, sent + 1));
        await eventually('a new fix is stored', async () => {
          const last = await store.db('car_locations').where({ device_id: car.deviceId }).first();
          return last.recorded_at.toISOString() === minute(sent + 1);
        });
      } finally {
        await proxy.restore().catch(() => {});
        await car.end();
      }
    });
  },
);
