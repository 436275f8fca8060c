/**
 * examples/hello-car end to end, as in a car: the service signs identity tokens; a host page (one
 * origin) embeds the app (another origin, which serves the runtime the service serves at
 * /_svc/sdk.js) and answers it through createSvcClient; the app calls its backend, which is the
 * code of the example's README, run as it is written, verifying the token with
 * verifyIdentityToken. Chromium reaches `https://api.hello-car.example.com` through a route to
 * that backend.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSvcClient } from '@svc/sdk';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { freePort, type Origin, serveOrigin } from '../../client/test/support/pages.ts';
import { hostBundle } from '../../scripts/build-runtime.ts';
import { repoRoot } from '../../scripts/repo-root.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { chromiumMissing, launchChromium } from './support/browser.ts';
import { makeOwner, provisionCar } from './support/cars.ts';
import { publishMiniApp } from './support/commands.ts';
import { eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const example = join(repoRoot, 'examples/hello-car');
const manifest = JSON.parse(readFileSync(join(example, 'manifest.json'), 'utf8')) as {
  id: string;
  network: string[];
};
const [backendOrigin] = manifest.network;
const carA = 'brand_a:1HGCM82633A004352';
const carB = 'brand_b:fleet-7.north';
const adminEmail = 'hello-car-admin@example.com';

/** The backend of the example's README: its one js block under "## The backend". */
function readmeBackend(): string {
  const readme = readFileSync(join(example, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## The backend'));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, 'examples/hello-car/README.md shows its backend in a js block');
  // The block is an ES module: as a .js file of a folder `npm init -y` made, it would not run.
  assert.match(section, /save it as `server\.mjs`/, 'the README names the file as this test runs it');
  return code;
}

const hostPage = `<!doctype html><title>car</title><body><script type="module">
import * as bridge from '/host.js';
window.bridge = bridge;
</script></body>`;

const missing = chromiumMissing();

describe.skipIf(missing)(`examples/hello-car in a host${missing ? ` (${missing})` : ''}`, () => {
  let service: TestService;
  let owner: Developer;
  let backend: ChildProcess | undefined;
  let backendUrl: string;
  let backendDir: string;
  let backendOutput = '';
  let app: Origin;
  let host: Origin;
  let browser: Browser;

  beforeAll(async () => {
    // The service's clock runs: the backend checks the tokens' times against its own.
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
    const admin = await signUpAdmin(service, adminEmail);
    owner = await signUpDeveloper(service.url);
    for (const deviceId of [carA, carB]) {
      await provisionCar(service, admin, deviceId);
      await makeOwner(service, deviceId, owner);
    }
    await publishMiniApp(service.url, await signUpDeveloper(service.url), admin, manifest.id, '1.0.0');

    // The README's backend, as its developer would run it: `node server.mjs` beside @svc/sdk.
    backendDir = mkdtempSync(join(tmpdir(), 'hello-car-backend-'));
    writeFileSync(join(backendDir, 'server.mjs'), readmeBackend());
    symlinkSync(join(repoRoot, 'node_modules'), join(backendDir, 'node_modules'));
    const port = await freePort();
    backendUrl = `http://127.0.0.1:${port}`;
    backend = spawn(process.execPath, [join(backendDir, 'server.mjs')], {
      env: { PATH: process.env.PATH, SVC_URL: service.url, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    backend.stdout?.on('data', (chunk) => (backendOutput += chunk));
    backend.stderr?.on('data', (chunk) => (backendOutput += chunk));
    await eventually(`the README's backend listens (${backendOutput})`, async () => {
      if (backend?.exitCode !== null) throw new Error(`the backend exited:\n${backendOutput}`);
      return fetch(backendUrl, { method: 'OPTIONS' }).then(
        (reply) => reply.status === 204,
        () => false,
      );
    });

    // The app in its own origin, with the runtime the service serves.
    const runtime = await (await fetch(`${service.url}/_svc/sdk.js`)).text();
    app = await serveOrigin({
      '/index.html': { file: join(example, 'index.html') },
      '/app.js': { file: join(example, 'app.js') },
      '/style.css': { file: join(example, 'style.css') },
      '/_svc/sdk.js': runtime,
    });
    host = await serveOrigin({ '/host.html': hostPage, '/host.js': { file: hostBundle } });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all([app?.close(), host?.close()]);
    backend?.kill();
    if (backendDir) rmSync(backendDir, { recursive: true, force: true });
    await service?.stop();
  });

  test('when the host embeds hello-car then it shows the car masked and its backend greets it with a verified token; another car gets its own greeting', async () => {
    const context = await browser.newContext();
    const calls: { url: string; authorization: string | undefined }[] = [];
    // Chromium's way to the backend the manifest names: the README's server on this machine.
    await context.route(`${backendOrigin}/**`, async (route) => {
      const request = route.request();
      const url = new URL(request.url());
      calls.push({ url: request.url(), authorization: (await request.allHeaders()).authorization });
      const response = await route.fetch({ url: `${backendUrl}${url.pathname}${url.search}` });
      await route.fulfill({ response });
    });
    const page = await context.newPage();
    // The host answers the app through the SDK's client, as the car's owner.
    const svc = createSvcClient({ baseUrl: service.url, token: owner.token });
    await page.exposeFunction('askService', (method: string, deviceId: string, locale: string) => {
      if (method === 'identityToken') return svc.cars.identityToken(deviceId, { appId: manifest.id, locale });
      if (method === 'status') return svc.cars.status(deviceId);
      throw new Error(`no ${method} here`);
    });
    await page.goto(`${host.origin}/host.html`);
    await page.waitForFunction('window.bridge !== undefined');
    await page.evaluate(`(() => {
      const frame = document.createElement('iframe');
      frame.id = 'app';
      frame.title = 'Hello Car';
      document.body.append(frame);
      window.host = bridge.createHost({
        frame,
        appUrl: '${app.origin}/index.html',
        appId: '${manifest.id}',
        activeCarId: '${carA}',
        locale: 'en-GB',
        identityToken: (car) => askService('identityToken', car.deviceId, car.locale),
        status: (car) => askService('status', car.deviceId, car.locale),
      });
    })()`);
    const frame = page.frameLocator('iframe#app');

    await frame.getByText('Hello, brand_a driver!').waitFor();
    await frame.getByRole('heading', { name: `Hello, ${'*'.repeat(21)}4352` }).waitFor();
    assert.equal(calls.length, 1);
    assert.equal(calls[0]?.url, `${backendOrigin}/greeting?device_id=brand_a%3A1HGCM82633A004352`);
    const token = /^Bearer (\S+)$/.exec(calls[0]?.authorization ?? '')?.[1];
    assert.ok(token, `a bearer token, not ${calls[0]?.authorization}`);
    assert.ok(!(await frame.locator('body').innerText()).includes(carA), 'never the whole device id');

    // The backend checks the car too: the same token for another car is refused.
    const otherCar = await fetch(`${backendUrl}/greeting?device_id=${encodeURIComponent(carB)}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(otherCar.status, 401);

    // A refused token is answered 401 too, and the backend's log says why.
    const forged = await fetch(`${backendUrl}/greeting?device_id=${encodeURIComponent(carA)}`, {
      headers: { authorization: 'Bearer not.a.token' },
    });
    assert.equal(forged.status, 401);
    await eventually(`the backend logs the refusal's code (${backendOutput})`, async () =>
      /malformed_token identity token has a header that is not base64url JSON/.test(backendOutput),
    );

    await page.evaluate(`host.setActiveCar('${carB}')`);
    await frame.getByText('Hello, brand_b driver!').waitFor();
    await frame.getByRole('heading', { name: `Hello, ${'*'.repeat(17)}orth` }).waitFor();
    assert.equal(calls.length, 2);
    assert.equal(calls[1]?.url, `${backendOrigin}/greeting?device_id=brand_b%3Afleet-7.north`);
    assert.notEqual(calls[1]?.authorization, calls[0]?.authorization, "the second car's own token");
    assert.ok(!(await frame.locator('body').innerText()).includes(carB));
    await context.close();
  });
});
