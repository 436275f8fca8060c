/**
 * The rollout page in Chromium (Debian's, through playwright-core), with simulated cars on the
 * service's embedded broker: a developer rolls an approved version out to a share of the cars
 * from My mini-apps, follows the counts on the app's rollout page, raises, pauses, resumes and
 * rolls back (asked first). No device id is on the page. axe-core on each page; screenshots in
 * test-output/console/.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { provisionCars } from '@svc/car-simulator';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import {
  publishMiniApp,
  startWatchedSimulator,
  type WatchedSimulator,
} from '../../server/test/support/commands.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import { checkPage, newVisitor, screenshots, signIn, type Visitor } from './support/pages.ts';

const missing = chromiumMissing();
const adminEmail = 'rollout-page-admin@example.com';
const appId = 'com.example.rollout-page';

describe.skipIf(missing !== undefined)(
  `the rollout page in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let service: TestService;
    let browser: Browser;
    let admin: Developer;
    let simulator: WatchedSimulator;
    const visitors: Visitor[] = [];

    beforeAll(async () => {
      mkdirSync(screenshots, { recursive: true });
      service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
      browser = await launchChromium();
      admin = await signUpAdmin(service, adminEmail);
    });
    afterAll(async () => {
      await simulator?.stop();
      await browser?.close();
      await service?.stop();
    });

    test('when a developer rolls a version out from My mini-apps then the rollout page counts the cars, and raise, pause, resume and a rollback asked first move it', async () => {
      const developer = await signUpDeveloper(service.url, 'rollout-dev@example.com');
      await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
      const cars = await provisionCars({
        apiUrl: service.url,
        token: admin.token,
        count: 12,
        brand: 'brand_a',
      });
      simulator = await startWatchedSimulator(service.mqttUrl, cars, {
        installedApps: [{ app_id: appId, version: '1.0.0' }],
      });
      await publishMiniApp(service.url, developer, admin, appId, '1.1.0', 'approved');
      const visitor = await newVisitor(browser);
      visitors.push(visitor);
      const { page } = visitor;
      await signIn(page, service.url, developer.email);

      await page.getByRole('link', { name: 'My mini-apps' }).click();
      await page.getByLabel(/^Share of the cars for .* 1\.1\.0, in %$/).fill('50');
      await page.getByRole('button', { name: /^Roll out/ }).click();
      await page.getByText(`Rolling out ${appId} 1.1.0 to 50 % of the cars`).waitFor();
      await checkPage(page, 'apps-rolling-out');

      await page.getByRole('link', { name: /^Rollout of / }).click();
      await page.getByRole('heading', { level: 1, name: `Rollout of ${appId}` }).waitFor();
      const table = page.getByRole('table', { name: 'Cars by where 1.1.0 stands on them' });
      const counts = async () => (await table.getByRole('cell').allTextContents()).map(Number);
      // The share's cars install it; the page refreshes itself.
      await page.waitForFunction(
        () => {
          const cells = [...document.querySelectorAll('table td')].map((cell) => Number(cell.textContent));
          return cells.length === 7 && cells[0] !== undefined && cells[0] > 0 && cells[0] === cells[1];
        },
        undefined,
        { timeout: 30_000 },
      );
      const [eligible, installed] = await counts();
      assert.ok(eligible !== undefined && eligible > 0 && eligible < 12, `${eligible} of 12 cars in half`);
      assert.equal(installed, eligible);
      await checkPage(page, 'rollout');
      for (const car of cars) {
        assert.ok(!(await page.content()).includes(car.deviceId.slice(car.deviceId.indexOf(':') + 1)));
      }

      await page.getByLabel('New share of the cars, in %').fill('20');
      await page.getByRole('button', { name: /^Raise/ }).click();
      await page
        .getByRole('alert')
        .getByText(/only grows/)
        .waitFor();
      await page.getByLabel('New share of the cars, in %').fill('100');
      await page.getByRole('button', { name: /^Raise/ }).click();
      await page.getByText('now goes to 100 % of the cars').waitFor();
      await page.getByRole('button', { name: /^Pause/ }).click();
      await page.getByText('Paused: no install is sent until you resume.').waitFor();
      await page.getByRole('button', { name: /^Resume/ }).click();
      await page.getByText('Resumed.').waitFor();

      await page.getByRole('button', { name: /^Roll back/ }).click();
      const question = page.getByRole('dialog', { name: `Roll back ${appId} 1.1.0?` });
      await question.waitFor();
      await checkPage(page, 'rollout-rollback-question');
      await question.getByRole('button', { name: 'Keep rolling out' }).click();
      await page.getByRole('button', { name: /^Roll back/ }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Roll back' }).click();
      await page.getByText('Rolled back: the cars that got 1.1.0 are moved back to 1.0.0.').waitFor();
      await page.getByText('Rolled back', { exact: true }).waitFor();
      assert.equal(await page.getByRole('button', { name: /^Pause|^Resume|^Complete/ }).count(), 0);
      // The one refusal the test asked for (a lower share) is the browser's only complaint.
      assert.deepEqual(visitor.errors, [
        'Failed to load resource: the server responded with a status of 409 (Conflict)',
      ]);
      assert.deepEqual(
        visitor.requests.filter((request) => !request.includes(new URL(service.url).host)),
        [],
      );
    });
  },
);
