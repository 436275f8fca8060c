/**
 * verifyWebhook in a real browser (Debian's Chromium through playwright-core): the SDK's main entry,
 * bundled for a browser as an app's bundler would, verifies the Standard Webhooks reference vector
 * with the page's Web Crypto and refuses a tampered body, so it needs nothing of Node.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { sourceCondition } from '../../scripts/build-sdk.ts';
import { repoRoot } from '../../scripts/repo-root.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { type Origin, serveOrigin } from './support/pages.ts';

const missing = chromiumMissing();

describe.skipIf(missing !== undefined)(
  `verifyWebhook in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let browser: Browser;
    let origin: Origin;

    beforeAll(async () => {
      const bundle = await build({
        entryPoints: [join(repoRoot, 'client/src/index.ts')],
        bundle: true,
        platform: 'browser',
        format: 'esm',
        conditions: [sourceCondition, 'module'],
        write: false,
        logLevel: 'silent',
      });
      // http://127.0.0.1 is a secure context, where browsers offer crypto.subtle.
      origin = await serveOrigin({
        '/index.html': '<!doctype html><title>receiver</title>',
        '/sdk.js': bundle.outputFiles.map((file) => file.text).join('\n'),
      });
      browser = await launchChromium();
    });

    afterAll(async () => {
      await browser?.close();
      await origin?.close();
    });

    test('when the page verifies the reference vector then it passes, and a tampered body is invalid_signature', async () => {
      const page = await browser.newPage();
      await page.goto(`${origin.origin}/index.html`);
      const outcome =
        await page.evaluate(`import('/sdk.js').then(async ({ verifyWebhook, WebhookVerificationError }) => {
      const headers = new Headers({
        'Webhook-Id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
        'Webhook-Timestamp': '1614265330',
        'Webhook-Signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
      });
      const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
      const now = new Date(1614265330 * 1000);
      const event = await verifyWebhook(new TextEncoder().encode('{"test": 2432232314}'), headers, secret, { now });
      const refusal = await verifyWebhook('{"test": 2432232315}', headers, secret, { now }).catch((error) => error);
      return {
        id: event.id,
        timestamp: event.signedAt.toISOString(),
        payload: event.payload,
        refusal: refusal instanceof WebhookVerificationError ? refusal.code : String(refusal),
      };
    })`);
      assert.deepEqual(outcome, {
        id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
        timestamp: '2021-02-25T15:02:10.000Z',
        payload: { test: 2432232314 },
        refusal: 'invalid_signature',
      });
    });
  },
);
