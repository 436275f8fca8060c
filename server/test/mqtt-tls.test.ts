/**
 * MQTT over TLS (issue 25, point 6): the embedded broker's TLS listener, with a CA and a server
 * certificate made by openssl for this run. A car that trusts the CA signs in with its credential
 * and its messages are stored; a client that trusts another CA never gets to sign in; a start with
 * a certificate that cannot be read stops with one line naming the setting.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { carTopic } from '../../generated/mqtt.ts';
import { runCli } from '../../simulator/src/index.ts';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { provisionCar, statusReport } from './support/cars.ts';
import { makeCertificates, type TestCertificates } from './support/certificates.ts';
import { eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { startTestService, type TestService } from './support/service.ts';
import { runServiceToExit } from './support/service-process.ts';

const adminEmail = 'tls-admin@example.com';
let certs: TestCertificates;
let service: TestService;
let admin: Developer;

beforeAll(async () => {
  certs = makeCertificates();
  service = await startTestService({
    SVC_ADMIN_EMAILS: adminEmail,
    MQTT_TLS_CERT: certs.serverCert,
    MQTT_TLS_KEY: certs.serverKey,
  });
  admin = await signUpAdmin(service, adminEmail);
});

afterAll(async () => {
  await service?.stop();
  certs?.remove();
});

describe('the embedded broker over TLS', () => {
  test('when MQTT_TLS_PORT is 0 then the service reports the real port of its TLS listener', () => {
    assert.match(service.mqttTlsUrl ?? '', /^mqtts:\/\/127\.0\.0\.1:[1-9]\d*$/);
    assert.notEqual(service.mqttTlsUrl?.split(':')[2], service.mqttUrl.split(':')[2]);
  });

  test('when a car that trusts the CA connects over TLS with its credential then its status report is stored', async () => {
    const deviceId = 'brand_b:tls-car-1';
    const { mqtt: credential } = await provisionCar(service, admin, deviceId);
    const before = sample(await scrape(service), 'svc_mqtt_messages_total', {
      suffix: 'status',
      outcome: 'stored',
    });
    const car = await mqtt.connectAsync(service.mqttTlsUrl ?? '', {
      clientId: deviceId,
      username: credential.username,
      password: credential.password,
      ca: readFileSync(certs.ca),
      reconnectPeriod: 0,
    });
    try {
      assert.equal((car.stream as { encrypted?: boolean }).encrypted, true, 'the connection is TLS');
      await car.publishAsync(
        carTopic('brand_b', 'tls-car-1', 'status'),
        statusReport(deviceId, 'brand_b', service.clock.now),
        { qos: 1 },
      );
      await eventually('the status report is stored', async () => {
        const now = sample(await scrape(service), 'svc_mqtt_messages_total', {
          suffix: 'status',
          outcome: 'stored',
        });
        return now === before + 1;
      });
    } finally {
      await car.endAsync();
    }
  });

  test('when a car gives a wrong password over TLS then it is refused as on the plain port', async () => {
    const refused = mqtt.connectAsync(service.mqttTlsUrl ?? '', {
      clientId: 'brand_b:tls-nobody',
      username: 'brand_b:tls-nobody',
      password: 'mq_wrong',
      ca: readFileSync(certs.ca),
      reconnectPeriod: 0,
    });
    await assert.rejects(refused, /Bad username or password|Not authorized/i);
  });

  test('when a client trusts another CA then the TLS handshake fails before any sign-in, and is counted', async () => {
    const before = sample(await scrape(service), 'svc_mqtt_connections_refused_total', {
      reason: 'tls_handshake',
    });
    const untrusting = mqtt.connectAsync(service.mqttTlsUrl ?? '', {
      clientId: 'brand_b:tls-car-1',
      username: 'brand_b:tls-car-1',
      password: 'irrelevant',
      ca: readFileSync(certs.otherCa),
      reconnectPeriod: 0,
      connectTimeout: 5000,
    });
    await assert.rejects(untrusting, /self[- ]signed|unable to verify|certificate/i);
    await eventually('the refused handshake is counted', async () => {
      const after = sample(await scrape(service), 'svc_mqtt_connections_refused_total', {
        reason: 'tls_handshake',
      });
      return after === before + 1;
    });
  });
});

describe('svc-car-sim over TLS', () => {
  /** Runs the simulator in process until `stopWhen` says so (then as after Ctrl-C). */
  async function simulate(argv: string[], stopWhen: (stderr: string) => boolean) {
    let stderr = '';
    const stop = new AbortController();
    const code = await runCli(argv, {
      stdout: { write: () => true },
      stderr: {
        write: (text: string) => {
          stderr += text;
          if (stopWhen(stderr)) stop.abort();
          return true;
        },
      },
      env: {},
      stop: stop.signal,
    });
    return { code, stderr };
  }

  async function credentialsFile(deviceId: string) {
    const { mqtt: credential } = await provisionCar(service, admin, deviceId);
    const path = join(certs.dir, `${deviceId.replace(':', '-')}.json`);
    writeFileSync(path, JSON.stringify([{ device_id: deviceId, password: credential.password }]));
    return path;
  }

  test('when svc-car-sim is given the CA with --ca then its car connects over TLS', async () => {
    const path = await credentialsFile('brand_b:tls-sim-1');
    const run = await simulate(
      ['--credentials', path, '--mqtt-url', service.mqttTlsUrl ?? '', '--ca', certs.ca],
      (text) => text.includes('Ctrl-C to stop'),
    );
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /1 car\(s\) online at mqtts:\/\/127\.0\.0\.1:/);
    assert.match(run.stderr, /1 car\(s\) offline/);
  });

  test("when svc-car-sim does not trust the broker's certificate then it says to pass --ca, exit 1", async () => {
    const path = await credentialsFile('brand_b:tls-sim-2');
    const run = await simulate(['--credentials', path, '--mqtt-url', service.mqttTlsUrl ?? ''], () => false);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /does not trust .*pass the CA that signed it with --ca FILE/);
  });
});

describe('starting with TLS settings that cannot work', () => {
  const runToExit = (env: Record<string, string>) => runServiceToExit(env, ['--check']);

  test('when MQTT_TLS_KEY names a file that cannot be read then one line names MQTT_TLS_KEY, exit 2, no stack', async () => {
    const run = await runToExit({
      MQTT_TLS_CERT: certs.serverCert,
      MQTT_TLS_KEY: join(certs.dir, 'missing.key'),
    });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /^svc: MQTT_TLS_KEY names .*missing\.key, which cannot be read \(ENOENT\)/);
    assert.equal(run.stderr.trimEnd().split('\n').length, 1, run.stderr);
  });

  test('when only MQTT_TLS_CERT is set then one line asks for MQTT_TLS_KEY too, exit 2', async () => {
    const run = await runToExit({ MQTT_TLS_CERT: certs.serverCert });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /^svc: MQTT_TLS_CERT is set without MQTT_TLS_KEY/);
  });

  test("when MQTT_TLS_KEY is another certificate's key then one line says they do not match, exit 2", async () => {
    const run = await runToExit({ MQTT_TLS_CERT: certs.serverCert, MQTT_TLS_KEY: join(certs.dir, 'ca.key') });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /^svc: MQTT_TLS_CERT and MQTT_TLS_KEY do not make a TLS identity/);
  });
});
