/**
 * The console in Chromium for tests: one browser context per person, with what it asked for and
 * what went wrong in its pages; and a page looked at as console-browser.test.ts looks at it (a
 * phone, a desktop and dark mode: a screenshot each, nothing wider than the screen, nothing
 * serious or critical for axe-core).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Screenshots for a person to look at (not committed). */
export const screenshots = join(import.meta.dirname, '../../../test-output/console');

export const password = 'correct horse battery staple';

export interface Visitor {
  context: BrowserContext;
  page: Page;
  requests: string[];
  errors: string[];
}

export async function newVisitor(browser: Browser, width = 1280): Promise<Visitor> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const page = await context.newPage();
  const visitor: Visitor = { context, page, requests: [], errors: [] };
  context.on('request', (request) => visitor.requests.push(`${request.method()} ${request.url()}`));
  page.on('console', (message) => {
    if (message.type() === 'error') visitor.errors.push(message.text());
  });
  page.on('pageerror', (error) => visitor.errors.push(error.message));
  return visitor;
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * The page as it is now, at 360 and 1280 px and in dark mode: a screenshot of each, nothing wider
 * than the screen, nothing serious or critical for axe-core. The page is left as it was.
 */
export async function checkPage(page: Page, name: string): Promise<void> {
  const before = page.viewportSize() ?? { width: 1280, height: 900 };
  for (const [width, colorScheme] of [
    [360, 'light'],
    [1280, 'light'],
    [1280, 'dark'],
  ] as const) {
    await page.setViewportSize({ width, height: before.height });
    await page.emulateMedia({ colorScheme });
    const shot = `${name}-${width}${colorScheme === 'dark' ? '-dark' : ''}.png`;
    await page.screenshot({ path: join(screenshots, shot), fullPage: true });
    assert.ok(
      (await page.evaluate(() => document.documentElement.scrollWidth)) <= width,
      `${name} is wider than ${width} px`,
    );
    await page.evaluate(axeSource);
    const violations = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
      const { violations } = await axe.run();
      return violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map(
          (v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
        );
    });
    assert.deepEqual(violations, [], `axe-core on ${name} at ${width} px, ${colorScheme}`);
  }
  await page.setViewportSize(before);
  await page.emulateMedia({ colorScheme: 'light' });
}

export async function signIn(page: Page, base: string, email: string): Promise<void> {
  await page.goto(`${base}/console`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
}
