/**
 * Hostile times from one car (car-time.ts): a time the store cannot hold (year 0, an offset of
 * +23:00 or -16:00, none at all) or one far ahead of the service's clock (year 9999, six minutes).
 * Sent every 200 ms among other cars' good messages, on the service's own broker with the cars'
 * real credentials and the telemetry batched as in production (200 ms): every good message is
 * stored, and every hostile one is refused when read, counted and logged without the car's id.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type CarTopicSuffix, carTopic, carTopicQos, carTopicRetain } from '../../generated/mqtt.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { carPath, deviceIds, provisionCar } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { startTestService, type TestService } from './support/service.ts';

/** The service's clock stands at 2026-11-21T10:00:00Z (support/service.ts). */
const past = (seconds: number) => new Date(Date.parse('2026-11-21T09:50:00Z') + seconds * 1000).toISOString();
const hostileTimes = [
  '0000-01-01T00:00:00Z',
  '2026-11-21T09:50:00+23:00',
  '2026-11-21T09:50:00-16:00',
  '9999-12-31T23:59:59Z',
  // Six minutes ahead of the service's clock: beyond the five the contract allows.
  '2026-11-21T10:06:00Z',
  // No offset: the store would read it in its own time zone.
  '2026-11-21T09:50:00',
];
const rounds = hostileTimes.length * 2;

const newDeviceId = deviceIds('times');

interface Car {
  deviceId: string;
  publish(suffix: CarTopicSuffix, payload: Record<string, unknown>): Promise<void>;
  end(): Promise<void>;
}

describe('times a car sends', () => {
  let service: TestService;
  let admin: Developer;

  const read = (deviceId: string, what: string) =>
    call(service.url, 'GET', carPath(deviceId, what), { token: admin.token });
  const counts = async (suffix: string) => {
    const text = await scrape(service);
    return {
      stored: sample(text, 'svc_mqtt_messages_total', { suffix, outcome: 'stored' }),
      dropped: sample(text, 'svc_mqtt_messages_total', { suffix, outcome: 'dropped' }),
      invalid: sample(text, 'svc_mqtt_dropped_total', { reason: 'invalid_payload' }),
    };
  };

  /** A provisioned car on the service's broker, signed in with its own credential. */
  async function connect(willAt = past(0)): Promise<Car> {
    const deviceId = newDeviceId();
    const { mqtt: credential } = await provisionCar(service, admin, deviceId);
    const nativeId = deviceId.slice('brand_b:'.length);
    const client: MqttClient = await mqtt.connectAsync(service.mqttUrl, {
      clientId: deviceId,
      username: credential.username,
      password: credential.password,
      reconnectPeriod: 0,
      will: {
        topic: carTopic('brand_b', nativeId, 'presence'),
        payload: Buffer.from(
          JSON.stringify({ device_id: deviceId, brand: 'brand_b', state: 'offline', at: willAt }),
        ),
        qos: carTopicQos.presence,
        retain: carTopicRetain.presence,
      },
    });
    return {
      deviceId,
      async publish(suffix, payload) {
        await client.publishAsync(
          carTopic('brand_b', nativeId, suffix),
          JSON.stringify({ device_id: deviceId, brand: 'brand_b', ...payload }),
          { qos: carTopicQos[suffix], retain: carTopicRetain[suffix] },
        );
      },
      end: () => client.endAsync(),
    };
  }

  /** Every 200 ms, each good car sends `good(n)` and the hostile car `hostile(its n-th time)`. */
  async function sendRounds(
    good: Car[],
    hostile: Car,
    suffix: CarTopicSuffix,
    message: (n: number, time: string) => Record<string, unknown>,
  ): Promise<void> {
    for (let n = 1; n <= rounds; n++) {
      await Promise.all([
        ...good.map((car) => car.publish(suffix, message(n, past(n)))),
        hostile.publish(suffix, message(n, hostileTimes[n % hostileTimes.length] as string)),
      ]);
      // The pace of the attack, not a wait for anything: every 200 ms, one telemetry batch's time.
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  function assertLoggedWithoutIds(cars: Car[], field: string) {
    const refusals = service.logs.filter(
      (line) => line.includes('mqtt: message dropped') && line.includes(`"detail":"/${field} `),
    );
    assert.ok(refusals.length >= rounds, `every refusal is logged, naming /${field}`);
    for (const car of cars) {
      const nativeId = car.deviceId.slice('brand_b:'.length);
      assert.ok(
        service.logs.every((line) => !line.includes(nativeId)),
        'the logs never hold a device id',
      );
    }
  }

  beforeAll(async () => {
    // The bridge batches telemetry as in production: 500 rows or 200 ms.
    service = await startTestService({ SVC_ADMIN_EMAILS: 'root@example.com' });
    admin = await signUpAdmin(service, 'root@example.com');
  });
  afterAll(async () => {
    await service?.stop();
  });

  test("when a car sends fixes with hostile times every 200 ms among other cars' fixes then every good fix is stored, and the hostile car's are refused and counted", async () => {
    const good = [await connect(), await connect(), await connect()];
    const hostile = await connect();
    const before = await counts('telemetry');
    try {
      await sendRounds(good, hostile, 'telemetry', (n, time) => ({
        recorded_at: time,
        location: { latitude: n, longitude: 11.5754 },
      }));
      await eventually('every fix is handled', async () => {
        const now = await counts('telemetry');
        return now.stored + now.dropped === before.stored + before.dropped + rounds * 4;
      });
      const after = await counts('telemetry');
      assert.equal(
        after.stored - before.stored,
        rounds * good.length,
        'the good fixes are stored, and no other',
      );
      assert.equal(after.dropped - before.dropped, rounds, "every one of the hostile car's fixes is refused");
      assert.equal(after.invalid - before.invalid, rounds);

      const everyFix = Array.from({ length: rounds }, (_, i) => i + 1);
      for (const car of good) {
        const history = await service.store
          .db('car_telemetry')
          .where({ device_id: car.deviceId })
          .orderBy('recorded_at')
          .select('latitude');
        assert.deepEqual(
          history.map((row: { latitude: number }) => row.latitude),
          everyFix,
          car.deviceId,
        );
        const location = await read(car.deviceId, 'location');
        assert.equal(location.body.latitude, rounds);
        assert.equal(location.body.recorded_at, past(rounds));
      }
      assert.deepEqual(await service.store.db('car_telemetry').where({ device_id: hostile.deviceId }), []);
      assert.equal((await read(hostile.deviceId, 'location')).body.recorded_at, undefined);
      assertLoggedWithoutIds([...good, hostile], 'recorded_at');
    } finally {
      for (const car of [...good, hostile]) await car.end();
    }
  });

  test("when a car sends status reports with hostile times every 200 ms among other cars' reports then every good report is stored, and the hostile car's are refused and counted", async () => {
    const good = [await connect(), await connect()];
    const hostile = await connect();
    const before = await counts('status');
    try {
      await sendRounds(good, hostile, 'status', (n, time) => ({
        reported_at: time,
        host_version: `2.14.${n}`,
        state: { ignition: false },
        installed_apps: [],
      }));
      await eventually('every report is handled', async () => {
        const now = await counts('status');
        return now.stored + now.dropped === before.stored + before.dropped + rounds * 3;
      });
      const after = await counts('status');
      assert.equal(
        after.stored - before.stored,
        rounds * good.length,
        'the good reports are stored, and no other',
      );
      assert.equal(
        after.dropped - before.dropped,
        rounds,
        "every one of the hostile car's reports is refused",
      );
      assert.equal(after.invalid - before.invalid, rounds);
      for (const car of good) {
        const install = await read(car.deviceId, 'install');
        assert.equal(install.body.host_version, `2.14.${rounds}`);
        assert.equal(install.body.reported_at, past(rounds));
      }
      assert.deepEqual(
        await service.store.db('car_status_reports').where({ device_id: hostile.deviceId }),
        [],
      );
      assertLoggedWithoutIds([...good, hostile], 'reported_at');
    } finally {
      for (const car of [...good, hostile]) await car.end();
    }
  });

  test('when a car says online at year 9999 then it is refused; a time ahead within the skew is taken, and a rotated credential leaves the car offline all the same', async () => {
    const hostile = await connect();
    const good = await connect();
    const online = async (car: Car) => (await read(car.deviceId, 'status')).body.online;
    try {
      let before = await counts('presence');
      await good.publish('presence', { state: 'online', at: past(0) });
      await hostile.publish('presence', { state: 'online', at: '9999-12-31T23:59:59Z' });
      await eventually('both presence messages are handled', async () => {
        const now = await counts('presence');
        return now.stored === before.stored + 1 && now.dropped === before.dropped + 1;
      });
      assert.equal((await counts('presence')).invalid, before.invalid + 1);
      assert.notEqual(await online(hostile), true, 'year 9999 does not make the car online');
      assert.equal(await online(good), true);

      // Four minutes ahead of the service's clock: a car's clock may drift that far.
      before = await counts('presence');
      await hostile.publish('presence', { state: 'online', at: '2026-11-21T10:04:00Z' });
      await eventually('the car shows online', async () => (await online(hostile)) === true);

      const rotated = await call(
        service.url,
        'POST',
        `/api/v1/admin/cars/${encodeURIComponent(hostile.deviceId)}/credential`,
        { token: admin.token },
      );
      assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
      assert.equal(await online(hostile), false, 'the rotation leaves the car offline');
      // Its last will (offline, at the time it connected) comes in too, and changes nothing.
      await eventually(
        'the last will is handled',
        async () => (await counts('presence')).stored === before.stored + 2,
      );
      assert.equal(await online(hostile), false, 'the car stays offline');
      assert.equal(await online(good), true, 'the other car stays online');
    } finally {
      await hostile.end().catch(() => {});
      await good.end();
    }
  });

  test('when a car sends a hostile time on any topic then the message is refused as an invalid payload, naming the field', async () => {
    const car = await connect();
    const messages: [CarTopicSuffix, string, (time: string) => Record<string, unknown>][] = [
      [
        'telemetry',
        'recorded_at',
        (time) => ({ recorded_at: time, location: { latitude: 1, longitude: 2 } }),
      ],
      [
        'status',
        'reported_at',
        (time) => ({ reported_at: time, host_version: '2.14.0', state: {}, installed_apps: [] }),
      ],
      ['presence', 'at', (time) => ({ state: 'online', at: time })],
      ['cmd/ack', 'at', (time) => ({ command_id: randomUUID(), outcome: 'completed', at: time })],
    ];
    try {
      for (const [suffix, field, message] of messages) {
        for (const time of hostileTimes) {
          const before = await counts(suffix);
          const from = service.logs.length;
          await car.publish(suffix, message(time));
          await eventually(
            `a ${suffix} at ${time} is refused`,
            async () => (await counts(suffix)).dropped === before.dropped + 1,
          );
          assert.equal((await counts(suffix)).invalid, before.invalid + 1, `${suffix} at ${time}`);
          assert.ok(
            service.logs.slice(from).some((line) => line.includes(`"detail":"/${field} `)),
            `${suffix} at ${time}: the log names /${field}`,
          );
        }
      }
    } finally {
      await car.end();
    }
  });
});
