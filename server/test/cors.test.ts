/**
 * OPTIONS on every path, `Allow` with HEAD wherever GET, and CORS for the web origins of
 * SVC_CORS_ORIGINS: over plain HTTP, and from pages of other origins in Chromium.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { routes } from '../../generated/routes.ts';
import { signUpDeveloper } from './support/accounts.ts';
import { chromiumMissing, launchChromium } from './support/browser.ts';
import { call, type Reply, rawExchange } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { serviceArgs } from './support/service-process.ts';

/** Each path of the contract with its methods, as generated/routes.ts gives them. */
const contractPaths = new Map<string, Set<string>>();
for (const route of Object.values(routes)) {
  const methods = contractPaths.get(route.openapiPath) ?? new Set<string>();
  methods.add(route.method.toUpperCase());
  contractPaths.set(route.openapiPath, methods);
}

/** A request path for a contract path: each parameter filled with something it could be. */
function concrete(openapiPath: string): string {
  return openapiPath.replace(/\{[^}]+\}/g, (name) =>
    name === '{device_id}' ? 'brand_a%3A1HGCM82633A004352' : '2a4b6c8d-0e1f-4a3b-8c5d-6e7f8a9b0c1d',
  );
}

const listOf = (header: unknown) =>
  String(header ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');

/** The one public path: the key set, which a page of any origin may read. */
const jwksPath = routes.getJwks.openapiPath;

function expectedAllow(methods: Set<string>): string[] {
  return [...methods, ...(methods.has('GET') ? ['HEAD'] : []), 'OPTIONS'].sort();
}

function assertNoCors(reply: Reply, what: string): void {
  const granted = Object.keys(reply.headers).filter((name) => name.startsWith('access-control-'));
  assert.deepEqual(granted, [], what);
}

describe('OPTIONS and Allow without SVC_CORS_ORIGINS', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.stop();
  });

  test('when any path of the contract but the JWKS is asked OPTIONS then 204 with Allow listing its methods, HEAD with GET, and no CORS grant', async () => {
    for (const [path, methods] of contractPaths) {
      if (path === jwksPath) continue;
      const reply = await call(service.url, 'OPTIONS', concrete(path), {
        headers: { origin: 'https://app.example.com', 'access-control-request-method': 'GET' },
      });
      assert.equal(reply.status, 204, path);
      assert.deepEqual(listOf(reply.headers.allow).sort(), expectedAllow(methods), path);
      assert.equal(reply.body, '', path);
      assert.equal(reply.headers['content-type'], undefined, path);
      assertNoCors(reply, path);
      assert.equal(reply.headers.vary, undefined, `${path}: nothing differs by Origin`);
    }
  });

  test('when /openapi.json or OPTIONS * is asked OPTIONS then 204 with Allow too', async () => {
    const contract = await call(service.url, 'OPTIONS', '/openapi.json');
    assert.equal(contract.status, 204);
    assert.deepEqual(listOf(contract.headers.allow).sort(), ['GET', 'HEAD', 'OPTIONS']);
    const { host } = new URL(service.url);
    const server = await rawExchange(
      service.url,
      `OPTIONS * HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(server.status, 204);
    const every = new Set([...contractPaths.values()].flatMap((methods) => [...methods]));
    assert.deepEqual(listOf(server.headers.allow).sort(), expectedAllow(every));
  });

  test('when a path is asked a method it does not take then 405 with the same Allow, HEAD included', async () => {
    for (const [path, methods] of contractPaths) {
      const other = ['DELETE', 'PATCH', 'PUT', 'POST'].find((method) => !methods.has(method)) ?? 'PATCH';
      const reply = await call(service.url, other, concrete(path));
      assert.equal(reply.status, 405, `${other} ${path}`);
      assert.equal(reply.body.code, 'method_not_allowed');
      assert.deepEqual(listOf(reply.headers.allow).sort(), expectedAllow(methods), path);
    }
  });

  test('when a GET route is asked with HEAD then it answers as GET would, without a body', async () => {
    const developer = await signUpDeveloper(service.url);
    const head = await call(service.url, 'HEAD', '/api/v1/dev/me', { token: developer.token });
    assert.equal(head.status, 200);
    assert.match(String(head.headers['content-type']), /^application\/json/);
    assert.equal(head.body, '');
    const anonymous = await call(service.url, 'HEAD', '/api/v1/mini-apps/mine');
    assert.equal(anonymous.status, 401);
  });

  test('when a browser page of another origin calls then nothing is granted to it', async () => {
    const reply = await call(service.url, 'GET', '/healthz', {
      headers: { origin: 'https://app.example.com' },
    });
    assert.equal(reply.status, 200);
    assertNoCors(reply, 'no origin is listed');
  });

  test('when a page of any origin asks for the JWKS then every answer, a refusal too, grants it to all, and so does the preflight', async () => {
    for (const origin of ['https://app.example.com', 'null', undefined]) {
      const headers: Record<string, string> = origin === undefined ? {} : { origin };
      const keys = await call(service.url, 'GET', jwksPath, { headers });
      assert.equal(keys.status, 200);
      assert.ok(Array.isArray(keys.body.keys));
      assert.equal(keys.headers['access-control-allow-origin'], '*', String(origin));
      assert.equal(keys.headers['access-control-allow-credentials'], undefined);
      const refused = await call(service.url, 'GET', `${jwksPath}?kid=x`, { headers });
      assert.equal(refused.status, 400, 'no query parameter is taken');
      assert.equal(refused.headers['access-control-allow-origin'], '*');
    }
    const preflight = await call(service.url, 'OPTIONS', jwksPath, {
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'cache-control',
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers['access-control-allow-origin'], '*');
    assert.deepEqual(listOf(preflight.headers['access-control-allow-methods']).sort(), ['GET', 'HEAD']);
    assert.equal(preflight.headers['access-control-allow-headers'], '*');
    assert.equal(preflight.headers['access-control-max-age'], '600');
    assert.deepEqual(listOf(preflight.headers.allow).sort(), ['GET', 'HEAD', 'OPTIONS']);
    // The grant is the key set's alone: a path next to it grants nothing.
    assertNoCors(
      await call(service.url, 'GET', '/healthz', { headers: { origin: 'https://app.example.com' } }),
      '/healthz',
    );
  });
});

describe('CORS with SVC_CORS_ORIGINS', () => {
  const origin = 'https://app.example.com';
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ SVC_CORS_ORIGINS: `${origin}, http://localhost:5173` });
  });
  afterAll(async () => {
    await service.stop();
  });

  test('when a listed origin sends a preflight then each path grants its methods, the headers the contract takes, for 10 minutes', async () => {
    for (const [path, methods] of contractPaths) {
      if (path === jwksPath) continue; // granted to every origin: above
      const reply = await call(service.url, 'OPTIONS', concrete(path), {
        headers: {
          origin,
          'access-control-request-method': [...methods][0] ?? 'GET',
          'access-control-request-headers': 'authorization,content-type,idempotency-key',
        },
      });
      assert.equal(reply.status, 204, path);
      assert.equal(reply.headers['access-control-allow-origin'], origin, path);
      assert.ok(listOf(reply.headers.vary).includes('Origin'), path);
      const granted = expectedAllow(methods).filter((method) => method !== 'OPTIONS');
      assert.deepEqual(listOf(reply.headers['access-control-allow-methods']).sort(), granted, path);
      assert.deepEqual(listOf(reply.headers['access-control-allow-headers']).sort(), [
        'Authorization',
        'Content-Type',
        'Idempotency-Key',
      ]);
      assert.equal(reply.headers['access-control-max-age'], '600');
      assert.deepEqual(listOf(reply.headers.allow).sort(), expectedAllow(methods), path);
      assert.equal(reply.headers['access-control-allow-credentials'], undefined, 'tokens are no cookies');
    }
  });

  test('when an origin that is not listed sends a preflight then 204 with Allow and no grant', async () => {
    for (const other of [
      'https://evil.example.com',
      'http://app.example.com',
      'https://app.example.com:8443',
      'null',
    ]) {
      const reply = await call(service.url, 'OPTIONS', '/api/v1/dev/me', {
        headers: { origin: other, 'access-control-request-method': 'GET' },
      });
      assert.equal(reply.status, 204, other);
      assert.deepEqual(listOf(reply.headers.allow).sort(), ['GET', 'HEAD', 'OPTIONS']);
      assertNoCors(reply, other);
      assert.ok(listOf(reply.headers.vary).includes('Origin'), 'caches keep origins apart');
    }
  });

  test('when a listed origin calls then the answer, a refusal too, is granted to it with the headers it may read', async () => {
    const developer = await signUpDeveloper(service.url);
    const answers = [
      await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token, headers: { origin } }),
      await call(service.url, 'GET', '/api/v1/dev/me', { headers: { origin } }),
      await call(service.url, 'DELETE', '/api/v1/dev/me', { token: developer.token, headers: { origin } }),
    ];
    assert.deepEqual(
      answers.map((reply) => reply.status),
      [200, 401, 405],
    );
    for (const reply of answers) {
      assert.equal(reply.headers['access-control-allow-origin'], origin);
      assert.ok(listOf(reply.headers.vary).includes('Origin'));
      const exposed = listOf(reply.headers['access-control-expose-headers']);
      for (const name of ['Idempotent-Replayed', 'Retry-After', 'WWW-Authenticate', 'X-Request-Id']) {
        assert.ok(exposed.includes(name), `${name} in ${exposed}`);
      }
      assert.ok(!exposed.some((name) => /^access-control-/i.test(name)), `${exposed}: no grant is exposed`);
    }
  });

  test('when an origin that is not listed calls then the answer grants it nothing', async () => {
    const reply = await call(service.url, 'GET', '/healthz', {
      headers: { origin: 'https://evil.example.com' },
    });
    assert.equal(reply.status, 200);
    assertNoCors(reply, 'unlisted origin');
  });
});

describe('SVC_CORS_ORIGINS at start', () => {
  // Each wrong form's message: config.test.ts.
  test('when one of its origins is not one then the service refuses to start with one line naming it', () => {
    // Embedded, whatever the suite runs on: only the origins are wrong.
    const { DATABASE_URL: _embedded, ...inherited } = process.env;
    const run = spawnSync(process.execPath, serviceArgs('--check'), {
      env: { ...inherited, SVC_CORS_ORIGINS: 'https://a.example.com,ftp://b.example.com' },
      encoding: 'utf8',
    });
    assert.equal(run.status, 2, run.stderr);
    assert.equal(
      run.stderr,
      'svc: SVC_CORS_ORIGINS must be web origins separated by commas, such as https://app.example.com,http://localhost:5173 (scheme, host and port, no path); "ftp://b.example.com" is not one\n',
    );
  });
});

const missing = chromiumMissing();

describe.skipIf(missing)(`CORS in a browser${missing ? ` (${missing})` : ''}`, () => {
  let pages: Server;
  let pagePort: number;
  let service: TestService;
  let browser: Browser;

  beforeAll(async () => {
    // The integrator's web app: an empty page on another port of this machine.
    pages = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'),
    );
    await new Promise<void>((resolve) => pages.listen(0, '127.0.0.1', resolve));
    pagePort = (pages.address() as AddressInfo).port;
    // Listed as 127.0.0.1; the same page reached as localhost is another, unlisted origin.
    service = await startTestService({ SVC_CORS_ORIGINS: `http://127.0.0.1:${pagePort}` });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    pages?.close();
  });

  /** Runs `fetch` calls in a page of `pageOrigin` against the service; what a script there sees. */
  async function fromPage(pageOrigin: string, token: string) {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${pageOrigin}/`);
    const seen = await page.evaluate(
      async ({ api, token }) => {
        const attempt = async (path: string, init: RequestInit) => {
          try {
            const reply = await fetch(`${api}${path}`, init);
            return {
              status: reply.status,
              body: await reply.json(),
              replayed: reply.headers.get('idempotent-replayed'),
              challenge: reply.headers.get('www-authenticate'),
            };
          } catch (error) {
            return { blocked: String(error) };
          }
        };
        const submit = {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'idempotency-key': 'browser-key-1',
          },
          body: JSON.stringify({ upload_id: '2a4b6c8d-0e1f-4a3b-8c5d-6e7f8a9b0c1d' }),
        };
        return {
          me: await attempt('/api/v1/dev/me', { headers: { authorization: `Bearer ${token}` } }),
          anonymous: await attempt('/api/v1/dev/me', {}),
          first: await attempt('/api/v1/mini-apps/submit', submit),
          again: await attempt('/api/v1/mini-apps/submit', submit),
        };
      },
      { api: service.url, token },
    );
    await context.close();
    return seen;
  }

  test('when a page of the listed origin calls with a token, JSON and an Idempotency-Key then it reads the answers and their headers', async () => {
    const developer = await signUpDeveloper(service.url);
    const seen = await fromPage(`http://127.0.0.1:${pagePort}`, developer.token);
    assert.equal((seen.me as { status: number }).status, 200, JSON.stringify(seen.me));
    assert.equal((seen.me as { body: { account: { email: string } } }).body.account.email, developer.email);
    assert.deepEqual(
      [(seen.anonymous as { status: number }).status, (seen.anonymous as { challenge: string }).challenge],
      [401, 'Bearer'],
    );
    assert.equal((seen.first as { status: number }).status, 404, JSON.stringify(seen.first));
    assert.equal((seen.first as { replayed: string | null }).replayed, null);
    assert.equal((seen.again as { status: number }).status, 404);
    assert.equal((seen.again as { replayed: string | null }).replayed, 'true');
  });

  test('when a page of an origin that is not listed calls then the browser keeps every answer from it', async () => {
    const developer = await signUpDeveloper(service.url);
    const seen = await fromPage(`http://localhost:${pagePort}`, developer.token);
    for (const [what, outcome] of Object.entries(seen)) {
      assert.match(String((outcome as { blocked?: string }).blocked), /TypeError: Failed to fetch/, what);
    }
  });

  test('when a page of an origin that is not listed fetches the JWKS, plainly or with a header that needs a preflight, then it reads the keys', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`http://localhost:${pagePort}/`);
    const seen = await page.evaluate(async (url) => {
      const kids = async (init: RequestInit) => {
        try {
          const reply = await fetch(url, init);
          return ((await reply.json()) as { keys: { kid: string }[] }).keys.map((key) => key.kid).length;
        } catch (error) {
          return String(error);
        }
      };
      // As jose asks for it; and as a page that bypasses its own cache would.
      return [
        await kids({ headers: { accept: 'application/json, application/jwk-set+json' } }),
        await kids({ headers: { 'cache-control': 'no-cache' } }),
      ];
    }, `${service.url}${jwksPath}`);
    await context.close();
    assert.deepEqual(
      seen,
      [2, 2],
      'the current and the next key, read from an origin SVC_CORS_ORIGINS does not list',
    );
  });
});
