import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { createLogger, redactDeviceIds } from '../src/logger.ts';
import { registerKey, signInWithKey, signUpDeveloper } from './support/accounts.ts';
import { call, putPackage } from './support/http.ts';
import { makePackage, manifestFor } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';
import { SshKit } from './support/ssh.ts';

interface LogLine {
  level: string;
  message: string;
  request_id?: string;
  method?: string;
  route?: string;
  status?: number;
  duration_ms?: number;
  account_id?: string;
}

describe('the request log', () => {
  const kit = new SshKit();
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service.stop();
    kit.cleanup();
  });

  const lines = (): LogLine[] => service.logs.map((line) => JSON.parse(line));
  const requestLines = (requestId: string) =>
    lines().filter((line) => line.message === 'request' && line.request_id === requestId);

  test('when a signed-in request is answered then one JSON line says its id, method, route, status, duration and account', async () => {
    const developer = await signUpDeveloper(service.url);
    const reply = await call(service.url, 'GET', '/api/v1/dev/me', {
      token: developer.token,
      headers: { 'x-request-id': 'trace-42' },
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['x-request-id'], 'trace-42', 'the id given is sent back');
    const [line, ...more] = requestLines('trace-42');
    assert.deepEqual(more, [], 'one line per request');
    assert.equal(line?.level, 'info');
    assert.equal(line?.method, 'GET');
    assert.equal(line?.route, '/api/v1/dev/me');
    assert.equal(line?.status, 200);
    assert.equal(typeof line?.duration_ms, 'number');
    assert.equal(line?.account_id, developer.accountId);
  });

  test('when no request id is given, or a hostile one, then one is made and sent back', async () => {
    const plain = await call(service.url, 'GET', '/api/v1/mini-apps/limits');
    const made = String(plain.headers['x-request-id']);
    assert.match(made, /^[0-9a-f-]{36}$/);
    assert.equal(requestLines(made).length, 1);
    assert.equal(requestLines(made)[0]?.route, '/api/v1/mini-apps/limits');

    const hostile = await call(service.url, 'GET', '/api/v1/mini-apps/limits', {
      headers: { 'x-request-id': `x"}{"level":"error","message":"forged${'a'.repeat(200)}` },
    });
    const replaced = String(hostile.headers['x-request-id']);
    assert.match(replaced, /^[0-9a-f-]{36}$/, 'a hostile id is not echoed');
    const deviceLike = await call(service.url, 'GET', '/api/v1/mini-apps/limits', {
      headers: { 'x-request-id': 'brand_a:1HGCM82633A004352' },
    });
    assert.match(
      String(deviceLike.headers['x-request-id']),
      /^[0-9a-f-]{36}$/,
      'nor one the log would redact',
    );
    assert.ok(!service.logs.some((line) => line.includes('forged')), 'nor logged');
  });

  test('when a path holds a device id then the line has the route template, never the id', async () => {
    const developer = await signUpDeveloper(service.url);
    const reply = await call(service.url, 'GET', '/api/v1/cars/brand_a%3A1HGCM82633A004352/status', {
      token: developer.token,
      headers: { 'x-request-id': 'car-status' },
    });
    const [line] = requestLines('car-status');
    assert.equal(line?.route, '/api/v1/cars/{device_id}/status');
    assert.equal(line?.status, reply.status);
    assert.ok(!service.logs.join('\n').includes('1HGCM82633A004352'));
  });

  test('when a path matches no route then the line says unmatched, without the path', async () => {
    await call(service.url, 'GET', '/no/such/brand_b:secret-car', { headers: { 'x-request-id': 'lost' } });
    const [line] = requestLines('lost');
    assert.equal(line?.route, 'unmatched');
    assert.equal(line?.status, 404);
    assert.ok(!service.logs.join('\n').includes('secret-car'));
  });

  test('when a whole developer session runs then its log holds no password, token, key or presigned signature', async () => {
    const developer = await signUpDeveloper(service.url);
    const key = kit.makeKey();
    await registerKey(service.url, developer, key.publicLine);
    const keyToken = String(await signInWithKey(service.url, key));
    const pkg = makePackage(manifestFor('com.example.logged', '1.0.0'));
    const target = await call(service.url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: keyToken,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(target.status, 201);
    assert.equal((await putPackage(target.body.upload_url, pkg.bytes)).status, 201);
    // A wrong signature and a wrong password are logged as requests, never by their content.
    await putPackage(`${target.body.upload_url}tampered`, pkg.bytes);
    await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: developer.email, password: 'hunter2-wrong-password' },
    });
    const submitted = await call(service.url, 'POST', '/api/v1/mini-apps/submit', {
      token: keyToken,
      body: { upload_id: target.body.upload_id },
    });
    assert.equal(submitted.status, 201);

    const log = service.logs.join('\n');
    const signature = new URL(target.body.upload_url).searchParams;
    const secrets = {
      password: developer.password,
      'wrong password': 'hunter2-wrong-password',
      'password-session token': developer.token,
      'key sign-in token': keyToken,
      'presigned URL query': signature.toString(),
      'private key': readFileSync(key.privatePath, 'utf8').split('\n')[1] ?? '',
    };
    for (const [what, secret] of Object.entries(secrets)) {
      assert.ok(secret.length > 8, what);
      assert.ok(!log.includes(secret), `the log holds the ${what}`);
    }
    for (const value of signature.values()) assert.ok(!log.includes(value), 'a presigned URL parameter');
    assert.ok(lines().some((line) => line.route === '/uploads/{upload_id}' && line.status === 201));
  });
});

describe('device ids in log lines', () => {
  test('when any line holds a device id, plain or URL-encoded, then it is written as redactDeviceId writes it', () => {
    const written: string[] = [];
    const logger = createLogger({ destination: { write: (line) => written.push(line) } });
    logger.warn('car went quiet', { car: 'brand_a:1HGCM82633A004352', note: 'from brand_c%3Atruck-17' });
    const line = JSON.parse(written[0] ?? '{}');
    assert.equal(line.car, '*********************4352');
    assert.ok(!written[0]?.includes('1HGCM82633A004352'));
    assert.ok(!written[0]?.includes('truck-17'));
    assert.equal(redactDeviceIds('see brand_b:abcdef'), 'see **********cdef');
    assert.equal(redactDeviceIds('no id here: brand_x:123'), 'no id here: brand_x:123');
    assert.ok(
      !redactDeviceIds(`x_brand_b:${'v'.repeat(100)}secret`).includes('vsecret'),
      'a long one, glued on',
    );
  });

  test('when the log is for a person at a terminal then lines are pretty, and ids are still redacted', () => {
    const written: string[] = [];
    const logger = createLogger({ destination: { write: (line) => written.push(line) }, pretty: true });
    logger.info('car connected', { car: 'brand_a:1HGCM82633A004352' });
    const text = written.join('');
    assert.throws(() => JSON.parse(text), 'not JSON');
    assert.match(text, /INFO.*car connected/);
    assert.match(text, /\*{21}4352/);
    assert.ok(!text.includes('1HGCM82633A004352'));
  });
});

describe('the log on stderr', () => {
  test('when a process logs lines a few at a time and exits at once then every line is on its stderr, in order, one JSON object each', () => {
    // The service's own destination (batched writes), as main.ts makes it: no destination given.
    const logger = JSON.stringify(fileURLToPath(new URL('../src/logger.ts', import.meta.url)));
    const script = `
      const { createLogger } = await import(${logger});
      const log = createLogger({ pretty: false });
      log.info('started');
      await new Promise((done) => setTimeout(done, 20));
      for (let n = 1; n <= 300; n += 1) log.info('request', { n });
      log.warn('stopping');
      process.exit(0);
    `;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    assert.equal(run.status, 0, run.stderr);
    const lines = run.stderr
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.equal(lines.length, 302);
    assert.equal(lines[0].message, 'started');
    assert.deepEqual(
      lines.slice(1, -1).map((line) => line.n),
      Array.from({ length: 300 }, (_, index) => index + 1),
    );
    assert.equal(lines.at(-1).message, 'stopping');
  });
});
