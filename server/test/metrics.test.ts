import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { signUpDeveloper } from './support/accounts.ts';
import { call, putPackage } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { makePackage, manifestFor } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';

describe('metrics', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.stop());

  test('when the public port is asked for /metrics then it is 404: metrics have a listener of their own', async () => {
    const reply = await call(service.url, 'GET', '/metrics');
    assert.equal(reply.status, 404);
    assert.notEqual(new URL(service.metricsUrl).port, new URL(service.url).port);
    assert.equal((await call(service.metricsUrl.replace('/metrics', '/other'), 'GET', '')).status, 404);
  });

  test('when requests are answered then they are counted and timed by route template, method and status', async () => {
    const developer = await signUpDeveloper(service.url);
    for (let i = 0; i < 3; i++) await call(service.url, 'GET', '/api/v1/dev/me', { token: developer.token });
    await call(service.url, 'GET', '/api/v1/cars/brand_a%3A1HGCM82633A004352/status', {
      token: developer.token,
    });
    const text = await scrape(service);
    assert.equal(
      sample(text, 'svc_http_requests_total', { route: '/api/v1/dev/me', method: 'GET', status: 200 }),
      3,
    );
    assert.equal(
      sample(text, 'svc_http_request_duration_seconds_count', { route: '/api/v1/dev/me', method: 'GET' }),
      3,
    );
    assert.ok(text.includes('route="/api/v1/cars/{device_id}/status"'), 'the template, not the path');
    assert.ok(!text.includes('1HGCM82633A004352'), 'never a device id');
    assert.match(text, /^process_cpu_user_seconds_total /m, "and the process's own metrics");
  });

  test('when sign-ins succeed or are refused, and uploads are stored or refused, then each outcome is counted', async () => {
    const developer = await signUpDeveloper(service.url);
    await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: developer.email, password: 'not the password' },
    });
    const pkg = makePackage(manifestFor('com.example.metrics', '1.0.0'));
    const target = await call(service.url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: developer.token,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(
      (await putPackage(target.body.upload_url, Buffer.concat([pkg.bytes, pkg.bytes]))).status,
      413,
    );
    assert.equal((await putPackage(target.body.upload_url, pkg.bytes)).status, 201);
    const text = await scrape(service);
    assert.ok(sample(text, 'svc_sign_ins_total', { method: 'password', outcome: 'signed_in' }) >= 1);
    assert.equal(sample(text, 'svc_sign_ins_total', { method: 'password', outcome: 'refused' }), 1);
    assert.equal(sample(text, 'svc_uploads_total', { outcome: 'stored' }), 1);
    assert.equal(sample(text, 'svc_uploads_total', { outcome: 'too_large' }), 1);
  });
});
