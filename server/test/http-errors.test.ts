import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiagnosticSeverity, Parser } from '@asyncapi/parser';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { buildDocs } from '../../scripts/build-docs.ts';
import { release } from '../src/release.ts';
import { signUpDeveloper } from './support/accounts.ts';
import { call, type RawReply, rawExchange } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

describe('the HTTP surface', () => {
  let service: TestService;
  let url: string;
  const docsDir = mkdtempSync(join(tmpdir(), 'svc-docs-'));

  beforeAll(async () => {
    buildDocs(docsDir);
    service = await startTestService({}, { docsDir });
    url = service.url;
  });

  afterAll(async () => {
    await service.stop();
    rmSync(docsDir, { recursive: true, force: true });
  });

  function assertProblem(
    reply: { status: number; headers: Record<string, unknown>; body: unknown },
    status: number,
    code: string,
  ) {
    assert.equal(reply.status, status, JSON.stringify(reply.body));
    assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
    const problem = reply.body as Record<string, unknown>;
    assert.equal(problem.status, status);
    assert.equal(problem.code, code);
    for (const member of ['type', 'title', 'detail']) assert.equal(typeof problem[member], 'string', member);
    assert.doesNotMatch(JSON.stringify(problem), /at .*\.(ts|js):\d+/, 'no stack trace');
  }

  test('when the route does not exist then 404 problem+json, not an HTML page', async () => {
    assertProblem(await call(url, 'GET', '/api/v1/nothing-here'), 404, 'not_found');
    assertProblem(await call(url, 'GET', '/favicon.ico'), 404, 'not_found');
  });

  test('when the JSON is malformed then 400 malformed_json', async () => {
    assertProblem(
      await call(url, 'POST', '/api/v1/auth/challenges', { raw: '{"public_key": ' }),
      400,
      'malformed_json',
    );
  });

  test('when the body is over the limit then 413 payload_too_large', async () => {
    const big = JSON.stringify({ public_key: 'x'.repeat(service.config.jsonLimitBytes + 10) });
    assertProblem(await call(url, 'POST', '/api/v1/auth/challenges', { raw: big }), 413, 'payload_too_large');
  });

  test('when a field is missing or mistyped then 400 validation_failed naming the field', async () => {
    const missing = await call(url, 'POST', '/api/v1/auth/tokens', { body: { signature: 'x' } });
    assertProblem(missing, 400, 'validation_failed');
    assert.deepEqual(
      missing.body.errors.map((e: { path: string }) => e.path),
      ['/body/challenge_id'],
    );
    const mistyped = await call(url, 'POST', '/api/v1/account/signup', {
      body: { email: 'ada@example.com', password: 12, name: 'Ada' },
    });
    assertProblem(mistyped, 400, 'validation_failed');
    assert.match(mistyped.body.detail, /\/body\/password/);
  });

  test('when a JSON operation gets another media type then 415, as the contract documents', async () => {
    const reply = await call(url, 'POST', '/api/v1/auth/challenges', {
      raw: 'public_key=ssh-ed25519',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertProblem(reply, 415, 'unsupported_media_type');
    assert.match(reply.body.detail, /send the body as JSON, with Content-Type: application\/json/);
    const untyped = await call(url, 'POST', '/api/v1/auth/challenges', {
      raw: 'public_key=ssh-ed25519',
      headers: { 'content-type': '' },
    });
    assertProblem(untyped, 415, 'unsupported_media_type');
    assert.doesNotMatch(untyped.body.detail, /undefined/);
  });

  test('when a body names a brand that does not exist then 422 unknown_brand, as in a device id', async () => {
    const admin = await signUpDeveloper(url);
    const reply = await call(url, 'POST', '/api/v1/cars/brand_a%3A1HGCM82633A004352/pair', {
      token: admin.token,
      body: { brand: 'brand_x' },
    });
    assertProblem(reply, 422, 'unknown_brand');
    assert.match(reply.body.detail, /\/body\/brand names no known brand: use one of brand_a, brand_b/);
  });

  test('when a query parameter is unknown then 400 naming it', async () => {
    const reply = await call(url, 'GET', '/healthz?verbose=1');
    assertProblem(reply, 400, 'validation_failed');
    assert.match(reply.body.detail, /verbose/);
  });

  test('when the method is not offered on a path then 405', async () => {
    assertProblem(await call(url, 'DELETE', '/api/v1/dev/me'), 405, 'method_not_allowed');
  });

  test('when an svc tool older than 5.6.0 calls then 426 says to run svc upgrade', async () => {
    for (const agent of ['svc-cli/5.5.9', 'svc-cli/4.12.0', 'svc-cli/5.5.10 node/20']) {
      const reply = await call(url, 'GET', '/api/v1/dev/me', { headers: { 'user-agent': agent } });
      assertProblem(reply, 426, 'upgrade_required');
      assert.match(reply.body.detail, /svc upgrade/);
    }
    for (const agent of ['svc-cli/5.6.0', 'svc-cli/5.10.1', 'svc-cli/6.0.0', 'curl/8.0']) {
      const reply = await call(url, 'GET', '/healthz', { headers: { 'user-agent': agent } });
      assert.equal(reply.status, 200, agent);
    }
  });

  test('when a device id in a vehicle path is malformed then 422 with its code, before anything else', async () => {
    // Vehicle routes need a credential first; with one, a malformed id is 422, never 400 or 500.
    const developer = await signUpDeveloper(url);
    const cases: [string, string][] = [
      ['1HGCM82633A004352', 'missing_prefix'],
      ['brand_x%3A1HGCM82633A004352', 'unknown_brand'],
      ['brand_a%3A1HGCM82633A00435', 'invalid_native_id'],
      ['BRAND_A%3A1HGCM82633A004352', 'unknown_brand'],
    ];
    for (const [deviceId, code] of cases) {
      const reply = await call(url, 'GET', `/api/v1/cars/${deviceId}/status`, { token: developer.token });
      assertProblem(reply, 422, code);
    }
    const mismatch = await call(url, 'POST', '/api/v1/cars/brand_a%3A1HGCM82633A004352/pair', {
      token: developer.token,
      body: { brand: 'brand_b' },
    });
    assertProblem(mismatch, 422, 'brand_mismatch');
    // Admin operations check the caller before the id (admin-operations.test.ts walks them all).
    const query = await call(url, 'GET', '/api/v1/admin/cars?device_id=brand_a', { token: developer.token });
    assertProblem(query, 403, 'admins_only');
  });

  test('when a secured operation is called without a credential then 401 comes before any body check', async () => {
    const reply = await call(url, 'POST', '/api/v1/mini-apps/submit', { body: { nonsense: 1 } });
    assertProblem(reply, 401, 'unauthorized');
  });

  test('when a load balancer asks with HEAD then a GET route answers, without a body', async () => {
    const reply = await call(url, 'HEAD', '/healthz');
    assert.equal(reply.status, 200);
    assert.equal(reply.body, '');
  });

  test('when liveness and readiness are asked then ok and ready', async () => {
    assert.deepEqual((await call(url, 'GET', '/healthz')).body, { status: 'ok', version: release });
    assert.deepEqual((await call(url, 'GET', '/readyz')).body, {
      status: 'ready',
      checks: { store: 'ok', key_value_store: 'ok', mqtt_bridge: 'ok' },
    });
  });

  test('when the contract is asked for then /openapi.json is the bundled contract', async () => {
    const reply = await call(url, 'GET', '/openapi.json');
    assert.equal(reply.status, 200);
    assert.equal(reply.body.openapi, '3.1.0');
    assert.ok(reply.body.paths['/api/v1/cars/{device_id}/status']);
  });

  test('when the MQTT contract is asked for then /asyncapi.yaml and /asyncapi.json are one self-contained AsyncAPI document', async () => {
    const yaml = await call(url, 'GET', '/asyncapi.yaml');
    assert.equal(yaml.status, 200);
    assert.match(String(yaml.headers['content-type']), /^application\/yaml/);
    const { document, diagnostics } = await new Parser().parse(yaml.body);
    assert.ok(document, JSON.stringify(diagnostics));
    assert.deepEqual(
      diagnostics.filter((d) => d.severity <= DiagnosticSeverity.Warning),
      [],
    );
    assert.equal(document.version(), '3.0.0');
    assert.ok(document.channels().get('carCommand'), 'the commands of cars are in it');
    const parsed = parseYaml(yaml.body);
    // Every reference points into the document itself: nothing to fetch from elsewhere.
    const refs = JSON.stringify(parsed).match(/"\$ref":"[^"]*"/g) ?? [];
    assert.ok(refs.length > 10);
    assert.deepEqual(
      refs.filter((ref) => !ref.startsWith('"$ref":"#/')),
      [],
    );

    const json = await call(url, 'GET', '/asyncapi.json');
    assert.equal(json.status, 200);
    assert.match(String(json.headers['content-type']), /^application\/json/);
    assert.deepEqual(json.body, parsed, 'the same document');
  });

  test('when /docs is read then it links the HTTP and the MQTT contracts, and each link answers', async () => {
    const page = await call(url, 'GET', '/docs');
    for (const path of ['/openapi.json', '/asyncapi.yaml', '/asyncapi.json']) {
      assert.ok(page.body.includes(`href="${path}"`), `the page links ${path}`);
      assert.equal((await call(url, 'GET', path)).status, 200, path);
    }
  });

  test('when /docs is opened then the reference page and its script come from this service, no CDN', async () => {
    const page = await call(url, 'GET', '/docs');
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body, /svc API/);
    assert.match(page.body, /\/docs\/redoc\.standalone\.js/);
    assert.doesNotMatch(
      page.body,
      /<script[^>]+src="https?:|import .* from "https?:|href="https?:[^"]+\.(js|css)"/,
    );
    const script = await call(url, 'GET', '/docs/redoc.standalone.js');
    assert.equal(script.status, 200);
    assert.ok(String(script.body).length > 100_000);
  });

  test('when /docs and /openapi.json are read then they name the URL this service runs on, not the default port', async () => {
    assert.notEqual(url, 'http://127.0.0.1:8080');
    const page = await call(url, 'GET', '/docs');
    assert.ok(page.body.includes(url), 'the page names this service');
    assert.ok(!page.body.includes('http://127.0.0.1:8080'), 'and not the default address');
    const contract = await call(url, 'GET', '/openapi.json');
    assert.equal(contract.body.servers[0].url, url);
  });

  function assertRawProblem(reply: RawReply, status: number, code: string) {
    assert.equal(reply.status, status, reply.body);
    assert.match(reply.headers['content-type'] ?? '', /^application\/problem\+json/);
    const problem = JSON.parse(reply.body);
    assert.equal(problem.status, status);
    assert.equal(problem.code, code);
    assert.equal(typeof problem.detail, 'string');
  }

  test("when Node's own HTTP parser refuses a request then the answer is still a problem+json", async () => {
    assertRawProblem(await rawExchange(url, 'NONSENSE\r\n\r\n'), 400, 'malformed_request');
    assertRawProblem(
      await rawExchange(url, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
      431,
      'header_too_large',
    );
    assertRawProblem(
      await rawExchange(
        url,
        `POST /api/v1/auth/challenges HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;${'e'.repeat(20_000)}\r\n`,
      ),
      413,
      'payload_too_large',
    );
    assertRawProblem(
      await rawExchange(
        url,
        'GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n',
      ),
      417,
      'expectation_failed',
    );
  });

  test("when a problem is about a URL with a query then its instance is the path only, never the query's secrets", async () => {
    const upload = await call(
      url,
      'PUT',
      '/uploads/00000000-0000-4000-8000-000000000000?expires=1&signature=SECRETSIGNATURE&access_token=SECRETTOKEN',
      { raw: 'x', headers: { 'content-type': 'application/gzip' } },
    );
    assert.ok(upload.status >= 400, String(upload.status));
    assert.equal(upload.body.instance, '/uploads/00000000-0000-4000-8000-000000000000');
    assert.doesNotMatch(JSON.stringify(upload.body), /SECRET/);
    const unknown = await call(url, 'GET', '/nothing?access_token=SECRETTOKEN');
    assert.equal(unknown.body.instance, '/nothing');
  });

  test('when the request target is in absolute form then it names the same resource as its path', async () => {
    const developer = await signUpDeveloper(url);
    const reply = await rawExchange(
      url,
      `GET ${url}/api/v1/dev/me HTTP/1.1\r\nHost: ${new URL(url).host}\r\n` +
        `Authorization: Bearer ${developer.token}\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(reply.status, 200, reply.body);
    assert.equal(JSON.parse(reply.body).account.email, developer.email);
  });

  test('when a GET carries If-None-Match: * then it is answered in full, never an empty 304', async () => {
    const developer = await signUpDeveloper(url);
    for (const header of ['*', 'W/"anything"']) {
      const reply = await call(url, 'GET', '/api/v1/dev/me', {
        token: developer.token,
        headers: { 'if-none-match': header, 'if-modified-since': new Date().toUTCString() },
      });
      assert.equal(reply.status, 200, header);
      assert.equal(reply.body.account.email, developer.email);
    }
  });

  test('when the JWKS is asked for then it holds two ES256 public keys (current and next) and nothing private', async () => {
    const reply = await call(url, 'GET', '/.well-known/jwks.json');
    assert.equal(reply.status, 200);
    assert.equal(reply.body.keys.length, 2);
    for (const key of reply.body.keys) {
      assert.equal(key.alg, 'ES256');
      assert.equal(key.d, undefined);
    }
  });
});
