import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { buildDocs } from '../../scripts/build-docs.ts';
import { chromiumMissing, launchChromium } from './support/browser.ts';
import { startTestService, type TestService } from './support/service.ts';

const missing = chromiumMissing();

describe.skipIf(missing)(`the reference page in a browser${missing ? ` (${missing})` : ''}`, () => {
  let service: TestService;
  let browser: Browser;
  const docsDir = mkdtempSync(join(tmpdir(), 'svc-docs-'));

  beforeAll(async () => {
    buildDocs(docsDir);
    service = await startTestService({}, { docsDir });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    rmSync(docsDir, { recursive: true, force: true });
  });

  test('when a sidebar link is opened in a new tab then that tab shows its section of /docs, not a 404', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${service.url}/docs`);
    const link = page.locator('.menu-content a', { hasText: 'Mini-apps' }).first();
    await link.waitFor();

    const [tab] = await Promise.all([context.waitForEvent('page'), link.click({ modifiers: ['Control'] })]);
    await tab.waitForLoadState();
    const opened = new URL(tab.url());
    assert.equal(opened.pathname, '/docs');
    assert.equal(opened.hash, '#/mini-apps');
    // The section's heading comes to the top of the window.
    await tab.waitForFunction(`(() => {
      const heading = [...document.querySelectorAll('h1, h2')].find((h) => h.textContent.trim() === 'Mini-apps');
      const top = heading?.getBoundingClientRect().top;
      return top !== undefined && top >= 0 && top < 200;
    })()`);
    assert.equal(page.url(), `${service.url}/docs`, 'the first tab stays where it was');

    // Every section link of the sidebar stays inside the page.
    const hrefs = await page
      .locator('.menu-content a')
      .evaluateAll((links) => links.map((a) => (a as unknown as { href: string }).href));
    assert.ok(hrefs.length >= 8, hrefs.join(' '));
    for (const href of hrefs) {
      if (!href.startsWith(service.url)) continue; // the credit link to Redocly's site
      assert.equal(new URL(href).pathname, '/docs', href);
    }
    await context.close();
  });

  test('when a sidebar link is clicked then the page moves to its section in the same tab', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${service.url}/docs`);
    await page.locator('.menu-content a', { hasText: 'Developer' }).first().click();
    await page.waitForURL(/#\/developer$/);
    assert.equal(context.pages().length, 1);
    await context.close();
  });

  test('when /docs is read, searched and browsed then it names this service and reaches no other host', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(service.url) && !request.url().startsWith('data:'))
        elsewhere.push(request.url());
    });
    const refused: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) refused.push(message.text());
    });
    await page.goto(`${service.url}/docs`);
    await page.locator('.menu-content').waitFor();
    assert.ok((await page.content()).includes(service.url), 'the page names this service');
    for (const section of ['Sign-in', 'Mini-apps', 'Review']) {
      await page.locator('.menu-content a', { hasText: section }).first().click();
    }
    await page.mouse.wheel(0, 5000);
    // Redoc sends its usage reports in batches, a few seconds apart.
    await page.waitForTimeout(6000);
    assert.deepEqual(elsewhere, [], 'no logo, icon, font, script or usage report from another host');
    assert.deepEqual(refused, [], 'nor any such attempt, refused by the page policy');
    await context.close();
  });
});
