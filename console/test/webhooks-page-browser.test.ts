/**
 * The Webhooks page in Chromium (Debian's, through playwright-core), with receivers on 127.0.0.1
 * (the service allows private addresses here, as SVC_WEBHOOK_ALLOW_PRIVATE says) and retries
 * falling due on the service's clock:
 * a developer registers an endpoint and sees its signing secret once, sends a ping and follows its
 * delivery in the log (a 500, then the retry's 200), delivers it again, rotates the secret, changes,
 * disables and enables the endpoint and removes it (asked first). An endpoint the service disabled
 * after it kept failing is said to its owner on signing in, on every page, and on the Webhooks page,
 * where enabling it sends what was pending. axe-core on each page; screenshots in test-output/console/.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { verifyWebhook } from '@svc/sdk';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { retryDelaysMs } from '../../server/src/webhooks/webhook-deliverer.ts';
import { type Developer, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { call, eventually } from '../../server/test/support/http.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import {
  type Received,
  startWebhookReceiver,
  type WebhookReceiver,
} from '../../server/test/support/webhook-receiver.ts';
import { checkPage, newVisitor, screenshots, signIn, type Visitor } from './support/pages.ts';

const missing = chromiumMissing();

/** The delivery's payload, once its signature with `secret` is verified as a receiver would. */
function verified(request: Received, secret: string) {
  return verifyWebhook(request.body, request.headers as Record<string, string>, secret, {
    now: Number(request.headers['webhook-timestamp']) * 1000,
  });
}

describe.skipIf(missing !== undefined)(
  `the Webhooks page in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let service: TestService;
    let browser: Browser;
    const receivers: WebhookReceiver[] = [];
    const visitors: Visitor[] = [];

    async function visit(width = 1280): Promise<Visitor> {
      const visitor = await newVisitor(browser, width);
      await visitor.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: service.url });
      visitors.push(visitor);
      return visitor;
    }
    async function receiver(path: string): Promise<WebhookReceiver> {
      const started = await startWebhookReceiver(path);
      receivers.push(started);
      return started;
    }
    const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText());
    /** Whether `text` is anywhere in the page, seen or not (hidden text and attributes too). */
    const inPage = async (page: Page, text: string) => (await page.content()).includes(text);
    /** Retries fall due on the service's clock: moved on, and what is due delivered now. */
    async function retryAfter(delayMs: number) {
      service.clock.advance(delayMs);
      await service.app.services.webhookDeliverer.deliverDue();
    }

    beforeAll(async () => {
      mkdirSync(screenshots, { recursive: true });
      // Private addresses (the receivers on 127.0.0.1) allowed; an endpoint failing for an hour disabled.
      service = await startTestService(
        { SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_DISABLE_AFTER: '1h' },
        { clockRuns: true },
      );
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
      await service?.stop();
      for (const started of receivers) await started.close();
    });

    test('when a developer registers an endpoint then its secret is shown once, a ping and its retry show in the log, and it is delivered again, rotated, changed, disabled, enabled and removed (asked first)', async () => {
      const hooks = await receiver('/svc');
      const { url } = hooks;
      const developer = await signUpDeveloper(service.url, 'hooks@example.com');
      const { page, context } = await visit();
      await signIn(page, service.url, developer.email);
      await page.getByRole('navigation').getByRole('link', { name: 'Webhooks' }).click();
      await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
      await page.getByText('No endpoints yet').waitFor();
      await checkPage(page, 'webhooks-empty');

      // No event chosen: refused at the checkboxes, in words.
      await page.getByLabel('URL').fill(url);
      await page.getByRole('button', { name: 'Register endpoint' }).click();
      await page.getByRole('alert').getByText('Choose at least one event.').waitFor();
      assert.equal(
        await page.getByRole('checkbox', { name: /^car\.online/ }).getAttribute('aria-invalid'),
        'true',
      );

      await page.getByRole('checkbox', { name: /^command\.state_changed/ }).check();
      await page.getByRole('checkbox', { name: /^car\.online/ }).check();
      await page.getByLabel('Description (optional)').fill('Fleet dashboard');
      await page.getByRole('button', { name: 'Register endpoint' }).click();
      const shown = page.getByRole('region', { name: `The signing secret of ${url}` });
      await shown.waitFor();
      const secret = (await shown.getByRole('definition').first().locator('code').textContent()) ?? '';
      assert.match(secret, /^whsec_[A-Za-z0-9+/]+={0,2}$/);
      await shown.getByRole('button', { name: 'Copy signing secret shown once' }).click();
      await shown.getByText('Copied.').waitFor();
      assert.equal(await clipboard(page), secret);
      await checkPage(page, 'webhooks-secret');

      const card = page.getByRole('list', { name: 'Your endpoints' }).getByRole('listitem').first();
      await card.getByRole('heading', { name: url, exact: true }).waitFor();
      const cardText = async () => (await card.textContent()) ?? '';
      assert.match(await cardText(), /Fleet dashboard/);
      assert.match(await cardText(), /Enabled/);
      assert.match(await cardText(), /command\.state_changed.*car\.online/);

      // The secret is gone once the page is left, and is nowhere when it is opened again.
      await page.getByRole('navigation').getByRole('link', { name: 'My cars' }).click();
      await page.getByRole('heading', { level: 1, name: 'My cars' }).waitFor();
      await page.getByRole('navigation').getByRole('link', { name: 'Webhooks' }).click();
      await card.getByRole('heading', { name: url, exact: true }).waitFor();
      assert.ok(!(await inPage(page, secret)), 'the secret is not shown again');
      assert.equal(await page.getByRole('region', { name: /signing secret/ }).count(), 0);

      // A ping answered 500, then 200 by the retry 5 s later: both attempts in the log.
      hooks.answer = (_request, sameIdBefore) =>
        sameIdBefore === 0 ? { status: 500, body: 'receiver is warming up' } : { status: 200, body: 'pong' };
      await card.getByRole('button', { name: `Send test ping to ${url}` }).click();
      await page.getByRole('status').getByText(`Sent a test ping to ${url}`).waitFor();
      const deliveries = card.getByRole('list', { name: `Delivery log of ${url}` }).locator(':scope > li');
      const ping = deliveries.first();
      await ping.getByText('HTTP 500').waitFor();
      await ping.getByText('receiver is warming up').waitFor();
      await retryAfter(retryDelaysMs[0] as number);
      await ping.getByText('Delivered').waitFor();
      await ping.getByText('HTTP 200').waitFor();
      await ping.getByText('pong').waitFor();
      const [first, retried] = hooks.received;
      assert.ok(first && retried, 'the receiver was sent the ping twice');
      assert.equal(first.type, 'webhook.ping');
      assert.equal(retried.id, first.id, 'the retry carries the event id');
      assert.ok(
        await ping.getByText(first.id, { exact: true }).isVisible(),
        'the log shows the event id the receiver got',
      );
      await verified(first, secret);
      await checkPage(page, 'webhooks-log');

      // Delivered again: a new delivery of the same event, at the top of the log.
      await ping.getByRole('button', { name: `Deliver again webhook.ping ${first.id}` }).click();
      await page.getByRole('status').getByText(`Delivering webhook.ping ${first.id} again`).waitFor();
      await eventually('the event is delivered again', () => hooks.delivered().length === 2);
      assert.equal(hooks.delivered()[1]?.id, first.id);
      await eventually('the log lists the new delivery', async () => (await deliveries.count()) === 2);
      await deliveries.first().getByText('Delivered').waitFor();

      // A new secret, shown once; the old one keeps signing beside it for a day.
      await card.getByRole('button', { name: `Rotate secret of ${url}` }).click();
      const question = page.getByRole('dialog', { name: `A new signing secret for ${url}?` });
      await question.waitFor();
      await question.getByText('The old one keeps signing beside it for a day').waitFor();
      await checkPage(page, 'webhooks-rotate-question');
      await question.getByRole('button', { name: 'Rotate secret' }).click();
      const rotated = page.getByRole('region', { name: `The new signing secret of ${url}` });
      await rotated.waitFor();
      await rotated.getByText('The old secret keeps signing beside it until').waitFor();
      const newSecret = (await rotated.getByRole('definition').first().locator('code').textContent()) ?? '';
      assert.match(newSecret, /^whsec_/);
      assert.notEqual(newSecret, secret);
      await card.getByText('Old secret signs until').waitFor();
      await rotated.getByRole('button', { name: 'I have saved the secret' }).click();
      await page.getByText('The signing secret is no longer shown, here or anywhere.').waitFor();
      assert.ok(!(await inPage(page, newSecret)));
      await card.getByRole('button', { name: `Send test ping to ${url}` }).click();
      await eventually('the second ping arrives', () => hooks.delivered().length === 3);
      const signedTwice = hooks.delivered()[2] as Received;
      await verified(signedTwice, newSecret);
      await verified(signedTwice, secret);

      // Changed: another event instead of one, and a new description.
      await card.getByRole('button', { name: `Change ${url}` }).click();
      const change = card.getByRole('region', { name: `Change ${url}` });
      await change.getByRole('checkbox', { name: /^car\.online/ }).uncheck();
      await change.getByRole('checkbox', { name: /^car\.offline/ }).check();
      await change.getByLabel('Description (optional)').fill('Fleet dashboard, offline alerts');
      await checkPage(page, 'webhooks-change');
      await change.getByRole('button', { name: `Save changes to ${url}` }).click();
      await page.getByRole('status').getByText(`Saved the changes to ${url}.`).waitFor();
      await card.getByText('Fleet dashboard, offline alerts').waitFor();
      assert.match(await cardText(), /command\.state_changed.*car\.offline/);
      assert.doesNotMatch(await cardText(), /car\.online/);

      // Disabled: no ping or redelivery offered; enabled again.
      await card.getByRole('button', { name: `Disable ${url}` }).click();
      await page.getByRole('status').getByText(`Disabled ${url}: nothing is sent to it`).waitFor();
      await card.getByText('Disabled by you').waitFor();
      assert.equal(await card.getByRole('button', { name: /^Send test ping|^Deliver again/ }).count(), 0);
      await card.getByRole('button', { name: `Enable ${url}` }).click();
      await page.getByRole('status').getByText(`Enabled ${url}: its events are sent to it again.`).waitFor();
      await card.getByText('Enabled', { exact: true }).waitFor();

      // Removed, asked first.
      await card.getByRole('button', { name: `Remove ${url}` }).click();
      const removal = page.getByRole('dialog', { name: `Remove ${url}?` });
      await removal.waitFor();
      await checkPage(page, 'webhooks-remove-question');
      await removal.getByRole('button', { name: 'Keep it' }).click();
      await card.getByRole('heading', { name: url, exact: true }).waitFor();
      await card.getByRole('button', { name: `Remove ${url}` }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Remove endpoint' }).click();
      await page.getByRole('status').getByText(`Removed ${url}: nothing more is sent to it`).waitFor();
      await page.getByText('No endpoints yet').waitFor();
      const listed = await call(service.url, 'GET', '/api/v1/webhooks', { token: developer.token });
      assert.deepEqual(listed.body.webhooks, []);
      // Closed before the next test moves the service's clock by hours, which would end its session.
      await context.close();
    });

    test('when the service disables an endpoint that kept failing then its owner is told on signing in and on every page, and enabling it on the Webhooks page sends what waited', async () => {
      const hooks = await receiver('/failing');
      hooks.answer = () => ({ status: 503, body: 'down for maintenance' });
      const owner = await signUpDeveloper(service.url, 'failing-hooks@example.com');
      const made = await call(service.url, 'POST', '/api/v1/webhooks', {
        token: owner.token,
        body: { url: hooks.url, events: ['car.online'] },
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const webhookPath = `/api/v1/webhooks/${made.body.webhook.webhook_id}`;
      const pinged = await call(service.url, 'POST', `${webhookPath}/pings`, { token: owner.token });
      assert.equal(pinged.status, 202, JSON.stringify(pinged.body));
      await eventually('the first attempt failed', () => hooks.received.length === 1);
      // Failing for more than the hour SVC_WEBHOOK_DISABLE_AFTER allows: 5 s, 5 min, 30 min, then 2 h on.
      for (const delay of retryDelaysMs.slice(0, 4)) await retryAfter(delay);
      assert.equal(hooks.received.length, 5);
      const disabled = await signedInAgain(owner);
      assert.equal(
        (await call(service.url, 'GET', webhookPath, { token: disabled.token })).body.disabled_reason,
        'failing',
      );

      const { page } = await visit(360);
      await signIn(page, service.url, owner.email);
      const notice = page.getByRole('region', { name: /A webhook endpoint of yours is disabled/ });
      await notice.getByText(`The service disabled ${hooks.url} on`).waitFor();
      await notice.getByText('every delivery to it had failed since').waitFor();
      await checkPage(page, 'webhooks-disabled-notice');
      await page.getByRole('navigation').getByRole('link', { name: 'My mini-apps' }).click();
      await page.getByRole('heading', { level: 1, name: 'My mini-apps' }).waitFor();
      await notice.waitFor();

      await notice.getByRole('link', { name: 'Webhooks page' }).click();
      await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
      await notice.getByText('choose Enable on the endpoint below').waitFor();
      const card = page.getByRole('list', { name: 'Your endpoints' }).getByRole('listitem').first();
      await card.getByText('Disabled by the service').waitFor();
      await card.getByText('Failing since').waitFor();
      assert.equal(await card.getByRole('button', { name: /^Send test ping/ }).count(), 0);
      await card.getByRole('button', { name: `Show delivery log of ${hooks.url}` }).click();
      const ping = card
        .getByRole('list', { name: `Delivery log of ${hooks.url}` })
        .locator(':scope > li')
        .first();
      await ping.getByText('Pending').waitFor();
      await ping.getByText('once the endpoint is enabled').waitFor();
      assert.equal(await ping.getByText('HTTP 503').count(), 5);
      await checkPage(page, 'webhooks-disabled');

      // The receiver is fixed; enabled, the pending ping goes out at once, and the notice goes.
      hooks.answer = () => ({ status: 204 });
      await card.getByRole('button', { name: `Enable ${hooks.url}` }).click();
      await page
        .getByRole('status')
        .getByText(`Enabled ${hooks.url}: the deliveries still pending go out at once`)
        .waitFor();
      assert.equal(await notice.count(), 0);
      await eventually('the waiting ping is delivered', () => hooks.delivered().length === 1);
      assert.equal(hooks.delivered()[0]?.id, pinged.body.event_id);
      await ping.getByText('Delivered').waitFor();
      await ping.getByText('HTTP 204').waitFor();
      await page.getByRole('navigation').getByRole('link', { name: 'SSH keys' }).click();
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
      assert.equal(await notice.count(), 0, 'the notice of before is not shown again, not even for a moment');
    });

    test('when the pages were used then nothing was fetched from outside this machine, and no page logged an error', () => {
      const origin = new URL(service.url).origin;
      const requests = visitors.flatMap((visitor) => visitor.requests);
      assert.ok(requests.length > 10);
      assert.deepEqual(
        requests.filter((request) => new URL(request.split(' ')[1] ?? '').origin !== origin),
        [],
      );
      // The one refusal the test asked for (no event chosen) is the browsers' only complaint.
      assert.deepEqual(
        visitors.flatMap((visitor) => visitor.errors),
        ['Failed to load resource: the server responded with a status of 400 (Bad Request)'],
      );
    });

    /** A new session: moving the service's clock by hours may have ended the one `who` had. */
    async function signedInAgain(who: Developer): Promise<Developer> {
      const session = await call(service.url, 'POST', '/api/v1/account/sessions', {
        body: { email: who.email, password: who.password },
      });
      assert.equal(session.status, 201, JSON.stringify(session.body));
      return { ...who, token: session.body.access_token };
    }
  },
);
