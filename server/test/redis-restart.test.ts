/**
 * Redis keeps the cars' broker credentials only as a copy of SQL, and a Redis that restarts without
 * persistence (this machine's keeps nothing on disk) comes back empty. The service fills it again
 * once it answers, so the fleet signs in again without an operator. A Redis server of this file's
 * own, so that stopping it touches no other test.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin } from './support/accounts.ts';
import { provisionCar } from './support/cars.ts';
import { eventually } from './support/http.ts';
import { freePort } from './support/mosquitto.ts';
import { signsIn } from './support/mqtt.ts';
import { startTestService, type TestService } from './support/service.ts';

/** redis-server on `port`, keeping nothing on disk, as the machine's own is run; resolves once it answers. */
async function startRedis(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let said = '';
  child.stdout?.setEncoding('utf8');
  for await (const text of child.stdout ?? []) {
    said += text;
    if (said.includes('Ready to accept connections')) break;
  }
  child.stdout?.resume();
  return child;
}

/** Whether the car signs in within `ms`, trying every 200 ms. */
async function signsInWithin(ms: number, url: string, username: string, password: string): Promise<boolean> {
  const until = Date.now() + ms;
  do {
    if (await signsIn(url, username, password)) return true;
    await new Promise((resolve) => setTimeout(resolve, 200));
  } while (Date.now() < until);
  return false;
}

describe('Redis restarted empty', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-redis-'));
  let port: number;
  let redis: ChildProcess;
  let service: TestService;
  let admin: Developer;

  beforeAll(async () => {
    port = await freePort();
    redis = await startRedis(port, dir);
    service = await startTestService({
      SVC_ADMIN_EMAILS: 'root@example.com',
      REDIS_URL: `redis://127.0.0.1:${port}`,
    });
    admin = await signUpAdmin(service, 'root@example.com');
  });
  afterAll(async () => {
    await service?.stop();
    redis?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  test('when Redis restarts with nothing in it then every car signs in again with its password, without an operator', async () => {
    const before = (await provisionCar(service, admin, 'brand_a:1HGCM82633A004352')).mqtt;
    // The second car first signs in after the restart: the broker has no copy of its credential
    // from before (it keeps a read credential for a short while).
    const after = (await provisionCar(service, admin, 'brand_b:redis.restart.2')).mqtt;
    assert.equal(await signsIn(service.mqttUrl, before.username, before.password), true);

    const logged = service.logs.length;
    redis.kill();
    await once(redis, 'exit');
    redis = await startRedis(port, dir);
    // Before any car tries: a car turned away by the empty Redis would be turned away again for as
    // long as the broker keeps what it read (a miss is kept like a credential).
    await eventually(
      'the service fills the new Redis',
      () =>
        service.logs.slice(logged).some((line) => {
          const entry = JSON.parse(line);
          return entry.message === 'broker credentials synced from the database' && entry.keyValueWritten > 0;
        }),
      20_000,
    );

    for (const car of [after, before]) {
      assert.equal(
        await signsInWithin(20_000, service.mqttUrl, car.username, car.password),
        true,
        `${car.username} signs in once the service has filled the new Redis`,
      );
    }
  });
});
