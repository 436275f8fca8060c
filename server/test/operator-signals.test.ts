/**
 * What an operator reads (issue 25, point 7): /readyz per component, with its status following what
 * requests need; LOG_LEVEL, with health probes at debug; the console's requests under routes of
 * their own in svc_http_requests_total; and svc_mqtt_connected_cars summing true over replicas.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { carTopic } from '../../generated/mqtt.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { provisionCar } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { redisMissing, testRedisUrl } from './support/redis.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

const noRedis = await redisMissing();
const readiness = (service: TestService) => call(service.url, 'GET', '/readyz');

/**
 * One store for the services of the tests that leave it as it was (they read, sign nobody up):
 * a store of each test's own cost as much again as the service it served.
 */
let sharedStore: TestStore;
beforeAll(async () => {
  sharedStore = await openTestStore();
});
afterAll(() => sharedStore?.close());

describe.skipIf(noRedis)(`readiness with Redis${noRedis ? ` (${noRedis})` : ''}`, () => {
  let proxy: TcpProxy;
  let service: TestService;
  beforeAll(async () => {
    const redis = new URL(testRedisUrl);
    proxy = await startTcpProxy({ host: redis.hostname, port: Number(redis.port || 6379) });
    redis.port = String(proxy.port);
    service = await startTestService({ REDIS_URL: redis.href }, { store: sharedStore });
  });
  afterAll(async () => {
    await service?.stop();
    await proxy?.close();
  });

  test('when Redis stops answering then /readyz is 503 naming the key-value store, and ready again once it is back', async () => {
    assert.deepEqual((await readiness(service)).body, {
      status: 'ready',
      checks: { store: 'ok', key_value_store: 'ok', mqtt_bridge: 'ok' },
    });
    await proxy.refuse();
    const down = await readiness(service);
    assert.equal(down.status, 503);
    assert.deepEqual(down.body, {
      status: 'not_ready',
      checks: { store: 'ok', key_value_store: 'failing', mqtt_bridge: 'ok' },
    });
    await proxy.restore();
    await eventually('ready again', async () => (await readiness(service)).status === 200);
  });
});

test('when REDIS_URL names a port where no Redis listens then /readyz is 503 from the start', async () => {
  const service = await startTestService({ REDIS_URL: 'redis://127.0.0.1:1' }, { store: sharedStore });
  try {
    const answer = await readiness(service);
    assert.equal(answer.status, 503);
    assert.equal(answer.body.checks.key_value_store, 'failing');
    assert.equal(answer.body.checks.store, 'ok');
  } finally {
    await service.stop();
  }
});

test("when the store's key-value table cannot be read then /readyz is 503 naming the key-value store, not the store", async () => {
  // A store of its own: the test renames one of its tables.
  const service = await startTestService();
  try {
    assert.equal((await readiness(service)).status, 200);
    await service.store.db.raw('alter table key_values rename to key_values_away');
    const answer = await readiness(service);
    assert.equal(answer.status, 503);
    assert.deepEqual(answer.body.checks, { store: 'ok', key_value_store: 'failing', mqtt_bridge: 'ok' });
    await service.store.db.raw('alter table key_values_away rename to key_values');
    assert.equal((await readiness(service)).status, 200);
  } finally {
    await service.stop();
  }
});

describe('logs and route labels', () => {
  let consoleDir: string;
  beforeAll(() => {
    consoleDir = mkdtempSync(join(tmpdir(), 'svc-console-'));
    mkdirSync(join(consoleDir, 'assets'));
    writeFileSync(join(consoleDir, 'index.html'), '<!doctype html><title>console</title>');
    writeFileSync(join(consoleDir, 'assets', 'app-1234.js'), 'console.log(1)');
  });
  afterAll(() => rmSync(consoleDir, { recursive: true, force: true }));

  const requestLines = (service: TestService, route: string) =>
    service.logs
      .map((line) => JSON.parse(line) as { message: string; route?: string; level: string })
      .filter((line) => line.message === 'request' && line.route === route);

  test('when LOG_LEVEL is unset then health probes leave no line, while other requests do', async () => {
    const service = await startTestService({}, { store: sharedStore, consoleDir });
    try {
      assert.equal(service.config.logLevel, 'info');
      await call(service.url, 'GET', '/healthz');
      await call(service.url, 'GET', '/readyz');
      await call(service.url, 'GET', '/api/v1/mini-apps/limits');
      await eventually(
        'the request line is written',
        () => requestLines(service, '/api/v1/mini-apps/limits').length === 1,
      );
      assert.deepEqual(requestLines(service, '/healthz'), []);
      assert.deepEqual(requestLines(service, '/readyz'), []);
    } finally {
      await service.stop();
    }
  });

  test('when LOG_LEVEL=debug then health probes are logged, at debug', async () => {
    const service = await startTestService({ LOG_LEVEL: 'debug' }, { store: sharedStore, consoleDir });
    try {
      await call(service.url, 'GET', '/healthz');
      await eventually('the probe is logged', () => requestLines(service, '/healthz').length === 1);
      assert.equal(requestLines(service, '/healthz')[0]?.level, 'debug');
    } finally {
      await service.stop();
    }
  });

  test('when LOG_LEVEL=warn then no request line is written', async () => {
    const service = await startTestService({ LOG_LEVEL: 'warn' }, { store: sharedStore, consoleDir });
    try {
      await call(service.url, 'GET', '/api/v1/mini-apps/limits');
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(requestLines(service, '/api/v1/mini-apps/limits'), []);
    } finally {
      await service.stop();
    }
  });

  test('when LOG_LEVEL is no pino level then the setting is refused, naming the levels', async () => {
    await assert.rejects(
      startTestService({ LOG_LEVEL: 'verbose' }),
      /LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, not "verbose"/,
    );
  });

  test('when the console and its assets are asked for then svc_http_requests_total counts them under their own routes, none as unmatched', async () => {
    const service = await startTestService({}, { store: sharedStore, consoleDir });
    try {
      assert.equal((await call(service.url, 'GET', '/console')).status, 200);
      assert.equal((await call(service.url, 'GET', '/console/keys')).status, 200);
      assert.equal((await call(service.url, 'GET', '/console/assets/app-1234.js')).status, 200);
      assert.equal((await call(service.url, 'GET', '/console/assets/gone-0000.js')).status, 404);
      const text = await scrape(service);
      assert.equal(sample(text, 'svc_http_requests_total', { route: '/console/*', status: 200 }), 2);
      assert.equal(sample(text, 'svc_http_requests_total', { route: '/console/assets/*', status: 200 }), 1);
      assert.equal(sample(text, 'svc_http_requests_total', { route: '/console/assets/*', status: 404 }), 1);
      assert.doesNotMatch(text, /svc_http_requests_total\{route="unmatched"/);
    } finally {
      await service.stop();
    }
  });
});

/** A car signed in to `url`, having said `online` (retained, as cars do). */
async function onlineCar(url: string, deviceId: string, password: string, at: string): Promise<MqttClient> {
  const [brand = '', nativeId = ''] = deviceId.split(':');
  const client = await mqtt.connectAsync(url, {
    clientId: deviceId,
    username: deviceId,
    password,
    reconnectPeriod: 0,
  });
  await client.publishAsync(
    carTopic(brand, nativeId, 'presence'),
    JSON.stringify({ device_id: deviceId, brand, state: 'online', at }),
    { qos: 1, retain: true },
  );
  return client;
}

const connectedSum = async (replicas: TestService[]) => {
  let sum = 0;
  for (const replica of replicas) sum += sample(await scrape(replica), 'svc_mqtt_connected_cars');
  return sum;
};

describe('connected cars over two replicas on one store', () => {
  const adminEmail = 'signals-admin@example.com';
  let store: TestStore;
  const cars: MqttClient[] = [];
  const replicas: TestService[] = [];
  let admin: Developer | undefined;
  let mosquitto: TestMosquitto | undefined;

  beforeAll(async () => {
    store = await openTestStore();
  });
  afterAll(async () => {
    await Promise.all(cars.map((car) => car.endAsync(true)));
    for (const replica of replicas) await replica.stop();
    await mosquitto?.stop();
    await store.close();
  });

  test("when cars connect to the embedded brokers of two replicas then the replicas' counts sum to the cars connected", async () => {
    const one = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail, SVC_REPLICA_ID: 'one' },
      { store, clockRuns: true },
    );
    replicas.push(one);
    const two = await startTestService({ SVC_REPLICA_ID: 'two' }, { store, clockRuns: true });
    replicas.push(two);
    admin = await signUpAdmin(one, adminEmail);
    const at = new Date().toISOString();
    for (const [index, replica] of [one, one, two].entries()) {
      const deviceId = `brand_b:signals-embedded-${index}`;
      const { mqtt: credential } = await provisionCar(one, admin, deviceId);
      cars.push(await onlineCar(replica.mqttUrl, deviceId, credential.password, at));
    }
    await eventually('every presence is stored', async () => {
      const online = await store.db('car_presence').where({ online: true }).count<{ c: string }[]>('* as c');
      return Number(online[0]?.c) === 3;
    });
    assert.equal(sample(await scrape(one), 'svc_mqtt_connected_cars'), 2);
    assert.equal(sample(await scrape(two), 'svc_mqtt_connected_cars'), 1);
    await cars[0]?.endAsync();
    await eventually(
      'the car that left is no longer counted',
      async () => (await connectedSum(replicas)) === 2,
    );
  });

  test('when two replicas share a Mosquitto then one of them reports the cars online and the sum is the fleet', async () => {
    for (const replica of replicas.splice(0)) await replica.stop();
    mosquitto = await startMosquitto();
    const withMosquitto = (id: string) => ({
      MQTT_URL: mosquitto?.url ?? '',
      MQTT_USERNAME: mosquitto?.admin.username ?? '',
      MQTT_PASSWORD: mosquitto?.admin.password ?? '',
      SVC_ADMIN_EMAILS: adminEmail,
      SVC_REPLICA_ID: id,
    });
    const one = await startTestService(withMosquitto('one'), { store, clockRuns: true });
    replicas.push(one);
    const two = await startTestService(withMosquitto('two'), { store, clockRuns: true });
    replicas.push(two);
    // Signed up by the test before, when it ran; else with the newest code, the last started replica's.
    admin ??= await signUpAdmin(two, adminEmail);
    const at = new Date().toISOString();
    const before = await connectedSum(replicas);
    for (let index = 0; index < 3; index += 1) {
      const deviceId = `brand_b:signals-mosquitto-${index}`;
      const { mqtt: credential } = await provisionCar(one, admin, deviceId);
      cars.push(await onlineCar(mosquitto.url, deviceId, credential.password, at));
    }
    await eventually(
      'the replicas count the three cars once',
      async () => (await connectedSum(replicas)) === before + 3,
    );
    const counts = [
      sample(await scrape(one), 'svc_mqtt_connected_cars'),
      sample(await scrape(two), 'svc_mqtt_connected_cars'),
    ];
    assert.ok(counts.includes(0), `one replica reports, the other says 0: ${counts}`);
  });
});
