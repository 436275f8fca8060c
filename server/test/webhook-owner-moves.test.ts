/**
 * What the console's Webhooks page does to an endpoint, at the API (the page's browser test does
 * it through Chromium; this runs wherever Chromium is missing too): its owner removes it, and
 * enabling one the service disabled after failing sends its pending deliveries at once.
 */
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { retryDelaysMs } from '../src/webhooks/webhook-deliverer.ts';
import { signUpDeveloper } from './support/accounts.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

describe('webhook endpoints moved by their owner', () => {
  let service: TestService;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    service = await startTestService(
      { SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_DISABLE_AFTER: '1h' },
      { clockRuns: true },
    );
    hooks = await startWebhookReceiver();
  });
  afterAll(async () => {
    await service?.stop();
    await hooks?.close();
  });

  test('when its owner removes an endpoint then the answer is 204, and it is gone with its log', async () => {
    const owner = await signUpDeveloper(service.url);
    const made = await call(service.url, 'POST', '/api/v1/webhooks', {
      token: owner.token,
      body: { url: hooks.url, events: ['car.online'] },
    });
    const path = `/api/v1/webhooks/${made.body.webhook.webhook_id}`;
    await call(service.url, 'POST', `${path}/pings`, { token: owner.token });
    await eventually('the ping arrived', () => hooks.delivered().length === 1);

    const removed = await call(service.url, 'DELETE', path, { token: owner.token });
    assert.equal(removed.status, 204, JSON.stringify(removed.body));
    assert.equal((await call(service.url, 'GET', path, { token: owner.token })).status, 404);
    assert.equal((await call(service.url, 'GET', `${path}/deliveries`, { token: owner.token })).status, 404);
    assert.equal((await call(service.url, 'DELETE', path, { token: owner.token })).status, 404);
  });

  test('when an endpoint the service disabled is enabled then its pending delivery goes out at once, not at its next retry', async () => {
    const owner = await signUpDeveloper(service.url);
    hooks.answer = () => ({ status: 503, body: 'down' });
    const made = await call(service.url, 'POST', '/api/v1/webhooks', {
      token: owner.token,
      body: { url: hooks.url, events: ['car.online'] },
    });
    const path = `/api/v1/webhooks/${made.body.webhook.webhook_id}`;
    const ping = await call(service.url, 'POST', `${path}/pings`, { token: owner.token });
    const sent = hooks.received.length;
    await eventually('the first attempt failed', () => hooks.received.length === sent + 1);
    // 5 s, 5 min, 30 min, then 2 h on: failing for more than the hour SVC_WEBHOOK_DISABLE_AFTER allows.
    for (const delay of retryDelaysMs.slice(0, 4)) {
      service.clock.advance(delay);
      await service.app.services.webhookDeliverer.deliverDue();
    }
    const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: owner.email, password: owner.password },
    });
    const token = session.body.access_token as string;
    const disabled = await call(service.url, 'GET', path, { token });
    assert.equal(disabled.body.disabled_reason, 'failing');
    const [waiting] = (await call(service.url, 'GET', `${path}/deliveries`, { token })).body.deliveries;
    assert.equal(waiting.state, 'pending');
    assert.ok(
      Date.parse(waiting.next_attempt_at) > service.clock.now + 60 * 60 * 1000,
      'next retry hours away',
    );

    hooks.answer = () => ({ status: 204 });
    const enabled = await call(service.url, 'PATCH', path, { token, body: { enabled: true } });
    assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
    await eventually('the waiting ping is delivered', () =>
      hooks.delivered().some((request) => request.id === ping.body.event_id),
    );
    const [delivered] = (await call(service.url, 'GET', `${path}/deliveries`, { token })).body.deliveries;
    assert.equal(delivered.state, 'delivered');
  });
});
