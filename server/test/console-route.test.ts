/**
 * GET /console: the service serves the built web console, its pages' paths and its hashed assets,
 * under a CSP that lets no inline or outside script run and no page frame it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { consoleDist } from '../../scripts/build-console.ts';
import { call, rawExchange } from './support/http.ts';
import { startMosquitto, type TestMosquitto } from './support/mosquitto.ts';
import { startTestService, type TestService } from './support/service.ts';

describe('the web console at /console', () => {
  let service: TestService;
  let unbuilt: TestService;
  /** The same service in service mode: cars on a Mosquitto it manages. */
  let serviceMode: TestService;
  let mosquitto: TestMosquitto;
  let dir: string;
  let consoleDir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-console-route-'));
    // Built by the tests' global setup, as `npm run build` builds it.
    consoleDir = consoleDist;
    service = await startTestService({}, { consoleDir });
    unbuilt = await startTestService({}, { consoleDir: join(dir, 'never-built') });
    mosquitto = await startMosquitto();
    serviceMode = await startTestService(
      {
        MQTT_URL: mosquitto.url,
        MQTT_USERNAME: mosquitto.admin.username,
        MQTT_PASSWORD: mosquitto.admin.password,
      },
      { consoleDir },
    );
  });
  afterAll(async () => {
    await serviceMode?.stop();
    await mosquitto?.stop();
    await service?.stop();
    await unbuilt?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('when /console or one of its pages is asked then the built page comes, under a strict CSP and never cached stale', async () => {
    const page = readFileSync(join(consoleDir, 'index.html'), 'utf8');
    // Paths it has no page for too: the page itself says "Page not found".
    const paths = [
      '/console',
      '/console/',
      '/console/sign-in',
      '/console/keys',
      '/console/Keys',
      '/console/keys/more',
    ];
    for (const [base, path] of [
      ...paths.map((p) => [service.url, p]),
      [serviceMode.url, '/console'],
    ] as const) {
      const reply = await call(base, 'GET', path);
      assert.equal(reply.status, 200, path);
      assert.equal(reply.body, page, path);
      assert.match(String(reply.headers['content-type']), /^text\/html/);
      assert.equal(reply.headers['cache-control'], 'no-cache');
      assert.equal(reply.headers['x-frame-options'], 'DENY');
      assert.equal(reply.headers['x-content-type-options'], 'nosniff');
      assert.equal(reply.headers['referrer-policy'], 'no-referrer');
    }
    const policy = String((await call(service.url, 'GET', '/console')).headers['content-security-policy']);
    const directives = new Map(
      policy.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]),
    );
    assert.equal(directives.get('default-src'), "'none'");
    assert.equal(directives.get('script-src'), "'self'");
    assert.equal(directives.get('style-src'), "'self'");
    assert.equal(directives.get('connect-src'), "'self'");
    assert.equal(directives.get('frame-ancestors'), "'none'");
    assert.doesNotMatch(policy, /unsafe-inline|unsafe-eval|\*|https?:/);
  });

  test('when the build is read then every script and style is a file of this service, none inline', () => {
    const page = readFileSync(join(consoleDir, 'index.html'), 'utf8');
    const scripts = [...page.matchAll(/<script\b([^>]*)>/g)].map(([, attributes]) => attributes ?? '');
    assert.ok(scripts.length > 0);
    for (const attributes of scripts) assert.match(attributes, /\ssrc="\/console\/assets\/[^"/]+\.js"/);
    assert.doesNotMatch(page, /<style|\sstyle=|https?:\/\//);
    const assets = readdirSync(join(consoleDir, 'assets'));
    for (const asset of assets) {
      // Nothing the page loads names another host (a font, an image, a CDN).
      assert.doesNotMatch(
        readFileSync(join(consoleDir, 'assets', asset), 'utf8'),
        /(?:src|href|url)\(?\s*=?\s*["']?https?:\/\//,
      );
    }
  });

  test('when an asset is asked then it comes cached for good; a missing one or a path out of the folder is a 404', async () => {
    const script = readdirSync(join(consoleDir, 'assets')).find((name) => name.endsWith('.js'));
    const reply = await call(service.url, 'GET', `/console/assets/${script}`);
    assert.equal(reply.status, 200);
    assert.match(String(reply.headers['content-type']), /javascript/);
    assert.match(String(reply.headers['cache-control']), /max-age=31536000, immutable/);
    assert.equal(reply.headers['x-content-type-options'], 'nosniff');

    for (const path of [
      '/console/assets/nothing-here.js',
      '/console/assets/%2e%2e/index.html',
      '/console/assets/..%2f..%2fpackage.json',
      '/console/app.js',
    ]) {
      const refused = await call(service.url, 'GET', path);
      assert.equal(refused.status, 404, path);
      assert.match(String(refused.headers['content-type']), /^application\/problem\+json/, path);
    }
    const raw = await rawExchange(
      service.url,
      'GET /console/assets/../../../package.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    assert.doesNotMatch(raw.body, /"workspaces"/);
    assert.notEqual(raw.status, 200);
  });

  test('when /console is asked with another method then a problem, never a page or a 500', async () => {
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const reply = await call(service.url, method, '/console/keys', { body: {} });
      assert.ok([404, 405].includes(reply.status), `${method}: ${reply.status}`);
      assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
    }
    const head = await call(service.url, 'HEAD', '/console');
    assert.equal(head.status, 200);
  });

  test('when the console is not built then /console says how to build it', async () => {
    const reply = await call(unbuilt.url, 'GET', '/console');
    assert.equal(reply.status, 503);
    assert.equal(reply.body.code, 'console_not_built');
    assert.match(reply.body.detail, /npm run build/);
  });
});
