/**
 * The simulator against a plain aedes that signs cars in from a table of passwords: what each car
 * sends, checked against the AsyncAPI contract, and how it answers commands and lost connections.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, test } from 'vitest';
import {
  carTopic,
  carTopicQos,
  carTopicRetain,
  type carTopicSuffixes,
  parseCarTopic,
} from '../../generated/mqtt.ts';
import { type CarCredential, type Simulator, SimulatorError, startSimulator } from '../src/index.ts';
import { randomVin } from '../src/native-id.ts';
import { type Published, startTestBroker, type TestBroker } from './support/broker.ts';
import { loadPayloadValidators, type PayloadValidators, payloadErrors } from './support/contract.ts';

/** Waits for the broker to see the car's connection closed (it handles the close a moment later). */
async function disconnected(deviceId: string): Promise<void> {
  const end = Date.now() + 5_000;
  while (broker.isConnected(deviceId)) {
    assert.ok(Date.now() < end, `the broker still has ${deviceId} connected`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const passwords = new Map<string, string>();
function newCar(brand = 'brand_a'): CarCredential {
  const credential = { deviceId: `${brand}:${randomVin()}`, password: `mq_${randomUUID()}` };
  passwords.set(credential.deviceId, credential.password);
  return credential;
}
const topicOf = (car: CarCredential, suffix: (typeof carTopicSuffixes)[number]) => {
  const [brand, nativeId] = car.deviceId.split(':') as [string, string];
  return carTopic(brand, nativeId, suffix);
};
const payload = (message: Published) => JSON.parse(message.payload);

let broker: TestBroker;
let validators: PayloadValidators;
let running: Simulator | undefined;
let shown: string[];

async function simulate(cars: CarCredential[], rates = { statusEveryMs: 200, telemetryEveryMs: 50 }) {
  shown = [];
  running = await startSimulator({
    mqttUrl: broker.url,
    cars,
    ...rates,
    reconnectPeriodMs: 100,
    output: { write: (text: string) => shown.push(text) },
    warnings: { write: () => true },
  });
  return running;
}

function sendCommand(car: CarCredential, name: string, args: Record<string, unknown> = {}, extra = {}) {
  const command = {
    command_id: randomUUID(),
    device_id: car.deviceId,
    brand: car.deviceId.split(':')[0],
    name,
    args,
    issued_at: new Date().toISOString(),
    ...extra,
  };
  return broker.publish(topicOf(car, 'cmd'), command).then(() => command.command_id);
}

const ackOf = (car: CarCredential, commandId: string, outcome: string) => (m: Published) =>
  m.topic === topicOf(car, 'cmd/ack') &&
  payload(m).command_id === commandId &&
  payload(m).outcome === outcome;

beforeAll(async () => {
  broker = await startTestBroker(
    (username, password) => username !== undefined && passwords.get(username) === password,
  );
  validators = await loadPayloadValidators();
});
afterEach(async () => {
  await running?.stop();
  running = undefined;
});
afterAll(async () => {
  await broker.close();
});

describe('a car on the broker', () => {
  test('when a car starts then it signs in with its credential, a clean session and a retained offline will, and says online', async () => {
    const car = newCar();
    await simulate([car]);
    const connection = broker.connections.find((c) => c.clientId === car.deviceId);
    assert.deepEqual(
      {
        ...connection,
        will: { ...connection?.will, payload: JSON.parse(connection?.will?.payload ?? '{}') },
      },
      {
        clientId: car.deviceId,
        username: car.deviceId,
        password: car.password,
        clean: true,
        will: {
          topic: topicOf(car, 'presence'),
          payload: {
            device_id: car.deviceId,
            brand: 'brand_a',
            state: 'offline',
            at: connection?.will && JSON.parse(connection.will.payload).at,
          },
          qos: carTopicQos.presence,
          retain: carTopicRetain.presence,
        },
      },
    );
    assert.deepEqual(
      payloadErrors(validators, connection?.will?.topic ?? '', connection?.will?.payload ?? ''),
      [],
    );
    const online = await broker.waitFor(
      (m) => m.topic === topicOf(car, 'presence') && m.clientId === car.deviceId,
    );
    assert.equal(payload(online).state, 'online');
    assert.equal(online.retain, true);
  });

  test('when cars report then every message validates against the contract, with the QoS and retain of its topic', async () => {
    const cars = [newCar('brand_a'), newCar('brand_b')];
    await simulate(cars);
    for (const car of cars) {
      for (const suffix of ['presence', 'status', 'telemetry'] as const) {
        await broker.waitFor((m) => m.topic === topicOf(car, suffix));
      }
      // A few fixes, far enough apart in time for the odometer (kept to the metre) to count.
      await broker.waitFor((m) => {
        if (m.topic !== topicOf(car, 'telemetry')) return false;
        const fixes = broker.published.filter((p) => p.topic === m.topic).map((p) => payload(p));
        return fixes.length >= 4 && (fixes.at(-1)?.odometer_km ?? 0) > (fixes[0]?.odometer_km ?? 0);
      });
    }
    const sent = broker.published.filter((m) => cars.some((car) => m.clientId === car.deviceId));
    for (const message of sent) {
      assert.deepEqual(payloadErrors(validators, message.topic, message.payload), [], message.payload);
      const parts = parseCarTopic(message.topic);
      assert.ok(parts, message.topic);
      assert.equal(message.qos, carTopicQos[parts.suffix], message.topic);
      assert.equal(message.retain, carTopicRetain[parts.suffix], message.topic);
      assert.equal(`${parts.brand}:${parts.nativeId}`, payload(message).device_id);
    }
    for (const car of cars) {
      const fixes = sent.filter((m) => m.topic === topicOf(car, 'telemetry')).map((m) => payload(m));
      const first = fixes[0];
      const last = fixes.at(-1);
      assert.ok(
        first.location.latitude !== last.location.latitude ||
          first.location.longitude !== last.location.longitude,
        'the car moves',
      );
      assert.ok(last.odometer_km > first.odometer_km, 'the odometer counts');
      const status = payload(sent.find((m) => m.topic === topicOf(car, 'status')) as Published);
      assert.equal(status.host_version, '2.14.0');
      assert.deepEqual(status.installed_apps, []);
    }
  });

  test('when app.install arrives then accepted, the next status shows the app, then completed; uninstall removes it', async () => {
    const car = newCar();
    await simulate([car], { statusEveryMs: 60_000, telemetryEveryMs: 60_000 });
    await broker.waitFor((m) => m.topic === topicOf(car, 'status'));
    const install = await sendCommand(car, 'app.install', {
      app_id: 'com.example.parking',
      version: '1.4.2',
    });
    const completed = await broker.waitFor(ackOf(car, install, 'completed'));
    const accepted = await broker.waitFor(ackOf(car, install, 'accepted'));
    const sinceAccepted = broker.published.slice(broker.published.indexOf(accepted));
    const status = sinceAccepted.find((m) => m.topic === topicOf(car, 'status'));
    assert.ok(
      status && broker.published.indexOf(status) < broker.published.indexOf(completed),
      'status before completed',
    );
    assert.deepEqual(payload(status).installed_apps, [{ app_id: 'com.example.parking', version: '1.4.2' }]);
    for (const message of [accepted, completed, status]) {
      assert.deepEqual(payloadErrors(validators, message.topic, message.payload), []);
    }

    const uninstall = await sendCommand(car, 'app.uninstall', { app_id: 'com.example.parking' });
    await broker.waitFor(ackOf(car, uninstall, 'completed'));
    const after = broker.published.filter((m) => m.topic === topicOf(car, 'status')).at(-1) as Published;
    assert.deepEqual(payload(after).installed_apps, []);
  });

  test('when doors.lock and pairing.show_code arrive then the status says locked and the code is printed', async () => {
    const car = newCar();
    await simulate([car], { statusEveryMs: 60_000, telemetryEveryMs: 60_000 });
    const lock = await sendCommand(car, 'doors.lock');
    await broker.waitFor(ackOf(car, lock, 'completed'));
    const status = broker.published.filter((m) => m.topic === topicOf(car, 'status')).at(-1) as Published;
    assert.equal(payload(status).state.doors_locked, true);
    const show = await sendCommand(car, 'pairing.show_code', { code: '12345678' });
    await broker.waitFor(ackOf(car, show, 'completed'));
    assert.deepEqual(shown, [`car ${car.deviceId} shows pairing code 12345678\n`]);
  });

  test('when a command is unknown, expired or lacks its arguments then it is rejected, never accepted', async () => {
    const car = newCar();
    await simulate([car], { statusEveryMs: 60_000, telemetryEveryMs: 60_000 });
    const unknown = await sendCommand(car, 'windows.open');
    const expired = await sendCommand(
      car,
      'doors.lock',
      {},
      { expires_at: new Date(Date.now() - 1000).toISOString() },
    );
    const bare = await sendCommand(car, 'app.install', { app_id: 'com.example.parking' });
    for (const [id, detail] of [
      [unknown, 'unknown command windows.open'],
      [expired, 'expired'],
      [bare, 'app.install needs args.app_id and args.version'],
    ] as const) {
      const rejected = await broker.waitFor(ackOf(car, id, 'rejected'));
      assert.equal(payload(rejected).detail, detail);
      assert.deepEqual(payloadErrors(validators, rejected.topic, rejected.payload), []);
      assert.equal(broker.published.some(ackOf(car, id, 'accepted')), false);
    }
  });

  test('when the same command arrives twice then it runs once and the car acknowledges how it ended', async () => {
    const car = newCar();
    const [simulated] = (await simulate([car], { statusEveryMs: 60_000, telemetryEveryMs: 60_000 })).cars;
    const command = {
      command_id: randomUUID(),
      device_id: car.deviceId,
      brand: 'brand_a',
      name: 'app.install',
      args: { app_id: 'com.example.parking', version: '1.0.0' },
      issued_at: new Date().toISOString(),
    };
    await broker.publish(topicOf(car, 'cmd'), command);
    await broker.waitFor(ackOf(car, command.command_id, 'completed'));
    await broker.publish(topicOf(car, 'cmd'), {
      ...command,
      args: { app_id: 'com.example.parking', version: '9.9.9' },
    });
    await broker.waitFor(
      (m) =>
        ackOf(car, command.command_id, 'completed')(m) &&
        broker.published.filter(ackOf(car, command.command_id, 'completed')).length === 2,
    );
    assert.equal(broker.published.filter(ackOf(car, command.command_id, 'accepted')).length, 1);
    assert.deepEqual(simulated?.installedApps, [{ app_id: 'com.example.parking', version: '1.0.0' }]);
  });

  test('when the connection drops then the broker publishes the retained offline will, and the car comes back online', async () => {
    const car = newCar();
    await simulate([car]);
    const online = await broker.waitFor(
      (m) => m.topic === topicOf(car, 'presence') && payload(m).state === 'online',
    );
    broker.dropClient(car.deviceId);
    const will = await broker.waitFor(
      (m) => m.topic === topicOf(car, 'presence') && payload(m).state === 'offline',
    );
    const registered = broker.connections.find((c) => c.clientId === car.deviceId)?.will;
    assert.equal(will.payload, registered?.payload, 'the will the car registered when it connected');
    assert.equal(will.retain, true);
    assert.deepEqual(payloadErrors(validators, will.topic, will.payload), []);
    const back = await broker.waitFor(
      (m) => m.topic === topicOf(car, 'presence') && payload(m).state === 'online' && m !== online,
    );
    assert.ok(broker.published.indexOf(back) > broker.published.indexOf(will));
    // The second connection registered a will of its own time.
    const wills = broker.connections.filter((c) => c.clientId === car.deviceId).map((c) => c.will?.payload);
    assert.equal(wills.length, 2);
  });

  test('when the simulator stops then each car says offline itself and disconnects', async () => {
    const car = newCar();
    const simulator = await simulate([car]);
    await broker.waitFor((m) => m.topic === topicOf(car, 'presence'));
    assert.equal(await simulator.stop(), 1, 'one car was online');
    const offline = broker.published.filter((m) => m.topic === topicOf(car, 'presence')).at(-1) as Published;
    assert.deepEqual(
      [offline.clientId, payload(offline).state, offline.retain],
      [car.deviceId, 'offline', true],
    );
    await disconnected(car.deviceId);
  });

  test('when a password is wrong then starting fails naming the car, and no car is left connected', async () => {
    const good = newCar();
    const bad = { ...newCar(), password: 'mq_rotated-since' };
    await assert.rejects(
      startSimulator({ mqttUrl: broker.url, cars: [good, bad], warnings: { write: () => true } }),
      (error: unknown) =>
        error instanceof SimulatorError &&
        error.message.includes(`car ${bad.deviceId}`) &&
        /refused its password: it is wrong, or it was rotated/.test(error.message),
    );
    await disconnected(good.deviceId);
  });

  test('when leftOut is given and one password is refused then that car is told there, the others drive, and allRefused waits for the cars that started', async () => {
    const good = newCar();
    const bad = { ...newCar(), password: 'mq_rotated-since' };
    const leftOut: string[] = [];
    const warnings: string[] = [];
    running = await startSimulator({
      mqttUrl: broker.url,
      cars: [bad, good],
      reconnectPeriodMs: 50,
      warnings: { write: (line: string) => warnings.push(line) > 0 },
      leftOut: (problem) => leftOut.push(`${problem.deviceId} ${problem.message}`),
    });
    assert.deepEqual(
      running.cars.map((car) => car.deviceId),
      [good.deviceId],
    );
    assert.equal(leftOut.length, 1);
    assert.ok(
      leftOut[0]?.startsWith(
        `${bad.deviceId} car ${bad.deviceId}: the broker at ${broker.url} refused its password`,
      ),
    );
    assert.equal(broker.isConnected(good.deviceId), true);

    // The one car that started is rotated: now every car the simulator runs is refused.
    passwords.set(good.deviceId, 'mq_rotated-too');
    broker.dropClient(good.deviceId);
    await running.allRefused;
    assert.ok(
      warnings.some((line) => line.includes(`car ${good.deviceId}`) && line.includes('this car stops')),
    );
    assert.equal(await running.stop(), 0, 'no car left online');
  });
});
