/**
 * The Idempotency-Key on the operations that take one, through the service: a retry gets the
 * first answer and does nothing again (submit makes no second version, transfer moves nothing
 * twice), another request with the key is 422, keys are per account and live 24 hours, and a
 * key that breaks the contract's form is 400. Races and failures of a run are in
 * idempotency-runs.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { keyLifetimeMs } from '../src/idempotency/idempotency-service.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, deviceIds, makeOwner, ownerOf, provisionCar } from './support/cars.ts';
import { call, putPackage } from './support/http.ts';
import { makePackage, manifestFor } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';
import { lockCarRow } from './support/store.ts';

let serial = 0;
const newKey = () => `key-${randomBytes(8).toString('hex')}`;
const newDeviceId = deviceIds('idempotent');

describe('Idempotency-Key', () => {
  let service: TestService;
  let admin: Developer;
  let ada: Developer;
  let bob: Developer;

  /** An uploaded package of a new app of `who`'s, ready to submit: its upload id. */
  async function uploaded(who: Developer, appId = `com.example.idem${++serial}`, version = '1.0.0') {
    const pkg = makePackage(manifestFor(appId, version));
    const target = await call(service.url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: who.token,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(target.status, 201, JSON.stringify(target.body));
    const put = await putPackage(target.body.upload_url, pkg.bytes);
    assert.equal(put.status, 201, JSON.stringify(put.body));
    return target.body.upload_id as string;
  }

  const submit = (who: Developer, uploadId: string, key?: string) =>
    call(service.url, 'POST', '/api/v1/mini-apps/submit', {
      token: who.token,
      body: { upload_id: uploadId },
      headers: key === undefined ? {} : { 'idempotency-key': key },
    });

  const transfer = (who: Developer, deviceId: string, toUser: string, key?: string) =>
    call(service.url, 'POST', carPath(deviceId, 'transfer'), {
      token: who.token,
      body: { to_user: toUser },
      headers: key === undefined ? {} : { 'idempotency-key': key },
    });

  /** Moves the clock on by `ms`, and signs ada in again: her session may have ended meanwhile. */
  async function later(ms: number) {
    service.clock.advance(ms);
    const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: ada.email, password: ada.password },
    });
    assert.equal(session.status, 201, JSON.stringify(session.body));
    ada.token = session.body.access_token;
  }

  async function versionsOf(who: Developer, appId: string) {
    const mine = await call(service.url, 'GET', '/api/v1/mini-apps/mine', { token: who.token });
    assert.equal(mine.status, 200);
    return (await service.store.db('mini_app_versions').where({ app_id: appId })).length;
  }

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: 'root@example.com' });
    admin = await signUpAdmin(service, 'root@example.com');
    [ada, bob] = await Promise.all([signUpDeveloper(service.url), signUpDeveloper(service.url)]);
  });
  afterAll(() => service?.stop());

  test('when a submit is sent again with its key then the same 201 and body come back, marked replayed, and no second version is made', async () => {
    const appId = `com.example.idem${++serial}`;
    const uploadId = await uploaded(ada, appId);
    const key = newKey();
    const first = await submit(ada, uploadId, key);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.headers['idempotent-replayed'], undefined);
    service.clock.advance(60_000);
    const retry = await submit(ada, uploadId, key);
    assert.equal(retry.status, 201, JSON.stringify(retry.body));
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.deepEqual(retry.body, first.body);
    assert.equal(await versionsOf(ada, appId), 1);
    // Without the key the same submit runs, and is refused: the replay above did not run.
    const unkeyed = await submit(ada, uploadId);
    assert.equal(unkeyed.status, 409, JSON.stringify(unkeyed.body));
  });

  test('when a key comes again with another body then 422 idempotency_key_reused, and that other request is not carried out', async () => {
    const key = newKey();
    assert.equal((await submit(ada, await uploaded(ada), key)).status, 201);
    const otherAppId = `com.example.idem${++serial}`;
    const other = await uploaded(ada, otherAppId);
    const reused = await submit(ada, other, key);
    assert.equal(reused.status, 422, JSON.stringify(reused.body));
    assert.equal(reused.body.code, 'idempotency_key_reused');
    assert.match(reused.body.detail, /new key/);
    assert.equal(await versionsOf(ada, otherAppId), 0);
    assert.equal((await submit(ada, other, newKey())).status, 201);
  });

  test("when another account sends the same key then it is its own: bob's submit runs, and ada's key still replays ada's answer", async () => {
    const key = newKey();
    const adas = await submit(ada, await uploaded(ada), key);
    assert.equal(adas.status, 201);
    const bobs = await submit(bob, await uploaded(bob), key);
    assert.equal(bobs.status, 201, JSON.stringify(bobs.body));
    assert.equal(bobs.headers['idempotent-replayed'], undefined);
    assert.notEqual(bobs.body.id, adas.body.id);
  });

  test('when a transfer is sent again with its key then the same 200 comes back and nothing moves again, though the car is no longer the sender’s', async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    await makeOwner(service, deviceId, ada);
    const key = newKey();
    const first = await transfer(ada, deviceId, bob.accountId, key);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    // Bob passes it on; ada's retry must not undo or redo anything.
    assert.equal((await transfer(bob, deviceId, admin.accountId)).status, 200);
    const retry = await transfer(ada, deviceId, bob.accountId, key);
    assert.equal(retry.status, 200);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.deepEqual(retry.body, first.body);
    assert.equal(await ownerOf(service, deviceId), admin.accountId);
    // The key is bound to its car: the same key on another car's path is another request.
    const elsewhere = await transfer(ada, newDeviceId(), bob.accountId, key);
    assert.equal(elsewhere.status, 422);
    assert.equal(elsewhere.body.code, 'idempotency_key_reused');
  });

  test('when a transfer was refused then its retry with the key gets the same refusal, even once it would succeed; a new key runs', async () => {
    const deviceId = newDeviceId();
    await provisionCar(service, admin, deviceId);
    await makeOwner(service, deviceId, ada);
    const key = newKey();
    const refused = await transfer(admin, deviceId, bob.accountId, key);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'not_owner');
    await makeOwner(service, deviceId, admin);
    const retry = await transfer(admin, deviceId, bob.accountId, key);
    assert.equal(retry.status, 403);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(await ownerOf(service, deviceId), admin.accountId);
    assert.equal((await transfer(admin, deviceId, bob.accountId, newKey())).status, 200);
  });

  test('when the key breaks its form then 400 and nothing runs: empty, blank, too long, with a space or a character beyond ASCII', async () => {
    const uploadId = await uploaded(ada);
    for (const key of ['a b', 'x'.repeat(256), 'caf\u00e9', ' ', '']) {
      const reply = await submit(ada, uploadId, key);
      assert.equal(reply.status, 400, `${JSON.stringify(key)}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.errors?.[0]?.path, '/headers/idempotency-key');
    }
    const longest = 'x'.repeat(255);
    assert.equal((await submit(ada, uploadId, longest)).status, 201);
    assert.equal(Number((await service.store.db('mini_app_versions').count({ n: '*' }))[0]?.n) > 0, true);
  });

  test.skipIf(!process.env.DATABASE_URL)(
    'when a transfer waits on the car and its retry comes with the key then the retry is 409 idempotency_key_in_use; once the first answers, the retry gets its answer',
    async () => {
      const deviceId = newDeviceId();
      await provisionCar(service, admin, deviceId);
      await makeOwner(service, deviceId, ada);
      const key = newKey();
      // The first transfer waits on the car's row, holding its key (Postgres: PGlite has one connection).
      const lock = await lockCarRow(service.store, deviceId);
      let first: ReturnType<typeof transfer>;
      try {
        first = transfer(ada, deviceId, bob.accountId, key);
        await lock.waiters(1);
        const retry = await transfer(ada, deviceId, bob.accountId, key);
        assert.equal(retry.status, 409, JSON.stringify(retry.body));
        assert.equal(retry.body.code, 'idempotency_key_in_use');
      } finally {
        await lock.release();
      }
      assert.equal((await first).status, 200);
      const later = await transfer(ada, deviceId, bob.accountId, key);
      assert.equal(later.headers['idempotent-replayed'], 'true');
      assert.equal(await ownerOf(service, deviceId), bob.accountId);
    },
  );
  // Last: the days it moves the clock end every session (each step signs ada in again).
  test('when 24 hours have passed then the key is new again: the same request runs again, another is no longer 422, and the sweep deletes what it kept', async () => {
    const uploadId = await uploaded(ada);
    const key = newKey();
    assert.equal((await submit(ada, uploadId, key)).status, 201);
    await later(keyLifetimeMs);
    assert.equal((await submit(ada, uploadId, key)).headers['idempotent-replayed'], 'true');
    await later(1); // 24 hours and a millisecond
    const again = await submit(ada, uploadId, key);
    assert.equal(again.status, 409, JSON.stringify(again.body));
    assert.equal(again.headers['idempotent-replayed'], undefined);
    // The 409 is kept now, under the key's new 24 hours; later, another request with the key runs.
    await later(keyLifetimeMs + 1);
    assert.equal((await submit(ada, await uploaded(ada), key)).status, 201);

    const kept = () => service.store.db('idempotency_keys').where({ key }).count({ n: '*' });
    assert.equal(Number((await kept())[0]?.n), 1);
    await later(keyLifetimeMs + 1);
    assert.ok((await service.app.services.idempotency.sweep()) >= 1);
    assert.equal(Number((await kept())[0]?.n), 0);
  });
});
