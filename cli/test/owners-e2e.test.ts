/**
 * Issue 13, end to end, on the embedded broker and on a Mosquitto of the test's own: a developer
 * publishes examples/hello-car with the built `svc` (signed in with a real ssh-keygen key), an
 * admin approves it and the developer releases it; an owner pairs a simulated car with the code the
 * car shows, installs hello-car on it and sees the command completed and the app listed; the owner
 * transfers the car, and from then on gets 404 for it. Then the broker restarts after the car ran
 * `app.install` and before its acknowledgement reached the service: the command still completes.
 *
 * The service runs in this process on the test's store (PGlite, or Postgres with DATABASE_URL),
 * so that the embedded broker can be restarted the only way it restarts: with its service, on the
 * same store and the same MQTT port.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import {
  type Developer,
  registerKey,
  signUpAdmin,
  signUpDeveloper,
} from '../../server/test/support/accounts.ts';
import {
  carPath,
  commandsOf,
  pairWithShownCode,
  reviewVersion,
  startWatchedSimulator,
  type WatchedSimulator,
} from '../../server/test/support/commands.ts';
import { call, eventually } from '../../server/test/support/http.ts';
import { sample } from '../../server/test/support/metrics.ts';
import { freePort, startMosquitto, type TestMosquitto } from '../../server/test/support/mosquitto.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import { makeKey } from '../../server/test/support/ssh.ts';
import { openTestStore, type TestStore } from '../../server/test/support/store.ts';
import { startTcpProxy, type TcpProxy } from '../../server/test/support/tcp-proxy.ts';
import { svc, userEnv } from './support/svc.ts';

const example = join(import.meta.dirname, '../../examples/hello-car');
const helloCar = { app_id: 'com.example.hello-car', version: '1.0.0' };
const adminEmail = 'owners-e2e-admin@example.com';

describe.each(['embedded', 'mosquitto'] as const)('owners end to end on the %s broker', (brokerKind) => {
  const home = mkdtempSync(join(tmpdir(), 'svc-owners-e2e-'));
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-owners-e2e-data-'));
  let store: TestStore;
  let mosquitto: TestMosquitto | undefined;
  let serviceEnv: Record<string, string>;
  let service: TestService;
  let commands: ReturnType<typeof commandsOf>;
  let admin: Developer;
  let developer: Developer;
  let svcEnv: NodeJS.ProcessEnv;
  const simulators: WatchedSimulator[] = [];
  const proxies: TcpProxy[] = [];

  /** The service on the test's store and data folder, which outlive it across a restart. */
  async function startService() {
    service = await startTestService(serviceEnv, { store, dataDir, clockRuns: true });
    commands = commandsOf(service.url);
  }

  /** Kills the broker and starts it again: the Mosquitto, or the service with its embedded broker. */
  async function restartBroker() {
    if (mosquitto) {
      await mosquitto.kill();
      await mosquitto.start();
    } else {
      await service.stop();
      await startService();
    }
  }

  async function newCar(
    mqttUrl = service.mqttUrl,
  ): Promise<{ deviceId: string; simulator: WatchedSimulator }> {
    const [credential] = (await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 1,
      brand: 'brand_a',
    })) as [CarCredential];
    const simulator = await startWatchedSimulator(mqttUrl, [credential]);
    simulators.push(simulator);
    return { deviceId: credential.deviceId, simulator };
  }

  const read = (who: Developer, deviceId: string, what: string) =>
    call(service.url, 'GET', carPath(deviceId, what), { token: who.token });

  beforeAll(async () => {
    store = await openTestStore();
    serviceEnv = { SVC_ADMIN_EMAILS: adminEmail };
    if (brokerKind === 'mosquitto') {
      mosquitto = await startMosquitto();
      Object.assign(serviceEnv, {
        MQTT_URL: mosquitto.url,
        MQTT_USERNAME: mosquitto.admin.username,
        MQTT_PASSWORD: mosquitto.admin.password,
      });
    } else {
      // A port of its own that a restarted service takes again, so that cars find their broker.
      serviceEnv.MQTT_PORT = String(await freePort());
    }
    await startService();
    admin = await signUpAdmin(service, adminEmail);
    developer = await signUpDeveloper(service.url);

    // The developer signs in with svc and their own key, and publishes the example.
    mkdirSync(join(home, '.ssh'), { mode: 0o700 });
    const key = makeKey(join(home, '.ssh'), 'id_ed25519');
    await registerKey(service.url, developer, key.publicLine);
    svcEnv = userEnv(home, { SVC_API_URL: service.url });
    const login = await svc(['login'], svcEnv);
    assert.equal(login.code, 0, login.stderr);
    const published = await svc(['publish', example, '--json'], svcEnv);
    assert.equal(published.code, 0, published.stderr);
    const version = JSON.parse(published.stdout).version as { id: string; version: string };
    assert.equal(version.version, helloCar.version);
    // An admin takes it in review and approves it; its developer releases it.
    await reviewVersion(service.url, developer, admin, version.id, 'published');
  });

  afterAll(async () => {
    await Promise.all(simulators.map((simulator) => simulator.stop()));
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await service?.stop();
    await store?.close();
    await mosquitto?.stop();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('when an owner pairs a simulated car with the code it shows and installs the released hello-car then the command completes and install lists the app; once the owner transfers the car, it is 404 to them', async () => {
    const listed = await svc(['status', '--json'], svcEnv);
    assert.equal(listed.code, 0, listed.stderr);
    const app = JSON.parse(listed.stdout).mini_apps.find((a: { id: string }) => a.id === helloCar.app_id);
    assert.equal(app?.live_version, helloCar.version, 'the developer sees the version live');

    const [owner, buyer] = await Promise.all([signUpDeveloper(service.url), signUpDeveloper(service.url)]);
    const { deviceId, simulator } = await newCar();
    await pairWithShownCode(service.url, owner, simulator, deviceId);

    const sent = await commands.send(owner.token, deviceId, { name: 'app.install', args: helloCar });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    const commandId = sent.body.command_id as string;
    const done = await commands.until(owner.token, deviceId, commandId, 'completed');
    assert.deepEqual(done?.args, helloCar);
    const install = await read(owner, deviceId, 'install');
    assert.equal(install.status, 200, JSON.stringify(install.body));
    assert.deepEqual(install.body.installed_apps, [helloCar]);
    assert.deepEqual(simulator.cars[0]?.installedApps, [helloCar], 'the car has it');
    // The owner's history starts when they paired: the code that paired them came before.
    const history = await commands.list(owner.token, deviceId);
    assert.deepEqual(
      history.body.commands.map((command: { name: string; state: string }) => [command.name, command.state]),
      [['app.install', 'completed']],
    );
    // Counted once the store has it: a moment after the read above may have seen it.
    await eventually(
      'the completed install is counted',
      async () =>
        sample(await (await fetch(service.metricsUrl)).text(), 'svc_commands_total', {
          name: 'app.install',
          state: 'completed',
        }) === 1,
    );

    const moved = await call(service.url, 'POST', carPath(deviceId, 'transfer'), {
      token: owner.token,
      body: { to_user: buyer.accountId },
    });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.equal(moved.body.owner_id, buyer.accountId);
    for (const what of ['status', 'install', 'commands', `commands/${commandId}`]) {
      const hidden = await read(owner, deviceId, what);
      assert.equal(hidden.status, 404, `${what}: ${JSON.stringify(hidden.body)}`);
      assert.equal(hidden.body.code, 'car_not_found', what);
    }
    const byBuyer = await read(buyer, deviceId, 'install');
    assert.equal(byBuyer.status, 200, JSON.stringify(byBuyer.body));
    assert.deepEqual(byBuyer.body.installed_apps, [helloCar], 'the buyer sees what the car has');
  });

  test('when the broker restarts after the car received app.install and before its acknowledgement reached the service then the command still completes and install lists the app', async () => {
    const owner = await signUpDeveloper(service.url);
    // The car reaches its broker through a proxy that can swallow what the car sends.
    const broker = new URL(service.mqttUrl);
    const proxy = await startTcpProxy({ host: broker.hostname, port: Number(broker.port) });
    proxies.push(proxy);
    const { deviceId, simulator } = await newCar(`mqtt://127.0.0.1:${proxy.port}`);
    await pairWithShownCode(service.url, owner, simulator, deviceId);

    proxy.swallow();
    const sent = await commands.send(owner.token, deviceId, { name: 'app.install', args: helloCar });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    const commandId = sent.body.command_id as string;
    await commands.until(owner.token, deviceId, commandId, 'sent');
    // The car got it: it answered (its PUBACK, its `accepted`), and that went nowhere.
    await eventually('the car answers', () => proxy.swallowedBytes > 0);
    assert.equal((await commands.read(owner.token, deviceId, commandId)).body.state, 'sent');

    await restartBroker();
    await commands.until(owner.token, deviceId, commandId, 'completed', 30_000);
    await eventually(
      'install lists the app',
      async () => (await read(owner, deviceId, 'install')).body.installed_apps?.length === 1,
    );
    assert.deepEqual((await read(owner, deviceId, 'install')).body.installed_apps, [helloCar]);
    const history = await commands.list(owner.token, deviceId);
    assert.deepEqual(
      history.body.commands
        .filter((command: { name: string }) => command.name === 'app.install')
        .map((command: { command_id: string; state: string }) => [command.command_id, command.state]),
      [[commandId, 'completed']],
      'one command, completed',
    );
  });
});
