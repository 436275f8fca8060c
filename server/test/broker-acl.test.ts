/**
 * The broker ACL table of DESIGN §9, the same checks on the embedded broker and on a Mosquitto of
 * the test's own, managed by the service through dynamic security.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'vitest';
import { aclAdminEmail, describeBrokerAcl } from './support/broker-acl.ts';
import { startEmbeddedUnderTest, startMosquittoUnderTest } from './support/brokers.ts';
import { startMosquitto } from './support/mosquitto.ts';
import { startTestService } from './support/service.ts';

describeBrokerAcl('the embedded broker', () =>
  startEmbeddedUnderTest({ SVC_ADMIN_EMAILS: aclAdminEmail }, 'acl-observer'),
);

describeBrokerAcl('Mosquitto with dynamic security', () =>
  startMosquittoUnderTest({ SVC_ADMIN_EMAILS: aclAdminEmail }, 'acl-observer'),
);

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
