/**
 * The web console in a real browser (Debian's Chromium through playwright-core): a new developer
 * signs up, adds the first key and signs in with the built `svc`; refused keys; a version moving
 * through review, seen by its developer while an admin works in a second browser; axe-core on
 * every page, on a phone and a desktop; nothing fetched from outside the machine. Screenshots of
 * each page, at 360 and 1280 px wide, go to test-output/console/ for a person to look at (not
 * committed).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { svc, userEnv } from '../../cli/test/support/svc.ts';
import { type Developer, signUpAdmin, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { publishMiniApp } from '../../server/test/support/commands.ts';
import { call } from '../../server/test/support/http.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import { makeKey } from '../../server/test/support/ssh.ts';
import {
  checkPage,
  newVisitor,
  password,
  screenshots,
  signIn as signInAs,
  type Visitor,
} from './support/pages.ts';

const missing = chromiumMissing();
const adminEmail = 'reviewer@example.com';

describe.skipIf(missing !== undefined)(
  `the web console in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let service: TestService;
    let browser: Browser;
    let home: string;
    /** The admin, signed up with the code the service printed, for the moves a test needs made. */
    let admin: Developer;
    const visitors: Visitor[] = [];

    async function visit(width = 1280): Promise<Visitor> {
      const visitor = await newVisitor(browser, width);
      visitors.push(visitor);
      return visitor;
    }

    const signIn = (page: Page, email: string) => signInAs(page, service.url, email);

    beforeAll(async () => {
      mkdirSync(screenshots, { recursive: true });
      home = mkdtempSync(join(tmpdir(), 'svc-console-'));
      // The console the tests' global setup built from this source, where `npm run build` puts it.
      service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
      browser = await launchChromium();
      admin = await signUpAdmin(service, adminEmail);
    });
    afterAll(async () => {
      await browser?.close();
      await service?.stop();
      if (home) rmSync(home, { recursive: true, force: true });
    });

    test('when a new developer signs up and pastes a key then the built svc login signs in with it', async () => {
      const { page } = await visit();
      await page.goto(`${service.url}/console`);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await page.waitForFunction(() => document.title === 'Sign in · svc console');
      assert.equal(await page.locator('html').getAttribute('lang'), 'en');
      await checkPage(page, 'sign-in');

      await page.getByRole('link', { name: 'Create an account' }).click();
      await page.getByRole('heading', { level: 1, name: 'Create an account' }).waitFor();
      await page.getByLabel('Name').fill('Ada');
      await page.getByLabel('Email').fill('ada@example.com');
      await page.getByLabel('Password').fill('too short');
      await page.getByRole('button', { name: 'Sign up' }).click();
      // The service's rule, said next to the field that broke it.
      const passwordField = page.getByLabel('Password');
      await page.getByText('Use 12 characters or more.').waitFor();
      assert.equal(await passwordField.getAttribute('aria-invalid'), 'true');
      assert.match((await passwordField.getAttribute('aria-describedby')) ?? '', /error/);
      assert.equal(await page.getByLabel('Email').getAttribute('aria-invalid'), null);
      await checkPage(page, 'sign-up-refused');

      await passwordField.fill(password);
      await page.getByRole('button', { name: 'Sign up' }).click();
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
      await page.getByText('No keys yet').waitFor();
      const stored = await page.evaluate(() => sessionStorage.getItem('svc.console.session'));
      assert.match(stored ?? '', /"token":"svc_/);
      const token = JSON.parse(stored ?? '{}').token as string;
      assert.equal(await page.evaluate(() => localStorage.length), 0);
      assert.equal(await page.evaluate(() => document.cookie), '');

      // Sign out, then in again with the password.
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByText('You are signed out.').waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('svc.console.session')), null);
      // Signing out ended the token at the service too, not only in the tab.
      assert.equal((await call(service.url, 'GET', '/api/v1/dev/me', { token })).status, 401);
      await page.getByLabel('Email').fill('ada@example.com');
      await page.getByLabel('Password').fill('not the password at all');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').waitFor();
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
      await page.waitForFunction(() => document.title === 'SSH keys · svc console');
      await page.getByText('npx svc login').first().waitFor();

      // The first key, from the real ssh-keygen, pasted as a person pastes it (comment and newline).
      const sshDir = join(home, '.ssh');
      mkdirSync(sshDir, { mode: 0o700 });
      const key = makeKey(sshDir, 'id_ed25519');
      const fingerprint = execFileSync('ssh-keygen', ['-lf', `${key.path}.pub`], { encoding: 'utf8' }).split(
        ' ',
      )[1];
      await page.getByLabel('Public key').fill(`${readFileSync(`${key.path}.pub`, 'utf8')}`);
      await page.getByLabel('Title (optional)').fill('ada laptop');
      await page.getByRole('button', { name: 'Add key' }).click();
      await page.getByRole('status').getByText(`Added “ada laptop”, ${fingerprint}.`).waitFor();
      const listed = page.getByRole('list', { name: 'Your SSH keys' }).getByRole('listitem');
      assert.equal(await listed.count(), 1);
      assert.match(
        (await listed.textContent()) ?? '',
        new RegExp(`ada laptop.*${escapeRegExp(fingerprint ?? '')}.*Last used\\s*never`),
      );
      await checkPage(page, 'ssh-keys');

      const env = userEnv(home, { SVC_API_URL: service.url });
      const login = await svc(['login'], env);
      assert.equal(login.code, 0, login.stderr);
      const whoami = await svc(['whoami'], env);
      assert.equal(whoami.code, 0, whoami.stderr);
      assert.match(whoami.stdout, /ada@example\.com/);
      assert.ok(whoami.stdout.includes(fingerprint ?? '?'), whoami.stdout);
      // The list shows the sign-in the key just made.
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
      assert.doesNotMatch((await listed.textContent()) ?? '', /Last used\s*never/);
    });

    test('when a private key, an RSA key or garbage is pasted then it is refused in words, and a private key never leaves the page', async () => {
      const { page, requests } = await visit(360);
      await signUpDeveloper(service.url, 'grace@example.com');
      await signIn(page, 'grace@example.com');
      const dir = mkdtempSync(join(home, 'keys-'));
      const privateKey = makeKey(dir, 'id_ed25519');
      const rsa = makeKey(dir, 'id_rsa', { type: 'rsa' });
      const posted = () =>
        requests.filter((request) => request === `POST ${service.url}/api/v1/dev/keys`).length;

      const postedBefore = posted();
      await page.getByLabel('Public key').fill(readFileSync(privateKey.path, 'utf8'));
      await page.getByRole('button', { name: 'Add key' }).click();
      await page.getByRole('alert').getByText('This is a private key').waitFor();
      assert.equal(posted(), postedBefore, 'the private key was sent to the service');
      assert.equal(await page.getByLabel('Public key').getAttribute('aria-invalid'), 'true');
      await checkPage(page, 'ssh-keys-refused');

      await page.getByLabel('Public key').fill(rsa.publicLine);
      await page.getByRole('button', { name: 'Add key' }).click();
      await page
        .getByRole('alert')
        .getByText(/Only ssh-ed25519 keys are supported; this key is ssh-rsa/)
        .waitFor();
      // The focus lands on the field to fix, not on the page.
      await page.waitForFunction(() => document.activeElement?.getAttribute('name') === 'public_key');

      await page.getByLabel('Public key').fill('hello, I am not a key');
      await page.getByRole('button', { name: 'Add key' }).click();
      await page
        .getByRole('alert')
        .getByText(/This does not read as an SSH public key .* it starts with ssh-ed25519/)
        .waitFor();

      // A title the service finds too long is refused at the title, in a person's words.
      await page.getByLabel('Public key').fill(makeKey(dir, 'titled').publicLine);
      await page.getByLabel('Title (optional)').fill('t'.repeat(150));
      await page.getByRole('button', { name: 'Add key' }).click();
      await page.getByText('Use 100 characters or fewer.').waitFor();
      assert.equal(await page.getByLabel('Title (optional)').getAttribute('aria-invalid'), 'true');
      assert.equal(await page.getByLabel('Public key').getAttribute('aria-invalid'), null);
      assert.match(
        (await page.getByRole('list', { name: 'Your SSH keys' }).count()) === 0 ? 'none' : 'some',
        /none/,
      );
      await page.getByText('No keys yet').waitFor();
    });

    test('when a key is removed then a confirmation comes first, and Escape keeps the key', async () => {
      const { page } = await visit();
      const developer = await signUpDeveloper(service.url, 'linus@example.com');
      const dir = mkdtempSync(join(home, 'keys-'));
      await signIn(page, developer.email);
      for (const name of ['first', 'second']) {
        await page.getByLabel('Public key').fill(makeKey(dir, name).publicLine);
        await page.getByRole('button', { name: 'Add key' }).click();
        await page.getByRole('status').getByText(`Added “${name}”`).waitFor();
      }
      const keys = page.getByRole('list', { name: 'Your SSH keys' }).getByRole('listitem');
      assert.equal(await keys.count(), 2);

      const firstRemove = keys.filter({ hasText: 'first' }).getByRole('button', { name: 'Remove' });
      await firstRemove.click();
      const dialog = page.getByRole('dialog', { name: 'Remove “first”?' });
      await dialog.waitFor();
      await checkPage(page, 'ssh-keys-remove');
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached' });
      assert.equal(await keys.count(), 2);
      // Focus goes back to the button that asked.
      assert.equal(await firstRemove.evaluate((button) => button === document.activeElement), true);

      await firstRemove.click();
      await dialog.getByRole('button', { name: 'Remove key' }).click();
      await page.getByRole('status').getByText('Removed “first”').waitFor();
      // Its button went with it; the focus is on the news, not lost to the page.
      await page.waitForFunction(() => document.activeElement?.getAttribute('role') === 'status');
      assert.equal(await keys.count(), 1);
      assert.match((await keys.textContent()) ?? '', /second/);
    });

    test('when an admin approves in a second browser then the developer sees the version move, and releases it', async () => {
      const developer = await signUpDeveloper(service.url, 'margaret@example.com');
      await publishMiniApp(service.url, developer, admin, 'com.example.console', '1.0.0', 'submitted', {
        brands: ['brand_a', 'brand_b'],
      });
      await publishMiniApp(service.url, developer, admin, 'com.example.console', '1.1.0', 'submitted');

      const developerView = await visit();
      await signIn(developerView.page, developer.email);
      const page = developerView.page;
      await page.getByRole('link', { name: 'My mini-apps' }).click();
      await page.getByRole('heading', { level: 1, name: 'My mini-apps' }).waitFor();
      assert.equal(await page.getByRole('link', { name: 'Review queue' }).count(), 0);
      const row = (version: string) =>
        page
          .getByRole('table', { name: /Versions of/ })
          .getByRole('row')
          .filter({ has: page.getByRole('rowheader', { name: version }) });
      await row('1.0.0').getByText('Submitted, waiting for review').waitFor();
      // The brands each version runs on, as its manifest lists them; none listed is every brand.
      assert.equal(
        await row('1.0.0').getByRole('cell', { name: 'brand_a, brand_b', exact: true }).count(),
        1,
      );
      assert.equal(await row('1.1.0').getByRole('cell', { name: 'All brands', exact: true }).count(), 1);
      await checkPage(page, 'my-mini-apps');

      // The admin, in a browser of their own.
      const adminView = await visit(360);
      const reviewer = adminView.page;
      await signIn(reviewer, adminEmail);
      await reviewer.getByRole('link', { name: 'Review queue' }).click();
      await reviewer.getByRole('heading', { level: 1, name: 'Review queue' }).waitFor();
      const waiting = reviewer
        .getByRole('list', { name: 'Versions waiting for review, oldest first' })
        .getByRole('listitem');
      await waiting.nth(1).waitFor();
      assert.deepEqual(
        (await waiting.getByRole('heading', { level: 3 }).allTextContents()).map((text) =>
          text.split(' ').slice(-2).join(' '),
        ),
        ['1.0.0 com.example.console', '1.1.0 com.example.console'],
      );
      assert.match((await waiting.nth(0).textContent()) ?? '', /Brandsbrand_a, brand_b/);
      assert.match((await waiting.nth(1).textContent()) ?? '', /BrandsAll brands/);
      await checkPage(reviewer, 'review-queue');

      // The admin reads the package before judging it: the file saved is the one submitted.
      const [saved] = await Promise.all([
        reviewer.waitForEvent('download'),
        reviewer.getByRole('button', { name: 'Download package com.example.console 1.0.0' }).click(),
      ]);
      assert.equal(saved.suggestedFilename(), 'com.example.console-1.0.0.tgz');
      const queued = await call(service.url, 'GET', '/api/v1/admin/review-queue', { token: admin.token });
      const submitted = queued.body.versions.find(
        (version: { version: string }) => version.version === '1.0.0',
      );
      assert.equal(
        createHash('sha256')
          .update(readFileSync(await saved.path()))
          .digest('hex'),
        submitted.package.sha256,
      );
      assert.match(execFileSync('tar', ['-tzf', await saved.path()], { encoding: 'utf8' }), /manifest\.json/);

      await reviewer.getByRole('button', { name: 'Start review of com.example.console 1.0.0' }).click();
      await reviewer.getByRole('button', { name: 'Approve com.example.console 1.0.0' }).click();
      await reviewer.getByRole('status').getByText('com.example.console 1.0.0 is now: approved.').waitFor();

      // A rejection needs a reason; the service's refusal is shown at the field.
      await reviewer.getByRole('button', { name: 'Start review of com.example.console 1.1.0' }).click();
      const reason = reviewer.getByLabel('Reason to reject com.example.console 1.1.0');
      await reviewer.getByRole('button', { name: 'Reject' }).click();
      await reviewer
        .getByRole('alert')
        .getByText('Give a reason for rejecting com.example.console 1.1.0: the developer reads it.')
        .waitFor();
      assert.equal(await reason.getAttribute('aria-invalid'), 'true');
      await checkPage(reviewer, 'review-queue-reject');
      await reason.fill('It calls an origin its manifest does not declare.');
      await reviewer.getByRole('button', { name: 'Reject' }).click();
      await reviewer.getByText('Nothing waits for review.').waitFor();

      // The queue follows what happens while it is open: a new version arrives, and its developer
      // withdraws it before the admin gets to it.
      const later = await publishMiniApp(
        service.url,
        developer,
        admin,
        'com.example.console',
        '1.2.0',
        'submitted',
      );
      const startLater = reviewer.getByRole('button', { name: 'Start review of com.example.console 1.2.0' });
      await startLater.waitFor({ timeout: 20_000 });
      const withdrawn = await call(service.url, 'POST', `/api/v1/mini-apps/versions/${later}/transitions`, {
        token: developer.token,
        body: { to: 'withdrawn' },
      });
      assert.equal(withdrawn.status, 200);
      await startLater.click();
      await reviewer
        .getByRole('alert')
        .getByText(/com\.example\.console 1\.2\.0 moved on meanwhile \(its developer or an admin moved it\)/)
        .waitFor();
      // The refusal has the focus: a second Enter presses nothing.
      await reviewer.waitForFunction(() => document.activeElement?.getAttribute('role') === 'alert');
      await reviewer.getByText('Nothing waits for review.').waitFor();

      // The developer's page follows the review without a reload.
      await row('1.0.0').getByText('Approved', { exact: true }).waitFor({ timeout: 20_000 });
      await row('1.1.0')
        .getByText('It calls an origin its manifest does not declare.')
        .waitFor({ timeout: 20_000 });
      await row('1.0.0').getByRole('button', { name: 'Release Hello Car 1.0.0' }).click();
      await page.getByRole('status').getByText('Released com.example.console 1.0.0').waitFor();
      await row('1.0.0').getByText('Live on cars').waitFor();
      assert.match(
        (await page.getByRole('region', { name: /com\.example\.console/ }).textContent()) ?? '',
        /Live version1\.0\.0/,
      );

      // The admin removes it from cars, with a reason the developer reads.
      await reviewer.reload();
      const live = reviewer
        .getByRole('list', { name: 'Versions live on cars' })
        .getByRole('listitem')
        .filter({ hasText: 'com.example.console' });
      await live
        .getByLabel('Reason to remove com.example.console 1.0.0')
        .fill('Reported unsafe while driving.');
      await live.getByRole('button', { name: 'Remove' }).click();
      await reviewer.getByRole('status').getByText('com.example.console 1.0.0 is now: removed.').waitFor();
      await row('1.0.0').getByText('Reported unsafe while driving.').waitFor({ timeout: 20_000 });
    });

    test('when a version waits for review then its developer can withdraw it, and cannot release it, nor an approved one older than the live one', async () => {
      const developer = await signUpDeveloper(service.url, 'barbara@example.com');
      await publishMiniApp(service.url, developer, admin, 'com.example.withdrawn', '2.0.0', 'submitted');
      await publishMiniApp(service.url, developer, admin, 'com.example.older', '1.0.0', 'approved');
      await publishMiniApp(service.url, developer, admin, 'com.example.older', '1.1.0', 'published');
      const { page } = await visit(360);
      await signIn(page, developer.email);
      await page.getByRole('link', { name: 'My mini-apps' }).click();
      // 1.0.0 is approved, but 1.1.0 is live: the service would refuse to release it, so no button.
      const older = page.getByRole('region', { name: /com\.example\.older/ });
      await older.getByText('A newer version is live').waitFor();
      assert.equal(await older.getByRole('button', { name: /Release/ }).count(), 0);

      const table = page.getByRole('region', { name: /com\.example\.withdrawn/ }).getByRole('table');
      await table.getByText('Submitted, waiting for review').waitFor();
      await checkPage(page, 'my-mini-apps-in-review');
      assert.equal(await table.getByRole('button', { name: /Release/ }).count(), 0);
      await table.getByRole('button', { name: /Withdraw .* 2\.0\.0/ }).click();
      await page.getByRole('status').getByText('Withdrew com.example.withdrawn 2.0.0 from review.').waitFor();
      await table.getByText('Withdrawn', { exact: true }).waitFor();
      assert.equal(await table.getByRole('button', { name: /Withdraw|Release/ }).count(), 0);
      await checkPage(page, 'my-mini-apps-withdrawn');
      // Withdrawn, the version keeps its package: its developer can still save what was submitted.
      const [saved] = await Promise.all([
        page.waitForEvent('download'),
        table.getByRole('button', { name: 'Download package com.example.withdrawn 2.0.0' }).click(),
      ]);
      assert.equal(saved.suggestedFilename(), 'com.example.withdrawn-2.0.0.tgz');
      assert.match(execFileSync('tar', ['-tzf', await saved.path()], { encoding: 'utf8' }), /manifest\.json/);
    });

    test('when the service refuses the token then the console forgets it and asks for a sign-in, saying why', async () => {
      const { page } = await visit();
      await signUpDeveloper(service.url, 'ken@example.com');
      await signIn(page, 'ken@example.com');
      // A token the service no longer knows, as after a restart with a wiped store.
      await page.evaluate(() => {
        const stored = JSON.parse(sessionStorage.getItem('svc.console.session') ?? '{}');
        sessionStorage.setItem(
          'svc.console.session',
          JSON.stringify({ ...stored, token: 'svc_revokedrevokedrevokedrevoked' }),
        );
      });
      await page.getByRole('link', { name: 'My mini-apps' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await page.getByRole('status').getByText('Your session has ended: sign in again.').waitFor();
      assert.equal(await page.evaluate(() => sessionStorage.getItem('svc.console.session')), null);
      // Signing in again goes back to the page that was asked for.
      await page.getByLabel('Email').fill('ken@example.com');
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'My mini-apps' }).waitFor();

      // A signed-in page asked for without a session: sign in first, then that page.
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.goto(`${service.url}/console/apps`);
      await page.getByRole('status').getByText('Sign in to open My mini-apps.').waitFor();
      await page.getByLabel('Email').fill('ken@example.com');
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'My mini-apps' }).waitFor();

      // A session that runs out while the page is open ends at the next step, saying so.
      // (Once the header shows who is signed in: a render after the expiry hides the signed-in links.)
      await page.getByRole('banner').getByText('ken@example.com').waitFor();
      await page.evaluate(() => {
        const stored = JSON.parse(sessionStorage.getItem('svc.console.session') ?? '{}');
        sessionStorage.setItem(
          'svc.console.session',
          JSON.stringify({ ...stored, expiresAt: new Date(Date.now() - 1000).toISOString() }),
        );
      });
      await page.getByRole('link', { name: 'SSH keys' }).click();
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      await page.getByRole('status').getByText('Your session has ended: sign in again.').waitFor();

      // An empty sign-in is refused at its fields, in words.
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByText('Enter an email address, like ada@example.com.').waitFor();
      assert.equal(await page.getByLabel('Email').getAttribute('aria-invalid'), 'true');
      await page.getByLabel('Email').fill('ken@example.com');
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();

      // A page the console does not have says so.
      await page.goto(`${service.url}/console/nonsense`);
      await page.getByRole('heading', { level: 1, name: 'Page not found' }).waitFor();
      await checkPage(page, 'page-not-found');
      await page.getByRole('link', { name: 'Go to SSH keys' }).click();
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
    });

    test('when a person uses only the keyboard then every control is reached in order, with a visible focus', async () => {
      const { page } = await visit();
      await page.goto(`${service.url}/console/sign-in`);
      await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
      // Opening a page puts the focus on its heading, so the first Tab goes to its first field.
      assert.equal(await page.evaluate(() => document.activeElement?.tagName), 'H1');
      const focused = () =>
        page.evaluate(() => {
          const element = document.activeElement as HTMLElement;
          const style = getComputedStyle(element);
          const label = element.id
            ? document.querySelector(`label[for="${element.id}"]`)?.textContent
            : undefined;
          // A focus anyone can see: an outline drawn around it.
          const visible = style.outlineStyle !== 'none' && Number.parseFloat(style.outlineWidth) >= 2;
          return `${label ?? element.textContent?.trim()}${visible ? '' : ' (no visible focus)'}`;
        });
      const reached: string[] = [];
      for (let i = 0; i < 4; i++) {
        await page.keyboard.press('Tab');
        reached.push(await focused());
      }
      assert.deepEqual(reached, ['Email', 'Password', 'Sign in', 'Create an account']);
      await page.getByLabel('Email').focus();
      await page.keyboard.press('Shift+Tab');
      assert.equal(await focused(), 'Skip to content');
      // Enter in the form signs in.
      await signUpDeveloper(service.url, 'keyboard@example.com');
      await page.getByLabel('Email').focus();
      await page.keyboard.type('keyboard@example.com');
      await page.keyboard.press('Tab');
      await page.keyboard.type(password);
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 1, name: 'SSH keys' }).waitFor();
    });

    test('when the pages were used then nothing was fetched from outside this machine, and no page logged an error', () => {
      const origin = new URL(service.url).origin;
      const requests = visitors.flatMap((visitor) => visitor.requests);
      assert.ok(requests.length > 20);
      assert.deepEqual(
        requests.filter((request) => new URL(request.split(' ')[1] ?? '').origin !== origin),
        [],
      );
      assert.deepEqual(
        // The refusals the tests ask for (a wrong password, a refused key) are logged by the
        // browser as failed loads; nothing else may be.
        visitors
          .flatMap((visitor) => visitor.errors)
          .filter((error) => !/status of 4(00|01|09|22)/.test(error)),
        [],
      );
    });
  },
);

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
