/**
 * Identity tokens for mini-apps: what the car's owner (or an admin) gets for a published app is an
 * ES256 JWT that a backend verifies with jose against the served JWKS, with exactly the claims
 * DESIGN.md §10 names; everyone else, and every app that cannot run on a car, is refused with a
 * stable code.
 */
import assert from 'node:assert/strict';
import { createLocalJWKSet, decodeProtectedHeader, type JWTPayload, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, makeOwner, provisionCar } from './support/cars.ts';
import { publishMiniApp } from './support/commands.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'tokens-admin@example.com';
const appId = 'com.example.hello-car';
const vin = 'brand_a:1HGCM82633A004352';
const otherBrandCar = 'brand_b:fleet-7.north';

describe('identity tokens', () => {
  let service: TestService;
  let admin: Developer;
  let owner: Developer;
  let stranger: Developer;

  const ask = (
    who: Developer | undefined,
    deviceId: string,
    body: unknown,
    headers?: Record<string, string>,
  ) => call(service.url, 'POST', carPath(deviceId, 'identity-token'), { token: who?.token, body, headers });

  /** The token checked as a mini-app's backend would: jose, the served JWKS, the app's id. */
  async function verify(token: string, audience = appId) {
    const jwks = await call(service.url, 'GET', '/.well-known/jwks.json');
    assert.equal(jwks.status, 200);
    return jwtVerify(token, createLocalJWKSet(jwks.body), {
      algorithms: ['ES256'],
      audience,
      issuer: service.url,
      // The service's clock stands still; the token is checked at the service's time.
      currentDate: new Date(service.clock.now),
    });
  }

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail });
    admin = await signUpAdmin(service, adminEmail);
    owner = await signUpDeveloper(service.url);
    stranger = await signUpDeveloper(service.url);
    const developer = await signUpDeveloper(service.url);
    for (const deviceId of [vin, otherBrandCar]) {
      await provisionCar(service, admin, deviceId);
      await makeOwner(service, deviceId, owner);
    }
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    await publishMiniApp(service.url, developer, admin, 'com.example.in-review', '1.0.0', 'approved');
  });
  afterAll(() => service?.stop());

  test('when the owner asks for a token for a published app then it is an ES256 JWT with kid that verifies against the JWKS, with exactly the claims of §10', async () => {
    const reply = await ask(owner, vin, { app_id: appId, locale: 'en-GB' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));

    const { payload, protectedHeader } = await verify(reply.body.token);
    assert.equal(protectedHeader.alg, 'ES256');
    assert.equal(protectedHeader.typ, 'JWT');
    assert.equal(typeof protectedHeader.kid, 'string');
    const now = Math.floor(service.clock.now / 1000);
    assert.deepEqual(
      { ...payload, jti: undefined },
      {
        sub: owner.accountId,
        device_id: vin,
        brand: 'brand_a',
        locale: 'en-GB',
        iss: service.url,
        aud: appId,
        iat: now,
        exp: now + 600,
        jti: undefined,
      },
    );
    // Nothing else: in particular no claim under a v3 name.
    assert.deepEqual(Object.keys(payload).sort(), [
      'aud',
      'brand',
      'device_id',
      'exp',
      'iat',
      'iss',
      'jti',
      'locale',
      'sub',
    ]);
    assert.match(String(payload.jti), /^[0-9a-f-]{36}$/);
    assert.equal(reply.body.expires_at, new Date((now + 600) * 1000).toISOString());
  });

  test('when the token has lived 10 minutes then it no longer verifies', async () => {
    const reply = await ask(owner, vin, { app_id: appId, locale: 'de' });
    const jwks = createLocalJWKSet((await call(service.url, 'GET', '/.well-known/jwks.json')).body);
    const at = (seconds: number) => new Date(service.clock.now + seconds * 1000);
    await jwtVerify(reply.body.token, jwks, { audience: appId, currentDate: at(599) });
    await assert.rejects(
      jwtVerify(reply.body.token, jwks, { audience: appId, currentDate: at(600) }),
      (error: { code?: string }) => error.code === 'ERR_JWT_EXPIRED',
    );
  });

  test('when two tokens are asked for then each has its own jti', async () => {
    const ids = new Set<unknown>();
    for (let i = 0; i < 3; i += 1) {
      const reply = await ask(owner, vin, { app_id: appId, locale: 'de' });
      ids.add((await verify(reply.body.token)).payload.jti);
    }
    assert.equal(ids.size, 3);
  });

  test('when the car is of another brand then device_id is its full prefixed id and brand is that brand', async () => {
    const reply = await ask(owner, otherBrandCar, { app_id: appId, locale: 'de-AT' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const { payload } = await verify(reply.body.token);
    assert.equal(payload.device_id, otherBrandCar);
    assert.equal(payload.brand, 'brand_b');
  });

  test('when an admin asks for a token for a car they do not own then they get one, in their own name', async () => {
    const reply = await ask(admin, vin, { app_id: appId, locale: 'en' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal((await verify(reply.body.token)).payload.sub, admin.accountId);
  });

  test('when someone who neither owns the car nor is an admin asks then 404 car_not_found, as for a car never provisioned', async () => {
    const strangers = await ask(stranger, vin, { app_id: appId, locale: 'en' });
    const missing = await ask(owner, 'brand_a:1HGCM82633A004353', { app_id: appId, locale: 'en' });
    for (const reply of [strangers, missing]) {
      assert.equal(reply.status, 404, JSON.stringify(reply.body));
      assert.equal(reply.body.code, 'car_not_found');
      assert.equal(reply.body.token, undefined);
    }
  });

  test('when nobody is signed in then 401', async () => {
    const reply = await ask(undefined, vin, { app_id: appId, locale: 'en' });
    assert.equal(reply.status, 401);
  });

  test('when the app does not exist then 404 app_not_found; when it has no published version then 409 app_not_published', async () => {
    const unknown = await ask(owner, vin, { app_id: 'com.example.nowhere', locale: 'en' });
    assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
    assert.equal(unknown.body.code, 'app_not_found');

    const approvedOnly = await ask(owner, vin, { app_id: 'com.example.in-review', locale: 'en' });
    assert.equal(approvedOnly.status, 409, JSON.stringify(approvedOnly.body));
    assert.equal(approvedOnly.body.code, 'app_not_published');
    assert.match(approvedOnly.body.detail, /no published version/);
  });

  test('when the locale is written in any case then the token carries its canonical BCP 47 form', async () => {
    const reply = await ask(owner, vin, { app_id: appId, locale: 'zh-hant-tw' });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    assert.equal((await verify(reply.body.token)).payload.locale, 'zh-Hant-TW');
  });

  test('when the locale has the shape of a tag but breaks BCP 47 then 422 invalid_locale saying what to send', async () => {
    for (const locale of ['en-GBX', 'en-gb-gb', 'aa-bb-cc-dd', 'en-a']) {
      const reply = await ask(owner, vin, { app_id: appId, locale });
      assert.equal(reply.status, 422, `${locale}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.code, 'invalid_locale');
      assert.match(reply.body.detail, /send one such as en-GB/);
    }
  });

  test('when the body is not an identity-token request then 400 validation_failed naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ app_id: appId, locale: 'english language' }, '/body/locale'],
      [{ app_id: appId, locale: 'en_GB' }, '/body/locale'],
      [{ app_id: appId, locale: 'en_gb' }, '/body/locale'],
      [{ app_id: appId, locale: 'not a locale!' }, '/body/locale'],
      [{ app_id: appId, locale: '' }, '/body/locale'],
      [{ app_id: appId, locale: `en-${'abcdefgh-'.repeat(4)}x` }, '/body/locale'],
      [{ app_id: appId, locale: 7 }, '/body/locale'],
      [{ app_id: appId }, '/body/locale'],
      [{ locale: 'en' }, '/body/app_id'],
      [{ app_id: '', locale: 'en' }, '/body/app_id'],
      [{ app_id: appId, locale: 'en', device_id: vin }, '/body/device_id'],
    ];
    for (const [body, path] of cases) {
      const reply = await ask(owner, vin, body);
      assert.equal(reply.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.code, 'validation_failed');
      assert.ok(
        reply.body.errors.some((error: { path: string }) => error.path === path),
        `${JSON.stringify(body)}: ${JSON.stringify(reply.body.errors)}`,
      );
    }
  });

  test('when the device id is malformed then 422 with the device-id code, before anything else', async () => {
    const reply = await ask(stranger, '1HGCM82633A004352', { app_id: 'com.example.nowhere', locale: 'en' });
    assert.equal(reply.status, 422);
    assert.equal(reply.body.code, 'missing_prefix');
  });

  test('when the service is called by another of its loopback names then iss is the URL the caller used', async () => {
    const port = new URL(service.url).port;
    const reply = await ask(owner, vin, { app_id: appId, locale: 'en' }, { host: `localhost:${port}` });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const payload: JWTPayload = JSON.parse(
      Buffer.from(reply.body.token.split('.')[1], 'base64url').toString(),
    );
    assert.equal(payload.iss, `http://localhost:${port}`);
    assert.equal(decodeProtectedHeader(reply.body.token).alg, 'ES256');
  });

  test('when the JWKS is fetched then it may be cached, and holds public keys only', async () => {
    const reply = await call(service.url, 'GET', '/.well-known/jwks.json');
    assert.equal(reply.headers['cache-control'], 'public, max-age=300');
    for (const key of reply.body.keys) {
      assert.deepEqual(Object.keys(key).sort(), ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
    }
  });
});

describe('identity tokens behind a public URL', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({
      SVC_ADMIN_EMAILS: adminEmail,
      SVC_PUBLIC_URL: 'https://svc.example.test/',
    });
  });
  afterAll(() => service?.stop());

  test('when SVC_PUBLIC_URL is set then iss is that URL, whatever Host the request names', async () => {
    const admin = await signUpAdmin(service, adminEmail);
    await provisionCar(service, admin, vin);
    await publishMiniApp(service.url, await signUpDeveloper(service.url), admin, appId, '1.0.0');
    const reply = await call(service.url, 'POST', carPath(vin, 'identity-token'), {
      token: admin.token,
      body: { app_id: appId, locale: 'en' },
      headers: { host: 'evil.example.com' },
    });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const jwks = (await call(service.url, 'GET', '/.well-known/jwks.json')).body;
    const { payload } = await jwtVerify(reply.body.token, createLocalJWKSet(jwks), {
      audience: appId,
      issuer: 'https://svc.example.test',
      currentDate: new Date(service.clock.now),
    });
    assert.equal(payload.iss, 'https://svc.example.test');
  });
});
