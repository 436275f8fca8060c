/**
 * GET /_svc/sdk.js: the service serves the browser build of `@svc/sdk/runtime` as a car's host
 * does (DESIGN §10): one ES module a page imports without a bundler, cached and revalidated.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Origin, serveOrigin } from '../../client/test/support/pages.ts';
import { runtimeBundle } from '../../scripts/build-runtime.ts';
import { chromiumMissing, launchChromium } from './support/browser.ts';
import { call } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const deviceId = 'brand_a:1HGCM82633A004352';

describe('the runtime at /_svc/sdk.js', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service?.stop());

  test('when /_svc/sdk.js is asked then it is the built runtime, as JavaScript any page may import, cached for an hour with an ETag', async () => {
    const reply = await fetch(`${service.url}/_svc/sdk.js`);
    assert.equal(reply.status, 200);
    assert.equal(await reply.text(), readFileSync(runtimeBundle, 'utf8'));
    assert.equal(reply.headers.get('content-type'), 'application/javascript; charset=utf-8');
    assert.equal(reply.headers.get('cache-control'), 'public, max-age=3600');
    assert.equal(reply.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(reply.headers.get('access-control-allow-origin'), '*');
    assert.match(String(reply.headers.get('etag')), /^"[A-Za-z0-9_-]{27}"$/);
  });

  test('when a page that has it asks again with its ETag then 304 without a body; HEAD and OPTIONS answer too', async () => {
    const first = await call(service.url, 'GET', '/_svc/sdk.js');
    const etag = String(first.headers.etag);
    const again = await call(service.url, 'GET', '/_svc/sdk.js', {
      headers: { 'if-none-match': `W/${etag}` },
    });
    assert.equal(again.status, 304);
    assert.equal(again.body, '');
    assert.equal(again.headers.etag, etag);
    const other = await call(service.url, 'GET', '/_svc/sdk.js', {
      headers: { 'if-none-match': '"another"' },
    });
    assert.equal(other.status, 200);

    const head = await call(service.url, 'HEAD', '/_svc/sdk.js');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    assert.equal(head.headers['content-type'], 'application/javascript; charset=utf-8');

    const options = await call(service.url, 'OPTIONS', '/_svc/sdk.js');
    assert.equal(options.status, 204);
    assert.deepEqual(String(options.headers.allow).split(', ').sort(), ['GET', 'HEAD', 'OPTIONS']);
  });

  test('when the runtime was never built then 503 sdk_not_built says how to build it', async () => {
    const unbuilt = await startTestService({}, { sdkScript: join(tmpdir(), 'svc-no-such-runtime.js') });
    try {
      const reply = await call(unbuilt.url, 'GET', '/_svc/sdk.js');
      assert.equal(reply.status, 503);
      assert.equal(reply.body.code, 'sdk_not_built');
      assert.match(reply.body.detail, /run `npm run build`/);
    } finally {
      await unbuilt.stop();
    }
  });
});

const missing = chromiumMissing();

describe.skipIf(missing)(`/_svc/sdk.js in a browser${missing ? ` (${missing})` : ''}`, () => {
  let service: TestService;
  let elsewhere: Origin;
  let browser: Browser;

  beforeAll(async () => {
    service = await startTestService();
    // A page on another origin, importing the runtime from the service by its full URL.
    elsewhere = await serveOrigin({
      '/app.html': `<!doctype html><title>app</title><script type="module">
        import { connectHost, redactDeviceId } from '${service.url}/_svc/sdk.js';
        window.imported = { connectHost: typeof connectHost, shown: redactDeviceId('${deviceId}') };
      </script>`,
    });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await elsewhere?.close();
    await service?.stop();
  });

  test("when a page of the service's origin imports { connectHost } from '/_svc/sdk.js' then it gets the runtime, which knows the page is not in a host", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${service.url}/healthz`);
    const seen =
      await page.evaluate(`import('/_svc/sdk.js').then(async ({ connectHost, redactDeviceId, HostError }) => ({
      connectHost: typeof connectHost,
      shown: redactDeviceId('${deviceId}'),
      outside: await connectHost().catch((error) => ({ hostError: error instanceof HostError, code: error.code })),
    }))`);
    assert.deepEqual(seen, {
      connectHost: 'function',
      shown: `${'*'.repeat(21)}4352`,
      outside: { hostError: true, code: 'not_embedded' },
    });
    await context.close();
  });

  test('when a page of another origin imports the runtime from the service then the browser lets it', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${elsewhere.origin}/app.html`);
    await page.waitForFunction('window.imported !== undefined');
    assert.deepEqual(await page.evaluate('window.imported'), {
      connectHost: 'function',
      shown: `${'*'.repeat(21)}4352`,
    });
    await context.close();
  });
});
