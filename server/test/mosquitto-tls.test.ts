/**
 * docs/operating.md, "The broker", gives operators a whole `mosquitto.conf`: this starts it as written, with
 * only its ports, paths and `user` changed, and runs the service against it over TLS with MQTT_CA
 * (issue 25, point 6): the bridge and the dynamic-security client connect with `mqtts://`, a car
 * that trusts the CA signs in and is heard, and a service that trusts another CA is refused at start.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { carTopic } from '../../generated/mqtt.ts';
import { signUpAdmin } from './support/accounts.ts';
import { provisionCar, statusReport } from './support/cars.ts';
import { makeCertificates, type TestCertificates } from './support/certificates.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { accepting, freePort, grantServiceRole } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';

const operating = readFileSync(join(import.meta.dirname, '../../docs/operating.md'), 'utf8');
const adminEmail = 'mosquitto-tls-admin@example.com';

let certs: TestCertificates;
let mosquitto: ChildProcess | undefined;
let tlsPort: number;
const admin = { username: 'svc-admin', password: randomBytes(18).toString('hex') };

/** docs/operating.md's file, as an operator on this machine would place it. */
function configFromOperating(localPort: number): string {
  const written = /```conf\n(# mosquitto\.conf for svc\n[\s\S]*?)```/.exec(operating)?.[1];
  assert.ok(
    written,
    'docs/operating.md, "The broker", holds a ```conf block starting "# mosquitto.conf for svc"',
  );
  const substituted = written
    .replace('listener 1883 127.0.0.1', `listener ${localPort} 127.0.0.1`)
    .replace('listener 8883', `listener ${tlsPort} 127.0.0.1`)
    .replace('/etc/mosquitto/certs/server.crt', certs.serverCert)
    .replace('/etc/mosquitto/certs/server.key', certs.serverKey)
    .replaceAll('/var/lib/mosquitto/', `${certs.dir}/`)
    // Run as root, Mosquitto would become `mosquitto`, who may not read the test's folder.
    .replace('user mosquitto', `user ${userInfo().username}`);
  assert.doesNotMatch(substituted, /\/etc\/mosquitto|\/var\/lib\/mosquitto/, 'every path substituted');
  return substituted;
}

beforeAll(async () => {
  certs = makeCertificates();
  tlsPort = await freePort();
  const localPort = await freePort();
  const dynsecFile = join(certs.dir, 'dynamic-security.json');
  execFileSync('mosquitto_ctrl', ['dynsec', 'init', dynsecFile, admin.username, admin.password], {
    stdio: 'ignore',
  });
  grantServiceRole(dynsecFile, admin.username);
  const configFile = join(certs.dir, 'mosquitto.conf');
  writeFileSync(configFile, configFromOperating(localPort));
  let output = '';
  const child = spawn('/usr/sbin/mosquitto', ['-c', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  mosquitto = child;
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  await accepting(tlsPort, child, () => output);
});

afterAll(async () => {
  if (mosquitto && mosquitto.exitCode === null) {
    const exited = new Promise((resolve) => mosquitto?.once('exit', resolve));
    mosquitto.kill('SIGTERM');
    await exited;
  }
  certs?.remove();
});

const overTls = (ca: string): Record<string, string> => ({
  MQTT_URL: `mqtts://127.0.0.1:${tlsPort}`,
  MQTT_CA: ca,
  MQTT_USERNAME: admin.username,
  MQTT_PASSWORD: admin.password,
  SVC_ADMIN_EMAILS: adminEmail,
});

describe("docs/operating.md's mosquitto.conf, over TLS", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService(overTls(certs.ca));
  });
  afterAll(async () => {
    await service?.stop();
  });

  test('when the service trusts the CA with MQTT_CA then its bridge is up over mqtts, and a car provisioned through it is heard', async () => {
    await eventually('the bridge is connected and subscribed', async () => {
      const readiness = await call(service.url, 'GET', '/readyz');
      return readiness.status === 200 && readiness.body.status === 'ready';
    });
    const owner = await signUpAdmin(service, adminEmail);
    const deviceId = 'brand_b:mosquitto-tls-1';
    const { mqtt: credential } = await provisionCar(service, owner, deviceId);
    const before = sample(await scrape(service), 'svc_mqtt_messages_total', {
      suffix: 'status',
      outcome: 'stored',
    });
    const car = await mqtt.connectAsync(`mqtts://127.0.0.1:${tlsPort}`, {
      clientId: deviceId,
      username: credential.username,
      password: credential.password,
      ca: readFileSync(certs.ca),
      reconnectPeriod: 0,
    });
    try {
      await car.publishAsync(
        carTopic('brand_b', 'mosquitto-tls-1', 'status'),
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

  test('when a car trusts another CA then Mosquitto is never reached past the handshake', async () => {
    const refused = mqtt.connectAsync(`mqtts://127.0.0.1:${tlsPort}`, {
      clientId: 'brand_b:mosquitto-tls-1',
      username: 'brand_b:mosquitto-tls-1',
      password: 'irrelevant',
      ca: readFileSync(certs.otherCa),
      reconnectPeriod: 0,
    });
    await assert.rejects(refused, /self[- ]signed|unable to verify|certificate/i);
  });
});

test("when MQTT_CA names a CA that did not sign the broker's certificate then the service does not start, naming MQTT_URL and the certificate", async () => {
  await assert.rejects(startTestService(overTls(certs.otherCa)), (error: Error) => {
    assert.match(error.message, /MQTT_URL mqtts:\/\/127\.0\.0\.1:\d+/);
    assert.match(error.message, /certificate/i);
    return true;
  });
});
