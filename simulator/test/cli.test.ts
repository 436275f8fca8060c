/** `svc-car-sim` in process (flags, errors, Ctrl-C) and once as the installed binary. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { runCli } from '../src/index.ts';
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

  test('when a password is wrong then exit 1 saying which car and that the password is wrong or rotated', async () => {
    let bad = '';
    const { path } = credentialsFile(2, (entry) => {
      entry.password = 'mq_old';
      bad = entry.device_id;
    });
    const { code, stderr } = await run(['--credentials', path, '--mqtt-url', broker.url]);
    assert.equal(code, 1);
    assert.equal(
      stderr,
      `svc-car-sim: car ${bad}: the broker at ${broker.url} refused its password: it is wrong, or it was rotated or the car decommissioned since the credentials were saved\n`,
    );
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
