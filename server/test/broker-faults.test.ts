/**
 * The broker going away under the service: a Mosquitto killed and started again while simulated
 * cars publish, and the bridge's own connection to the embedded broker cut. The service stays up
 * and ready, and what cars report after the broker is back is stored again.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars, type Simulator, startSimulator } from '@svc/car-simulator';
import { afterAll, afterEach, beforeAll, describe, test } from 'vitest';
import { serviceUsername } from '../src/broker/embedded-broker.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { call, eventually } from './support/http.ts';
import { sample } from './support/metrics.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore } from './support/store.ts';

const adminEmail = 'faults-admin@example.com';
const quiet = { write: () => true };

/**
 * A fleet reporting several times a second, and reconnecting soon after a drop. Its cars' clocks are
 * real ones, so the services here run on real time too (clockRuns): a car's time ahead of the
 * service's is refused.
 */
function simulate(mqttUrl: string, cars: CarCredential[]): Promise<Simulator> {
  return startSimulator({
    mqttUrl,
    cars,
    statusEveryMs: 200,
    telemetryEveryMs: 100,
    reconnectPeriodMs: 100,
    output: quiet,
    warnings: quiet,
  });
}

function fleetReads(service: TestService, admin: Developer) {
  const read = (deviceId: string, what: string) =>
    call(service.url, 'GET', `/api/v1/cars/${encodeURIComponent(deviceId)}/${what}`, { token: admin.token });
  return {
    read,
    /** Whether every car's last status was reported after `since` (and so stored after it). */
    async allReportedSince(cars: CarCredential[], since: Date): Promise<boolean> {
      for (const car of cars) {
        const status = await read(car.deviceId, 'status');
        if (status.status !== 200 || !(Date.parse(status.body.reported_at) > since.getTime())) return false;
      }
      return true;
    },
    async allOnline(cars: CarCredential[]): Promise<boolean> {
      for (const car of cars) if ((await read(car.deviceId, 'status')).body.online !== true) return false;
      return true;
    },
  };
}

describe('when Mosquitto is killed and started again while cars publish', () => {
  let mosquitto: TestMosquitto;
  let service: TestService;
  let admin: Developer;
  let simulator: Simulator | undefined;

  beforeAll(async () => {
    mosquitto = await startMosquitto();
    service = await startTestService(
      {
        SVC_ADMIN_EMAILS: adminEmail,
        MQTT_URL: mosquitto.url,
        MQTT_USERNAME: mosquitto.admin.username,
        MQTT_PASSWORD: mosquitto.admin.password,
      },
      { clockRuns: true, bridge: { telemetryBatch: { maxRows: 50, maxDelayMs: 20 } } },
    );
    admin = await signUpAdmin(service, adminEmail);
  });
  afterAll(async () => {
    await simulator?.stop();
    await service?.stop();
    await mosquitto?.stop();
  });

  test('then the bridge resubscribes and stores reports again, provisioning works again, presence ends right, and the service stays up and ready', async () => {
    const cars = await provisionCars({ apiUrl: service.url, token: admin.token, count: 5, brand: 'brand_a' });
    simulator = await simulate(mosquitto.url, cars);
    const fleet = fleetReads(service, admin);
    await eventually('every car shows online', () => fleet.allOnline(cars));

    await mosquitto.kill();
    const provisionOne = () =>
      provisionCars({ apiUrl: service.url, token: admin.token, count: 1, brand: 'brand_a' });
    await assert.rejects(provisionOne(), /broker/i, 'provisioning needs the broker, and says so');
    // Serving: the store answers, and the API (accounts, packages) works without the broker; but
    // it says the bridge takes nothing, and so does the metric.
    await eventually('/readyz says the bridge is failing', async () => {
      const readiness = await call(service.url, 'GET', '/readyz');
      assert.equal(readiness.status, 200);
      return readiness.body.status === 'degraded' && readiness.body.checks.mqtt_bridge === 'failing';
    });
    const metrics = async () => String((await call(service.metricsUrl, 'GET', '')).body);
    assert.equal(sample(await metrics(), 'svc_mqtt_bridge_subscribed'), 0);
    assert.equal(sample(await metrics(), 'svc_mqtt_bridge_connected', { connection: 'messages' }), 0);
    assert.equal((await call(service.url, 'GET', '/healthz')).status, 200);

    const restarted = new Date();
    await mosquitto.start();

    await eventually(
      'every car reports after the restart, and its report is stored',
      () => fleet.allReportedSince(cars, restarted),
      30_000,
    );
    await eventually('every car shows online again', () => fleet.allOnline(cars));
    // It says so once it has read what the cars left retained, which may come after their reports.
    await eventually('the bridge says it subscribed again, the broker having lost its session', () =>
      service.logs
        .map((line) => JSON.parse(line))
        .some(
          (line) =>
            line.message === 'mqtt: bridge connected' &&
            line.subscribed === true &&
            line.session_present === false,
        ),
    );

    let added: CarCredential[] = [];
    await eventually(
      'provisioning works again',
      async () => {
        added = await provisionOne().catch(() => []);
        return added.length === 1;
      },
      30_000,
    );
    // The new car's credential is on the restarted broker: it signs in and is seen.
    const newcomer = await simulate(mosquitto.url, added);
    try {
      await eventually('the new car shows online', () => fleet.allOnline(added));
    } finally {
      await newcomer.stop();
    }

    // Presence still ends right: a car that leaves is offline, and the gauge agrees.
    const leaving = simulator.cars[0];
    assert.ok(leaving);
    await leaving.stop();
    await eventually(
      'the car that left shows offline',
      async () => (await fleet.read(leaving.deviceId, 'status')).body.online === false,
    );
    await eventually(
      'connected cars counts the four still there',
      async () =>
        sample(String((await call(service.metricsUrl, 'GET', '')).body), 'svc_mqtt_connected_cars') === 4,
    );
    assert.deepEqual((await call(service.url, 'GET', '/readyz')).body, {
      status: 'ready',
      checks: { store: 'ok', key_value_store: 'ok', mqtt_bridge: 'ok' },
    });
    const scrape = await metrics();
    assert.equal(sample(scrape, 'svc_mqtt_bridge_subscribed'), 1);
    for (const connection of ['messages', 'commands']) {
      assert.equal(sample(scrape, 'svc_mqtt_bridge_connected', { connection }), 1, connection);
    }
  });
});

describe('when a car leaves while no service listens to Mosquitto', () => {
  test('then a service starting afterwards reads its retained offline, though it subscribes shared', async () => {
    const mosquitto = await startMosquitto();
    const store = await openTestStore();
    const env = {
      SVC_ADMIN_EMAILS: adminEmail,
      MQTT_URL: mosquitto.url,
      MQTT_USERNAME: mosquitto.admin.username,
      MQTT_PASSWORD: mosquitto.admin.password,
    };
    let simulator: Simulator | undefined;
    let later: TestService | undefined;
    try {
      const first = await startTestService(env, { store, clockRuns: true });
      let admin: Developer;
      let cars: CarCredential[];
      try {
        admin = await signUpAdmin(first, adminEmail);
        cars = await provisionCars({ apiUrl: first.url, token: admin.token, count: 1, brand: 'brand_a' });
        simulator = await simulate(mosquitto.url, cars);
        await eventually('the car shows online', () => fleetReads(first, admin).allOnline(cars));
      } finally {
        await first.stop();
      }
      // The car says offline, retained, with no bridge subscribed.
      await simulator.stop();
      simulator = undefined;

      later = await startTestService(env, { store, clockRuns: true });
      const reads = fleetReads(later, admin);
      const [car] = cars;
      assert.ok(car);
      await eventually(
        'the car shows offline',
        async () => (await reads.read(car.deviceId, 'status')).body.online === false,
      );
    } finally {
      await simulator?.stop();
      await later?.stop();
      await store.close();
      await mosquitto.stop();
    }
  });
});

describe("when the embedded broker drops the bridge's own connection", () => {
  let service: TestService;
  let admin: Developer;
  let simulator: Simulator | undefined;

  beforeAll(async () => {
    service = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail },
      { clockRuns: true, bridge: { telemetryBatch: { maxRows: 50, maxDelayMs: 20 } } },
    );
    admin = await signUpAdmin(service, adminEmail);
  });
  afterEach(async () => {
    await simulator?.stop();
    simulator = undefined;
  });
  afterAll(async () => {
    await service?.stop();
  });

  test('then the bridge reconnects, and what cars report afterwards is stored', async () => {
    const cars = await provisionCars({ apiUrl: service.url, token: admin.token, count: 3, brand: 'brand_a' });
    simulator = await simulate(service.mqttUrl, cars);
    const fleet = fleetReads(service, admin);
    await eventually('every car shows online', () => fleet.allOnline(cars));

    const from = service.logs.length;
    // What a rotation of the service's credential would do: the broker closes its connections.
    await service.app.broker.accounts.remove(serviceUsername);
    await eventually('the bridge reconnects', () =>
      service.logs.slice(from).some((line) => JSON.parse(line).message === 'mqtt: bridge connected'),
    );
    const dropped = new Date();
    await eventually('every car reports after the drop, and its report is stored', () =>
      fleet.allReportedSince(cars, dropped),
    );
    assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
  });
});
