/**
 * The broker ACL table of DESIGN §9, the same checks on the embedded broker and on a Mosquitto of
 * the test's own, managed by the service through dynamic security.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { serviceUsername } from '../src/mqtt/embedded-broker.ts';
import { aclAdminEmail, describeBrokerAcl } from './support/broker-acl.ts';
import { startMosquitto } from './support/mosquitto.ts';
import { startTestService } from './support/service.ts';

describeBrokerAcl('the embedded broker', async () => {
  const service = await startTestService({ SVC_ADMIN_EMAILS: aclAdminEmail });
  const { password } = service.app.broker.serviceCredential;
  return {
    service,
    observer: { username: serviceUsername, password, clientId: `${serviceUsername}/acl-observer` },
    stop: () => service.stop(),
  };
});

describeBrokerAcl('Mosquitto with dynamic security', async () => {
  const mosquitto = await startMosquitto();
  try {
    const service = await startTestService({
      SVC_ADMIN_EMAILS: aclAdminEmail,
      MQTT_URL: mosquitto.url,
      MQTT_USERNAME: mosquitto.admin.username,
      MQTT_PASSWORD: mosquitto.admin.password,
    });
    return {
      service,
      observer: { ...mosquitto.admin, clientId: `${mosquitto.admin.username}/acl-observer` },
      async stop() {
        await service.stop();
        await mosquitto.stop();
      },
    };
  } catch (error) {
    await mosquitto.stop();
    throw error;
  }
});

describe('service mode start-up', () => {
  test('when MQTT_USERNAME cannot sign in to MQTT_URL then the service does not start, and says which settings', async () => {
    const mosquitto = await startMosquitto();
    try {
      await assert.rejects(
        startTestService({
          MQTT_URL: mosquitto.url,
          MQTT_USERNAME: mosquitto.admin.username,
          MQTT_PASSWORD: 'not-the-password',
        }),
        /cannot sign in to the broker at MQTT_URL .* as MQTT_USERNAME svc-admin/,
      );
    } finally {
      await mosquitto.stop();
    }
  });
});
