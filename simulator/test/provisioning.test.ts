/**
 * Cars provisioned on the fly through a real service's admin API: the credentials they get are the
 * ones the service keeps. The broker here signs cars in from the service's own credential store
 * (`mqtt:auth:{deviceId}`), as the service's broker does.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isValidDeviceId } from '@svc/sdk';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createSqlCredentialStore, secretMatches } from '../../server/src/broker/credentials.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { call } from '../../server/test/support/http.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import { provisionCars, runCli, SimulatorError, startSimulator } from '../src/index.ts';
import { randomVin } from '../src/native-id.ts';
import { startTestBroker, type TestBroker } from './support/broker.ts';

let service: TestService;
let folder: string;
let admin: Developer;
let broker: TestBroker;

/** Runs svc-car-sim with an admin's token in SVC_TOKEN until its cars are online (then as after Ctrl-C). */
async function simulate(argv: string[]) {
  const stop = new AbortController();
  let stderr = '';
  const code = await runCli(argv, {
    stdout: { write: () => true },
    stderr: {
      write: (text: string) => {
        stderr += text;
        if (text.includes('Ctrl-C to stop')) stop.abort();
      },
    },
    env: { SVC_TOKEN: admin.token },
    stop: stop.signal,
  });
  return { code, stderr };
}

/** The device ids of every car the service has. */
async function provisionedCars(): Promise<string[]> {
  const listed = await call(service.url, 'GET', '/api/v1/admin/cars?limit=200', { token: admin.token });
  assert.equal(listed.status, 200);
  assert.equal(listed.body.next_cursor ?? null, null, 'one page holds them all');
  return listed.body.cars.map((car: { device_id: string }) => car.device_id);
}

beforeAll(async () => {
  // Port 0: whatever broker this service runs must not take the machine's 1883.
  service = await startTestService({ SVC_ADMIN_EMAILS: 'root@example.com', MQTT_PORT: '0' });
  admin = await signUpAdmin(service, 'root@example.com');
  const credentials = createSqlCredentialStore(service.store.db);
  folder = mkdtempSync(join(tmpdir(), 'svc-car-sim-'));
  broker = await startTestBroker(async (username, password) => {
    const credential = username === undefined ? undefined : await credentials.get(username);
    return credential !== undefined && password !== undefined && secretMatches(password, credential);
  });
});
afterAll(async () => {
  await broker?.close();
  await service?.stop();
});

describe('cars provisioned on the fly', () => {
  test('when an admin provisions cars then each gets a VIN of its brand, the service lists it, and its credential signs in', async () => {
    const cars = await provisionCars({ apiUrl: service.url, token: admin.token, count: 3, brand: 'brand_a' });
    assert.equal(cars.length, 3);
    assert.equal(new Set(cars.map((c) => c.deviceId)).size, 3);
    for (const car of cars) {
      assert.match(car.deviceId, /^brand_a:[A-HJ-NPR-Z0-9]{17}$/);
      assert.ok(isValidDeviceId(car.deviceId));
      const listed = await call(
        service.url,
        'GET',
        `/api/v1/admin/cars?device_id=${encodeURIComponent(car.deviceId)}`,
        {
          token: admin.token,
        },
      );
      assert.equal(listed.body.cars.length, 1);
    }
    const simulator = await startSimulator({ mqttUrl: broker.url, cars, warnings: { write: () => true } });
    try {
      for (const car of cars) {
        const online = await broker.waitFor(
          (m) => m.clientId === car.deviceId && m.topic.endsWith('/presence'),
        );
        assert.equal(JSON.parse(online.payload).state, 'online');
      }
    } finally {
      await simulator.stop();
    }
  });

  test('when a car is rotated after provisioning then its old password is refused, naming the car', async () => {
    const [car] = await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 1,
      brand: 'brand_b',
    });
    assert.ok(car);
    const rotated = await call(
      service.url,
      'POST',
      `/api/v1/admin/cars/${encodeURIComponent(car.deviceId)}/credential`,
      {
        token: admin.token,
      },
    );
    assert.equal(rotated.status, 201);
    await assert.rejects(
      startSimulator({ mqttUrl: broker.url, cars: [car], warnings: { write: () => true } }),
      (error: unknown) =>
        error instanceof SimulatorError && error.message.includes(`car ${car.deviceId}: the broker`),
    );
  });

  test("when a running car's password is rotated then the service's broker drops it, and the car says so and stops", async () => {
    const [car] = await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 1,
      brand: 'brand_a',
    });
    assert.ok(car);
    const warnings: string[] = [];
    const simulator = await startSimulator({
      mqttUrl: service.mqttUrl,
      cars: [car],
      reconnectPeriodMs: 50,
      warnings: { write: (line: string) => warnings.push(line) > 0 },
    });
    try {
      const rotated = await call(
        service.url,
        'POST',
        `/api/v1/admin/cars/${encodeURIComponent(car.deviceId)}/credential`,
        { token: admin.token },
      );
      assert.equal(rotated.status, 201);
      await simulator.allRefused;
      assert.ok(
        warnings.some((line) => line.includes(`car ${car.deviceId}`) && line.includes('this car stops')),
        warnings.join(''),
      );
    } finally {
      await simulator.stop();
    }
  });

  test('when svc-car-sim --cars provisions with --save-credentials then the cars come online and the file runs them again', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'svc-car-sim-'));
    const saved = join(folder, 'cars.json');
    const stop = new AbortController();
    let stderr = '';
    const code = await runCli(
      ['--cars', '2', '--api-url', service.url, '--save-credentials', saved, '--mqtt-url', broker.url],
      {
        stdout: { write: () => true },
        stderr: {
          write: (text: string) => {
            stderr += text;
            if (text.includes('Ctrl-C to stop')) stop.abort();
          },
        },
        env: { SVC_TOKEN: admin.token },
        stop: stop.signal,
      },
    );
    assert.equal(code, 0, stderr);
    assert.match(stderr, new RegExp(`provisioned 2 car\\(s\\) of brand_a at ${service.url}`));
    assert.equal(statSync(saved).mode & 0o777, 0o600, 'passwords readable by the owner only');
    const entries = JSON.parse(await readFile(saved, 'utf8')) as { device_id: string; password: string }[];
    assert.equal(entries.length, 2);

    const again = new AbortController();
    let rerun = '';
    const second = await runCli(['--credentials', saved, '--mqtt-url', broker.url], {
      stdout: { write: () => true },
      stderr: {
        write: (text: string) => {
          rerun += text;
          if (text.includes('Ctrl-C to stop')) again.abort();
        },
      },
      env: {},
      stop: again.signal,
    });
    assert.equal(second, 0, rerun);
    for (const { device_id } of entries) assert.ok(rerun.includes(device_id));
  });

  test("when the token is not an admin's then provisioning fails saying an admin is needed", async () => {
    const developer = await signUpDeveloper(service.url);
    let stderr = '';
    const code = await runCli(
      ['--cars', '1', '--api-url', service.url, '--token', developer.token, '--mqtt-url', broker.url],
      {
        stdout: { write: () => true },
        stderr: { write: (text: string) => (stderr += text) },
        env: {},
        stop: new AbortController().signal,
      },
    );
    assert.equal(code, 1);
    assert.match(stderr, /^svc-car-sim: provisioning cars needs an admin's token: /);
    assert.doesNotMatch(stderr, /\n\s+at /);
  });

  test('when the broker does not answer then svc-car-sim provisions no car, saves no file, and says the broker is unreachable', async () => {
    const before = await provisionedCars();
    const saved = join(folder, 'unreached.json');
    const { code, stderr } = await simulate([
      '--cars',
      '2',
      '--api-url',
      service.url,
      '--mqtt-url',
      'mqtt://127.0.0.1:1',
      '--save-credentials',
      saved,
    ]);
    assert.equal(code, 1);
    assert.equal(
      stderr,
      'svc-car-sim: cannot reach the broker at mqtt://127.0.0.1:1 (nothing listens there): is the service running, and is --mqtt-url right?\n',
    );
    assert.deepEqual(await provisionedCars(), before);
    assert.equal(existsSync(saved), false);
  });

  test('when --save-credentials names a file that exists, or a folder that does not, then no car is provisioned and the file is left as it was', async () => {
    const before = await provisionedCars();
    const existing = join(folder, 'earlier-cars.json');
    writeFileSync(existing, '[{"device_id":"brand_a:1HGCM82633A004352","password":"mq_earlier"}]\n', {
      mode: 0o644,
    });
    const nowhere = join(folder, 'no-such-folder', 'cars.json');
    for (const [path, message] of [
      [
        existing,
        `${existing} exists already and may hold the passwords of cars provisioned before: run those with --credentials ${existing}, or save the new ones to another file`,
      ],
      [nowhere, `cannot write the credentials file ${nowhere}: no such folder`],
    ] as const) {
      const { code, stderr } = await simulate([
        '--cars',
        '1',
        '--api-url',
        service.url,
        '--mqtt-url',
        broker.url,
        '--save-credentials',
        path,
      ]);
      assert.equal(code, 1, stderr);
      assert.equal(stderr, `svc-car-sim: ${message}\n`);
    }
    assert.deepEqual(await provisionedCars(), before);
    assert.equal(
      await readFile(existing, 'utf8'),
      '[{"device_id":"brand_a:1HGCM82633A004352","password":"mq_earlier"}]\n',
    );
    assert.equal(existsSync(nowhere), false);
  });

  test("when the credentials file holds the service's own answers to provisioning and to rotation then those cars drive", async () => {
    const provisioned = await call(service.url, 'POST', '/api/v1/admin/cars', {
      token: admin.token,
      body: { device_id: `brand_a:${randomVin()}`, brand: 'brand_a' },
    });
    assert.equal(provisioned.status, 201);
    const [car] = await provisionCars({
      apiUrl: service.url,
      token: admin.token,
      count: 1,
      brand: 'brand_a',
    });
    assert.ok(car);
    const rotated = await call(
      service.url,
      'POST',
      `/api/v1/admin/cars/${encodeURIComponent(car.deviceId)}/credential`,
      { token: admin.token },
    );
    assert.equal(rotated.status, 201);
    const path = join(folder, 'answers.json');
    // As an operator saves them: the answers exactly as the service gave them.
    writeFileSync(path, JSON.stringify([provisioned.body, rotated.body]));
    const { code, stderr } = await simulate(['--credentials', path, '--mqtt-url', broker.url]);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /^2 car\(s\) online at /m);
    for (const deviceId of [provisioned.body.car.device_id, car.deviceId]) {
      assert.ok(stderr.includes(`  ${deviceId}\n`), stderr);
    }
  });

  test('when the broker refuses the cars just provisioned then each is named, and the command says to use the MQTT address npm start printed', async () => {
    const other = await startTestBroker(() => false);
    try {
      const saved = join(folder, 'refused.json');
      const { code, stderr } = await simulate([
        '--cars',
        '1',
        '--api-url',
        service.url,
        '--mqtt-url',
        other.url,
        '--save-credentials',
        saved,
      ]);
      assert.equal(code, 1);
      const [deviceId] = (JSON.parse(await readFile(saved, 'utf8')) as { device_id: string }[]).map(
        (entry) => entry.device_id,
      );
      const lines = stderr.trimEnd().split('\n');
      assert.deepEqual(lines.slice(2), [
        `car ${deviceId}: the broker at ${other.url} refused the password the service at ${service.url} just gave it; it does not start: is --mqtt-url the MQTT address npm start printed for that service?`,
        `svc-car-sim: no car could start: the broker at ${other.url} refused every car the service at ${service.url} provisioned: pass the MQTT address npm start printed for that service as --mqtt-url, and run them with --credentials ${saved}`,
      ]);
    } finally {
      await other.close();
    }
  });
});
