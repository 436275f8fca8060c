/**
 * JSON nested far deeper than the contract needs (arrays or objects, 10,000 and 100,000 levels):
 * an HTTP body is refused with 400 `json_too_deep` naming the limit, on public and signed-in
 * routes alike, and an MQTT payload is dropped and counted by the bridge, on the embedded broker
 * and on Mosquitto. Neither ever answers 500 or stops the service, and other callers and other
 * cars go on being served.
 */
import assert from 'node:assert/strict';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { maxPacketBytes } from '../src/broker/packet-size-guard.ts';
import { maxJsonDepth } from '../src/json-nesting.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { startEmbeddedUnderTest, startMosquittoUnderTest } from './support/brokers.ts';
import { carPath, provisionCar } from './support/cars.ts';
import { call, eventually, type Reply } from './support/http.ts';
import { sample } from './support/metrics.ts';
import { startTestService, type TestService } from './support/service.ts';
import { SshKit } from './support/ssh.ts';

const adminEmail = 'deep-admin@example.com';

/** `inner` wrapped in `depth` arrays or objects: `[[[…]]]` or `{"a":{"a":…}}`. */
function nested(kind: 'arrays' | 'objects', depth: number, inner: string): string {
  return kind === 'arrays'
    ? `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}${inner}${'}'.repeat(depth)}`;
}

describe('a JSON body nested deeper than the API needs', () => {
  let service: TestService;
  let developer: Developer;
  const kit = new SshKit();

  beforeAll(async () => {
    service = await startTestService();
    developer = await signUpDeveloper(service.url);
  });
  afterAll(async () => {
    await service?.stop();
    kit.cleanup();
  });

  function assertTooDeep(reply: Reply): void {
    assert.equal(reply.status, 400, JSON.stringify(reply.body).slice(0, 500));
    assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
    assert.equal(reply.body.code, 'json_too_deep');
    assert.match(reply.body.detail, new RegExp(`deeper than ${maxJsonDepth} levels`));
    assert.deepEqual(reply.body.errors, [
      { path: '/body', message: `must not nest deeper than ${maxJsonDepth} levels` },
    ]);
  }

  for (const depth of [10_000, 100_000]) {
    for (const kind of ['arrays', 'objects'] as const) {
      test(`when an anonymous caller asks for a sign-in challenge with ${kind} ${depth} deep then 400 json_too_deep names the limit, and the next challenge is issued`, async () => {
        const reply = await call(service.url, 'POST', '/api/v1/auth/challenges', {
          raw: `{"public_key":${nested(kind, depth, '"ssh-ed25519 AAAA"')}}`,
        });
        assertTooDeep(reply);

        const key = kit.makeKey();
        const next = await call(service.url, 'POST', '/api/v1/auth/challenges', {
          body: { public_key: key.publicLine },
        });
        assert.equal(next.status, 201, JSON.stringify(next.body));
      });

      test(`when a signed-in developer adds an SSH key with ${kind} ${depth} deep then 400 json_too_deep, no key is added, and the next key is`, async () => {
        const reply = await call(service.url, 'POST', '/api/v1/dev/keys', {
          token: developer.token,
          raw: `{"public_key":"ssh-ed25519 AAAA","title":${nested(kind, depth, '"laptop"')}}`,
        });
        assertTooDeep(reply);
        const keys = await call(service.url, 'GET', '/api/v1/dev/keys', { token: developer.token });
        const before = keys.body.keys.length;

        const added = await call(service.url, 'POST', '/api/v1/dev/keys', {
          token: developer.token,
          body: { public_key: kit.makeKey().publicLine, title: `after ${kind} ${depth}` },
        });
        assert.equal(added.status, 201, JSON.stringify(added.body));
        const after = await call(service.url, 'GET', '/api/v1/dev/keys', { token: developer.token });
        assert.equal(after.body.keys.length, before + 1);
      });
    }
  }

  test(`when a body nests exactly ${maxJsonDepth} levels then the depth is taken and the contract decides; one more is refused`, async () => {
    // The body itself is the first level: its field holds the other levels.
    const atLimit = await call(service.url, 'POST', '/api/v1/auth/challenges', {
      raw: `{"public_key":${nested('arrays', maxJsonDepth - 1, '"x"')}}`,
    });
    assert.equal(atLimit.status, 400, JSON.stringify(atLimit.body));
    assert.equal(atLimit.body.code, 'validation_failed', 'public_key must be a string');

    const overLimit = await call(service.url, 'POST', '/api/v1/auth/challenges', {
      raw: `{"public_key":${nested('arrays', maxJsonDepth, '"x"')}}`,
    });
    assertTooDeep(overLimit);
  });

  test('when an integrator reads the contract then its 400 answer states the same limit', async () => {
    const contract = await call(service.url, 'GET', '/openapi.json');
    assert.match(
      contract.body.components.responses.BadRequest.description,
      new RegExp(`deeper than ${maxJsonDepth} levels[^]*json_too_deep`),
    );
  });

  test('when a text check meets a value nested 100,000 deep then it finds the NUL at the bottom', async () => {
    // The check every body and manifest passes through walks without recursion.
    const { findUnstorableText } = await import('@svc/sdk');
    const deep = JSON.parse(nested('arrays', 100_000, '"a\\u0000"'));
    assert.deepEqual(findUnstorableText(deep, '/body'), {
      pointer: `/body${'/0'.repeat(100_000)}`,
      reason: 'nul',
    });
  });
});

/** The same MQTT checks on each broker the service can use. */
function describeDeepPayloads(
  name: string,
  start: () => Promise<{ service: TestService; stop(): Promise<void> }>,
) {
  describe(`an MQTT payload nested thousands deep, on ${name}`, () => {
    let running: { service: TestService; stop(): Promise<void> };
    let admin: Developer;
    const open: MqttClient[] = [];
    let serial = 0;
    const at = '2026-11-21T09:59:00.000Z';

    const statusReport = (deviceId: string, reportedAt = at) => ({
      device_id: deviceId,
      brand: 'brand_b',
      reported_at: reportedAt,
      host_version: '2.14.0',
      state: { ignition: false },
      installed_apps: [],
    });
    const readStatus = (deviceId: string) =>
      call(running.service.url, 'GET', carPath(deviceId, 'status'), { token: admin.token });
    const drops = async () =>
      sample(String((await call(running.service.metricsUrl, 'GET', '')).body), 'svc_mqtt_dropped_total', {
        reason: 'invalid_payload',
      });

    async function carOnline() {
      const deviceId = `brand_b:deep-${process.pid}-${++serial}`;
      const made = await provisionCar(running.service, admin, deviceId);
      const client = await mqtt.connectAsync(running.service.mqttUrl, {
        clientId: deviceId,
        username: made.mqtt.username,
        password: made.mqtt.password,
        protocolVersion: 4,
        reconnectPeriod: 0,
      });
      client.on('error', () => {});
      open.push(client);
      const topic = `cars/brand_b/${deviceId.slice('brand_b:'.length)}/status`;
      return {
        deviceId,
        client,
        publish: (payload: string) => client.publishAsync(topic, payload, { qos: 1 }),
      };
    }

    beforeAll(async () => {
      running = await start();
      admin = await signUpAdmin(running.service, adminEmail);
    });
    afterAll(async () => {
      for (const client of open) client.end(true);
      await running?.stop();
    });

    test('when a car sends statuses nested 10,000 deep (arrays and objects) then the bridge drops and counts both, stays up, and stores the next status of that car and of another', async () => {
      const attacker = await carOnline();
      const other = await carOnline();
      const before = await drops();
      for (const kind of ['arrays', 'objects'] as const) {
        const deep = JSON.stringify(statusReport(attacker.deviceId)).replace(
          '{"ignition":false}',
          `{"nested":${nested(kind, 10_000, '1')}}`,
        );
        assert.ok(Buffer.byteLength(deep) < maxPacketBytes, 'small enough for the broker to take');
        await attacker.publish(deep);
      }
      await eventually(
        'both deep statuses are dropped as invalid_payload',
        async () => (await drops()) === before + 2,
      );
      assert.equal((await readStatus(attacker.deviceId)).body.reported_at, null, 'nothing of them stored');

      const later = '2026-11-21T09:59:30.000Z';
      await other.publish(JSON.stringify(statusReport(other.deviceId, later)));
      await attacker.publish(JSON.stringify(statusReport(attacker.deviceId, later)));
      await eventually(
        "the other car's status is stored",
        async () => (await readStatus(other.deviceId)).body.reported_at === later,
      );
      await eventually(
        "the attacker's next ordinary status is stored",
        async () => (await readStatus(attacker.deviceId)).body.reported_at === later,
      );
      assert.equal((await call(running.service.url, 'GET', '/readyz')).status, 200);
    });
  });
}

describeDeepPayloads('the embedded broker', () => startEmbeddedUnderTest({ SVC_ADMIN_EMAILS: adminEmail }));

describeDeepPayloads('Mosquitto', () => startMosquittoUnderTest({ SVC_ADMIN_EMAILS: adminEmail }));
