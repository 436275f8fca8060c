/**
 * Signing-key rotation without downtime, on a clock the tests move: a key is published before it
 * signs, a token signed just before a rotation verifies (jose over the served JWKS) until it
 * expires, a retired key leaves the JWKS once its tokens have expired, the schedule rotates when
 * the period has passed, an admin may rotate at once, and two replicas on one store rotating at
 * the same moment make one rotation.
 */
import assert from 'node:assert/strict';
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { migrateToLatest } from '../src/store/db.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, provisionCar } from './support/cars.ts';
import { publishMiniApp } from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const adminEmail = 'keys-admin@example.com';
const appId = 'com.example.rotation';
const vin = 'brand_a:1HGCM82633A004352';
const minute = 60_000;
const day = 24 * 60 * minute;
/** Sessions outlive the months these tests move the clock on. */
const sessionTtl = '365d';

interface SigningKey {
  kid: string;
  state: 'next' | 'current' | 'retired';
  created_at: string;
  activated_at: string | null;
  retired_at: string | null;
  in_jwks: boolean;
}

/** What a verifier and an admin see of one service. */
function lookAt(service: TestService, admin: () => Developer) {
  return {
    async jwks(): Promise<JSONWebKeySet> {
      const reply = await call(service.url, 'GET', '/.well-known/jwks.json');
      assert.equal(reply.status, 200);
      return reply.body;
    },
    async kids(): Promise<string[]> {
      return (await this.jwks()).keys.map((key) => String(key.kid)).sort();
    },
    async keys(): Promise<{ keys: SigningKey[]; next_rotation_at: string; rotation_period_seconds: number }> {
      const reply = await call(service.url, 'GET', '/api/v1/admin/signing-keys', { token: admin().token });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      return reply.body;
    },
    async inState(state: SigningKey['state']): Promise<SigningKey[]> {
      return (await this.keys()).keys.filter((key) => key.state === state);
    },
    rotate() {
      return call(service.url, 'POST', '/api/v1/admin/signing-keys/rotate', { token: admin().token });
    },
    async token(): Promise<string> {
      const reply = await call(service.url, 'POST', carPath(vin, 'identity-token'), {
        token: admin().token,
        body: { app_id: appId, locale: 'en' },
      });
      assert.equal(reply.status, 201, JSON.stringify(reply.body));
      return reply.body.token;
    },
  };
}

/** The token checked by a backend holding `jwks`, at `at`. */
function verifyAt(token: string, jwks: JSONWebKeySet, at: number) {
  return jwtVerify(token, createLocalJWKSet(jwks), {
    algorithms: ['ES256'],
    audience: appId,
    currentDate: new Date(at),
  });
}

const kidOf = (token: string) => String(decodeProtectedHeader(token).kid);

describe('signing-key rotation', () => {
  let service: TestService;
  let admin: Developer;
  let look: ReturnType<typeof lookAt>;

  beforeAll(async () => {
    // The schedule is looked at every 25 ms of real time; the clock it reads moves only when told.
    service = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail, SVC_TOKEN_TTL: sessionTtl },
      { signingKeyCheckMs: 25 },
    );
    admin = await signUpAdmin(service, adminEmail);
    look = lookAt(service, () => admin);
    await provisionCar(service, admin, vin);
    await publishMiniApp(service.url, await signUpDeveloper(service.url), admin, appId, '1.0.0');
  });
  afterAll(() => service?.stop());

  test('when the service starts then the JWKS lists a current and a next key, and the schedule rotates them a period later', async () => {
    const { keys, next_rotation_at, rotation_period_seconds } = await look.keys();
    assert.deepEqual(keys.map((key) => key.state).sort(), ['current', 'next']);
    assert.ok(keys.every((key) => key.in_jwks));
    assert.deepEqual(await look.kids(), keys.map((key) => key.kid).sort());
    assert.equal(rotation_period_seconds, 30 * 86400);
    const current = keys.find((key) => key.state === 'current') as SigningKey;
    assert.equal(Date.parse(next_rotation_at), Date.parse(String(current.activated_at)) + 30 * day);
    assert.equal(kidOf(await look.token()), current.kid);
  });

  test('when an admin rotates before the next key has been published 5 minutes then 409 rotation_too_soon says when, and Retry-After in how many seconds', async () => {
    const [next] = await look.inState('next');
    const reply = await look.rotate();
    assert.equal(reply.status, 409, JSON.stringify(reply.body));
    assert.equal(reply.body.code, 'rotation_too_soon');
    assert.match(reply.body.detail, /may sign from .*: rotate then/);
    const mayRotateAt = Date.parse(String(next?.created_at)) + 5 * minute;
    assert.equal(reply.headers['retry-after'], String(Math.ceil((mayRotateAt - service.clock.now) / 1000)));
    assert.ok(Number(reply.headers['retry-after']) >= 1 && Number(reply.headers['retry-after']) <= 300);
    assert.deepEqual((await look.keys()).keys.map((key) => key.state).sort(), ['current', 'next']);
  });

  test('when a token is signed just before a rotation then it verifies after it until it expires, and the retired key leaves the JWKS after that', async () => {
    service.clock.advance(5 * minute);
    const jwksBefore = await look.jwks();
    const [next] = await look.inState('next');
    const before = await look.token();
    const signedAt = service.clock.now;

    const rotated = await look.rotate();
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const states = Object.fromEntries(rotated.body.keys.map((key: SigningKey) => [key.kid, key.state]));
    assert.equal(states[kidOf(before)], 'retired');
    assert.equal(states[String(next?.kid)], 'current');
    assert.equal(Object.values(states).filter((state) => state === 'next').length, 1);

    // New tokens are signed with the key that was next, which a verifier holding the JWKS from
    // before the rotation already knows.
    const after = await look.token();
    assert.equal(kidOf(after), next?.kid);
    await verifyAt(after, jwksBefore, service.clock.now);

    // The token from before verifies against the JWKS served now, until its last second.
    service.clock.advance(599_000);
    await verifyAt(before, await look.jwks(), signedAt + 599_000);
    assert.ok((await look.kids()).includes(kidOf(before)));
    await assert.rejects(verifyAt(before, await look.jwks(), signedAt + 600_000), {
      code: 'ERR_JWT_EXPIRED',
    });

    // A minute later (clocks disagree) the retired key is no longer published, then deleted.
    service.clock.advance(61_000);
    assert.ok(!(await look.kids()).includes(kidOf(before)));
    await assert.rejects(verifyAt(before, await look.jwks(), signedAt), { code: 'ERR_JWKS_NO_MATCHING_KEY' });
    await eventually('the retired key is deleted', async () =>
      (await look.keys()).keys.every((key) => key.kid !== kidOf(before)),
    );
  });

  test('when the clock passes the rotation period then the schedule rotates the keys, with no call', async () => {
    const { next_rotation_at } = await look.keys();
    const [current] = await look.inState('current');
    const [next] = await look.inState('next');
    service.clock.advance(Date.parse(next_rotation_at) - service.clock.now - 1000);
    // What the schedule looks at each tick: a second early, nothing is due.
    assert.equal(await service.app.services.signingKeys.rotateIfDue(), false);
    assert.equal((await look.inState('current'))[0]?.kid, current?.kid);

    service.clock.advance(1000);
    await eventually(
      'the schedule rotates the keys',
      async () => (await look.inState('current'))[0]?.kid === next?.kid,
    );
    const keys = (await look.keys()).keys;
    assert.equal(keys.find((key) => key.kid === current?.kid)?.state, 'retired');
    assert.equal(keys.filter((key) => key.state === 'next').length, 1);
    assert.equal(kidOf(await look.token()), next?.kid);
  });

  test('when someone who is not an admin lists or rotates the keys then 403 admins_only; signed out, 401', async () => {
    const developer = await signUpDeveloper(service.url);
    for (const [method, path] of [
      ['GET', '/api/v1/admin/signing-keys'],
      ['POST', '/api/v1/admin/signing-keys/rotate'],
    ] as const) {
      const refused = await call(service.url, method, path, { token: developer.token });
      assert.equal(refused.status, 403, path);
      assert.equal(refused.body.code, 'admins_only');
      assert.equal((await call(service.url, method, path)).status, 401, path);
    }
  });
});

describe(`two replicas on one ${process.env.DATABASE_URL ? 'Postgres' : 'PGlite store (one process)'} rotating at once`, () => {
  let store: TestStore;
  const replicas: TestService[] = [];
  let admin: Developer;
  let looks: ReturnType<typeof lookAt>[];

  beforeAll(async () => {
    store = await openTestStore();
    // The schema is in place (two first starts would race to make knex's own table); the keys are
    // not: both replicas start at once and make them, one current and one next between them.
    await migrateToLatest(store.db);
    const start = () =>
      startTestService(
        { SVC_ADMIN_EMAILS: adminEmail, SVC_TOKEN_TTL: sessionTtl },
        // The schedule's own timer stays out of the way: these tests look, from both at once.
        { store, signingKeyCheckMs: 2 ** 31 - 1 },
      );
    replicas.push(...(await Promise.all([start(), start()])));
    const [first, second] = replicas as [TestService, TestService];
    // Each start issued a code, and whichever start wrote last holds the live one.
    admin = await signUpDeveloper(first.url, adminEmail);
    const claims = [...first.adminCodes, ...second.adminCodes].map(({ code }) =>
      call(first.url, 'POST', '/api/v1/account/admin-claims', { token: admin.token, body: { code } }),
    );
    assert.ok((await Promise.all(claims)).some((reply) => reply.status === 200));
    looks = replicas.map((replica) => lookAt(replica, () => admin));
    await provisionCar(first, admin, vin);
    await publishMiniApp(first.url, await signUpDeveloper(first.url), admin, appId, '1.0.0');
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
    await store?.close();
  });

  test('when both started at once then the store holds one current and one next key, and both serve them', async () => {
    const [first, second] = looks as [ReturnType<typeof lookAt>, ReturnType<typeof lookAt>];
    assert.deepEqual((await first.keys()).keys.map((key) => key.state).sort(), ['current', 'next']);
    assert.deepEqual(await first.kids(), await second.kids());
  });

  test('when the period has passed for both and both look at once then the keys rotate once, and both sign with the new key', async () => {
    const [first, second] = looks as [ReturnType<typeof lookAt>, ReturnType<typeof lookAt>];
    const [next] = await first.inState('next');
    for (const replica of replicas) replica.clock.advance(30 * day);
    const before = await first.token();

    const rotated = await Promise.all(
      replicas.map((replica) => replica.app.services.signingKeys.rotateIfDue()),
    );
    assert.deepEqual(rotated.sort(), [false, true]);
    const states = (await second.keys()).keys.map((key) => key.state).sort();
    assert.deepEqual(states, ['current', 'next', 'retired']);

    // Each replica signs with what the store calls current, whichever rotated.
    assert.equal(kidOf(await first.token()), next?.kid);
    assert.equal(kidOf(await second.token()), next?.kid);
    // The token one replica signed just before verifies against what the other serves.
    await verifyAt(before, await second.jwks(), (replicas[1] as TestService).clock.now);
  });

  test('when an admin rotates through both replicas at once then one rotation is made and the other is 409 rotation_too_soon', async () => {
    for (const replica of replicas) replica.clock.advance(5 * minute);
    const [first, second] = looks as [ReturnType<typeof lookAt>, ReturnType<typeof lookAt>];
    const retiredBefore = (await first.inState('retired')).length;
    const replies = await Promise.all([first.rotate(), second.rotate()]);
    assert.deepEqual(
      replies.map((reply) => reply.status).sort(),
      [200, 409],
      JSON.stringify(replies.map((r) => r.body)),
    );
    assert.equal(replies.find((reply) => reply.status === 409)?.body.code, 'rotation_too_soon');
    assert.equal((await second.inState('retired')).length, retiredBefore + 1);
    assert.equal((await second.inState('current')).length, 1);
    assert.equal((await second.inState('next')).length, 1);
  });
});
