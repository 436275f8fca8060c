/**
 * The MQTT bridge against a real broker (a plain aedes, without the ACL): cars publish as the
 * contract says, and what they reported shows on the read routes; every message the contract
 * refuses is dropped, counted by reason and never stored; a handler that fails stops nothing;
 * telemetry waiting in a batch is written when the service stops.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { deviceIds, provisionCar } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { bridgeConnection, connectCar, type PlainBroker, startPlainBroker } from './support/mqtt.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore } from './support/store.ts';

const at = '2026-11-21T09:59:00.000Z';
/** A brand_b car of this run: its native id is free-form. */
const newDeviceId = deviceIds('bridge');

const statusReport = (deviceId: string, extra: Record<string, unknown> = {}) => ({
  device_id: deviceId,
  brand: 'brand_b',
  reported_at: at,
  host_version: '2.14.0',
  state: { ignition: false, doors_locked: true },
  installed_apps: [{ app_id: 'com.example.parking', version: '1.4.2' }],
  ...extra,
});

/** An acknowledgement of a command the service never sent. */
const strayAck = (deviceId: string) => ({
  command_id: randomUUID(),
  device_id: deviceId,
  brand: 'brand_b',
  outcome: 'completed',
  at,
});

const fix = (deviceId: string, latitude: number, recordedAt = at) => ({
  device_id: deviceId,
  brand: 'brand_b',
  recorded_at: recordedAt,
  location: { latitude, longitude: 11.5754, accuracy_m: 4.5 },
  battery_percent: 81,
});

describe('the MQTT bridge', () => {
  let broker: PlainBroker;
  let service: TestService;
  let admin: Developer;

  const read = (deviceId: string, what: string) =>
    call(service.url, 'GET', `/api/v1/cars/${encodeURIComponent(deviceId)}/${what}`, { token: admin.token });

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
  });
  afterAll(async () => {
    await service?.stop();
    await broker?.close();
  });

  test('when a car reports presence, status and telemetry then status, install and location show them, state keys of its own too', async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    const car = await connectCar(broker, deviceId, at);
    try {
      await car.publish('presence', { device_id: deviceId, brand: 'brand_b', state: 'online', at });
      // The contract names `ignition` and `doors_locked`; a car may report keys of its own.
      const state = { ignition: false, doors_locked: true, fuel_level_pct: 41, lights: { low_beam: 'on' } };
      await car.publish('status', statusReport(deviceId, { state }));
      await car.publish('telemetry', fix(deviceId, 48.1371));

      await eventually(
        'the fix shows on location',
        async () => (await read(deviceId, 'location')).status === 200,
      );
      const status = await read(deviceId, 'status');
      assert.deepEqual(status.body, {
        device_id: deviceId,
        brand: 'brand_b',
        online: true,
        // When the service received the car's last message, by its own clock.
        last_seen: new Date(service.clock.now).toISOString(),
        state,
        reported_at: at,
      });
      assert.deepEqual((await read(deviceId, 'install')).body, {
        device_id: deviceId,
        brand: 'brand_b',
        host_version: '2.14.0',
        installed_apps: [{ app_id: 'com.example.parking', version: '1.4.2' }],
        reported_at: at,
      });
      assert.deepEqual((await read(deviceId, 'location')).body, {
        device_id: deviceId,
        brand: 'brand_b',
        latitude: 48.1371,
        longitude: 11.5754,
        accuracy_m: 4.5,
        recorded_at: at,
      });
      const metrics = await scrape(service);
      for (const suffix of ['presence', 'status', 'telemetry']) {
        assert.ok(sample(metrics, 'svc_mqtt_messages_total', { suffix, outcome: 'stored' }) >= 1, suffix);
      }
      assert.ok(sample(metrics, 'svc_mqtt_connected_cars') >= 1);
    } finally {
      await car.end();
    }
  });

  test('when a car drops off without a word then its last will makes it offline', async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    const car = await connectCar(broker, deviceId, at);
    await car.publish('presence', { device_id: deviceId, brand: 'brand_b', state: 'online', at });
    await eventually('the car is online', async () => (await read(deviceId, 'status')).body.online === true);
    car.vanish();
    await eventually(
      'the car is offline',
      async () => (await read(deviceId, 'status')).body.online === false,
    );
  });

  test('when a message breaks the contract then it is dropped, counted by reason, logged with the redacted id, and nothing is stored', async () => {
    const deviceId = newDeviceId();
    const otherId = newDeviceId();
    const neverProvisioned = newDeviceId();
    await provisionCar(service, admin, deviceId);
    await provisionCar(service, admin, otherId);
    const car = await connectCar(broker, deviceId, at);
    const stranger = await connectCar(broker, neverProvisioned, at);
    const cases: [reason: string, send: () => Promise<void>][] = [
      ['not_json', () => car.publish('status', Buffer.from('{"device_id": '))],
      ['not_json', () => car.publish('status', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))],
      ['invalid_payload', () => car.publish('status', statusReport(deviceId, { host_version: '' }))],
      // A key the contract names, with a value of another type.
      [
        'invalid_payload',
        () => car.publish('status', statusReport(deviceId, { state: { ignition: 'off' } })),
      ],
      ['invalid_payload', () => car.publish('telemetry', fix(deviceId, 91))],
      [
        'invalid_payload',
        () => car.publish('presence', { device_id: deviceId, brand: 'brand_b', state: 'away', at }),
      ],
      [
        'invalid_payload',
        () => car.publish('status', statusReport(deviceId, { reported_at: '2026-02-30T00:00:00Z' })),
      ],
      ['topic_mismatch', () => car.publish('status', statusReport(otherId))],
      ['topic_mismatch', () => car.publish('telemetry', { ...fix(deviceId, 1), brand: 'brand_c' })],
      ['unknown_car', () => stranger.publish('status', statusReport(neverProvisioned))],
      ['unknown_car', () => stranger.publish('telemetry', fix(neverProvisioned, 1))],
      ['unknown_car', () => stranger.publish('cmd/ack', strayAck(neverProvisioned))],
      ['invalid_topic', () => car.publishOn('cars/brand_z/ABC/status', statusReport(deviceId), 'status')],
    ];
    try {
      for (const [reason, send] of cases) {
        const before = sample(await scrape(service), 'svc_mqtt_dropped_total', { reason });
        await send();
        await eventually(
          `a ${reason} drop is counted`,
          async () => sample(await scrape(service), 'svc_mqtt_dropped_total', { reason }) === before + 1,
        );
      }
      for (const id of [deviceId, otherId, neverProvisioned]) {
        for (const table of ['car_status_reports', 'car_locations', 'car_telemetry']) {
          assert.deepEqual(await service.store.db(table).where({ device_id: id }), [], `${table} ${id}`);
        }
      }
      const dropLines = service.logs.filter((line) => line.includes('mqtt: message dropped'));
      // A car not provisioned is logged in words of its own.
      const unknownCars = cases.filter(([reason]) => reason === 'unknown_car').length;
      assert.ok(dropLines.length >= cases.length - unknownCars, 'every drop is logged');
      const unknownCarLines = service.logs.filter((line) => line.includes('a car not provisioned dropped'));
      assert.ok(unknownCarLines.length >= unknownCars, 'every unknown car is logged');
      const nativeId = deviceId.slice('brand_b:'.length);
      assert.ok(
        service.logs.every((line) => !line.includes(nativeId)),
        'the logs never hold the device id itself',
      );
      assert.ok(dropLines.some((line) => line.includes('"reason":"topic_mismatch"')));
    } finally {
      await car.end();
      await stranger.end();
    }
  });

  test('when a car sends only an acknowledgement then that moves its last seen to when the service got it, and a stray one is counted as unknown_command', async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    const car = await connectCar(broker, deviceId, at);
    try {
      await car.publish('presence', { device_id: deviceId, brand: 'brand_b', state: 'online', at });
      const firstSeen = new Date(service.clock.now).toISOString();
      await eventually(
        'the car shows',
        async () => (await read(deviceId, 'status')).body.last_seen === firstSeen,
      );
      const before = sample(await scrape(service), 'svc_mqtt_dropped_total', { reason: 'unknown_command' });
      service.clock.advance(60_000);
      await car.publish('cmd/ack', strayAck(deviceId));
      const later = new Date(service.clock.now).toISOString();
      await eventually(
        'the acknowledgement moves last seen',
        async () => (await read(deviceId, 'status')).body.last_seen === later,
      );
      await eventually(
        'the dropped acknowledgement is counted',
        async () =>
          sample(await scrape(service), 'svc_mqtt_dropped_total', { reason: 'unknown_command' }) ===
          before + 1,
      );
    } finally {
      await car.end();
    }
  });

  test('when storing a message fails then it is counted as handler_failed, and the next message is stored', async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    const car = await connectCar(broker, deviceId, at);
    try {
      const before = sample(await scrape(service), 'svc_mqtt_dropped_total', { reason: 'handler_failed' });
      // Valid JSON and a valid report, which Postgres refuses to keep: jsonb holds no NUL character.
      await car.publish('status', statusReport(deviceId, { state: { note: 'a\u0000b' } }));
      await eventually(
        'the failure is counted',
        async () =>
          sample(await scrape(service), 'svc_mqtt_dropped_total', { reason: 'handler_failed' }) ===
          before + 1,
      );
      assert.equal((await read(deviceId, 'install')).body.host_version, null);
      await car.publish('status', statusReport(deviceId, { host_version: '2.15.0' }));
      await eventually(
        'the next report is stored',
        async () => (await read(deviceId, 'install')).body.host_version === '2.15.0',
      );
      assert.ok(service.logs.some((line) => line.includes('mqtt: a message could not be handled')));
    } finally {
      await car.end();
    }
  });

  test('when the service stops then the telemetry waiting in a batch is written', async () => {
    const store = await openTestStore();
    const patient = await startTestService(
      { SVC_ADMIN_EMAILS: 'root@example.com' },
      {
        store,
        // Nothing is written before the stop: the batch neither fills nor times out.
        bridge: {
          // A client id of its own beside the file's service: two bridges under one id take the
          // broker session from each other, and the other one's batch would write these fixes.
          brokerConnection: { ...bridgeConnection(broker), clientId: 'svc-bridge/patient' },
          telemetryBatch: { maxRows: 10_000, maxDelayMs: 600_000 },
        },
      },
    );
    const deviceId = newDeviceId();
    try {
      const root = await signUpAdmin(patient, 'root@example.com');
      const made = await call(patient.url, 'POST', '/api/v1/admin/cars', {
        token: root.token,
        body: { device_id: deviceId, brand: 'brand_b' },
      });
      assert.equal(made.status, 201);
      const car = await connectCar(broker, deviceId, at);
      for (let i = 1; i <= 5; i += 1) {
        await car.publish('telemetry', fix(deviceId, 48 + i / 100, `2026-11-21T09:5${i}:00.000Z`));
      }
      // A status after the fixes: once it is stored, the bridge has taken the fixes before it.
      await car.publish('status', statusReport(deviceId));
      await car.end();
      const location = `/api/v1/cars/${encodeURIComponent(deviceId)}/location`;
      await eventually(
        'the status is stored',
        async () => (await store.db('car_status_reports').where({ device_id: deviceId })).length === 1,
      );
      assert.equal(
        (await call(patient.url, 'GET', location, { token: root.token })).body.code,
        'no_location_yet',
      );
      assert.equal((await store.db('car_telemetry').where({ device_id: deviceId })).length, 0);
    } finally {
      await patient.stop();
    }
    try {
      const history = await store.db('car_telemetry').where({ device_id: deviceId }).orderBy('recorded_at');
      assert.deepEqual(
        history.map((row) => row.latitude),
        [48.01, 48.02, 48.03, 48.04, 48.05],
      );
      const last = await store.db('car_locations').where({ device_id: deviceId }).first();
      assert.equal(last.latitude, 48.05);
    } finally {
      await store.close();
    }
  });
});
