/**
 * `svc dev` over HTTP, as a browser and a backend see it: two origins on 127.0.0.1, the app's
 * pages under the car's network rules, only what `svc publish` would pack, identity tokens a
 * backend verifies with the SDK against the dev JWKS, and never a call to the service.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyIdentityToken } from '@svc/sdk';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { freePort } from '../../client/test/support/pages.ts';
import { devIssuer, devKeyFile, loadDevSigningKey } from '../src/dev/dev-key.ts';
import { type DevServer, startDevServer } from '../src/dev/dev-server.ts';
import { svcBinary, userEnv } from './support/svc.ts';

const helloCar = join(import.meta.dirname, '../../examples/hello-car');
const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

function scratch(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** hello-car copied, with what publish leaves out beside it. */
function appFolder(): string {
  const dir = join(scratch('svc-dev-app-'), 'hello-car');
  cpSync(helloCar, dir, { recursive: true });
  writeFileSync(join(dir, '.svcignore'), 'notes/\n*.secret\n');
  mkdirSync(join(dir, 'notes'));
  writeFileSync(join(dir, 'notes', 'todo.txt'), 'private notes\n');
  writeFileSync(join(dir, 'api.secret'), 'hunter2\n');
  mkdirSync(join(dir, 'node_modules', 'left-pad'), { recursive: true });
  writeFileSync(join(dir, 'node_modules', 'left-pad', 'index.js'), 'export {}\n');
  return dir;
}

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('svc dev, the dev-server', () => {
  let dir: string;
  let home: string;
  let server: DevServer;
  const logged: string[] = [];
  const post = (url: string, body: unknown, origin?: string) =>
    fetch(url, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: origin ? { origin } : {},
    });

  beforeAll(async () => {
    dir = appFolder();
    home = scratch('svc-dev-home-');
    server = await startDevServer({
      dir,
      port: 0,
      deviceId: 'brand_a:1HGCM82633A004352',
      locale: 'en-GB',
      allowedOrigins: ['http://127.0.0.1:8787'],
      key: loadDevSigningKey(home).key,
      hostVersion: 'svc-dev/test',
      log: (line) => logged.push(line),
    });
  });
  afterAll(() => server?.close());

  const hostOrigin = () => new URL(server.hostUrl).origin;

  test('when started then the host page and the app are on two origins of 127.0.0.1', async () => {
    const host = new URL(server.hostUrl);
    const app = new URL(server.appUrl);
    assert.equal(host.hostname, '127.0.0.1');
    assert.equal(app.hostname, '127.0.0.1');
    assert.notEqual(host.origin, app.origin);
    const page = await fetch(server.hostUrl);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<iframe id="app"/);
    const bridge = await fetch(new URL('/_svc/host.js', server.hostUrl));
    assert.equal(bridge.status, 200);
    assert.match(bridge.headers.get('content-type') ?? '', /^text\/javascript/);
  });

  test("when the app's entry is asked for then it comes under connect-src 'self', the manifest's network and this session's origins, nothing broader", async () => {
    const page = await fetch(server.appUrl);
    assert.equal(page.status, 200);
    assert.equal(await page.text(), readFileSync(join(dir, 'index.html'), 'utf8'));
    const policy = page.headers.get('content-security-policy') ?? '';
    const directives = new Map(
      policy.split(';').map((part) => {
        const [name, ...values] = part.trim().split(/\s+/);
        return [name, values];
      }),
    );
    assert.deepEqual(directives.get('connect-src'), [
      "'self'",
      'https://api.hello-car.example.com',
      'http://127.0.0.1:8787',
    ]);
    assert.deepEqual(directives.get('frame-ancestors'), [hostOrigin()]);
    assert.deepEqual(directives.get('report-uri'), ['/_svc/csp-report']);
    assert.equal(directives.has('default-src'), false);
  });

  test("when the app asks for /_svc/sdk.js then it gets the runtime in its own origin, as a car's host serves it", async () => {
    const runtime = await fetch(new URL('/_svc/sdk.js', server.appUrl));
    assert.equal(runtime.status, 200);
    assert.match(runtime.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.match(await runtime.text(), /connectHost/);
  });

  test('when a file svc publish would leave out is asked for then it is not served, and the terminal says why', async () => {
    for (const path of ['notes/todo.txt', 'api.secret', 'node_modules/left-pad/index.js']) {
      const response = await fetch(new URL(path, server.appUrl));
      assert.equal(response.status, 404, path);
      const body = await response.text();
      assert.doesNotMatch(body, /private notes|hunter2/);
      assert.match(body, /svc publish would not ship it/, path);
    }
    assert.ok(logged.some((line) => line.startsWith('api.secret is not served:')));
    for (const path of ['../dev-server.test.ts', '%2e%2e/%2e%2e/etc/passwd', '.svcignore/../api.secret']) {
      const response = await fetch(`${server.appUrl}${path}`);
      assert.notEqual(response.status, 200, path);
    }
  });

  test('when a request names another host (DNS rebinding) then neither origin answers', async () => {
    for (const url of [new URL('/_svc/state', server.hostUrl), new URL('/', server.appUrl)]) {
      const { request } = await import('node:http');
      const status = await new Promise<number>((resolve, reject) => {
        request(url, { headers: { host: `evil.example.com:${url.port}` } }, (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        })
          .on('error', reject)
          .end();
      });
      assert.equal(status, 421);
    }
  });

  test('when the dev-server is asked for as localhost then it sends the browser to 127.0.0.1, the name it answers as', async () => {
    const { request } = await import('node:http');
    const url = new URL('/?x=1', server.hostUrl);
    const answer = await new Promise<{ status: number; location?: string }>((resolve, reject) => {
      request(url, { headers: { host: `localhost:${url.port}` } }, (response) => {
        response.resume();
        resolve({ status: response.statusCode ?? 0, location: response.headers.location });
      })
        .on('error', reject)
        .end();
    });
    assert.deepEqual(answer, { status: 307, location: `${new URL(server.hostUrl).origin}/?x=1` });
  });

  test('when a path with control characters is asked for then the answer shows none of them', async () => {
    const response = await fetch(`${server.appUrl}app.js%00%1b%5b2J.html`);
    assert.equal(response.status, 404);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not be there
    assert.doesNotMatch(await response.text(), /[\u0000-\u0008\u000b-\u001f]/);
  });

  test("when the host page asks for an identity token then the app's backend verifies it with the SDK against the dev JWKS", async () => {
    const issued = await post(new URL('/_svc/identity-token', server.hostUrl).href, {}, hostOrigin());
    assert.equal(issued.status, 200);
    const { token, expiresAt } = (await issued.json()) as { token: string; expiresAt: string };
    const identity = await verifyIdentityToken(token, {
      jwksUrl: new URL('/.well-known/jwks.json', server.hostUrl).href,
      audience: 'com.example.hello-car',
      issuer: devIssuer,
    });
    assert.equal(identity.deviceId, 'brand_a:1HGCM82633A004352');
    assert.equal(identity.brand, 'brand_a');
    assert.equal(identity.locale, 'en-GB');
    assert.equal(identity.appId, 'com.example.hello-car');
    assert.equal(identity.expiresAt, expiresAt);
    const lifetime = Date.parse(expiresAt) - Date.now();
    assert.ok(lifetime > 9 * 60_000 && lifetime <= 10 * 60_000, `lives ${lifetime} ms`);
  });

  test("when hello-car's backend runs against the dev-server as its README says then it greets the car of a dev token", async () => {
    // The README's backend, run as written: SVC_URL the dev-server, SVC_ISSUER its issuer.
    const readme = readFileSync(join(helloCar, 'README.md'), 'utf8');
    const code = /```js\n([\s\S]*?)```/.exec(readme.slice(readme.indexOf('## The backend')))?.[1];
    assert.ok(code);
    const devSection = readme.slice(readme.indexOf('## In development, with `svc dev`'));
    assert.match(devSection, /SVC_ISSUER=urn:svc:dev-server/);
    const backendDir = scratch('svc-dev-backend-');
    writeFileSync(join(backendDir, 'server.mjs'), code);
    symlinkSync(join(import.meta.dirname, '../../node_modules'), join(backendDir, 'node_modules'));
    const port = await freePort();
    const backend = spawn(process.execPath, [join(backendDir, 'server.mjs')], {
      env: {
        PATH: process.env.PATH,
        SVC_URL: new URL(server.hostUrl).origin,
        SVC_ISSUER: devIssuer,
        PORT: String(port),
      },
    });
    try {
      const url = `http://127.0.0.1:${port}/greeting?device_id=${encodeURIComponent('brand_b:fleet-7.north')}`;
      const issued = await post(
        new URL('/_svc/car', server.hostUrl).href,
        { deviceId: 'brand_b:fleet-7.north' },
        hostOrigin(),
      );
      assert.equal(issued.status, 200);
      const { token } = (await (
        await post(new URL('/_svc/identity-token', server.hostUrl).href, {}, hostOrigin())
      ).json()) as {
        token: string;
      };
      let answer: Response | undefined;
      for (let tries = 0; tries < 100 && !answer; tries++) {
        answer = await fetch(url, { headers: { authorization: `Bearer ${token}` } }).catch(async () => {
          await new Promise((resolve) => setTimeout(resolve, 50));
          return undefined;
        });
      }
      assert.equal(answer?.status, 200);
      assert.deepEqual(await answer?.json(), { greeting: 'Hello, brand_b driver!' });
    } finally {
      backend.kill();
    }
  });

  test('when a page of another origin asks for a token or changes the car then it is refused', async () => {
    for (const path of ['/_svc/identity-token', '/_svc/car']) {
      const url = new URL(path, server.hostUrl).href;
      assert.equal((await post(url, {}, 'https://evil.example.com')).status, 403);
      assert.equal((await post(url, {}, server.appUrl.slice(0, -1))).status, 403);
      assert.equal((await post(url, {})).status, 403);
    }
  });

  test('when the panel changes the car then its models follow, and a device id or locale the service would refuse is 422 naming the field', async () => {
    const url = new URL('/_svc/car', server.hostUrl).href;
    const changed = await post(
      url,
      { deviceId: 'brand_b:fleet-7.north', doorsLocked: false, latitude: 52.52, longitude: 13.405 },
      hostOrigin(),
    );
    assert.equal(changed.status, 200);
    const state = (await changed.json()) as { models: Record<string, Record<string, unknown>> };
    assert.equal(state.models.status?.deviceId, 'brand_b:fleet-7.north');
    assert.equal(state.models.status?.brand, 'brand_b');
    assert.deepEqual(state.models.status?.state, { ignition: false, doors_locked: false });
    assert.equal(state.models.location?.latitude, 52.52);
    assert.deepEqual(state.models.install?.installedApps, [
      { appId: 'com.example.hello-car', version: '1.0.0' },
    ]);
    assert.ok(logged.includes('the active car is now brand_b:fleet-7.north'));

    for (const [change, field] of [
      [{ deviceId: 'brand_x:1HGCM82633A004352' }, 'deviceId'],
      [{ deviceId: 'brand_a:NOTAVIN' }, 'deviceId'],
      [{ locale: 'not a locale!' }, 'locale'],
      [{ latitude: 91 }, 'latitude'],
      [{ online: 'yes' }, 'online'],
      [{ wheels: 4 }, 'wheels'],
    ] as const) {
      const refused = await post(url, change, hostOrigin());
      assert.equal(refused.status, 422, JSON.stringify(change));
      assert.equal(((await refused.json()) as { field: string }).field, field);
    }
    const unchanged = (await (await fetch(new URL('/_svc/state', server.hostUrl))).json()) as {
      car: { deviceId: string };
    };
    assert.equal(unchanged.car.deviceId, 'brand_b:fleet-7.north');
    assert.equal((await post(url, 'x'.repeat(70_000), hostOrigin())).status, 413);
  });

  test('when the browser reports a blocked connection then the terminal says which origin, from where, and what to add, in printable text', async () => {
    const report = (blocked: string, file = `${server.appUrl}app.js`) =>
      fetch(new URL('/_svc/csp-report', server.appUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/csp-report' },
        body: JSON.stringify({
          'csp-report': {
            'blocked-uri': blocked,
            'effective-directive': 'connect-src',
            'source-file': file,
            'line-number': 17,
          },
        }),
      });
    assert.equal((await report('https://tracker.example.net/collect?id=1')).status, 204);
    assert.ok(
      logged.includes(
        'blocked a connection to https://tracker.example.net from app.js:17 (connect-src): add "https://tracker.example.net" to "network" in manifest.json, or the car blocks it too',
      ),
      logged.join('\n'),
    );
    await report('http://127.0.0.1:9999/x');
    assert.ok(logged.some((line) => line.includes('run svc dev --allow-origin http://127.0.0.1:9999')));
    // A hostile page cannot write to the terminal: no escape sequence gets through.
    await report('https://a.example.com', '\u001b[2J\u001b]0;pwned\u0007evil.js');
    assert.match(logged.at(-1) ?? '', /from \[2J\]0;pwnedevil\.js:17/);
    await report('https://b.example.com', `${server.appUrl}\u001b[2Jevil.js`);
    assert.match(logged.at(-1) ?? '', /from %1B\[2Jevil\.js:17/);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not be there
    assert.doesNotMatch(logged.join('\n'), /[\u0000-\u0008\u000b-\u001f\u007f]/);
    assert.equal((await report('not a url')).status, 204);

    // A page of another site can POST text/plain without a preflight: such a "report" is refused.
    const said = logged.length;
    const forged = await fetch(new URL('/_svc/csp-report', server.appUrl), {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({
        'csp-report': { 'blocked-uri': 'https://evil.example', 'effective-directive': 'connect-src' },
      }),
    });
    assert.equal(forged.status, 415);
    assert.equal(logged.length, said);
  });

  test('when a file changes then the panel hears state and reload, and a broken manifest is reported until it is fixed', async () => {
    const events = await fetch(new URL('/_svc/events', server.hostUrl));
    const reader = events.body?.getReader();
    assert.ok(reader);
    let received = '';
    const reading = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        received += Buffer.from(value).toString('utf8');
      }
    })();
    await until('the first state', () => received.includes('event: state'));
    const manifestPath = join(dir, 'manifest.json');
    const manifest = readFileSync(manifestPath, 'utf8');
    writeFileSync(
      manifestPath,
      manifest.replace('"https://api.hello-car.example.com"', '"http://api.hello-car.example.com"'),
    );
    await until('a reload', () => received.includes('event: reload'));
    await until('the problem in the state', () => received.includes('network[0]'));
    assert.ok(logged.some((line) => line.includes('manifest.json: network[0]:')));
    assert.equal(server.folder().manifest, undefined);
    assert.equal((await fetch(server.appUrl)).status, 404);

    writeFileSync(manifestPath, manifest);
    await until('fixed', () => server.folder().manifest !== undefined);
    assert.ok(logged.includes('the app has no problems now'));
    assert.equal((await fetch(server.appUrl)).status, 200);
    await reader.cancel();
    await reading.catch(() => {});
  });
});

describe('svc dev, a car of a brand the manifest does not list', () => {
  test('when the car is of a brand the manifest does not list then the terminal and the panel warn, until the car or the manifest changes', async () => {
    const dir = appFolder();
    const manifestPath = join(dir, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    writeFileSync(manifestPath, JSON.stringify({ ...manifest, brands: ['brand_a', 'brand_b'] }));
    const logged: string[] = [];
    const server = await startDevServer({
      dir,
      port: 0,
      deviceId: 'brand_c:fleet-3.south',
      locale: 'en-GB',
      allowedOrigins: [],
      key: loadDevSigningKey(scratch('svc-dev-home-')).key,
      hostVersion: 'svc-dev/test',
      log: (line) => logged.push(line),
    });
    const hostOrigin = new URL(server.hostUrl).origin;
    const warningShown = async () =>
      (
        (await (await fetch(new URL('/_svc/state', server.hostUrl))).json()) as {
          brandWarning: string | null;
        }
      ).brandWarning;
    const changeCar = (deviceId: string) =>
      fetch(new URL('/_svc/car', server.hostUrl), {
        method: 'POST',
        body: JSON.stringify({ deviceId }),
        headers: { origin: hostOrigin },
      });
    try {
      const warning =
        'the car brand_c:fleet-3.south is a brand_c car, but manifest.json lists brands brand_a, brand_b only: the service would not install the app on it nor sign its identity tokens there (add "brand_c" to "brands" in manifest.json, or pick a car of a listed brand)';
      assert.deepEqual(logged, [`warning: ${warning}`]);
      assert.equal(await warningShown(), warning);

      assert.equal((await changeCar('brand_b:fleet-7.north')).status, 200);
      assert.equal(await warningShown(), null);
      assert.equal(logged.at(-1), 'the car brand_b:fleet-7.north is of a brand manifest.json lists');

      // The manifest is edited to drop brand_b: the same car is warned of again.
      writeFileSync(manifestPath, JSON.stringify({ ...manifest, brands: ['brand_a'] }));
      await until('the warning after the edit', () => logged.at(-1)?.startsWith('warning: ') === true);
      assert.match(
        logged.at(-1) ?? '',
        /brand_b:fleet-7\.north is a brand_b car, but manifest\.json lists brands brand_a only/,
      );
      assert.match((await warningShown()) ?? '', /is a brand_b car/);

      // No brands at all: the app is for every brand.
      writeFileSync(manifestPath, JSON.stringify({ ...manifest, brands: undefined }));
      await until(
        'the warning gone',
        () => logged.at(-1) === 'the car brand_b:fleet-7.north is of a brand manifest.json lists',
      );
      assert.equal(await warningShown(), null);
    } finally {
      await server.close();
    }
  });
});

describe('svc dev, watching the folder', () => {
  /** inotify watches this process holds (Linux), as the kernel lists them. */
  function inotifyWatches(): number {
    let count = 0;
    for (const fd of readdirSync('/proc/self/fdinfo')) {
      try {
        count += readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
          .split('\n')
          .filter((line) => line.startsWith('inotify wd:')).length;
      } catch {}
    }
    return count;
  }

  test.skipIf(process.platform !== 'linux')(
    'when the app has a node_modules of many folders then only the folders it packs are watched, and a folder added later is',
    async () => {
      const dir = appFolder();
      for (let i = 0; i < 200; i++)
        mkdirSync(join(dir, 'node_modules', `package-${i}`, 'lib'), { recursive: true });
      const before = inotifyWatches();
      const logged: string[] = [];
      const server = await startDevServer({
        dir,
        port: 0,
        deviceId: 'brand_a:1HGCM82633A004352',
        locale: 'en-GB',
        allowedOrigins: [],
        key: loadDevSigningKey(scratch('svc-dev-home-')).key,
        hostVersion: 'svc-dev/test',
        log: (line) => logged.push(line),
      });
      try {
        // The app's folder alone (notes/ is left out by .svcignore, node_modules always).
        assert.equal(inotifyWatches() - before, 1);
        mkdirSync(join(dir, 'images'));
        writeFileSync(join(dir, 'images', 'logo.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
        await until('the new file served', () => server.folder().files.has('images/logo.svg'));
        assert.equal(inotifyWatches() - before, 2);
        writeFileSync(join(dir, 'images', 'logo.svg'), '<svg xmlns="http://www.w3.org/2000/svg" width="1"/>');
        const served = await fetch(new URL('images/logo.svg', server.appUrl));
        assert.equal(served.headers.get('content-type'), 'image/svg+xml');
      } finally {
        await server.close();
      }
      assert.equal(inotifyWatches(), before);
    },
  );
});

describe('svc dev, the dev key', () => {
  test('when it is first needed then it is made readable by its owner only, and kept for the next start', () => {
    const home = scratch('svc-dev-key-');
    const first = loadDevSigningKey(home);
    assert.equal(first.replaced, undefined);
    assert.equal(statSync(devKeyFile(home)).mode & 0o777, 0o600);
    assert.equal(statSync(join(home, '.config', 'svc')).mode & 0o777, 0o700);
    const second = loadDevSigningKey(home);
    assert.equal(second.key.kid, first.key.kid);
    assert.equal(second.key.userId, first.key.userId);
    assert.deepEqual(second.key.publicJwk, first.key.publicJwk);
  });

  test('when the key file is readable by others then it is used, with a warning that says how to fix it', () => {
    const home = scratch('svc-dev-key-');
    const first = loadDevSigningKey(home);
    chmodSync(devKeyFile(home), 0o644);
    const loaded = loadDevSigningKey(home);
    assert.equal(loaded.key.kid, first.key.kid);
    assert.equal(
      loaded.warning,
      `${devKeyFile(home)} is readable by others (mode 644): run chmod 600 ${devKeyFile(home)}`,
    );
  });

  test('when the key file is damaged then a new key is made and the reason said', () => {
    const home = scratch('svc-dev-key-');
    mkdirSync(join(home, '.config', 'svc'), { recursive: true });
    writeFileSync(devKeyFile(home), '{"kid": "x"');
    const loaded = loadDevSigningKey(home);
    assert.match(loaded.replaced ?? '', /could not be read as a signing key .*made a new one/);
    assert.equal(loadDevSigningKey(home).key.kid, loaded.key.kid);
  });
});

describe('svc dev, the command', () => {
  let service: Server;
  let connections = 0;
  let busy: Server;

  beforeAll(async () => {
    // Where SVC_API_URL points: a listening socket that counts whoever connects.
    service = createServer((_request, response) => response.end('{}'));
    service.on('connection', () => {
      connections += 1;
    });
    service.listen(0, '127.0.0.1');
    await once(service, 'listening');
    // The port svc dev is told to use, taken.
    busy = createServer();
    busy.listen(0, '127.0.0.1');
    await once(busy, 'listening');
  });
  afterAll(() => {
    service?.close();
    busy?.close();
  });

  async function startSvcDev(
    args: string[],
    home: string,
    path = process.env.PATH,
  ): Promise<{ child: ChildProcess; output: () => string }> {
    const servicePort = (service.address() as AddressInfo).port;
    const child = spawn(process.execPath, [svcBinary, 'dev', ...args], {
      env: userEnv(home, {
        PATH: path,
        SVC_API_URL: `http://127.0.0.1:${servicePort}`,
        SVC_TOKEN: 'a-token-it-must-not-use',
      }),
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    return { child, output: () => output };
  }

  test('when run then it says where it serves, takes the next port when its own is taken, reads no token, never calls the service, and stops on Ctrl-C', async () => {
    const home = scratch('svc-dev-home-');
    const taken = (busy.address() as AddressInfo).port;
    const { child, output } = await startSvcDev([helloCar, '--port', String(taken)], home);
    await until('svc dev to start', () => output().includes('Ctrl-C stops'), 30_000);
    const text = output();
    assert.match(
      text,
      /Serving com\.example\.hello-car 1\.0\.0 from .*hello-car \(\d+ files, as svc publish would pack them\)/,
    );
    assert.match(text, new RegExp(`port ${taken} was taken`));
    const hostUrl = /host page: +(http:\/\/127\.0\.0\.1:\d+\/)/.exec(text)?.[1];
    assert.ok(hostUrl, text);
    assert.notEqual(new URL(hostUrl).port, String(taken));
    assert.match(
      text,
      /app origin: +http:\/\/127\.0\.0\.1:\d+\/ +\(connects to 'self', https:\/\/api\.hello-car\.example\.com\)/,
    );
    assert.equal((await fetch(hostUrl)).status, 200);
    assert.equal((await fetch(new URL('/.well-known/jwks.json', hostUrl))).status, 200);

    child.kill('SIGINT');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    assert.match(output(), /Stopped\.\n$/);
    assert.equal(connections, 0, 'svc dev connected to the service');
  });

  test('when --car names a brand the manifest does not list then the terminal warns that the service would not install the app there', async () => {
    const dir = appFolder();
    const manifestPath = join(dir, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    writeFileSync(manifestPath, JSON.stringify({ ...manifest, brands: ['brand_a', 'brand_b'] }));
    const { child, output } = await startSvcDev(
      [dir, '--car', 'brand_c:fleet-3.south'],
      scratch('svc-dev-home-'),
    );
    try {
      await until('svc dev to start', () => output().includes('Ctrl-C stops'), 30_000);
      assert.match(
        output(),
        /^svc dev: warning: the car brand_c:fleet-3\.south is a brand_c car, but manifest\.json lists brands brand_a, brand_b only: the service would not install the app on it/m,
      );
    } finally {
      child.kill('SIGINT');
      await once(child, 'exit');
    }
  });

  test("when --open is given then the host page is handed to the desktop's opener", async () => {
    const home = scratch('svc-dev-home-');
    // xdg-open as the desktop has it, here a script that writes down what it was asked to open.
    const bin = scratch('svc-dev-bin-');
    const opened = join(bin, 'opened.txt');
    writeFileSync(join(bin, 'xdg-open'), `#!/bin/sh\necho "$@" > '${opened}'\n`, { mode: 0o755 });
    const { child, output } = await startSvcDev([helloCar, '--open'], home, `${bin}:${process.env.PATH}`);
    try {
      await until('svc dev to start', () => output().includes('Ctrl-C stops'), 30_000);
      const hostUrl = /host page: +(\S+)/.exec(output())?.[1];
      await until('the browser opened', () => statSync(opened, { throwIfNoEntry: false }) !== undefined);
      await until('the whole line', () => readFileSync(opened, 'utf8').endsWith('\n'));
      assert.equal(readFileSync(opened, 'utf8'), `${hostUrl}\n`);
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGINT');
        await once(child, 'exit');
      }
    }
  });

  test('when the folder does not exist then it says so and starts nothing', async () => {
    const { child, output } = await startSvcDev(
      [join(scratch('svc-dev-none-'), 'no-such-app')],
      scratch('svc-dev-home-'),
    );
    const [code] = await once(child, 'exit');
    assert.equal(code, 1);
    assert.match(output(), /^svc: no folder at .*no-such-app: give the folder of the mini-app/m);
  });

  test('when the folder has no manifest.json then it says which folder to give, and starts nothing', async () => {
    const { child, output } = await startSvcDev([scratch('svc-dev-empty-')], scratch('svc-dev-home-'));
    const [code] = await once(child, 'exit');
    assert.equal(code, 1);
    assert.match(
      output(),
      /^svc: no manifest\.json in .*: give the folder of the mini-app \(to try the example: svc dev examples\/hello-car\)/m,
    );
  });

  test('when --car, --locale, --allow-origin or --port is not valid then it says which and starts nothing', async () => {
    const home = scratch('svc-dev-home-');
    for (const [args, message] of [
      [['--car', 'brand_x:1'], /^svc: --car: device id "brand_x:1" has unknown brand prefix/m],
      [['--locale', 'no locale'], /^svc: --locale: "no locale" is not a BCP 47 language tag/m],
      [
        ['--allow-origin', 'http://127.0.0.1:8787/api'],
        /^svc: --allow-origin: .* write "http:\/\/127\.0\.0\.1:8787"/m,
      ],
      [['--port', '65535'], /Invalid value for --port: expected to be in the \[1; 65534\] range/],
    ] as const) {
      const { child, output } = await startSvcDev([helloCar, ...args], home);
      const [code] = await once(child, 'exit');
      assert.equal(code, 2, output());
      assert.match(output(), message);
    }
  });
});
