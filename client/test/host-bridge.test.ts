/**
 * The host bridge in Chromium: a host page (one origin) embeds an app (another origin) with
 * `@svc/sdk/host`, and the app talks to it with `@svc/sdk/runtime`, both as their browser builds
 * (client/dist/*.browser.js, built by the tests' global setup). A third origin plays a stranger
 * in a sibling frame.
 */
import assert from 'node:assert/strict';
import type { Browser, Frame, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { hostBundle, runtimeBundle } from '../../scripts/build-runtime.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { type Origin, serveOrigin } from './support/pages.ts';

const missing = chromiumMissing();

const carA = 'brand_a:1HGCM82633A004352';
const carB = 'brand_b:fleet-7.north';
const appId = 'com.example.hello-car';
const token = 'eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJ1MSJ9.c2lnbmF0dXJl';

const hostPage = `<!doctype html><title>host</title><body><script type="module">
import * as bridge from '/host.js';
window.bridge = bridge;
</script></body>`;

const appPage = `<!doctype html><title>app</title><script type="module">
import * as sdk from '/_svc/sdk.js';
window.sdk = sdk;
</script>`;

/** What a promise in the page came to: its value, or its error's name, code and message. */
type Outcome = { value: unknown } | { error: { name: string; code?: string; message: string } };

function settle(frame: Frame | Page, expression: string): Promise<Outcome> {
  return frame.evaluate(`Promise.resolve().then(() => (${expression})).then(
    (value) => ({ value }),
    (e) => ({ error: { name: e.name, code: e.code, message: e.message } }),
  )`) as Promise<Outcome>;
}

function errorOf(outcome: Outcome): { name: string; code?: string; message: string } {
  assert.ok('error' in outcome, `expected a failure, got ${JSON.stringify(outcome)}`);
  return outcome.error;
}

describe.skipIf(missing)(`the host bridge in a browser${missing ? ` (${missing})` : ''}`, () => {
  let browser: Browser;
  let host: Origin;
  let app: Origin;
  let stranger: Origin;

  beforeAll(async () => {
    host = await serveOrigin({ '/host.html': hostPage, '/host.js': { file: hostBundle } });
    app = await serveOrigin({ '/app.html': appPage, '/_svc/sdk.js': { file: runtimeBundle } });
    stranger = await serveOrigin({ '/stranger.html': '<!doctype html><title>stranger</title>' });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all([host, app, stranger].map((origin) => origin?.close()));
  });

  /** A fresh page at the host origin, with the host bridge loaded. */
  async function openHostPage(): Promise<Page> {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${host.origin}/host.html`);
    await page.waitForFunction('window.bridge !== undefined');
    return page;
  }

  /** The app's frame, once the runtime has loaded in it. */
  async function appFrame(page: Page, selector = 'iframe#app'): Promise<Frame> {
    const frame = await (await page.waitForSelector(selector)).contentFrame();
    assert.ok(frame);
    await frame.waitForURL(`${app.origin}/**`);
    await frame.waitForFunction('window.sdk !== undefined');
    return frame;
  }

  /**
   * A host with createHost, as a car's would be: status and tokens answered, location never
   * (a car that does not answer), install not offered. Each callback's calls are kept in
   * `window.calls`. A stranger's frame sits beside the app's.
   */
  async function embedApp(page: Page, moreOptions = ''): Promise<Frame> {
    await page.evaluate(`(() => {
      window.calls = { identityToken: [], status: [], location: [] };
      const frame = document.createElement('iframe');
      frame.id = 'app';
      document.body.append(frame);
      window.host = bridge.createHost({
        frame,
        appUrl: '${app.origin}/app.html',
        appId: '${appId}',
        activeCarId: '${carA}',
        locale: 'en-gb',
        identityToken: async (car) => {
          calls.identityToken.push(car);
          return { token: '${token}', expiresAt: new Date(Date.now() + 600000).toISOString() };
        },
        status: async (car) => {
          calls.status.push(car);
          return { deviceId: car.deviceId, brand: car.brand, online: true, lastSeen: null, state: { ignition: 'off' }, reportedAt: null };
        },
        location: (car) => {
          calls.location.push(car);
          return new Promise(() => {});
        },
        ${moreOptions}
      });
      const stranger = document.createElement('iframe');
      stranger.id = 'stranger';
      stranger.src = '${stranger.origin}/stranger.html';
      document.body.append(stranger);
    })()`);
    return appFrame(page);
  }

  const connect = (frame: Frame, options = '{ timeoutMs: 2000 }') =>
    settle(
      frame,
      `sdk.connectHost(${options}).then((ctx) => {
        window.ctx = ctx;
        window.changes = [];
        ctx.on('activecarchange', (change) => changes.push({ change, activeCarId: ctx.activeCarId }));
        window.statuses = [];
        ctx.on('statuschange', (change) => statuses.push(change));
        return { appId: ctx.appId, activeCarId: ctx.activeCarId, brand: ctx.brand, locale: ctx.locale, hostOrigin: ctx.hostOrigin };
      })`,
    );

  test('when an app connects to its host then its context names the app, the active car, its brand, the canonical locale and the host origin', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    assert.deepEqual(await connect(frame), {
      value: { appId, activeCarId: carA, brand: 'brand_a', locale: 'en-GB', hostOrigin: host.origin },
    });
    await page.context().close();
  });

  test("when the app asks for an identity token and the car's status then the host's callbacks answer for the active car, as v4 models", async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);

    const first = await settle(frame, 'ctx.identityToken()');
    assert.ok('value' in first);
    const issued = first.value as { token: string; expiresAt: string };
    assert.equal(issued.token, token);
    assert.ok(Date.parse(issued.expiresAt) > Date.now());
    // A token with minutes to live is given again without asking the host.
    assert.deepEqual(await settle(frame, 'ctx.identityToken()'), first);

    assert.deepEqual(await settle(frame, 'ctx.status()'), {
      value: {
        deviceId: carA,
        brand: 'brand_a',
        online: true,
        lastSeen: null,
        state: { ignition: 'off' },
        reportedAt: null,
      },
    });
    assert.deepEqual(await page.evaluate('calls.identityToken'), [
      { deviceId: carA, brand: 'brand_a', appId, locale: 'en-GB' },
    ]);
    assert.equal(await page.evaluate('calls.status.length'), 1);

    const install = errorOf(await settle(frame, 'ctx.install()'));
    assert.equal(install.name, 'HostError');
    assert.equal(install.code, 'not_available');
    assert.match(install.message, /does not offer install/);
    await page.context().close();
  });

  test('when the host makes another car active then the app hears activecarchange, its context follows, and its next token is for that car', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);
    await settle(frame, 'ctx.identityToken()');

    await page.evaluate(`host.setActiveCar('${carB}')`);
    await frame.waitForFunction('changes.length > 0');
    assert.deepEqual(await frame.evaluate('changes'), [
      { change: { activeCarId: carB, brand: 'brand_b' }, activeCarId: carB },
    ]);
    assert.deepEqual(await frame.evaluate('({ activeCarId: ctx.activeCarId, brand: ctx.brand })'), {
      activeCarId: carB,
      brand: 'brand_b',
    });

    await settle(frame, 'ctx.identityToken()');
    assert.deepEqual(
      await page.evaluate('calls.identityToken.map((car) => car.deviceId)'),
      [carA, carB],
      'the token of the first car is not given for the second',
    );
    await page.context().close();
  });

  test('when a page of another origin posts as the host to the app, and as the app to the host, then neither side takes it', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);
    const strangerFrame = await (await page.waitForSelector('iframe#stranger')).contentFrame();
    assert.ok(strangerFrame);
    await strangerFrame.waitForURL(`${stranger.origin}/**`);

    // The stranger is in a sibling frame: it reaches the app's window and the host's.
    await strangerFrame.evaluate(`(() => {
      const envelope = { protocol: 'svc-host-bridge', version: 1 };
      const appWindow = parent.frames[0];
      appWindow.postMessage({ ...envelope, kind: 'event', name: 'activecarchange', data: { activeCarId: 'brand_c:forged-car', brand: 'brand_c' } }, '*');
      parent.postMessage({ ...envelope, kind: 'request', id: 'forged-1', method: 'status', params: { deviceId: '${carA}' } }, '*');
    })()`);

    // The forged messages were posted first; what the real host and app send next is heard.
    assert.equal(
      ((await settle(frame, 'ctx.status()')) as { value: { deviceId: string } }).value.deviceId,
      carA,
    );
    await page.evaluate(`host.setActiveCar('${carB}')`);
    await frame.waitForFunction('changes.length > 0');

    assert.deepEqual(
      await frame.evaluate('changes.map((c) => c.change.activeCarId)'),
      [carB],
      'the app heard only its host',
    );
    assert.equal(await page.evaluate('calls.status.length'), 1, 'the host answered only its app');
    await page.context().close();
  });

  /** A CarStatus as a host would report it, at a time of its own. */
  const statusOf = (deviceId: string, brand: string, online: boolean, state: object, at: string) => ({
    deviceId,
    brand,
    online,
    lastSeen: at,
    state,
    reportedAt: at,
  });

  test("when the host says the active car's status changed then the app hears statuschange with the new status and what changed, once per change", async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);
    // What the app had: the status callback's answer (ignition off).
    await settle(frame, 'ctx.status()');

    const ignitionOn = statusOf(carA, 'brand_a', true, { ignition: 'on' }, '2025-01-01T10:00:00.000Z');
    assert.equal(await page.evaluate(`host.statusChanged(${JSON.stringify(ignitionOn)})`), true);
    await frame.waitForFunction('statuses.length === 1');
    assert.deepEqual(await frame.evaluate('statuses'), [{ status: ignitionOn, changed: ['state.ignition'] }]);

    // The same status again (only its times moved) is no news; a car that goes offline with its
    // doors unlocked is.
    const again = {
      ...ignitionOn,
      lastSeen: '2025-01-01T10:01:00.000Z',
      reportedAt: '2025-01-01T10:01:00.000Z',
    };
    const offline = statusOf(
      carA,
      'brand_a',
      false,
      { ignition: 'on', doors: 'unlocked' },
      '2025-01-01T10:02:00.000Z',
    );
    await page.evaluate(
      `host.statusChanged(${JSON.stringify(again)}); host.statusChanged(${JSON.stringify(offline)})`,
    );
    await frame.waitForFunction('statuses.length === 2');
    assert.deepEqual(await frame.evaluate('statuses[1]'), {
      status: offline,
      changed: ['online', 'state.doors'],
    });
    assert.equal(await frame.evaluate('statuses.length'), 2);
    await page.context().close();
  });

  test("when the host is told another car's status then the app hears nothing, until that car is the active one", async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);
    const otherCar = statusOf(carB, 'brand_b', true, { ignition: 'on' }, '2025-01-01T10:00:00.000Z');
    assert.equal(
      await page.evaluate(`host.statusChanged(${JSON.stringify(otherCar)})`),
      false,
      'not sent: not the active car',
    );
    // A host without createHost's check: its own window posts another car's status as an event.
    await page.evaluate(`document.querySelector('iframe#app').contentWindow.postMessage(
      { protocol: 'svc-host-bridge', version: 1, kind: 'event', name: 'statuschange', data: { status: ${JSON.stringify(otherCar)} } },
      '${app.origin}')`);

    await page.evaluate(`host.setActiveCar('${carB}')`);
    await frame.waitForFunction('changes.length === 1');
    const next = statusOf(carB, 'brand_b', true, { ignition: 'off' }, '2025-01-01T10:01:00.000Z');
    assert.equal(await page.evaluate(`host.statusChanged(${JSON.stringify(next)})`), true);
    await frame.waitForFunction('statuses.length > 0');
    // The app had no status of this car: everything is news.
    assert.deepEqual(await frame.evaluate('statuses'), [
      { status: next, changed: ['online', 'state.ignition'] },
    ]);
    await page.context().close();
  });

  test('when a page of another origin, or the app itself, posts a statuschange to the app then the app does not hear it', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);
    const strangerFrame = await (await page.waitForSelector('iframe#stranger')).contentFrame();
    assert.ok(strangerFrame);
    await strangerFrame.waitForURL(`${stranger.origin}/**`);
    const forged = (source: string) => ({
      protocol: 'svc-host-bridge',
      version: 1,
      kind: 'event',
      name: 'statuschange',
      data: {
        status: statusOf(
          carA,
          'brand_a',
          true,
          { ignition: 'on', forgedBy: source },
          '2025-01-01T10:00:00.000Z',
        ),
      },
    });
    await strangerFrame.evaluate(`parent.frames[0].postMessage(${JSON.stringify(forged('stranger'))}, '*')`);
    await frame.evaluate(`postMessage(${JSON.stringify(forged('the app'))}, '*')`);

    // Posted after the forged ones: once the app hears it, it has had its chance to hear those.
    const real = statusOf(carA, 'brand_a', false, { ignition: 'off' }, '2025-01-01T10:01:00.000Z');
    await page.evaluate(`host.statusChanged(${JSON.stringify(real)})`);
    await frame.waitForFunction('statuses.length > 0');
    assert.deepEqual(
      await frame.evaluate('statuses.map((change) => change.status)'),
      [real],
      'the app heard only its host',
    );
    await page.context().close();
  });

  test('when a host passes statusChanged something that is not a CarStatus, or an app listens for an unknown event, then each is told at once', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame);
    const host = errorOf(
      await settle(
        page,
        `host.statusChanged({ deviceId: '${carA}', brand: 'brand_b', online: true, state: {}, lastSeen: null, reportedAt: null })`,
      ),
    );
    assert.equal(host.name, 'TypeError');
    assert.match(host.message, /statusChanged takes a CarStatus/);
    const app = errorOf(await settle(frame, `ctx.on('ignitionchange', () => {})`));
    assert.equal(app.name, 'TypeError');
    assert.equal(app.message, `no event "ignitionchange": try 'activecarchange' or 'statuschange'`);
    await page.context().close();
  });

  test('when the host does not answer in time then the call fails with a HostError timeout', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    await connect(frame, '{ timeoutMs: 300 }');
    const error = errorOf(await settle(frame, 'ctx.location()'));
    assert.equal(error.name, 'HostError');
    assert.equal(error.code, 'timeout');
    assert.match(error.message, /did not answer location within 300 ms/);
    assert.equal(await page.evaluate('calls.location.length'), 1);
    await page.context().close();
  });

  test('when the app asks what the host cannot answer then each refusal has its code: unknown_method, inactive_car, too_many_requests, closed', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page, 'maxPendingRequests: 2,');
    await connect(frame, '{ timeoutMs: 5000 }');
    /** A request as an app without the SDK would send it; the host's answer to it. */
    const raw = (id: string, method: string, params: object) =>
      frame.evaluate(`new Promise((resolve) => {
        addEventListener('message', (event) => { if (event.data?.id === '${id}') resolve(event.data.error); });
        parent.postMessage({ protocol: 'svc-host-bridge', version: 1, kind: 'request', id: '${id}', method: '${method}', params: ${JSON.stringify(params)} }, '${host.origin}');
      })`);
    assert.deepEqual(await raw('m1', 'selfDestruct', {}), {
      code: 'unknown_method',
      message:
        'this host knows no method "selfDestruct": it answers connect, identityToken, status, location, install',
    });
    assert.equal(((await raw('m2', 'status', { deviceId: carB })) as { code: string }).code, 'inactive_car');
    assert.equal(await page.evaluate('calls.status.length'), 0, 'nothing was asked about the other car');

    // Two location calls wait on a car that does not answer; a third is refused at once.
    await frame.evaluate(
      'window.waiting = [ctx.location(), ctx.location()].map((call) => call.catch((e) => e.code))',
    );
    await page.waitForFunction('calls.location.length === 2');
    assert.equal(errorOf(await settle(frame, 'ctx.location()')).code, 'too_many_requests');

    await frame.evaluate('ctx.close()');
    assert.deepEqual(await frame.evaluate('Promise.all(waiting)'), ['closed', 'closed']);
    assert.equal(errorOf(await settle(frame, 'ctx.status()')).code, 'closed');
    await page.context().close();
  });

  test('when the host speaks another version of the bridge then connectHost fails with version_mismatch', async () => {
    const page = await openHostPage();
    // A host from the future: it answers every request in version 2.
    await page.evaluate(`(() => {
      addEventListener('message', (event) => {
        if (event.origin !== '${app.origin}' || event.data?.protocol !== 'svc-host-bridge') return;
        event.source.postMessage({
          protocol: 'svc-host-bridge', version: 2, kind: 'response', id: event.data.id,
          result: { appId: '${appId}', activeCarId: '${carA}', brand: 'brand_a', locale: 'en-GB' },
        }, event.origin);
      });
      const frame = document.createElement('iframe');
      frame.id = 'app';
      frame.src = '${app.origin}/app.html?svc_host_origin=' + encodeURIComponent(location.origin);
      document.body.append(frame);
    })()`);
    const frame = await appFrame(page);
    const error = errorOf(await connect(frame));
    assert.equal(error.code, 'version_mismatch');
    assert.match(error.message, /speaks svc-host-bridge version 1, the host version 2/);
    await page.context().close();
  });

  test('when an app sends a request in another version then the host answers version_mismatch in words of its own version', async () => {
    const page = await openHostPage();
    const frame = await embedApp(page);
    const answer = await frame.evaluate(`new Promise((resolve) => {
      addEventListener('message', (event) => { if (event.data?.id === 'from-v2') resolve(event.data); });
      parent.postMessage({ protocol: 'svc-host-bridge', version: 2, kind: 'request', id: 'from-v2', method: 'connect', params: {} }, '${host.origin}');
    })`);
    assert.deepEqual(answer, {
      protocol: 'svc-host-bridge',
      version: 1,
      kind: 'response',
      id: 'from-v2',
      error: {
        code: 'version_mismatch',
        message:
          "this host speaks svc-host-bridge version 1, the app's runtime version 2: use an @svc/sdk of the same major version on both sides (the app loads /_svc/sdk.js from its host)",
      },
    });
    await page.context().close();
  });

  test('when the app is embedded by a page other than the host its URL names then connectHost refuses it', async () => {
    const page = await openHostPage();
    await page.evaluate(`(() => {
      const named = document.createElement('iframe');
      named.id = 'app';
      named.src = '${app.origin}/app.html?svc_host_origin=' + encodeURIComponent('${stranger.origin}');
      document.body.append(named);
      const unnamed = document.createElement('iframe');
      unnamed.id = 'unnamed';
      unnamed.src = '${app.origin}/app.html';
      document.body.append(unnamed);
    })()`);
    const named = errorOf(await connect(await appFrame(page)));
    assert.equal(named.code, 'wrong_host_origin');
    assert.match(named.message, new RegExp(`embedded by ${host.origin}, not by ${stranger.origin}`));

    const unnamed = errorOf(await connect(await appFrame(page, 'iframe#unnamed')));
    assert.equal(unnamed.code, 'invalid_host_origin');
    assert.match(unnamed.message, /svc_host_origin/);

    const pinned = errorOf(await connect(await appFrame(page), `{ hostOrigin: '${stranger.origin}' }`));
    assert.equal(pinned.code, 'wrong_host_origin');
    await page.context().close();
  });

  test('when the app is opened outside any frame then connectHost says it is not embedded', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${app.origin}/app.html?svc_host_origin=${encodeURIComponent(host.origin)}`);
    await page.waitForFunction('window.sdk !== undefined');
    const error = errorOf(await settle(page, 'sdk.connectHost()'));
    assert.equal(error.code, 'not_embedded');
    await context.close();
  });

  test("when a host page would embed an app of its own origin then createHost refuses: the app could reach into the host's page", async () => {
    const page = await openHostPage();
    const error = errorOf(
      await settle(
        page,
        `bridge.createHost({ frame: document.body.appendChild(document.createElement('iframe')), appUrl: '/app.html', appId: '${appId}', activeCarId: '${carA}', locale: 'en' })`,
      ),
    );
    assert.match(error.message, /must be served on another origin than the host page/);
    await page.context().close();
  });
});
