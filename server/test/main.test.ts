import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { call } from './support/http.ts';
import { testKeyEncryptionKey } from './support/key-encryption.ts';
import { startMosquitto } from './support/mosquitto.ts';
import {
  exitOf,
  runServiceToExit,
  type ServiceProcess,
  serviceArgs,
  startServiceProcess,
} from './support/service-process.ts';

const startProcess = (dataDir: string) => startServiceProcess({ dataDir });

/** A port nothing listens on just now. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('npm start', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-data-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  /** Runs the service (with `args`) to its end: for starts that must refuse. */
  async function runToExit(env: Record<string, string>, args: string[] = []) {
    const { code, stderr } = await runServiceToExit(env, args);
    // The migrations run, and are logged, before the broker and the listeners start: what is
    // looked at here is what follows them.
    return { code, stderr: withoutMigrationLines(stderr) };
  }

  // One service on DATA_DIR for the two tests that look at a running one: each start costs
  // seconds of the machine's time.
  describe('with a service running', () => {
    let first: ServiceProcess;
    beforeAll(async () => {
      first = await startProcess(dataDir);
    });
    afterAll(async () => {
      if (!first) return;
      const exited = exitOf(first.child);
      first.child.kill('SIGINT');
      await exited;
    });

    test('when started then it prints where the API, console, docs, data and metrics are, and serves the console', async () => {
      const { url, banner } = first;
      assert.match(banner, new RegExp(`docs\\s+${url}/docs`));
      assert.match(banner, new RegExp(`console\\s+${url}/console`));
      const page = await call(url, 'GET', '/console');
      assert.equal(page.status, 200, 'npm test builds the console, as npm start does');
      assert.match(String(page.body), /<title>svc console<\/title>/);
      assert.match(banner, new RegExp(`data\\s+${dataDir} \\(pglite\\)`));
      assert.equal((await call(url, 'GET', '/readyz')).status, 200);
      const metricsUrl = /metrics\s+(http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(banner)?.[1];
      assert.ok(metricsUrl, banner);
      assert.notEqual(new URL(metricsUrl).port, new URL(url).port, 'metrics on a port of their own');
      assert.match(String((await call(metricsUrl, 'GET', '')).body), /svc_http_requests_total/);
    });

    test("when a second service starts on the same DATA_DIR then it refuses, naming DATA_DIR and the first one's pid, and the first keeps its data", async () => {
      // Neither takes the lock: the start and npm start's check run at once.
      const [second, check] = await Promise.all([
        runToExit({ PORT: '0', DATA_DIR: dataDir }),
        runToExit({ PORT: '0', DATA_DIR: dataDir }, ['--check']),
      ]);
      assert.equal(second.code, 2, second.stderr);
      assert.equal(
        second.stderr.trim(),
        `svc: DATA_DIR ${dataDir} is in use by another svc (pid ${first.child.pid}): stop it first, or give this one another DATA_DIR (or a DATABASE_URL). If no svc runs as pid ${first.child.pid}, remove ${join(dataDir, 'svc.lock')}.`,
      );
      assert.equal(check.code, 2, 'npm start finds it out before building');
      assert.equal((await call(first.url, 'GET', '/readyz')).status, 200);
      // Stopped as a person stops npm start, with Ctrl-C; the next test stops one with SIGTERM.
      const exited = exitOf(first.child);
      first.child.kill('SIGINT');
      await exited;
      assert.ok(!existsSync(join(dataDir, 'svc.lock')), 'a clean stop releases the lock');
    });
  });

  test('when SIGTERM arrives during a request then the request finishes, the process exits 0, and the data is kept', async () => {
    const { child, url } = await startProcess(dataDir);
    const body = JSON.stringify({
      email: 'kept@example.com',
      password: 'correct horse battery staple',
      name: 'Kept',
    });
    const exited = exitOf(child);
    let printed = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
    });
    let logged = '';
    const signalTaken = new Promise<void>((resolve) => {
      child.stderr?.on('data', (chunk: Buffer) => {
        logged += chunk.toString();
        if (logged.includes('"message":"stopping: finishing in-flight requests"')) resolve();
      });
    });
    const reply = new Promise<number>((resolve, reject) => {
      const req = request(
        `${url}/api/v1/account/signup`,
        {
          method: 'POST',
          // The server's 100 Continue says it has the request: from then on it is in flight.
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            expect: '100-continue',
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      // Half the body now, the signal once the request is in flight, then the rest once the
      // service has taken the signal.
      req.write(body.slice(0, 20));
      req.once('continue', () => {
        child.kill('SIGTERM');
        signalTaken.then(() => req.end(body.slice(20)), reject);
      });
    });
    assert.equal(await reply, 201);
    assert.equal(await exited, 0);
    assert.match(printed, /svc stopped: requests finished, store closed\./);
    assert.ok(!existsSync(join(dataDir, 'svc.lock')), 'a clean stop releases the lock');

    const again = await startProcess(dataDir);
    try {
      const session = await call(again.url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'kept@example.com', password: 'correct horse battery staple' },
      });
      assert.equal(session.status, 201, 'the account made before the signal is still there');
    } finally {
      again.child.kill('SIGINT');
      await exitOf(again.child);
    }
  });

  // These three share nothing (a start refused before it reads DATA_DIR, a folder of its own, and
  // DATA_DIR, which no other test uses meanwhile) and run at once.
  test.concurrent('when a setting is wrong then it refuses to start and names the variable', async () => {
    const child = spawn(process.execPath, serviceArgs(), {
      env: { ...process.env, PORT: 'eighty', DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    assert.equal(await exitOf(child), 2);
    assert.match(stderr, /^svc: PORT must be a port number/);
  });

  test.concurrent('when a setting is set under its former name then the service starts and its log warns, naming the new one', async () => {
    const service = await startServiceProcess({ env: { DATABASE_ACQUIRE_TIMEOUT_MS: '2000' } });
    let stderr = '';
    service.child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    assert.equal((await call(service.url, 'GET', '/readyz')).status, 200);
    await service.stop();
    const warning = stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: string; message: string })
      .find((line) => line.message.startsWith('DATABASE_ACQUIRE_TIMEOUT_MS'));
    assert.deepEqual(warning && { level: warning.level, message: warning.message }, {
      level: 'warn',
      message:
        'DATABASE_ACQUIRE_TIMEOUT_MS is now DATABASE_ACQUIRE_TIMEOUT: set DATABASE_ACQUIRE_TIMEOUT=2000ms instead (DATABASE_ACQUIRE_TIMEOUT_MS is refused from svc 0.3.0)',
    });
  });

  test.concurrent('when the service holding DATA_DIR was killed then the next start takes the folder over', async () => {
    const killed = await startProcess(dataDir);
    const gone = exitOf(killed.child);
    killed.child.kill('SIGKILL');
    await gone;
    assert.ok(existsSync(join(dataDir, 'svc.lock')), 'SIGKILL leaves the lock behind');
    const next = await startProcess(dataDir);
    try {
      assert.equal((await call(next.url, 'GET', '/readyz')).status, 200);
      assert.equal(readFileSync(join(dataDir, 'svc.lock'), 'utf8').trim(), String(next.child.pid));
    } finally {
      await next.stop();
    }
  });

  test('when the port or the metrics port is taken then one line names PORT or METRICS_PORT, with exit 2 and no stack', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as AddressInfo;
    const portDataDir = mkdtempSync(join(tmpdir(), 'svc-data-port-'));
    // npm start's check looks at a folder of its own (left unmade, as a check leaves it): the
    // start holds the lock of its folder for a moment, and the two run at once.
    const checkDataDir = join(portDataDir, 'checked');
    try {
      const taken = await Promise.all([
        runToExit({ PORT: String(port), DATA_DIR: portDataDir }),
        runToExit({ PORT: String(port), DATA_DIR: checkDataDir }, ['--check']),
      ]);
      for (const run of taken) {
        assert.equal(run.code, 2, run.stderr);
        assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
        assert.match(
          run.stderr,
          new RegExp(`^svc: PORT ${port} is taken on 127\\.0\\.0\\.1 .*set PORT to a free port`),
        );
      }
      assert.ok(!existsSync(join(portDataDir, 'svc.lock')), 'the refused start released the data folder');
      for (const args of [[], ['--check']]) {
        // Its own PORT is a free port, the next one when it is free: the advice never names it.
        // Another test file's server may take that port for a moment; then the service rightly
        // names PORT, and it tries again with another.
        let run: { code: number | null; stderr: string } = { code: null, stderr: '' };
        let ownPort = port + 1;
        for (let attempt = 0; attempt < 10; attempt++) {
          run = await runToExit(
            { PORT: String(ownPort), METRICS_PORT: String(port), DATA_DIR: portDataDir },
            args,
          );
          if (!run.stderr.startsWith(`svc: PORT ${ownPort} is taken`)) break;
          ownPort = await freePort();
        }
        assert.equal(run.code, 2, run.stderr);
        const said = new RegExp(
          `^svc: METRICS_PORT ${port} is taken on 127\\.0\\.0\\.1 .*such as METRICS_PORT=(\\d+) npm start.*\n$`,
        ).exec(run.stderr);
        assert.ok(said, run.stderr);
        assert.notEqual(Number(said[1]), ownPort, 'the advice names a port other than its own PORT');
        assert.notEqual(Number(said[1]), port);
      }
    } finally {
      blocker.close();
      rmSync(portDataDir, { recursive: true, force: true });
    }
  });

  test("when the embedded broker's port is taken then one line names MQTT_PORT and MQTT_URL, with exit 2; with MQTT_URL set the port is not checked", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const { port } = blocker.address() as AddressInfo;
    const portDataDir = mkdtempSync(join(tmpdir(), 'svc-data-mqtt-port-'));
    // The checks look at a folder of their own (left unmade, as a check leaves it): the start
    // holds the lock of its folder for a moment, and the three run at once.
    const checkDataDir = join(portDataDir, 'checked');
    try {
      const [start, check, external] = await Promise.all([
        runToExit({ PORT: '0', MQTT_PORT: String(port), DATA_DIR: portDataDir }),
        runToExit({ PORT: '0', MQTT_PORT: String(port), DATA_DIR: checkDataDir }, ['--check']),
        runToExit(
          {
            PORT: '0',
            MQTT_PORT: String(port),
            MQTT_URL: 'mqtt://127.0.0.1:1',
            MQTT_USERNAME: 'svc',
            MQTT_PASSWORD: 'secret',
            DATA_DIR: checkDataDir,
          },
          ['--check'],
        ),
      ]);
      for (const run of [start, check]) {
        assert.equal(run.code, 2, run.stderr);
        assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
        assert.match(
          run.stderr,
          new RegExp(
            `^svc: MQTT_PORT ${port} is taken on 127\\.0\\.0\\.1 .*set MQTT_PORT to a free port.*set MQTT_URL`,
          ),
        );
      }
      assert.ok(!existsSync(join(portDataDir, 'svc.lock')), 'the refused start released the data folder');
      assert.equal(external.code, 0, external.stderr);
    } finally {
      blocker.close();
      rmSync(portDataDir, { recursive: true, force: true });
    }
  });

  // The last three share nothing (their own broker, folders and ports; a start refused before it
  // reads DATA_DIR) and run at once: much of their time is spent waiting on the processes they start.
  test.concurrent('when MQTT_PASSWORD is wrong, or the broker has no dynamic-security plugin, then one line says which settings, with exit 2 and no stack', async () => {
    const mosquitto = await startMosquitto();
    // A data folder for each of the two starts, which run at once.
    const dataDirs = [0, 1].map(() => mkdtempSync(join(tmpdir(), 'svc-data-mqtt-url-')));
    try {
      // An account without the plugin's admin role: Mosquitto answers it on the control topic as
      // little as a Mosquitto without the plugin answers anyone.
      const account = { username: 'svc-no-control', password: 'no-control-secret' };
      const port = new URL(mosquitto.url).port;
      const ctrl = [
        '-h',
        '127.0.0.1',
        '-p',
        port,
        '-u',
        mosquitto.admin.username,
        '-P',
        mosquitto.admin.password,
      ];
      execFileSync('mosquitto_ctrl', [
        ...ctrl,
        'dynsec',
        'createClient',
        account.username,
        '-p',
        account.password,
      ]);
      const [wrong, denied] = await Promise.all([
        runToExit({
          PORT: '0',
          DATA_DIR: dataDirs[0] ?? '',
          MQTT_URL: mosquitto.url,
          MQTT_USERNAME: mosquitto.admin.username,
          MQTT_PASSWORD: 'not-the-password',
        }),
        runToExit({
          PORT: '0',
          DATA_DIR: dataDirs[1] ?? '',
          MQTT_URL: mosquitto.url,
          MQTT_USERNAME: account.username,
          MQTT_PASSWORD: account.password,
        }),
      ]);
      assert.equal(wrong.code, 2, wrong.stderr);
      assert.equal(wrong.stderr.trim().split('\n').length, 1, wrong.stderr);
      assert.match(
        wrong.stderr,
        /^svc: cannot sign in to the broker at MQTT_URL \S+ as MQTT_USERNAME svc-admin: Connection refused: Not authorized\n$/,
      );
      assert.equal(denied.code, 2, denied.stderr);
      assert.equal(denied.stderr.trim().split('\n').length, 1, denied.stderr);
      assert.match(
        denied.stderr,
        /^svc: the broker at MQTT_URL \S+ gave MQTT_USERNAME svc-no-control no answer on \$CONTROL\/dynamic-security\/v1: load the dynamic-security plugin/,
      );
    } finally {
      await mosquitto.stop();
      for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    }
  });

  test.concurrent('when DATA_DIR is a file, HOST is no address here, or Postgres cannot be reached then one line or one log line says which, and no stack', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'svc-bad-settings-'));
    try {
      const file = join(scratch, 'a-file');
      writeFileSync(file, 'not a folder');
      // A folder of its own, so that it starts from the run's migrated database: HOST is found
      // out when the service listens, after the store is open and migrated.
      const hostDataDir = join(scratch, 'data');
      mkdirSync(hostDataDir);
      // Four starts that share nothing, at once.
      const [fileRuns, host, unreachable] = await Promise.all([
        Promise.all([[], ['--check']].map((args) => runToExit({ PORT: '0', DATA_DIR: file }, args))),
        runToExit({ PORT: '0', HOST: 'not a host', DATA_DIR: hostDataDir }),
        runToExit({
          PORT: '0',
          DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
          SVC_KEY_ENCRYPTION_KEY: testKeyEncryptionKey,
        }),
      ]);
      for (const run of fileRuns) {
        assert.equal(run.code, 2, run.stderr);
        assert.equal(
          run.stderr,
          `svc: DATA_DIR ${file} is a file, not a folder: set DATA_DIR to a folder (it is made when missing).\n`,
        );
      }
      assert.equal(host.code, 2, host.stderr);
      assert.match(host.stderr, /^svc: HOST not a host is not an address of this machine: set HOST/);

      assert.equal(unreachable.code, 1, unreachable.stderr);
      const [line, ...more] = unreachable.stderr.trim().split('\n');
      assert.deepEqual(more, [], unreachable.stderr);
      const logged = JSON.parse(line ?? '{}');
      assert.equal(logged.level, 'error');
      assert.equal(logged.message, 'cannot start: the database is unreachable');
      assert.match(logged.hint, /DATABASE_URL/);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test.concurrent('when a setting is wrong then npm start says so before building anything', async () => {
    const child = spawn('npm', ['start', '--silent'], {
      cwd: join(import.meta.dirname, '../..'),
      env: { ...process.env, PORT: 'eighty', DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    assert.notEqual(await exitOf(child), 0);
    assert.match(output, /svc: PORT must be a port number/);
    assert.doesNotMatch(output, /built|docs/i, 'nothing was built');
  });
});

/** stderr without the migrator's info lines (`migration applied`, `migrations done`, `migrations: …`). */
function withoutMigrationLines(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => !/^\{"level":"info".*"message":"migrations?[ :]/.test(line))
    .join('\n');
}
