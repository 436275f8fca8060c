/**
 * Postgres, the bucket and one key are the only state: a service restored from a `pg_dump` onto
 * an emptied Redis and a new Mosquitto (empty dynamic security) gives every car and connector its
 * credential back, so they sign in with their old passwords; identity tokens issued before verify
 * against the restored JWKS; packages download from the bucket. Needs Postgres (DATABASE_URL's
 * server, else 127.0.0.1:5432), Redis and Mosquitto.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createRedisCredentialStore } from '../src/broker/credentials.ts';
import { syncBrokerCredentials } from '../src/cars/broker-credential-sync.ts';
import { createLogger } from '../src/logger.ts';
import { createKeyRing } from '../src/store/key-encryption.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, makeOwner, provisionCar } from './support/cars.ts';
import { publishMiniApp } from './support/commands.ts';
import { call } from './support/http.ts';
import { testKeyEncryptionKey } from './support/key-encryption.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { signsIn } from './support/mqtt.ts';
import { redisMissing, testRedisUrl } from './support/redis.ts';
import { s3rverCredentials, startS3rver, type TestBucket } from './support/s3rver.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, postgresServerUrl, type TestStore } from './support/store.ts';

const redisAway = await redisMissing();
const adminEmail = 'restore-admin@example.com';
const appId = 'com.example.restored';
const cars = ['brand_a:1HGCM82633A004352', 'brand_b:restore.1'];

/** A Redis database of this file's own, so that flushing it touches no other test's keys. */
const redisUrl = (() => {
  const url = new URL(testRedisUrl);
  url.pathname = '/13';
  return url.href;
})();

/** The sha256 of a version's package as its download brings it (admins may download any). */
async function downloadedSha256(base: string, who: Developer, versionId: string): Promise<string> {
  const answer = await fetch(`${base}/api/v1/mini-apps/versions/${versionId}/package`, {
    headers: { authorization: `Bearer ${who.token}` },
  });
  assert.equal(answer.status, 200, await answer.clone().text());
  return createHash('sha256')
    .update(Buffer.from(await answer.arrayBuffer()))
    .digest('hex');
}

function serviceEnv(mosquitto: TestMosquitto, bucket: TestBucket): Record<string, string> {
  return {
    ...bucket.env,
    SVC_ADMIN_EMAILS: adminEmail,
    REDIS_URL: redisUrl,
    MQTT_URL: mosquitto.url,
    MQTT_USERNAME: mosquitto.admin.username,
    MQTT_PASSWORD: mosquitto.admin.password,
  };
}

describe.skipIf(redisAway)(`restore from a backup${redisAway ? ` (skipped: ${redisAway})` : ''}`, () => {
  const workDir = mkdtempSync(join(tmpdir(), 'svc-restore-'));
  const backup = join(workDir, 'svc.dump');
  // Each service a data folder of its own: what the restored one serves comes from the backup.
  const dataDir = mkdtempSync(join(workDir, 'original-'));
  const restoredDataDir = mkdtempSync(join(workDir, 'restored-'));
  let bucket: TestBucket;
  let versionId: string;
  let packageSha256: string;
  const redis = new Redis(redisUrl, { lazyConnect: true });
  let original: { store: TestStore; mosquitto: TestMosquitto; service: TestService } | undefined;
  let restored: { store: TestStore; mosquitto: TestMosquitto; service: TestService } | undefined;
  const passwords = new Map<string, string>();
  let identityToken: string;
  let admin: Developer;

  beforeAll(async () => {
    await redis.connect();
    await redis.flushdb();
    // The service as it ran: Postgres, Redis, a Mosquitto with dynamic security, a bucket.
    // The AWS SDK reads its credentials from the environment, as a replica's would.
    Object.assign(process.env, s3rverCredentials);
    bucket = await startS3rver();
    const store = await openTestStore({ serverUrl: postgresServerUrl });
    const mosquitto = await startMosquitto();
    const service = await startTestService(serviceEnv(mosquitto, bucket), {
      store,
      dataDir,
      clockRuns: true,
    });
    original = { store, mosquitto, service };
    admin = await signUpAdmin(service, adminEmail);
    const owner: Developer = await signUpDeveloper(service.url);
    for (const deviceId of cars)
      passwords.set(deviceId, (await provisionCar(service, admin, deviceId)).mqtt.password);
    const connector = await call(service.url, 'POST', '/api/v1/admin/connectors', {
      token: admin.token,
      body: { brand: 'brand_b', name: 'maker-cloud' },
    });
    assert.equal(connector.status, 201, JSON.stringify(connector.body));
    passwords.set(connector.body.mqtt.username, connector.body.mqtt.password);
    const [firstCar] = cars;
    await makeOwner(service, String(firstCar), owner);
    versionId = await publishMiniApp(service.url, await signUpDeveloper(service.url), admin, appId, '1.0.0');
    packageSha256 = await downloadedSha256(service.url, admin, versionId);
    const token = await call(service.url, 'POST', carPath(String(firstCar), 'identity-token'), {
      token: owner.token,
      body: { app_id: appId, locale: 'en-GB' },
    });
    assert.equal(token.status, 201, JSON.stringify(token.body));
    identityToken = token.body.token;
    for (const [username, password] of passwords)
      assert.ok(await signsIn(mosquitto.url, username, password), username);

    // The backup: pg_dump of the database. Then the machines go: Redis emptied, Mosquitto gone.
    execFileSync('pg_dump', ['--format=custom', '--no-owner', `--file=${backup}`, String(store.databaseUrl)]);
    await service.stop();
    await mosquitto.stop();
    await redis.flushdb();

    // The restore: a new database from the dump, a new Mosquitto with an empty dynamic-security file.
    const newStore = await openTestStore({ serverUrl: postgresServerUrl, empty: true });
    execFileSync('pg_restore', ['--no-owner', `--dbname=${newStore.databaseUrl}`, backup]);
    const newMosquitto = await startMosquitto();
    restored = {
      store: newStore,
      mosquitto: newMosquitto,
      service: await startTestService(serviceEnv(newMosquitto, bucket), {
        store: newStore,
        dataDir: restoredDataDir,
        clockRuns: true,
      }),
    };
  });

  afterAll(async () => {
    await restored?.service.stop();
    await restored?.mosquitto.stop();
    await restored?.store.close();
    await original?.store.close();
    await redis.flushdb().catch(() => undefined);
    redis.disconnect();
    await bucket?.stop();
    rmSync(workDir, { recursive: true, force: true });
  });

  test('when the service starts on the restored database then the package published before the backup downloads from the bucket, the same bytes', async () => {
    assert.ok(restored);
    assert.equal(await downloadedSha256(restored.service.url, admin, versionId), packageSha256);
  });

  test('when the service starts on the restored database then every car and connector signs in to the new Mosquitto with its old password', async () => {
    assert.ok(restored);
    for (const [username, password] of passwords) {
      assert.equal(
        await signsIn(restored.mosquitto.url, username, password),
        true,
        `${username} cannot sign in`,
      );
      assert.equal(await signsIn(restored.mosquitto.url, username, `${password}x`), false);
    }
  });

  test('when the service starts on the restored database then the emptied Redis holds every credential again', async () => {
    for (const username of passwords.keys()) {
      const held = JSON.parse((await redis.get(`mqtt:auth:${username}`)) ?? 'null');
      assert.equal(typeof held?.secret_sha256, 'string', `no credential for ${username} in Redis`);
    }
  });

  test('when an identity token issued before the backup is checked then it verifies against the restored JWKS', async () => {
    assert.ok(restored && original);
    const jwks = await call(restored.service.url, 'GET', '/.well-known/jwks.json');
    assert.equal(jwks.status, 200);
    const { payload } = await jwtVerify(identityToken, createLocalJWKSet(jwks.body), {
      algorithms: ['ES256'],
      audience: appId,
    });
    assert.equal(payload.device_id, cars[0]);
  });

  test('when two replicas start at once on an emptied Redis then they write each credential once between them, and every car signs in', async () => {
    assert.ok(restored);
    const { store, mosquitto } = restored;
    await redis.flushdb();
    const replicas = await Promise.all(
      ['svc-a', 'svc-b'].map((replica) =>
        startTestService(
          { ...serviceEnv(mosquitto, bucket), SVC_REPLICA_ID: replica },
          { store, dataDir, clockRuns: true },
        ),
      ),
    );
    try {
      const written = replicas.flatMap((replica) =>
        replica.logs
          .map((line) => JSON.parse(line))
          .filter((line) => line.message === 'broker credentials synced from the database')
          .map((line) => [line.keyValueWritten, line.brokerWritten]),
      );
      assert.deepEqual(written, [[passwords.size, 0]]);
      for (const [username, password] of passwords) {
        assert.equal(await signsIn(mosquitto.url, username, password), true, `${username} cannot sign in`);
      }
    } finally {
      await Promise.all(replicas.map((replica) => replica.stop()));
    }
  });

  test("when a car is decommissioned behind the broker's back then the sync command removes it from Redis and Mosquitto", async () => {
    assert.ok(restored);
    const [, gone] = cars;
    // As a decommission cut short after SQL: the car is gone there, its entries are not.
    await restored.store.db('broker_credentials').where({ username: gone }).delete();
    await restored.store.db('cars').where({ device_id: gone }).delete();
    const run = execFileSync(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, '../src/sync-broker-credentials.ts')],
      {
        env: {
          ...process.env,
          DATABASE_URL: String(restored.store.databaseUrl),
          SVC_KEY_ENCRYPTION_KEY: restored.service.config.keyEncryptionKey?.toString('base64') ?? '',
          ...serviceEnv(restored.mosquitto, bucket),
        },
        encoding: 'utf8',
      },
    );
    assert.match(
      run,
      /^svc: broker credentials synced from the database: key-value store 0 written, 1 removed; broker 0 written, 1 removed\.\n$/,
    );
    assert.equal(await redis.get(`mqtt:auth:${gone}`), null);
    assert.equal(
      await signsIn(restored.mosquitto.url, String(gone), String(passwords.get(String(gone)))),
      false,
    );
    assert.equal(
      await signsIn(restored.mosquitto.url, String(cars[0]), String(passwords.get(String(cars[0])))),
      true,
    );
  });
  test("when a car's credential is rotated on the restored service then Mosquitto takes only the new password, and a sync afterwards writes nothing", async () => {
    assert.ok(restored);
    const deviceId = String(cars[0]);
    const rotated = await call(
      restored.service.url,
      'POST',
      `/api/v1/admin/cars/${encodeURIComponent(deviceId)}/credential`,
      {
        token: admin.token,
      },
    );
    assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
    assert.equal(await signsIn(restored.mosquitto.url, deviceId, String(passwords.get(deviceId))), false);
    assert.equal(await signsIn(restored.mosquitto.url, deviceId, rotated.body.password), true);
    const credentials = createRedisCredentialStore(redisUrl, createLogger());
    const report = await syncBrokerCredentials({
      db: restored.store.db,
      clock: () => new Date(),
      credentials,
      broker: restored.service.app.broker.accounts,
      keyRing: createKeyRing(Buffer.from(testKeyEncryptionKey, 'base64')),
      logger: createLogger(),
    });
    assert.deepEqual(report, {
      keyValueWritten: 0,
      keyValueRemoved: 0,
      brokerWritten: 0,
      brokerRemoved: 0,
      withoutSecret: [],
    });
    await credentials.close();
  });
});
