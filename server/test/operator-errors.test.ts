/**
 * What an operator reads when the setup is wrong or a backing service is away: JSON log lines or
 * one plain line per mistake, never a stack trace or a library's own plain-text noise.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { eventually } from './support/http.ts';
import { testKeyEncryptionKey } from './support/key-encryption.ts';
import {
  type PostgresCluster,
  postgresClusterMissing,
  startPostgresCluster,
} from './support/postgres-cluster.ts';
import { runServiceToExit, startServiceProcess } from './support/service-process.ts';

/** `npm start` (or its `--check`) run to its end, on the suite's store: its exit code and stderr. */
const runToExit = (env: Record<string, string>, args: string[] = []) =>
  runServiceToExit(env, args, { inheritDatabaseUrl: true });

// The three parts share nothing (each its own servers, ports and data folder) and run at once:
// much of their time is spent waiting on the processes they start.
describe.concurrent('when REDIS_URL names a Redis that resets every connection', () => {
  const sockets = new Set<Socket>();
  let attempts = 0;
  const redis = createServer((socket) => {
    attempts += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.resetAndDestroy();
  });

  beforeAll(() => new Promise<void>((resolve) => redis.listen(0, '127.0.0.1', resolve)));
  afterAll(() => new Promise<void>((resolve) => redis.close(() => resolve())));

  test('then every failed attempt goes through the logger: JSON lines only, one warn line for many attempts, and no password', async () => {
    const { port } = redis.address() as AddressInfo;
    const service = await startServiceProcess({
      env: { REDIS_URL: `redis://:hunter2-secret@127.0.0.1:${port}` },
    });
    let stderr = '';
    service.child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    try {
      // A car signing in makes the service ask Redis for its credential.
      const mqttUrl = /MQTT\s+(mqtt:\/\/\S+)/.exec(service.banner)?.[1];
      assert.ok(mqttUrl, service.banner);
      await mqtt
        .connectAsync(mqttUrl, {
          username: 'brand_b:car-1',
          password: 'mq_not-known',
          reconnectPeriod: 0,
          connectTimeout: 10_000,
        })
        .then(
          (client) => client.endAsync(),
          () => undefined,
        );
      // ioredis goes on reconnecting: many failures, each an `error` event.
      await eventually('Redis was tried again and again', () => attempts >= 6, 30_000);
    } finally {
      await service.stop();
    }
    const lines = stderr.split('\n').filter((line) => line.trim() !== '');
    assert.doesNotMatch(stderr, /\[ioredis\]/);
    assert.doesNotMatch(stderr, /hunter2-secret/);
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `a line that is not JSON: ${line}`);
    const parsed = lines.map(
      (line) => JSON.parse(line) as { level: string; message: string; reason?: string; store?: string },
    );
    const redisLines = parsed.filter((line) => line.message === 'key-value store unreachable');
    assert.equal(redisLines.length, 1, JSON.stringify(redisLines));
    assert.equal(redisLines[0]?.level, 'warn');
    assert.equal(redisLines[0]?.store, `redis 127.0.0.1:${port}`);
    assert.equal(redisLines[0]?.reason, 'ECONNRESET');
  });
});

describe.concurrent('when several of the ports are taken', () => {
  const blockers = [createHttpServer(), createHttpServer(), createHttpServer()];
  const scratch = mkdtempSync(join(tmpdir(), 'svc-ports-taken-'));
  let ports: number[] = [];
  beforeAll(async () => {
    ports = await Promise.all(
      blockers.map(
        (blocker) =>
          new Promise<number>((resolve) =>
            blocker.listen(0, '127.0.0.1', () => resolve((blocker.address() as AddressInfo).port)),
          ),
      ),
    );
  });
  afterAll(() => {
    for (const blocker of blockers) blocker.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test("then the start (and npm start's check) names each taken port in a line of its own, at once, with exit 2", async () => {
    const [port, metricsPort, mqttPort] = ports;
    const taken = { PORT: String(port), METRICS_PORT: String(metricsPort), MQTT_PORT: String(mqttPort) };
    // Data folders of their own (left unmade until the start makes its), not the checkout's
    // .svc-data: the start holds its folder's lock for a moment, and the check, run at once,
    // would find it held.
    const runs = await Promise.all([
      runToExit({ ...taken, DATA_DIR: join(scratch, 'start') }),
      runToExit({ ...taken, DATA_DIR: join(scratch, 'check') }, ['--check']),
    ]);
    for (const run of runs) {
      assert.equal(run.code, 2, run.stderr);
      const lines = run.stderr.trim().split('\n');
      assert.equal(lines.length, 3, run.stderr);
      assert.match(lines[0] ?? '', new RegExp(`^svc: PORT ${port} is taken on 127\\.0\\.0\\.1 `));
      assert.match(
        lines[1] ?? '',
        new RegExp(`^svc: METRICS_PORT ${metricsPort} is taken on 127\\.0\\.0\\.1 `),
      );
      assert.match(
        lines[2] ?? '',
        new RegExp(`^svc: MQTT_PORT ${mqttPort} is taken on 127\\.0\\.0\\.1 .*MQTT_URL`),
      );
    }
  });
});

const clusterMissing = postgresClusterMissing();

describe.skipIf(clusterMissing)(
  `when DATABASE_URL names what its Postgres does not have${clusterMissing ? ` (${clusterMissing})` : ''}`,
  { concurrent: true },
  () => {
    let cluster: PostgresCluster;
    beforeAll(async () => {
      cluster = await startPostgresCluster();
    }, 60_000);
    afterAll(() => cluster?.remove());

    test('when the database does not exist then one line names DATABASE_URL and the database, exit 2, no stack', async () => {
      const url = new URL(cluster.url);
      url.pathname = '/svc_no_such_database';
      const run = await runToExit({ DATABASE_URL: url.href, SVC_KEY_ENCRYPTION_KEY: testKeyEncryptionKey });
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(
          `^svc: DATABASE_URL names the database "svc_no_such_database", which does not exist on 127\\.0\\.0\\.1:${url.port}: create it \\(createdb .*\\) or set DATABASE_URL`,
        ),
      );
    });

    test('when its user does not exist then one line names DATABASE_URL and the user, exit 2, no password', async () => {
      const url = new URL(cluster.url);
      url.username = 'nobody';
      url.password = 'hunter2-secret';
      const run = await runToExit({ DATABASE_URL: url.href, SVC_KEY_ENCRYPTION_KEY: testKeyEncryptionKey });
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
      assert.match(
        run.stderr,
        /^svc: DATABASE_URL's user "nobody" cannot sign in to 127\.0\.0\.1:\d+ \(role "nobody" does not exist\)/,
      );
      assert.doesNotMatch(run.stderr, /hunter2-secret/);
    });
  },
);
