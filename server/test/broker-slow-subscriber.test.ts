/**
 * The embedded broker does not let one subscriber that falls behind (the bridge, storing as it
 * reads) hold back the others and the cars: it keeps what that subscriber has not read yet, up to
 * a bound, and goes on.
 */
import assert from 'node:assert/strict';
import mqtt, { type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { carTopic, carTopicFilter } from '../../generated/mqtt.ts';
import { serviceUsername } from '../src/broker/embedded-broker.ts';
import { signUpAdmin } from './support/accounts.ts';
import { deviceIds } from './support/cars.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'slow-subscriber-admin@example.com';
const newDeviceId = deviceIds('slow');

describe('a subscriber of the service that stops reading, on the embedded broker', () => {
  let service: TestService;
  const open: MqttClient[] = [];

  async function signInAsService(name: string): Promise<MqttClient> {
    const client = await mqtt.connectAsync(service.mqttUrl, {
      username: serviceUsername,
      password: service.app.broker.serviceCredential.password,
      clientId: `${serviceUsername}/${name}`,
      reconnectPeriod: 0,
    });
    client.on('error', () => {});
    open.push(client);
    await client.subscribeAsync(carTopicFilter('telemetry'), { qos: 0 });
    return client;
  }

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail });
  });
  afterAll(async () => {
    for (const client of open) client.end(true);
    await service?.stop();
  });

  test("when one of the service's subscribers stops reading then a car's messages, many megabytes of them, still reach another and are acknowledged to the car", async () => {
    const admin = await signUpAdmin(service, adminEmail);
    const deviceId = newDeviceId();
    const made = await call(service.url, 'POST', '/api/v1/admin/cars', {
      token: admin.token,
      body: { device_id: deviceId, brand: 'brand_b' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const stuck = await signInAsService('stuck');
    const reader = await signInAsService('reader');
    let received = 0;
    reader.on('message', () => {
      received += 1;
    });
    // It reads nothing more: what the broker sends it fills the socket's buffers, then waits.
    stuck.stream.pause();
    const car = await mqtt.connectAsync(service.mqttUrl, {
      clientId: deviceId,
      username: deviceId,
      password: made.body.mqtt.password,
      reconnectPeriod: 0,
    });
    open.push(car);
    // Far more than the kernel's buffers and the stream's hold between the broker and the stuck
    // subscriber (a few MiB on loopback): 24 MiB, each acknowledged (QoS 1) before the next.
    const messages = 1500;
    const payload = Buffer.alloc(16 * 1024, 'x');
    const topic = carTopic('brand_b', deviceId.slice('brand_b:'.length), 'telemetry');
    for (let sent = 0; sent < messages; sent++) await car.publishAsync(topic, payload, { qos: 1 });

    await eventually('the reading subscriber received every message', () => received === messages);
  });
});
