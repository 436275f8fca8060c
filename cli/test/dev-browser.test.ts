/**
 * `svc dev` in a real browser (Debian's Chromium through playwright-core): the host page, the app
 * in its frame on another origin, the panel's car, identity tokens, the car's network rules as the
 * browser enforces them, reload on save and the manifest's problems. Screenshots of the host page
 * at two sizes go to test-output/svc-dev/ for a person to look at (not committed).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redactDeviceId, verifyIdentityToken } from '@svc/sdk';
import type { Browser, Frame, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { devIssuer, loadDevSigningKey } from '../src/dev/dev-key.ts';
import { type DevServer, startDevServer } from '../src/dev/dev-server.ts';

const missing = chromiumMissing();
const appId = 'com.example.dev-check';
const firstCar = 'brand_a:1HGCM82633A004352';
const secondCar = 'brand_b:fleet-7.north';
const screenshots = join(import.meta.dirname, '../../test-output/svc-dev');

const manifest = {
  id: appId,
  name: 'Dev check',
  version: '1.0.0',
  entry: 'index.html',
  network: ['https://api.example.com'],
  brands: ['brand_a', 'brand_b', 'brand_c', 'brand_d'],
};

/** The app: shows the masked active car and its version, and leaves its ctx for the test. */
const appScript = (version: string) => `import { connectHost, redactDeviceId } from '/_svc/sdk.js';
const ctx = await connectHost();
window.svcTest = { ctx };
const show = () => { document.getElementById('car').textContent = redactDeviceId(ctx.activeCarId); };
ctx.on('activecarchange', show);
show();
document.getElementById('version').textContent = ${JSON.stringify(version)};
`;

/** A backend on this machine that answers any origin. */
async function startBackend(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'access-control-allow-origin': '*', 'content-type': 'text/plain' });
    response.end('hello from the backend');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Waits until `check` gives a value; one that throws (a frame between two pages) is tried again. */
async function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const end = Date.now() + 15_000;
  for (;;) {
    const value = await Promise.resolve()
      .then(check)
      .catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(missing !== undefined)(
  `svc dev in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let dir: string;
    let dev: DevServer;
    let browser: Browser;
    let page: Page;
    let allowed: { server: Server; origin: string };
    let undeclared: { server: Server; origin: string };
    const logged: string[] = [];

    /** The app's frame as it is now (a reload makes a new one). */
    const appFrame = (): Frame => {
      const frame = page.frames().find((candidate) => candidate.url().startsWith(dev.appUrl));
      assert.ok(frame, `no frame at ${dev.appUrl}: ${page.frames().map((f) => f.url())}`);
      return frame;
    };
    const appText = (selector: string) => appFrame().locator(selector).textContent();

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'svc-dev-browser-'));
      writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
      writeFileSync(
        join(dir, 'index.html'),
        '<!doctype html><meta charset="utf-8"><p id="car"></p><p id="version"></p><script type="module" src="app.js"></script>\n',
      );
      writeFileSync(join(dir, 'app.js'), appScript('v1'));
      allowed = await startBackend();
      undeclared = await startBackend();
      dev = await startDevServer({
        dir,
        port: 0,
        deviceId: firstCar,
        locale: 'de-DE',
        allowedOrigins: [allowed.origin],
        key: loadDevSigningKey(mkdtempSync(join(tmpdir(), 'svc-dev-home-'))).key,
        hostVersion: 'svc-dev/test',
        log: (line) => logged.push(line),
      });
      browser = await launchChromium();
      page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
      await page.goto(dev.hostUrl);
    });
    afterAll(async () => {
      await browser?.close();
      await dev?.close();
      allowed?.server.close();
      undeclared?.server.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test('when the host page opens then the app frame shows the active car masked, never whole', async () => {
      await eventually('the car in the app', async () => (await appText('#car')) || undefined);
      assert.equal(await appText('#car'), redactDeviceId(firstCar));
      assert.equal(await page.locator('#deviceId').inputValue(), firstCar);
      const html = await appFrame().content();
      assert.doesNotMatch(html, /1HGCM82633A004352/);
    });

    test('when the panel switches the car then the app shows the new one', async () => {
      await page.locator('#deviceId').fill(secondCar);
      await page.locator('#deviceId').press('Enter');
      await page.locator('#deviceId').blur();
      await eventually('the second car in the app', async () =>
        (await appText('#car')) === redactDeviceId(secondCar) ? true : undefined,
      );
      const status = await appFrame().evaluate(async () => {
        const ctx = (globalThis as unknown as { svcTest: { ctx: { status(): Promise<unknown> } } }).svcTest
          .ctx;
        return ctx.status();
      });
      assert.equal((status as { deviceId: string }).deviceId, secondCar);
      assert.equal((status as { brand: string }).brand, 'brand_b');
    });

    test('when the panel is given a device id the service would refuse then it says why and the app keeps its car', async () => {
      await page.locator('#deviceId').fill('brand_x:nope');
      await page.locator('#deviceId').press('Enter');
      await page.locator('#deviceId').blur();
      const error = page.locator('[data-error-for="deviceId"]');
      await eventually(
        'the error',
        async () => ((await error.textContent()) ?? '').includes('brand_x') || undefined,
      );
      assert.equal(await appText('#car'), redactDeviceId(secondCar));
    });

    test('when the app asks for an identity token then its backend verifies it with the SDK against the dev JWKS', async () => {
      const token = await appFrame().evaluate(async () => {
        const ctx = (
          globalThis as unknown as { svcTest: { ctx: { identityToken(): Promise<{ token: string }> } } }
        ).svcTest.ctx;
        return (await ctx.identityToken()).token;
      });
      const identity = await verifyIdentityToken(token, {
        jwksUrl: new URL('/.well-known/jwks.json', dev.hostUrl).href,
        audience: appId,
        issuer: devIssuer,
      });
      assert.equal(identity.deviceId, secondCar);
      assert.equal(identity.locale, 'de-DE');
    });

    test('when the app fetches an origin it may reach then it works, and one the manifest does not list is blocked and reported', async () => {
      const fetchFromApp = (url: string) =>
        appFrame().evaluate(
          (target) =>
            fetch(target).then(
              (response) => response.text(),
              (error: Error) => `failed: ${error.message}`,
            ),
          url,
        );
      assert.equal(await fetchFromApp(`${allowed.origin}/greeting`), 'hello from the backend');
      assert.match(await fetchFromApp(`${undeclared.origin}/greeting`), /^failed:/);
      const expected = `blocked a connection to ${undeclared.origin}`;
      await eventually(
        'the report in the terminal',
        () => logged.some((line) => line.startsWith(expected)) || undefined,
      );
      const line = logged.find((entry) => entry.startsWith(expected)) ?? '';
      assert.match(
        line,
        /\(connect-src\): the car allows https:\/\/ origins only; for a local backend in development run svc dev --allow-origin/,
      );
      await eventually(
        'the report in the panel',
        async () => ((await page.locator('#violations').textContent()) ?? '').includes(expected) || undefined,
      );
    });

    test("when a file of the app is saved then the frame reloads by itself, keeping the panel's car", async () => {
      assert.equal(await appText('#version'), 'v1');
      writeFileSync(join(dir, 'app.js'), appScript('v2'));
      await eventually('the new version', async () => (await appText('#version')) === 'v2' || undefined);
      await eventually(
        'the car after the reload',
        async () => (await appText('#car')) === redactDeviceId(secondCar) || undefined,
      );
    });

    test("when the manifest stops listing the car's brand then the panel warns that the service would not install the app there, until it lists it again", async () => {
      const warning = page.getByRole('status').filter({ hasText: 'is a brand_b car' });
      assert.equal(await warning.count(), 0);
      writeFileSync(
        join(dir, 'manifest.json'),
        JSON.stringify({ ...manifest, brands: ['brand_a'] }, null, 2),
      );
      await eventually('the warning in the panel', async () => (await warning.isVisible()) || undefined);
      assert.equal(
        await warning.textContent(),
        `the car ${secondCar} is a brand_b car, but manifest.json lists brands brand_a only: the service would not install the app on it nor sign its identity tokens there (add "brand_b" to "brands" in manifest.json, or pick a car of a listed brand)`,
      );
      assert.ok(logged.some((line) => line.startsWith(`warning: the car ${secondCar} is a brand_b car`)));
      mkdirSync(screenshots, { recursive: true });
      await page.screenshot({ path: join(screenshots, 'host-page-brand-warning.png') });
      writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
      await eventually('the warning gone', async () => (await warning.count()) === 0 || undefined);
    });

    test('when the manifest breaks then the host page shows its problems over the app, until it is fixed', async () => {
      const problems = page.locator('#problems');
      assert.equal(await problems.isVisible(), false);
      writeFileSync(
        join(dir, 'manifest.json'),
        JSON.stringify({ ...manifest, network: ['http://api.example.com'], version: 'one' }, null, 2),
      );
      await eventually('the problems shown', async () => (await problems.isVisible()) || undefined);
      const shown = (await page.locator('#problem-list').textContent()) ?? '';
      assert.match(shown, /manifest\.json: version:/);
      assert.match(
        shown,
        /manifest\.json: network\[0\]: "http:\/\/api\.example\.com" must be an https:\/\/ origin/,
      );
      writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
      await eventually('the problems gone', async () => (await problems.isHidden()) || undefined);
      await eventually(
        'the app back',
        async () => (await appText('#car')) === redactDeviceId(secondCar) || undefined,
      );
    });

    test('when the screen is switched then the host page is captured at two sizes for a person to look at', async () => {
      mkdirSync(screenshots, { recursive: true });
      for (const [screen, viewport] of [
        ['1280x720', { width: 1680, height: 900 }],
        ['800x480', { width: 1200, height: 700 }],
      ] as const) {
        await page.setViewportSize(viewport);
        await page.locator('#screen').selectOption(screen);
        const box = await page.locator('#screen-box').boundingBox();
        assert.ok(box && box.width > 0 && box.height > 0);
        const [width, height] = screen.split('x').map(Number) as [number, number];
        // Scaled to fit, in the screen's proportions.
        assert.ok(Math.abs(box.width / box.height - width / height) < 0.02, JSON.stringify(box));
        await page.screenshot({ path: join(screenshots, `host-page-${screen}.png`) });
      }
    });
  },
);
