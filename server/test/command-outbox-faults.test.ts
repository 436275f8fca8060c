/**
 * The command outbox on a Mosquitto of the test's own (the service's MQTT_URL mode, MQTT 5 and
 * shared subscriptions), and the broker going away: a command round trip to `completed`; a
 * broker killed between the command and its publication, and between its publication and the
 * car's acknowledgement, loses nothing, and the car sees the command again only with the same
 * `command_id`.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import {
  type BareCar,
  carPath,
  commandsOf,
  connectBareCar,
  pairWithShownCode,
  startWatchedSimulator,
  type WatchedSimulator,
} from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'outbox-admin@example.com';

describe('commands through Mosquitto, and Mosquitto restarting', () => {
  let mosquitto: TestMosquitto;
  let service: TestService;
  let admin: Developer;
  let commands: ReturnType<typeof commandsOf>;
  const simulators: WatchedSimulator[] = [];
  const bareCars: BareCar[] = [];

  const provision = async () =>
    (
      await provisionCars({ apiUrl: service.url, token: admin.token, count: 1, brand: 'brand_a' })
    )[0] as CarCredential;
  const online = async (deviceId: string) =>
    (await call(service.url, 'GET', carPath(deviceId, 'status'), { token: admin.token })).body.online ===
    true;

  beforeAll(async () => {
    mosquitto = await startMosquitto();
    service = await startTestService(
      {
        SVC_ADMIN_EMAILS: adminEmail,
        MQTT_URL: mosquitto.url,
        MQTT_USERNAME: mosquitto.admin.username,
        MQTT_PASSWORD: mosquitto.admin.password,
        SVC_COMMAND_SWEEP: '1s',
      },
      { clockRuns: true },
    );
    admin = await signUpAdmin(service, adminEmail);
    commands = commandsOf(service.url);
  });
  afterAll(async () => {
    await Promise.all(bareCars.map((car) => car.end()));
    await Promise.all(simulators.map((simulator) => simulator.stop()));
    await service?.stop();
    await mosquitto?.stop();
  });

  test('when the owner of a simulated car on Mosquitto locks its doors then the command goes to completed', async () => {
    const owner = await signUpDeveloper(service.url);
    const credential = await provision();
    const simulator = await startWatchedSimulator(mosquitto.url, [credential]);
    simulators.push(simulator);
    await pairWithShownCode(service.url, owner, simulator, credential.deviceId);
    const sent = await commands.send(owner.token, credential.deviceId, { name: 'doors.lock' });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    await commands.until(owner.token, credential.deviceId, sent.body.command_id, 'completed');
    const status = await call(service.url, 'GET', carPath(credential.deviceId, 'status'), {
      token: owner.token,
    });
    assert.equal(status.body.state.doors_locked, true);
  });

  test('when the broker is down as the command is made then it stays queued, and once the broker is back the car gets it and completes it', async () => {
    const credential = await provision();
    const simulator = await startWatchedSimulator(mosquitto.url, [credential]);
    simulators.push(simulator);
    await eventually('the car shows online', () => online(credential.deviceId));

    const from = service.logs.length;
    await mosquitto.kill();
    let sent: Awaited<ReturnType<typeof commands.send>>;
    try {
      sent = await commands.send(admin.token, credential.deviceId, { name: 'doors.lock' });
      assert.equal(sent.status, 202, 'a command is taken while the broker is away');
      assert.equal(sent.body.state, 'queued');
      await eventually('the bridge knows the broker is gone', () =>
        service.logs.slice(from).some((line) => line.includes('mqtt: bridge offline')),
      );
      const waiting = await commands.read(admin.token, credential.deviceId, sent.body.command_id);
      assert.equal(waiting.body.state, 'queued', 'nothing took it: it waits');
    } finally {
      await mosquitto.start();
    }
    await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'completed', 30_000);
  });

  test('when the broker restarts between publishing a command and the car acknowledging it then nothing is lost: the car gets it again with the same command_id and completes it', async () => {
    const credential = await provision();
    const car = await connectBareCar(mosquitto.url, credential);
    bareCars.push(car);
    await eventually('the car shows online', () => online(credential.deviceId));

    const sent = await commands.send(admin.token, credential.deviceId, { name: 'doors.unlock' });
    await eventually('the car receives the command', () =>
      car.received.some((command) => command.command_id === sent.body.command_id),
    );
    await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'sent');

    // Counted now: the car may already have had a copy, from the pass that greets a car online.
    const copiesOf = () => car.received.filter((command) => command.command_id === sent.body.command_id);
    const copiesBefore = copiesOf().length;
    await mosquitto.kill();
    await mosquitto.start();
    // The car comes back on its own, says online, and is sent what it has not finished.
    await eventually('the car receives the command again', () => copiesOf().length > copiesBefore, 30_000);
    const copies = copiesOf();
    assert.ok(
      copies.every((copy) => JSON.stringify(copy) === JSON.stringify(copies[0])),
      'every copy is the same command',
    );
    assert.deepEqual(
      car.received.map((command) => command.command_id).filter((id) => id !== sent.body.command_id),
      [],
      'nothing else reached the car',
    );
    await car.ack(sent.body.command_id, 'accepted');
    await car.ack(sent.body.command_id, 'completed');
    await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'completed', 30_000);
  });
});
