/**
 * An app's `manifest.brands` decides which cars it reaches: `app.install` of a version is refused
 * on a car of a brand that version's manifest does not list, and so is an identity token on a car
 * of a brand the app's live version does not list, each 409 `brand_not_supported`; a manifest
 * without `brands` is for every brand.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { carPath, makeOwner, provisionCar } from './support/cars.ts';
import { publishMiniApp } from './support/commands.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'brands-admin@example.com';
const brandA = 'brand_a:1HGCM82633A004352';
const brandC = 'brand_c:fleet-3.south';
const twoBrands = { brands: ['brand_a', 'brand_b'] };

describe("an app's brands", () => {
  let service: TestService;
  let admin: Developer;
  let owner: Developer;
  let developer: Developer;

  const install = (deviceId: string, appId: string, version: string) =>
    call(service.url, 'POST', carPath(deviceId, 'commands'), {
      token: owner.token,
      body: { name: 'app.install', args: { app_id: appId, version } },
    });
  const token = (deviceId: string, appId: string) =>
    call(service.url, 'POST', carPath(deviceId, 'identity-token'), {
      token: owner.token,
      body: { app_id: appId, locale: 'en-GB' },
    });
  const installsSentTo = async (deviceId: string) =>
    (
      await call(service.url, 'GET', carPath(deviceId, 'commands'), { token: owner.token })
    ).body.commands.filter((command: { name: string }) => command.name === 'app.install').length;

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail });
    admin = await signUpAdmin(service, adminEmail);
    owner = await signUpDeveloper(service.url);
    developer = await signUpDeveloper(service.url);
    for (const deviceId of [brandA, brandC]) {
      await provisionCar(service, admin, deviceId);
      await makeOwner(service, deviceId, owner);
    }
  });
  afterAll(() => service?.stop());

  test('when a version lists brand_a and brand_b then installing it on a brand_c car is 409 brand_not_supported and nothing is sent, and on a brand_a car it is sent', async () => {
    const appId = 'com.example.install-ab';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0', 'published', twoBrands);

    const refused = await install(brandC, appId, '1.0.0');
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'brand_not_supported');
    assert.equal(refused.body.title, 'Brand not supported');
    assert.equal(
      refused.body.detail,
      `${appId} 1.0.0 runs on brand_a, brand_b only (the brands of its manifest), not on a brand_c car: it cannot be installed there.`,
    );
    assert.equal(await installsSentTo(brandC), 0);

    const sent = await install(brandA, appId, '1.0.0');
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    assert.deepEqual(sent.body.args, { app_id: appId, version: '1.0.0' });
  });

  test('when a version lists no brands then it installs on a car of any brand', async () => {
    const appId = 'com.example.install-any';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    for (const deviceId of [brandA, brandC]) {
      const sent = await install(deviceId, appId, '1.0.0');
      assert.equal(sent.status, 202, `${deviceId}: ${JSON.stringify(sent.body)}`);
    }
  });

  test('when the live version lists brand_a and brand_b then a token for a brand_c car is 409 brand_not_supported, one for a brand_a car is signed', async () => {
    const appId = 'com.example.token-ab';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0', 'published', twoBrands);

    const refused = await token(brandC, appId);
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'brand_not_supported');
    assert.equal(refused.body.token, undefined);
    assert.match(
      refused.body.detail,
      /runs on brand_a, brand_b only .* no identity token is signed for it there/,
    );

    const signed = await token(brandA, appId);
    assert.equal(signed.status, 201, JSON.stringify(signed.body));
    assert.equal(typeof signed.body.token, 'string');
  });

  test("when a newer version goes live then its brands decide the tokens, not an earlier version's", async () => {
    const appId = 'com.example.token-moves';
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0', 'published', twoBrands);
    assert.equal((await token(brandC, appId)).status, 409);

    // 1.1.0, for every brand, supersedes 1.0.0.
    await publishMiniApp(service.url, developer, admin, appId, '1.1.0');
    const everyBrand = await token(brandC, appId);
    assert.equal(everyBrand.status, 201, JSON.stringify(everyBrand.body));

    // 2.0.0, for brand_c only: a brand_a car no longer gets tokens, although 1.x ran there.
    await publishMiniApp(service.url, developer, admin, appId, '2.0.0', 'published', { brands: ['brand_c'] });
    const dropped = await token(brandA, appId);
    assert.equal(dropped.status, 409, JSON.stringify(dropped.body));
    assert.equal(dropped.body.code, 'brand_not_supported');
    assert.match(
      dropped.body.detail,
      new RegExp(`^${appId.replaceAll('.', '\\.')} 2\\.0\\.0 runs on brand_c only`),
    );
    assert.equal((await token(brandC, appId)).status, 201);
  });
});
