/**
 * Webhooks (issue 28) with real receivers on 127.0.0.1 (the service started with
 * SVC_WEBHOOK_ALLOW_PRIVATE): an account registers endpoints and hears, signed as the Standard
 * Webhooks specification says and verified with the SDK's own `verifyWebhook`, its apps' review
 * and rollout moves, and its cars' commands and presence; never another account's. Retries follow
 * the schedule on the service's clock, first attempts go out in the order events happened, an
 * endpoint that keeps failing is disabled, and a restart between attempts loses nothing.
 */
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { verifyWebhook } from '@svc/sdk';
import { afterAll, afterEach, beforeAll, describe, test } from 'vitest';
import { retryDelaysMs } from '../src/webhooks/webhook-deliverer.ts';
import { isBlockedAddress } from '../src/webhooks/webhook-sender.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import {
  commandsOf,
  pairWithShownCode,
  publishMiniApp,
  startWatchedSimulator,
  type WatchedSimulator,
} from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { startTestService, type TestService } from './support/service.ts';
import { openTestStore } from './support/store.ts';
import { type Received, startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

const adminEmail = 'webhooks-admin@example.com';
const hour = 60 * 60 * 1000;
const day = 24 * hour;

describe('webhooks', () => {
  let service: TestService;
  let admin: Developer;
  const receivers: WebhookReceiver[] = [];

  beforeAll(async () => {
    service = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail, SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_TIMEOUT: '1s' },
      { clockRuns: true },
    );
    admin = await signUpAdmin(service, adminEmail);
  });

  afterEach(async () => {
    for (const receiver of receivers.splice(0)) await receiver.close();
  });

  afterAll(async () => {
    await service?.stop();
  });

  async function receiver(): Promise<WebhookReceiver> {
    const started = await startWebhookReceiver();
    receivers.push(started);
    return started;
  }

  async function register(who: Developer, url: string, events: string[]) {
    const made = await call(service.url, 'POST', '/api/v1/webhooks', {
      token: who.token,
      body: { url, events },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    return made.body as { webhook: { webhook_id: string }; secret: string };
  }

  /** A new session for `who`: moving the clock by days ends the one they had. */
  async function signInAgain(who: Developer): Promise<void> {
    const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
      body: { email: who.email, password: who.password },
    });
    assert.equal(session.status, 201, JSON.stringify(session.body));
    who.token = session.body.access_token;
  }

  const deliverDue = () => service.app.services.webhookDeliverer.deliverDue();

  /** The delivery log of the endpoint, newest first. */
  async function logOf(who: Developer, webhookId: string) {
    const log = await call(service.url, 'GET', `/api/v1/webhooks/${webhookId}/deliveries`, {
      token: who.token,
    });
    assert.equal(log.status, 200, JSON.stringify(log.body));
    return log.body.deliveries as {
      delivery_id: string;
      event_id: string;
      event_type: string;
      state: string;
      next_attempt_at: string | null;
      attempts: { status: number | null; duration_ms: number; response: string; error: string | null }[];
    }[];
  }

  /** The request's payload, once its signature, time and id are verified as a receiver would. */
  function verified(request: Received, secret: string) {
    return verifyWebhook(request.body, request.headers as Record<string, string>, secret, {
      now: Number(request.headers['webhook-timestamp']) * 1000,
    });
  }

  test('when an endpoint is registered then its secret is shown once, in the whsec_ form, and never listed', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    const made = await register(developer, hooks.url, ['mini_app.review_state_changed']);
    assert.match(made.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const listed = await call(service.url, 'GET', '/api/v1/webhooks', { token: developer.token });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.webhooks.map((w: { url: string; enabled: boolean }) => [w.url, w.enabled]),
      [[hooks.url, true]],
    );
    assert.ok(!JSON.stringify(listed.body).includes(made.secret.slice(6, 20)), 'the list shows no secret');
    const shown = await call(service.url, 'GET', `/api/v1/webhooks/${made.webhook.webhook_id}`, {
      token: developer.token,
    });
    assert.ok(!JSON.stringify(shown.body).includes('whsec_'));
    // The store keeps it sealed: its text is nowhere in the row.
    const row = await service.store.db('webhook_endpoints').where({ id: made.webhook.webhook_id }).first();
    assert.ok(!JSON.stringify(row).includes(made.secret.slice(6)));
  });

  test('when a developer moves a version through review then each move reaches their endpoint signed, in order', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    const { secret } = await register(developer, hooks.url, ['mini_app.review_state_changed']);
    await publishMiniApp(service.url, developer, admin, 'com.example.hooked', '1.0.0');
    await eventually('four review moves delivered', () => hooks.delivered().length === 4);
    const moves = [];
    for (const request of hooks.received) {
      const event = await verified(request, secret);
      assert.equal(event.type, 'mini_app.review_state_changed');
      const data = event.data as { app_id: string; from: string | null; to: string; version: string };
      assert.equal(data.app_id, 'com.example.hooked');
      assert.equal(data.version, '1.0.0');
      moves.push(`${data.from}→${data.to}`);
    }
    assert.deepEqual(moves, [
      'null→submitted',
      'submitted→in_review',
      'in_review→approved',
      'approved→published',
    ]);
    // Each event has its own id, and the headers the specification names.
    assert.equal(new Set(hooks.received.map((r) => r.id)).size, 4);
    for (const request of hooks.received) {
      assert.match(request.id, /^evt_[0-9a-f]{32}$/);
      assert.match(String(request.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
      assert.equal(request.headers['content-type'], 'application/json');
    }
    // A wrong secret does not verify.
    const other = await register(developer, hooks.url, ['car.online']);
    await assert.rejects(verified(hooks.received[0] as Received, other.secret), {
      code: 'invalid_signature',
    });
  });

  test("when another account's app moves then an endpoint hears nothing of it", async () => {
    const developer = await signUpDeveloper(service.url);
    const bystander = await signUpDeveloper(service.url);
    const mine = await receiver();
    const theirs = await receiver();
    await register(developer, mine.url, ['mini_app.review_state_changed']);
    await register(bystander, theirs.url, [
      'mini_app.review_state_changed',
      'mini_app.rollout_moved',
      'command.state_changed',
    ]);
    await publishMiniApp(service.url, developer, admin, 'com.example.private-moves', '1.0.0', 'approved');
    await eventually('the developer heard three moves', () => mine.delivered().length === 3);
    await deliverDue();
    assert.equal(theirs.received.length, 0);
  });

  describe("an owner's cars", () => {
    let cars: CarCredential[];
    let simulator: WatchedSimulator;
    let owner: Developer;

    beforeAll(async () => {
      cars = await provisionCars({ apiUrl: service.url, token: admin.token, count: 1, brand: 'brand_a' });
      simulator = await startWatchedSimulator(service.mqttUrl, cars);
      owner = await signUpDeveloper(service.url);
      await pairWithShownCode(service.url, owner, simulator, (cars[0] as CarCredential).deviceId);
    });

    afterAll(async () => {
      await simulator?.stop();
    });

    test('when the owner locks the doors then every state of the command reaches their endpoint, and none reaches the admin', async () => {
      const deviceId = (cars[0] as CarCredential).deviceId;
      const hooks = await receiver();
      const adminHooks = await receiver();
      const { secret } = await register(owner, hooks.url, ['command.state_changed']);
      await register(admin, adminHooks.url, ['command.state_changed']);
      const commands = commandsOf(service.url);
      const sent = await commands.send(owner.token, deviceId, { name: 'doors.lock' });
      assert.equal(sent.status, 202, JSON.stringify(sent.body));
      await commands.until(owner.token, deviceId, sent.body.command_id, 'completed');
      await eventually(
        'queued, sent, accepted and completed delivered',
        () => hooks.delivered().length === 4,
      );
      const states = [];
      for (const request of hooks.received) {
        const event = await verified(request, secret);
        const command = event.data as { command_id: string; device_id: string; brand: string; state: string };
        assert.equal(command.command_id, sent.body.command_id);
        assert.equal(command.device_id, deviceId);
        assert.equal(command.brand, 'brand_a');
        states.push(command.state);
      }
      assert.deepEqual(states, ['queued', 'sent', 'accepted', 'completed']);
      await deliverDue();
      assert.equal(adminHooks.received.length, 0, 'the car is not the admin’s');
    });

    test('when the car goes away and comes back then car.offline and car.online reach its owner', async () => {
      const deviceId = (cars[0] as CarCredential).deviceId;
      const hooks = await receiver();
      const { secret } = await register(owner, hooks.url, ['car.online', 'car.offline']);
      await simulator.stop();
      simulator = await startWatchedSimulator(service.mqttUrl, cars);
      await eventually('offline then online delivered', () => hooks.delivered().length >= 2);
      const events = await Promise.all(hooks.received.map((request) => verified(request, secret)));
      assert.deepEqual(
        events.slice(0, 2).map((event) => [event.type, (event.data as { device_id: string }).device_id]),
        [
          ['car.offline', deviceId],
          ['car.online', deviceId],
        ],
      );
    });
    test('when the car changes hands then its old owner hears their command withdrawn, and the new one hears nothing of it', async () => {
      const deviceId = (cars[0] as CarCredential).deviceId;
      const newOwner = await signUpDeveloper(service.url);
      const oldHooks = await receiver();
      const newHooks = await receiver();
      await register(owner, oldHooks.url, ['command.state_changed']);
      await register(newOwner, newHooks.url, ['command.state_changed']);
      // The car is away: the command waits, queued.
      await simulator.stop();
      const sent = await commandsOf(service.url).send(owner.token, deviceId, { name: 'doors.unlock' });
      assert.equal(sent.status, 202, JSON.stringify(sent.body));
      const moved = await call(service.url, 'POST', `/api/v1/cars/${encodeURIComponent(deviceId)}/transfer`, {
        token: owner.token,
        body: { to_user: newOwner.accountId },
      });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
      const states = () => oldHooks.delivered().map((request) => JSON.parse(request.body).data.state);
      await eventually('the withdrawal delivered to the old owner', () => states().includes('expired'));
      // Made (and taken by the broker, which keeps nothing for a car away), then withdrawn.
      assert.equal(states()[0], 'queued');
      assert.equal(states().at(-1), 'expired');
      assert.match(JSON.parse(String(oldHooks.delivered().at(-1)?.body)).data.detail, /changed owner/);
      // The car comes back; the new owner's own command is theirs to hear of, the old one never.
      simulator = await startWatchedSimulator(service.mqttUrl, cars);
      const theirs = await commandsOf(service.url).send(newOwner.token, deviceId, { name: 'doors.lock' });
      assert.equal(theirs.status, 202, JSON.stringify(theirs.body));
      await commandsOf(service.url).until(newOwner.token, deviceId, theirs.body.command_id, 'completed');
      await eventually('the new owner heard their command', () => newHooks.delivered().length === 4);
      assert.ok(
        newHooks.received.every(
          (request) => JSON.parse(request.body).data.command_id === theirs.body.command_id,
        ),
      );
    });
  });

  test('when a rollout starts, grows and completes then its developer hears each move with its progress', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    const { secret } = await register(developer, hooks.url, [
      'mini_app.rollout_moved',
      'mini_app.rollout_completed',
    ]);
    await publishMiniApp(service.url, developer, admin, 'com.example.rolled', '1.0.0');
    const next = await publishMiniApp(
      service.url,
      developer,
      admin,
      'com.example.rolled',
      '1.1.0',
      'approved',
    );
    const started = await call(service.url, 'POST', `/api/v1/mini-apps/versions/${next}/transitions`, {
      token: developer.token,
      body: { to: 'rolling_out', rollout: { percent: 10 } },
    });
    assert.equal(started.status, 200, JSON.stringify(started.body));
    for (const body of [{ move: 'set_percent', percent: 50 }, { move: 'complete' }]) {
      const moved = await call(service.url, 'POST', '/api/v1/mini-apps/com.example.rolled/rollout/moves', {
        token: developer.token,
        body,
      });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
    }
    await eventually('three rollout events delivered', () => hooks.delivered().length === 3);
    const events = await Promise.all(hooks.received.map((request) => verified(request, secret)));
    assert.deepEqual(
      events.map((event) => {
        const data = event.data as {
          move?: string;
          rollout: { percent: number; state: string; progress: object };
        };
        assert.ok(data.rollout.progress, 'the rollout comes with its progress');
        return [event.type, data.move ?? null, data.rollout.percent, data.rollout.state];
      }),
      [
        ['mini_app.rollout_moved', 'started', 10, 'active'],
        ['mini_app.rollout_moved', 'percent_raised', 50, 'active'],
        ['mini_app.rollout_completed', null, 100, 'completed'],
      ],
    );
  });

  test('when the receiver answers 500 twice then 200 then each event is delivered once, first attempts in order', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    const before = await scrape(service);
    hooks.answer = (_request, sameIdBefore) =>
      sameIdBefore < 2 ? { status: 500, body: 'not now' } : { status: 200, body: 'thanks' };
    const made = await register(developer, hooks.url, ['mini_app.review_state_changed']);
    await publishMiniApp(service.url, developer, admin, 'com.example.flaky', '1.0.0', 'approved');
    await eventually('three first attempts', () => hooks.received.length >= 3);
    const firstAttempts = hooks.received.slice(0, 3).map((r) => JSON.parse(r.body).data.to);
    assert.deepEqual(firstAttempts, ['submitted', 'in_review', 'approved']);
    // The retries come 5 s, then 5 min after, on the service's clock.
    service.clock.advance(retryDelaysMs[0] as number);
    await deliverDue();
    service.clock.advance(retryDelaysMs[1] as number);
    await deliverDue();
    assert.equal(hooks.delivered().length, 3);
    assert.deepEqual(
      hooks
        .delivered()
        .map((r) => JSON.parse(r.body).data.to)
        .sort(),
      ['approved', 'in_review', 'submitted'],
    );
    const ids = hooks.received.map((r) => r.id);
    assert.equal(new Set(ids).size, 3, 'every attempt of an event carries its one id');
    const log = await logOf(developer, made.webhook.webhook_id);
    assert.deepEqual(
      log.map((delivery) => [delivery.state, delivery.attempts.map((attempt) => attempt.status)]),
      [
        ['delivered', [200, 500, 500]],
        ['delivered', [200, 500, 500]],
        ['delivered', [200, 500, 500]],
      ],
    );
    const failed = log[0]?.attempts[2];
    assert.equal(failed?.response, 'not now');
    assert.equal(failed?.error, 'status');
    assert.ok((failed?.duration_ms ?? -1) >= 0);
    // The endpoint's failing streak ended with its deliveries.
    const endpoint = await call(service.url, 'GET', `/api/v1/webhooks/${made.webhook.webhook_id}`, {
      token: developer.token,
    });
    assert.equal(endpoint.body.failing_since, null);
    // The operator sees the same on the metrics.
    const after = await scrape(service);
    const counted = (text: string, result: string) => sample(text, 'svc_webhook_attempts_total', { result });
    assert.equal(counted(after, 'status') - counted(before, 'status'), 6);
    assert.equal(counted(after, 'delivered') - counted(before, 'delivered'), 3);
  });

  test("when the receiver never answers then the attempt times out and is tried again, and other endpoints' deliveries do not wait for it", async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    hooks.answer = (_request, sameIdBefore) => (sameIdBefore === 0 ? 'hang' : { status: 204 });
    const made = await register(developer, hooks.url, ['webhook.ping']);
    const ping = await call(service.url, 'POST', `/api/v1/webhooks/${made.webhook.webhook_id}/pings`, {
      token: developer.token,
    });
    assert.equal(ping.status, 202, JSON.stringify(ping.body));
    assert.equal(ping.body.state, 'pending');
    // Another account's endpoint, pinged while the first hangs, is answered meanwhile.
    await eventually('the first attempt hangs', () => hooks.received.length === 1);
    const neighbour = await signUpDeveloper(service.url);
    const prompt = await receiver();
    const theirs = await register(neighbour, prompt.url, ['webhook.ping']);
    await call(service.url, 'POST', `/api/v1/webhooks/${theirs.webhook.webhook_id}/pings`, {
      token: neighbour.token,
    });
    await eventually('the neighbour got their ping', () => prompt.delivered().length === 1);
    const deliveredAt = Date.now();
    await eventually('the attempt timed out', async () => {
      const [delivery] = await logOf(developer, made.webhook.webhook_id);
      return delivery?.attempts[0]?.error === 'timeout';
    });
    assert.ok(
      Date.now() - deliveredAt > 100,
      'the neighbour was answered well before the hanging attempt ended',
    );
    service.clock.advance(retryDelaysMs[0] as number);
    await deliverDue();
    const [delivery] = await logOf(developer, made.webhook.webhook_id);
    assert.equal(delivery?.state, 'delivered');
    assert.deepEqual(
      delivery?.attempts.map((attempt) => attempt.status),
      [204, null],
    );
  });

  test('when an endpoint fails for three days then it is disabled, and enabling it sends what waited', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    hooks.answer = () => ({ status: 503, body: 'down for maintenance' });
    const made = await register(developer, hooks.url, ['webhook.ping']);
    const webhookPath = `/api/v1/webhooks/${made.webhook.webhook_id}`;
    const ping = () => call(service.url, 'POST', `${webhookPath}/pings`, { token: developer.token });
    assert.equal((await ping()).status, 202);
    await eventually('the first attempt failed', () => hooks.received.length === 1);
    // Every attempt of the schedule fails; the endpoint stays enabled until three days of it.
    let elapsed = 0;
    for (const delay of retryDelaysMs) {
      service.clock.advance(delay);
      elapsed += delay;
      await deliverDue();
      const endpoint = await service.store
        .db('webhook_endpoints')
        .where({ id: made.webhook.webhook_id })
        .first();
      assert.equal(
        endpoint.enabled,
        elapsed < 3 * day,
        `after ${elapsed / hour} h enabled is ${endpoint.enabled}`,
      );
    }
    assert.equal(hooks.received.length, retryDelaysMs.length + 1);
    await signInAgain(developer);
    await signInAgain(admin);
    const disabled = (await call(service.url, 'GET', webhookPath, { token: developer.token })).body;
    assert.equal(disabled.disabled_reason, 'failing');
    assert.ok(disabled.failing_since && disabled.disabled_at);
    // Nothing goes to a disabled endpoint: a ping is refused, and events wait for no one.
    const refused = await ping();
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, 'webhook_disabled');
    const [spent] = await logOf(developer, made.webhook.webhook_id);
    assert.equal(spent?.state, 'failed');
    assert.equal(spent?.attempts.length, retryDelaysMs.length + 1);
    // Its owner enables it; a redelivery of the spent event then goes out at once.
    hooks.answer = () => ({ status: 200 });
    const enabled = await call(service.url, 'PATCH', webhookPath, {
      token: developer.token,
      body: { enabled: true },
    });
    assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
    assert.deepEqual(
      [enabled.body.enabled, enabled.body.disabled_reason, enabled.body.failing_since],
      [true, null, null],
    );
    const again = await call(
      service.url,
      'POST',
      `${webhookPath}/deliveries/${spent?.delivery_id}/redeliveries`,
      {
        token: developer.token,
      },
    );
    assert.equal(again.status, 202, JSON.stringify(again.body));
    await eventually('the redelivery arrived', () => hooks.delivered().length === 1);
    assert.equal(hooks.delivered()[0]?.id, spent?.event_id, 'a redelivery carries the event’s id');
  });

  test('when the secret is rotated then both secrets sign until the overlap ends, then only the new one', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    const made = await register(developer, hooks.url, ['webhook.ping']);
    const webhookPath = `/api/v1/webhooks/${made.webhook.webhook_id}`;
    const rotated = await call(service.url, 'POST', `${webhookPath}/secret-rotations`, {
      token: developer.token,
      body: { previous_secret_lasts_seconds: 3600 },
    });
    assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
    assert.notEqual(rotated.body.secret, made.secret);
    assert.ok(rotated.body.webhook.previous_secret_expires_at);
    const ping = () => call(service.url, 'POST', `${webhookPath}/pings`, { token: developer.token });
    await ping();
    await eventually('the ping arrived', () => hooks.delivered().length === 1);
    const during = hooks.received[0] as Received;
    assert.equal(String(during.headers['webhook-signature']).split(' ').length, 2);
    await verified(during, made.secret);
    await verified(during, rotated.body.secret);
    service.clock.advance(hour + 1000);
    await signInAgain(developer);
    await ping();
    await eventually('the second ping arrived', () => hooks.delivered().length === 2);
    const after = hooks.received[1] as Received;
    assert.equal(String(after.headers['webhook-signature']).split(' ').length, 1);
    await verified(after, rotated.body.secret);
    await assert.rejects(verified(after, made.secret), { code: 'invalid_signature' });
    // A leaked secret is stopped at once: no overlap, nothing but the new one signs.
    const stopped = await call(service.url, 'POST', `${webhookPath}/secret-rotations`, {
      token: developer.token,
      body: { previous_secret_lasts_seconds: 0 },
    });
    assert.equal(stopped.status, 201, JSON.stringify(stopped.body));
    assert.equal(stopped.body.webhook.previous_secret_expires_at, null);
    await ping();
    await eventually('the third ping arrived', () => hooks.delivered().length === 3);
    const third = hooks.received[2] as Received;
    assert.equal(String(third.headers['webhook-signature']).split(' ').length, 1);
    await verified(third, stopped.body.secret);
    await assert.rejects(verified(third, rotated.body.secret), { code: 'invalid_signature' });
  });

  test('when a delivery still being retried is delivered again then it goes out now, once, not twice', async () => {
    const developer = await signUpDeveloper(service.url);
    const hooks = await receiver();
    hooks.answer = (_request, sameIdBefore) => (sameIdBefore === 0 ? { status: 500 } : { status: 200 });
    const made = await register(developer, hooks.url, ['webhook.ping']);
    const webhookPath = `/api/v1/webhooks/${made.webhook.webhook_id}`;
    await call(service.url, 'POST', `${webhookPath}/pings`, { token: developer.token });
    await eventually('the first attempt failed', () => hooks.received.length === 1);
    const [pending] = await logOf(developer, made.webhook.webhook_id);
    assert.equal(pending?.state, 'pending');
    const again = await call(
      service.url,
      'POST',
      `${webhookPath}/deliveries/${pending?.delivery_id}/redeliveries`,
      {
        token: developer.token,
      },
    );
    assert.equal(again.status, 202, JSON.stringify(again.body));
    assert.equal(again.body.delivery_id, pending?.delivery_id);
    await eventually('the retry arrived at once', () => hooks.delivered().length === 1);
    // Its own retry, due in 5 s, is spent: nothing more comes.
    service.clock.advance(retryDelaysMs[0] as number);
    await deliverDue();
    assert.equal(hooks.received.length, 2);
    const log = await logOf(developer, made.webhook.webhook_id);
    assert.deepEqual(
      log.map((delivery) => [delivery.state, delivery.attempts.length]),
      [['delivered', 2]],
    );
  });

  test('when an endpoint is registered wrongly then the answer says what to fix, and nothing is kept', async () => {
    const developer = await signUpDeveloper(service.url);
    const refusals = [
      { url: 'ftp://hooks.example.com/', events: ['car.online'] },
      { url: 'https://user:pass@hooks.example.com/', events: ['car.online'] },
    ];
    for (const body of refusals) {
      const refused = await call(service.url, 'POST', '/api/v1/webhooks', { token: developer.token, body });
      assert.equal(refused.status, 422, JSON.stringify(refused.body));
      assert.equal(refused.body.code, 'invalid_webhook_url');
    }
    const badType = await call(service.url, 'POST', '/api/v1/webhooks', {
      token: developer.token,
      body: { url: 'https://hooks.example.com/', events: ['car.exploded'] },
    });
    assert.equal(badType.status, 400, JSON.stringify(badType.body));
    const listed = await call(service.url, 'GET', '/api/v1/webhooks', { token: developer.token });
    assert.deepEqual(listed.body.webhooks, [], 'nothing refused was kept');
    // A forged cursor of the log is refused, not read.
    const own = await register(developer, 'https://hooks.example.com/mine', ['car.online']);
    const forged = Buffer.from(JSON.stringify(['+275760-09-13T00:00:00.000Z', 'x'])).toString('base64url');
    const badCursor = await call(
      service.url,
      'GET',
      `/api/v1/webhooks/${own.webhook.webhook_id}/deliveries?cursor=${forged}`,
      { token: developer.token },
    );
    assert.equal(badCursor.status, 400, JSON.stringify(badCursor.body));
    assert.equal(badCursor.body.code, 'invalid_cursor');
    // Another account's endpoint does not exist for this one.
    const stranger = await signUpDeveloper(service.url);
    const made = await register(stranger, 'https://hooks.example.com/', ['car.online']);
    for (const [method, suffix] of [
      ['GET', ''],
      ['DELETE', ''],
      ['POST', '/pings'],
      ['GET', '/deliveries'],
    ] as const) {
      const hidden = await call(service.url, method, `/api/v1/webhooks/${made.webhook.webhook_id}${suffix}`, {
        token: developer.token,
      });
      assert.equal(hidden.status, 404, `${method} ${suffix}: ${JSON.stringify(hidden.body)}`);
    }
  });
});

describe('webhooks without SVC_WEBHOOK_ALLOW_PRIVATE', () => {
  let service: TestService;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    service = await startTestService({}, { clockRuns: true });
    receiver = await startWebhookReceiver();
  });

  afterAll(async () => {
    await receiver?.close();
    await service?.stop();
  });

  test('when an endpoint names a private address then it is refused at registration', async () => {
    const developer = await signUpDeveloper(service.url);
    for (const url of [
      receiver.url,
      'https://127.0.0.1/hooks',
      'https://169.254.169.254/latest',
      'https://[::1]/',
    ]) {
      const refused = await call(service.url, 'POST', '/api/v1/webhooks', {
        token: developer.token,
        body: { url, events: ['webhook.ping'] },
      });
      assert.equal(refused.status, 422, `${url}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.code, 'invalid_webhook_url');
    }
  });

  test('when a name resolves to 127.0.0.1 then the delivery is refused at connect time and nothing arrives', async () => {
    const developer = await signUpDeveloper(service.url);
    const port = new URL(receiver.url).port;
    // The machine's own name: nothing in it says "local", so only its resolved address gives it away.
    const name = hostname();
    const { address } = await lookup(name);
    assert.ok(
      isBlockedAddress(address),
      `${name} resolves to ${address}, which is meant to be this machine's`,
    );
    const made = await call(service.url, 'POST', '/api/v1/webhooks', {
      token: developer.token,
      body: { url: `https://${name}:${port}/hooks`, events: ['webhook.ping'] },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const webhookId = made.body.webhook.webhook_id;
    await call(service.url, 'POST', `/api/v1/webhooks/${webhookId}/pings`, { token: developer.token });
    await eventually('the attempt was refused', async () => {
      const log = await call(service.url, 'GET', `/api/v1/webhooks/${webhookId}/deliveries`, {
        token: developer.token,
      });
      return log.body.deliveries[0]?.attempts[0]?.error === 'address_refused';
    });
    assert.equal(receiver.received.length, 0);
  });
});

describe('webhooks across a restart', () => {
  test('when the service restarts between attempts then the retry goes out from the new one, once', async () => {
    const store = await openTestStore();
    const receiver = await startWebhookReceiver();
    receiver.answer = (_request, sameIdBefore) => (sameIdBefore === 0 ? { status: 502 } : { status: 200 });
    const env = { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' };
    try {
      const first = await startTestService(env, { store, clockRuns: true });
      const developer = await signUpDeveloper(first.url);
      const made = await call(first.url, 'POST', '/api/v1/webhooks', {
        token: developer.token,
        body: { url: receiver.url, events: ['webhook.ping'] },
      });
      await call(first.url, 'POST', `/api/v1/webhooks/${made.body.webhook.webhook_id}/pings`, {
        token: developer.token,
      });
      await eventually('the first attempt failed', () => receiver.received.length === 1);
      await first.stop();
      const second = await startTestService(env, { store, clockRuns: true });
      try {
        second.clock.advance(retryDelaysMs[0] as number);
        await second.app.services.webhookDeliverer.deliverDue();
        await eventually('the retry arrived', () => receiver.delivered().length === 1);
        assert.equal(receiver.received.length, 2);
        assert.equal(receiver.received[0]?.id, receiver.received[1]?.id);
      } finally {
        await second.stop();
      }
    } finally {
      await receiver.close();
      await store.close();
    }
  });
});

describe('webhooks on two replicas of one database', () => {
  test('when events are written on both replicas then each goes out once, in the order they happened', async (context) => {
    const store = await openTestStore();
    // PGlite is one process's store: replicas share a database only on Postgres.
    if (store.kind === 'pglite') {
      await store.close();
      context.skip();
    }
    const receiver = await startWebhookReceiver();
    const env = { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' };
    const replicas = [
      await startTestService(env, { store, clockRuns: true }),
      await startTestService(env, { store, clockRuns: true }),
    ];
    try {
      const [one, two] = replicas as [TestService, TestService];
      const developer = await signUpDeveloper(one.url);
      const made = await call(one.url, 'POST', '/api/v1/webhooks', {
        token: developer.token,
        body: { url: receiver.url, events: ['webhook.ping'] },
      });
      const pingPath = `/api/v1/webhooks/${made.body.webhook.webhook_id}/pings`;
      const eventIds: string[] = [];
      for (let i = 0; i < 20; i += 1) {
        const ping = await call((i % 2 === 0 ? one : two).url, 'POST', pingPath, { token: developer.token });
        assert.equal(ping.status, 202, JSON.stringify(ping.body));
        eventIds.push(ping.body.event_id);
      }
      await eventually('every ping arrived', () => receiver.delivered().length === 20, 20_000);
      assert.deepEqual(
        receiver.received.map((request) => request.id),
        eventIds,
      );
    } finally {
      for (const replica of replicas) await replica.stop();
      await receiver.close();
      await store.close();
    }
  });
});
