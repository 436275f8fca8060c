/**
 * A Mosquitto set up with the service's account but not its `svc-bridge` role (a restore onto a
 * new broker that skipped step 3 of docs/operating.md, "The broker") lets the service sign in but
 * refuses every command it publishes. The operator learns it from /readyz and one log line naming
 * the fix, not from commands that stay `queued` for ever.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { provisionCar } from './support/cars.ts';
import { commandsOf } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'refused-admin@example.com';

describe('a broker that refuses the service its commands', () => {
  let mosquitto: TestMosquitto;
  let service: TestService;
  let admin: Developer;

  beforeAll(async () => {
    mosquitto = await startMosquitto({ serviceRole: false });
    service = await startTestService({
      SVC_ADMIN_EMAILS: adminEmail,
      MQTT_URL: mosquitto.url,
      MQTT_USERNAME: mosquitto.admin.username,
      MQTT_PASSWORD: mosquitto.admin.password,
    });
    admin = await signUpAdmin(service, adminEmail);
  });
  afterAll(async () => {
    await service?.stop();
    await mosquitto?.stop();
  });

  test('when the service account lacks the svc-bridge role then a command stays queued, /readyz says the bridge is failing, and the log names the role', async () => {
    const deviceId = 'brand_a:1HGCM82633A004352';
    await provisionCar(service, admin, deviceId);
    const sent = await commandsOf(service.url).send(admin.token, deviceId, { name: 'doors.lock' });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));

    await eventually('the log says the broker refuses the commands', () =>
      service.logs.some((line) => line.includes("the broker refuses the service's commands")),
    );
    const refusal = JSON.parse(
      service.logs.find((line) => line.includes("the broker refuses the service's commands")) ?? '{}',
    );
    assert.equal(refusal.level, 'error');
    assert.match(refusal.message, /svc-bridge role/);
    const ready = await call(service.url, 'GET', '/readyz');
    assert.equal(ready.status, 200, 'requests are still served');
    assert.equal(ready.body.status, 'degraded');
    assert.equal(ready.body.checks.mqtt_bridge, 'failing');
    const command = await commandsOf(service.url).read(admin.token, deviceId, sent.body.command_id);
    assert.equal(command.body.state, 'queued');
  });
});
