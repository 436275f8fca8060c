/** `svc-car-sim` in process (flags, errors, Ctrl-C) and once as the installed binary. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type CarCredential, runCli } from '../src/index.ts';
import { randomVin } from '../src/native-id.ts';
import { startTestBroker, type TestBroker } from './support/broker.ts';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const passwords = new Map<string, string>();
let broker: TestBroker;
let folder: string;

function credentialsFile(count: number, tamper?: (entry: { device_id: string; password: string }) => void) {
  const entries = Array.from({ length: count }, () => {
    const entry = { device_id: `brand_a:${randomVin()}`, password: `mq_${randomUUID()}` };
    passwords.set(entry.device_id, entry.password);
    return entry;
  });
  if (tamper && entries[0]) tamper(entries[0]);
  const path = join(folder, `${randomUUID()}.json`);
  writeFileSync(path, JSON.stringify(entries));
  return { path, deviceIds: entries.map((e) => e.device_id) };
}

/** Runs the command until `stopWhen` says so (then as after Ctrl-C); its exit code and output. */
async function run(argv: string[], stopWhen?: (stderr: string) => boolean, env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const stop = new AbortController();
  const code = await runCli(argv, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: {
      write: (text: string) => {
        stderr += text;
        if (stopWhen?.(stderr)) stop.abort();
      },
    },
    env,
    stop: stop.signal,
  });
  return { code, stdout, stderr };
}

const noStack = (text: string) => assert.doesNotMatch(text, /\n\s+at /, 'no stack trace');

beforeAll(async () => {
  broker = await startTestBroker(
    (username, password) => username !== undefined && passwords.get(username) === password,
  );
  folder = mkdtempSync(join(tmpdir(), 'svc-car-sim-'));
});
afterAll(async () => {
  await broker.close();
});

describe('svc-car-sim', () => {
  test('when asked for --help then it prints the flags and exits 0', async () => {
    const { code, stdout } = await run(['--help']);
    assert.equal(code, 0);
    for (const flag of [
      '--cars',
      '--credentials',
      '--api-url',
      '--token',
      '--mqtt-url',
      '--status-every',
      '--telemetry-every',
    ]) {
      assert.ok(stdout.includes(flag), flag);
    }
  });

  test('when the flags are wrong then exit 2 with what is wrong, and no stack', async () => {
    const file = credentialsFile(1).path;
    for (const [argv, message] of [
      [['--bogus'], "Unknown option '--bogus'"],
      [[], 'say which cars: --credentials FILE, or --cars N'],
      [['--cars', 'five'], '--cars must be a whole number'],
      [['--cars', '2'], "provisioning cars needs an admin's token"],
      [['--credentials', file, '--status-every', 'often'], '--status-every must be a duration such as 200ms'],
      [['--credentials', file, '--telemetry-every', '0ms'], '--telemetry-every must be a duration'],
      [['--credentials', file, '--mqtt-url', 'http://x'], '--mqtt-url must be an mqtt:// or mqtts:// URL'],
      [
        ['--credentials', file, '--token', 't'],
        '--token provisions new cars: it cannot go with --credentials',
      ],
      [['--credentials', file, '--cars', '3'], `--cars 3, but ${file} holds 1 car(s)`],
      [['--cars', '1', '--token', 't', '--brand', 'brand_z'], '--brand must be one of brand_a, brand_b'],
      [['--credentials', file, '--app', 'hello-car'], '--app must be a mini-app id and a version'],
      [
        ['--credentials', file, '--app', 'com.example.hello-car@one'],
        '--app must be a mini-app id and a version',
      ],
    ] as const) {
      const { code, stderr } = await run([...argv]);
      assert.equal(code, 2, argv.join(' '));
      assert.ok(stderr.startsWith(`svc-car-sim: ${message}`), stderr);
      assert.ok(stderr.includes('svc-car-sim --help'));
      noStack(stderr);
    }
  });

  test('when the credentials file is missing or malformed then exit 1 naming the file', async () => {
    const missing = join(folder, 'none.json');
    const broken = credentialsFile(1, (entry) => {
      entry.device_id = 'brand_a:not-a-vin';
    }).path;
    for (const [file, message] of [
      [missing, `cannot read the credentials file ${missing}: no such file`],
      [broken, `${broken}, car 1: `],
    ] as const) {
      const { code, stderr } = await run(['--credentials', file]);
      assert.equal(code, 1);
      assert.ok(stderr.startsWith(`svc-car-sim: ${message}`), stderr);
      noStack(stderr);
    }
  });

  test('when cars run from a credentials file and Ctrl-C comes then each says offline and the command exits 0', async () => {
    const { path, deviceIds } = credentialsFile(3);
    const { code, stderr } = await run(
      ['--credentials', path, '--cars', '2', '--mqtt-url', broker.url, '--telemetry-every', '100ms'],
      (text) => text.includes('Ctrl-C to stop'),
    );
    assert.equal(code, 0, stderr);
    assert.match(
      stderr,
      /2 car\(s\) online at mqtt:\/\/127\.0\.0\.1:\d+: status every 10s, telemetry every 100ms/,
    );
    assert.match(stderr, /2 car\(s\) offline/);
    for (const deviceId of deviceIds.slice(0, 2)) {
      const presence = broker.published.filter(
        (m) => m.clientId === deviceId && m.topic.endsWith('/presence'),
      );
      assert.deepEqual(
        presence.map((m) => JSON.parse(m.payload).state),
        ['online', 'offline'],
      );
    }
    assert.equal(
      broker.connections.some((c) => c.clientId === deviceIds[2]),
      false,
      'only the first two',
    );
  });

  test('when one car of the file has a rotated password and another was decommissioned then each is named on one line with the fix, and the others drive', async () => {
    const { path, deviceIds } = credentialsFile(3);
    const [rotated, gone, good] = deviceIds as [string, string, string];
    passwords.set(rotated, 'mq_rotated-since');
    passwords.delete(gone);
    const { code, stderr } = await run(['--credentials', path, '--mqtt-url', broker.url], (text) =>
      text.includes('Ctrl-C to stop'),
    );
    assert.equal(code, 0, stderr);
    for (const deviceId of [rotated, gone]) {
      const line = stderr.split('\n').find((l) => l.startsWith(`car ${deviceId}:`));
      assert.equal(
        line,
        `car ${deviceId}: the broker at ${broker.url} refused its password: it is wrong, or it was rotated or the car decommissioned since the credentials were saved; it does not start: rotate its credential (POST /api/v1/admin/cars/${encodeURIComponent(deviceId)}/credential) and put the new password in ${path}, or remove the car from ${path}`,
      );
    }
    assert.match(stderr, /^1 car\(s\) online at mqtt:\/\/127\.0\.0\.1:\d+ \(2 refused, above\): /m);
    assert.match(stderr, /\n1 car\(s\) offline\n$/);
    const presence = broker.published.filter((m) => m.clientId === good && m.topic.endsWith('/presence'));
    assert.deepEqual(
      presence.map((m) => JSON.parse(m.payload).state),
      ['online', 'offline'],
    );
  });

  test('when the broker refuses every car of the file then exit 1 saying no car could start', async () => {
    const { path, deviceIds } = credentialsFile(2);
    for (const deviceId of deviceIds) passwords.set(deviceId, 'mq_rotated-since');
    const { code, stderr } = await run(['--credentials', path, '--mqtt-url', broker.url]);
    assert.equal(code, 1);
    const lines = stderr.trimEnd().split('\n');
    assert.equal(lines.length, 3, stderr);
    for (const deviceId of deviceIds) assert.ok(lines.some((l) => l.startsWith(`car ${deviceId}: `)));
    assert.equal(
      lines[2],
      `svc-car-sim: no car could start: the broker at ${broker.url} refused every car of ${path}: give them new passwords (above), or provision new cars with --cars N`,
    );
    noStack(stderr);
  });

  test('when Ctrl-C comes after some cars were dropped for their passwords then only the cars still online are counted offline', async () => {
    const { path, deviceIds } = credentialsFile(3);
    const dropped = deviceIds.slice(0, 2);
    let rotated = false;
    const { code, stderr } = await run(['--credentials', path, '--mqtt-url', broker.url], (text) => {
      if (!rotated && text.includes('Ctrl-C to stop')) {
        rotated = true;
        // Rotated while running: the broker drops the car, which is refused on its reconnection.
        for (const deviceId of dropped) {
          passwords.set(deviceId, 'mq_rotated-since');
          broker.dropClient(deviceId);
        }
      }
      return text.split('this car stops').length - 1 === dropped.length;
    });
    assert.equal(code, 0, stderr);
    assert.match(stderr, /^3 car\(s\) online at /m);
    assert.match(stderr, /\n1 car\(s\) offline\n$/);
  });

  test('when the credentials file holds provisioning answers, credentials and saved entries then every car drives', async () => {
    const [a, b, c] = Array.from({ length: 3 }, () => {
      const deviceId = `brand_a:${randomVin()}`;
      passwords.set(deviceId, `mq_${randomUUID()}`);
      return { deviceId, password: passwords.get(deviceId) as string };
    }) as [CarCredential, CarCredential, CarCredential];
    const path = join(folder, `${randomUUID()}.json`);
    writeFileSync(
      path,
      JSON.stringify([
        {
          car: { device_id: a.deviceId, brand: 'brand_a', created_at: new Date().toISOString() },
          mqtt: { client_id: a.deviceId, username: a.deviceId, password: a.password },
        },
        { client_id: b.deviceId, username: b.deviceId, password: b.password },
        { device_id: c.deviceId, password: c.password },
      ]),
    );
    const { code, stderr } = await run(['--credentials', path, '--mqtt-url', broker.url], (text) =>
      text.includes('Ctrl-C to stop'),
    );
    assert.equal(code, 0, stderr);
    assert.match(stderr, /^3 car\(s\) online at /m);
    for (const car of [a, b, c]) {
      await broker.waitFor((m) => m.clientId === car.deviceId && m.topic.endsWith('/presence'));
    }
  });

  test('when an entry of the credentials file has no accepted shape then exit 1 in one line that shows the shapes', async () => {
    const deviceId = `brand_a:${randomVin()}`;
    const shapes =
      '{"device_id", "password"}, a provisioning answer {"car": {"device_id", …}, "mqtt": {"username", "password", …}}, or a credential {"username", "password"} (user name = the device id)';
    for (const [entries, message] of [
      [[{ id: deviceId, password: 'mq_x' }], `car 1: expected ${shapes}`],
      [[{ device_id: deviceId, password: '' }], `car 1: expected ${shapes}`],
      [[{ device_id: deviceId, secret: 'mq_x' }], `car 1: expected ${shapes}`],
      [[{ car: deviceId, mqtt: { password: 'mq_x' } }], `car 1: expected ${shapes}`],
      [['mq_x'], `car 1: expected ${shapes}`],
      [[{ username: 'brand_a:not-a-vin', password: 'mq_x' }], 'car 1: device id "brand_a:not-a-vin"'],
      [
        [{ car: { device_id: deviceId }, mqtt: { username: 'brand_b:other', password: 'mq_x' } }],
        `car 1: its user name and client id must be its device id ${deviceId}, not "brand_b:other"`,
      ],
    ] as const) {
      const path = join(folder, `${randomUUID()}.json`);
      writeFileSync(path, JSON.stringify(entries));
      const { code, stderr } = await run(['--credentials', path, '--mqtt-url', broker.url]);
      assert.equal(code, 1, stderr);
      assert.ok(stderr.startsWith(`svc-car-sim: ${path}, ${message}`), stderr);
      assert.equal(stderr.split('\n').length, 2, 'one line');
      assert.equal(
        broker.connections.some((c) => c.clientId === deviceId),
        false,
      );
    }
    const single = join(folder, `${randomUUID()}.json`);
    writeFileSync(single, JSON.stringify({ device_id: deviceId, password: 'mq_x' }));
    const { code, stderr } = await run(['--credentials', single, '--mqtt-url', broker.url]);
    assert.equal(code, 1);
    assert.equal(
      stderr,
      `svc-car-sim: ${single} must hold a JSON list [ … ] with one entry per car: ${shapes}\n`,
    );
  });

  test('when the broker lets in a client without a password then the command warns that it is not the service broker', async () => {
    const anyone = await startTestBroker(() => true);
    try {
      const { path } = credentialsFile(1);
      const { code, stderr } = await run(['--credentials', path, '--mqtt-url', anyone.url], (text) =>
        text.includes('Ctrl-C to stop'),
      );
      assert.equal(code, 0, stderr);
      assert.ok(
        stderr.startsWith(
          `warning: the broker at ${anyone.url} let in a client without a password, which the service's own broker never does: is it another broker (a system Mosquitto)? Use the MQTT address npm start printed\n`,
        ),
        stderr,
      );
    } finally {
      await anyone.close();
    }
    const { path } = credentialsFile(1);
    const { stderr } = await run(['--credentials', path, '--mqtt-url', broker.url], (text) =>
      text.includes('Ctrl-C to stop'),
    );
    assert.doesNotMatch(stderr, /warning/);
  });

  test('when --mqtt-url names something that is not an MQTT broker then exit 1 saying so', async () => {
    const web = createServer((_request, response) => response.end('svc'));
    web.listen(0, '127.0.0.1');
    await once(web, 'listening');
    const url = `mqtt://127.0.0.1:${(web.address() as AddressInfo).port}`;
    try {
      const { path } = credentialsFile(1);
      const { code, stderr } = await run(['--credentials', path, '--mqtt-url', url]);
      assert.equal(code, 1);
      assert.match(
        stderr,
        new RegExp(
          `^svc-car-sim: the broker at ${url} does not answer as an MQTT broker \\(.+\\): is --mqtt-url the MQTT address npm start printed\\?\\n$`,
        ),
      );
    } finally {
      web.closeAllConnections();
      await new Promise((resolve) => web.close(resolve));
    }
  });

  test('when the broker cannot be reached then exit 1 saying so', async () => {
    const { path } = credentialsFile(1);
    const { code, stderr } = await run(['--credentials', path, '--mqtt-url', 'mqtt://127.0.0.1:1']);
    assert.equal(code, 1);
    assert.equal(
      stderr,
      'svc-car-sim: cannot reach the broker at mqtt://127.0.0.1:1 (nothing listens there): is the service running, and is --mqtt-url right?\n',
    );
  });

  test('when SVC_MQTT_URL is set and --mqtt-url is not then that broker is the one used', async () => {
    const { path } = credentialsFile(1);
    const { code, stderr } = await run(['--credentials', path], undefined, {
      SVC_MQTT_URL: 'mqtt://127.0.0.1:1',
    });
    assert.equal(code, 1);
    assert.match(stderr, /cannot reach the broker at mqtt:\/\/127\.0\.0\.1:1 /);
  });

  test('when run as the installed npx svc-car-sim and interrupted then the car goes offline and it exits 0', async () => {
    const { path, deviceIds } = credentialsFile(1);
    const child = spawn(
      join(repoRoot, 'node_modules/.bin/svc-car-sim'),
      ['--credentials', path, '--mqtt-url', broker.url],
      {
        cwd: repoRoot,
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk) => {
      const before = stderr;
      stderr += chunk;
      // Once: a second Ctrl-C ends the process at once, as it should.
      if (stderr.includes('Ctrl-C to stop') && !before.includes('Ctrl-C to stop')) child.kill('SIGINT');
    });
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, stderr);
    const presence = broker.published.filter(
      (m) => m.clientId === deviceIds[0] && m.topic.endsWith('/presence'),
    );
    assert.deepEqual(
      presence.map((m) => JSON.parse(m.payload).state),
      ['online', 'offline'],
    );
  });
});
