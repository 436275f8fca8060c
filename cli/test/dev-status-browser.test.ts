/**
 * `svc dev`'s panel drives the app's `statuschange` event, in Debian's Chromium through
 * playwright-core: the app shows its car's online, ignition and doors as the events say, and a
 * log of each event; the panel's checkboxes change them without reloading the app. A page of a
 * third origin, in a frame of the host page, plays a stranger who forges the event.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redactDeviceId } from '@svc/sdk';
import type { Browser, Frame, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Origin, serveOrigin } from '../../client/test/support/pages.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { loadDevSigningKey } from '../src/dev/dev-key.ts';
import { type DevServer, startDevServer } from '../src/dev/dev-server.ts';

const missing = chromiumMissing();
const firstCar = 'brand_a:1HGCM82633A004352';
const secondCar = 'brand_b:fleet-7.north';
const screenshots = join(import.meta.dirname, '../../test-output/svc-dev');

const manifest = {
  id: 'com.example.status-check',
  name: 'Status check',
  version: '1.0.0',
  entry: 'index.html',
  network: [],
};

const appPage = `<!doctype html><meta charset="utf-8"><title>Status check</title>
<p>Car <span id="car"></span>: <span id="online"></span>, ignition <span id="ignition"></span>, doors <span id="doors"></span></p>
<ol id="changes" aria-label="Status changes"></ol>
<script type="module" src="app.js"></script>
`;

/** The app: its car's status as ctx.status() first answers it, then as each statuschange says. */
const appScript = `import { connectHost, redactDeviceId } from '/_svc/sdk.js';
const ctx = await connectHost();
const text = (id, value) => { document.getElementById(id).textContent = value; };
const showStatus = (status) => {
  text('online', status.online ? 'online' : 'offline');
  text('ignition', status.state.ignition ? 'on' : 'off');
  text('doors', status.state.doors_locked ? 'locked' : 'unlocked');
};
const showCar = async () => {
  text('car', redactDeviceId(ctx.activeCarId));
  showStatus(await ctx.status());
};
ctx.on('activecarchange', showCar);
ctx.on('statuschange', ({ status, changed }) => {
  showStatus(status);
  const item = document.createElement('li');
  item.textContent = redactDeviceId(status.deviceId) + ': ' + changed.join(', ');
  document.getElementById('changes').append(item);
});
await showCar();
`;

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
  `svc dev's panel and the app's statuschange in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let dir: string;
    let dev: DevServer;
    let browser: Browser;
    let page: Page;
    let stranger: Origin;

    const appFrame = (): Frame => {
      const frame = page.frames().find((candidate) => candidate.url().startsWith(dev.appUrl));
      assert.ok(frame, `no frame at ${dev.appUrl}: ${page.frames().map((f) => f.url())}`);
      return frame;
    };
    /** The app's line of its car, as a person reads it. */
    const shown = async () => (await appFrame().locator('p').first().textContent())?.trim();
    const changes = () => appFrame().getByRole('listitem').allTextContents();
    const waitForShown = (expected: string) =>
      eventually(`the app to show "${expected}"`, async () => (await shown()) === expected || undefined);
    /** Marks the app's document: a reload would replace it, and the mark with it. */
    const markDocument = () => appFrame().evaluate('window.sameDocument = true');
    const sameDocument = () => appFrame().evaluate('window.sameDocument === true');

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'svc-dev-status-'));
      writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
      writeFileSync(join(dir, 'index.html'), appPage);
      writeFileSync(join(dir, 'app.js'), appScript);
      stranger = await serveOrigin({ '/stranger.html': '<!doctype html><title>stranger</title>' });
      dev = await startDevServer({
        dir,
        port: 0,
        deviceId: firstCar,
        locale: 'en-GB',
        allowedOrigins: [],
        key: loadDevSigningKey(mkdtempSync(join(tmpdir(), 'svc-dev-home-'))).key,
        hostVersion: 'svc-dev/test',
        log: () => {},
      });
      browser = await launchChromium();
      page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
      await page.goto(dev.hostUrl);
      await waitForShown(`Car ${redactDeviceId(firstCar)}: online, ignition off, doors locked`);
    });
    afterAll(async () => {
      await browser?.close();
      await dev?.close();
      await stranger?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test('when the panel turns the ignition on and unlocks the doors then the app shows each at once, without a reload', async () => {
      await markDocument();
      await page.getByLabel('Ignition on').check();
      await waitForShown(`Car ${redactDeviceId(firstCar)}: online, ignition on, doors locked`);
      await page.getByLabel('Doors locked').uncheck();
      await waitForShown(`Car ${redactDeviceId(firstCar)}: online, ignition on, doors unlocked`);
      assert.deepEqual(await changes(), [
        `${redactDeviceId(firstCar)}: state.ignition`,
        `${redactDeviceId(firstCar)}: state.doors_locked`,
      ]);
      assert.equal(await sameDocument(), true, 'the app was not reloaded');
      mkdirSync(screenshots, { recursive: true });
      await page.screenshot({ path: join(screenshots, 'host-page-status-change.png') });
    });

    test('when the panel takes the car offline then the app hears online change, and nothing for a move of the car', async () => {
      await page.getByLabel('Online').uncheck();
      await waitForShown(`Car ${redactDeviceId(firstCar)}: offline, ignition on, doors unlocked`);
      // A new position is no status change: the next event names only what changed after it.
      await page.getByLabel('Latitude').fill('52.52');
      await page.getByLabel('Latitude').press('Enter');
      await page.getByLabel('Latitude').blur();
      await page.getByLabel('Online').check();
      await waitForShown(`Car ${redactDeviceId(firstCar)}: online, ignition on, doors unlocked`);
      assert.deepEqual((await changes()).slice(2), [
        `${redactDeviceId(firstCar)}: online`,
        `${redactDeviceId(firstCar)}: online`,
      ]);
      assert.equal(await sameDocument(), true);
    });

    test("when the panel switches the car then the app hears the car change, not a status change, and the next change is the new car's", async () => {
      const before = (await changes()).length;
      await page.getByLabel('Device id').fill(secondCar);
      await page.getByLabel('Device id').press('Enter');
      await page.getByLabel('Device id').blur();
      await waitForShown(`Car ${redactDeviceId(secondCar)}: online, ignition on, doors unlocked`);
      assert.equal((await changes()).length, before, 'the switch is not a statuschange');
      await page.getByLabel('Ignition on').uncheck();
      await waitForShown(`Car ${redactDeviceId(secondCar)}: online, ignition off, doors unlocked`);
      assert.deepEqual((await changes()).slice(before), [`${redactDeviceId(secondCar)}: state.ignition`]);
    });

    test('when a page of another origin, in a frame of the host page, forges a statuschange then the app does not show it', async () => {
      await page.evaluate(`new Promise((resolve) => {
        const frame = document.createElement('iframe');
        frame.id = 'stranger';
        frame.onload = resolve;
        frame.src = '${stranger.origin}/stranger.html';
        document.body.append(frame);
      })`);
      const strangerFrame = page.frames().find((frame) => frame.url().startsWith(stranger.origin));
      assert.ok(strangerFrame);
      const before = (await changes()).length;
      // As the host would send it, for the active car, to the app's frame (the host page's first).
      const forged = {
        protocol: 'svc-host-bridge',
        version: 1,
        kind: 'event',
        name: 'statuschange',
        data: {
          status: {
            deviceId: secondCar,
            brand: 'brand_b',
            online: false,
            lastSeen: null,
            state: { ignition: true, doors_locked: true, forged: true },
            reportedAt: null,
          },
        },
      };
      await strangerFrame.evaluate(`parent.frames[0].postMessage(${JSON.stringify(forged)}, '*')`);
      // Changed after the forgery was posted: once the app shows it, it has had the forgery too.
      await page.getByLabel('Doors locked').check();
      await waitForShown(`Car ${redactDeviceId(secondCar)}: online, ignition off, doors locked`);
      assert.deepEqual((await changes()).slice(before), [`${redactDeviceId(secondCar)}: state.doors_locked`]);
    });
  },
);
