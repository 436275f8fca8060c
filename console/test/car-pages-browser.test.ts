/**
 * The console's car pages in Chromium (Debian's, through playwright-core), with a simulated car on
 * the service's embedded broker: an owner pairs the car with the code it shows, sees it online with
 * its apps and location, locks it and hands it to another account (asked first); an admin
 * provisions a car and sees its password once, finds, rotates and decommissions it, and makes a
 * brand connector. Device ids are masked on every page, the full id only copied. axe-core on each
 * page; screenshots in test-output/console/.
 */
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { redactDeviceId } from '@svc/sdk';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from '../../server/test/support/accounts.ts';
import { chromiumMissing, launchChromium } from '../../server/test/support/browser.ts';
import { startWatchedSimulator, type WatchedSimulator } from '../../server/test/support/commands.ts';
import { call, eventually } from '../../server/test/support/http.ts';
import { signsIn } from '../../server/test/support/mqtt.ts';
import { startTestService, type TestService } from '../../server/test/support/service.ts';
import { checkPage, newVisitor, screenshots, signIn, type Visitor } from './support/pages.ts';

const missing = chromiumMissing();
const adminEmail = 'fleet-admin@example.com';

describe.skipIf(missing !== undefined)(
  `the car pages in Chromium${missing ? ` (skipped: ${missing})` : ''}`,
  () => {
    let service: TestService;
    let browser: Browser;
    let admin: Developer;
    const visitors: Visitor[] = [];
    const simulators: WatchedSimulator[] = [];

    async function visit(width = 1280): Promise<Visitor> {
      const visitor = await newVisitor(browser, width);
      await visitor.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: service.url });
      visitors.push(visitor);
      return visitor;
    }
    const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText());
    /** Whether `text` is anywhere in the page, seen or not (hidden text and attributes too). */
    const inPage = async (page: Page, text: string) => (await page.content()).includes(text);
    const lastFour = (deviceId: string) => deviceId.slice(-4);

    beforeAll(async () => {
      mkdirSync(screenshots, { recursive: true });
      service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail }, { clockRuns: true });
      browser = await launchChromium();
      admin = await signUpAdmin(service, adminEmail);
    });
    afterAll(async () => {
      await Promise.all(simulators.map((simulator) => simulator.stop()));
      await browser?.close();
      await service?.stop();
    });

    test('when an owner pairs a car with the code it shows then it is listed masked, its page shows status, location and apps, it locks and removes an app, and a transfer asks first', async () => {
      const [car] = (await provisionCars({
        apiUrl: service.url,
        token: admin.token,
        count: 1,
        brand: 'brand_a',
      })) as [CarCredential];
      const { deviceId } = car;
      const nativeId = deviceId.slice(deviceId.indexOf(':') + 1);
      const simulator = await startWatchedSimulator(service.mqttUrl, [car], {
        installedApps: [{ app_id: 'com.example.parking', version: '1.4.2' }],
        telemetryEveryMs: 500,
      });
      simulators.push(simulator);
      const owner = await signUpDeveloper(service.url, 'owner@example.com');
      const { page } = await visit(360);
      await signIn(page, service.url, owner.email);

      await page.getByRole('link', { name: 'My cars' }).click();
      await page.getByRole('heading', { level: 1, name: 'My cars' }).waitFor();
      await page.getByText('No cars yet').waitFor();
      await checkPage(page, 'my-cars-empty');

      // A malformed id is refused at its field, before any request.
      await page.getByLabel('Device id').fill('1HGCM82633A004352');
      await page.getByRole('button', { name: 'Ask the car for a code' }).click();
      await page
        .getByRole('alert')
        .getByText(/no brand prefix/)
        .waitFor();
      assert.equal(await page.getByLabel('Device id').getAttribute('aria-invalid'), 'true');

      await page.getByLabel('Device id').fill(deviceId);
      await page.getByRole('button', { name: 'Ask the car for a code' }).click();
      await page.getByText(`The car ending ${lastFour(deviceId)} shows an 8-digit code now`).waitFor();
      await checkPage(page, 'my-cars-pairing');
      const code = await waitForCode(simulator, deviceId);
      await page.getByLabel('Code the car shows').fill(`${code.slice(0, 4)} ${code.slice(4)}`);
      await page.getByRole('button', { name: 'Pair', exact: true }).click();
      await page
        .getByRole('status')
        .getByText(`Paired the car ending ${lastFour(deviceId)} with your account.`)
        .waitFor();

      // The notice comes as the pairing is answered; the list follows once it is read again.
      const cards = page.getByRole('list', { name: 'Your cars, newest first' }).getByRole('listitem');
      const card = cards.first();
      await card.getByText(redactDeviceId(deviceId)).waitFor();
      assert.equal(await cards.count(), 1);
      assert.match((await card.textContent()) ?? '', /Online/);
      assert.match((await card.textContent()) ?? '', /com\.example\.parking 1\.4\.2/);
      assert.ok(!(await inPage(page, nativeId)), 'the full device id is nowhere in the page');
      await checkPage(page, 'my-cars');

      // The full id only through the copy button.
      await card
        .getByRole('button', { name: `Copy device id of the car ending ${lastFour(deviceId)}` })
        .click();
      await card.getByText('Copied.').waitFor();
      assert.equal(await clipboard(page), deviceId);

      await card.getByRole('link', { name: `Open the car ending ${lastFour(deviceId)}` }).click();
      await page.getByRole('heading', { level: 1, name: `The car ending ${lastFour(deviceId)}` }).waitFor();
      const status = page.getByRole('region', { name: 'Status' });
      await status.getByText('Online').waitFor();
      await status.getByText('Unlocked').waitFor();
      const location = page.getByRole('region', { name: 'Location' });
      await location.getByText('Coordinates').waitFor({ timeout: 15_000 });
      const map = location.getByRole('link', { name: /Show on OpenStreetMap/ });
      assert.match((await map.getAttribute('href')) ?? '', /^https:\/\/www\.openstreetmap\.org\/\?mlat=48\./);
      await page
        .getByRole('region', { name: 'Mini-apps' })
        .getByRole('button', { name: 'Remove com.example.parking' })
        .waitFor();
      assert.ok(!(await inPage(page, nativeId)), 'the full device id is nowhere in the car page');
      await checkPage(page, 'car');

      await page.getByRole('button', { name: 'Lock doors', exact: true }).click();
      await page.getByText('Lock doors: done.').waitFor({ timeout: 15_000 });
      await status.getByText('Locked', { exact: true }).waitFor({ timeout: 15_000 });
      assert.equal(simulator.cars[0]?.doorsLocked, true, 'the car itself locked');

      // Removing an app is a command too: the car runs it, and its next report lists no app.
      await page.getByRole('button', { name: 'Remove com.example.parking' }).click();
      await page.getByText('Remove com.example.parking: done.').waitFor({ timeout: 15_000 });
      await page.getByText('The car has reported no mini-apps.').waitFor({ timeout: 15_000 });

      // A reload keeps the car (it is in the page's history entry, not in its address).
      assert.equal(new URL(page.url()).pathname, '/console/car');
      await page.reload();
      await page.getByRole('heading', { level: 1, name: `The car ending ${lastFour(deviceId)}` }).waitFor();

      // Unpair asks first; Escape keeps the car.
      await page.getByRole('button', { name: 'Unpair this car' }).click();
      const unpairDialog = page.getByRole('dialog', { name: `Unpair the car ending ${lastFour(deviceId)}?` });
      await unpairDialog.waitFor();
      await checkPage(page, 'car-unpair');
      await page.keyboard.press('Escape');
      await unpairDialog.waitFor({ state: 'detached' });

      // Transfer asks first too, then the car is the other account's.
      const newOwner = await signUpDeveloper(service.url);
      await page.getByLabel("New owner's account id").fill(newOwner.accountId);
      await page.getByRole('button', { name: 'Transfer', exact: true }).click();
      const transferDialog = page.getByRole('dialog', {
        name: `Transfer the car ending ${lastFour(deviceId)}?`,
      });
      await transferDialog.waitFor();
      await transferDialog.getByRole('button', { name: 'Transfer' }).click();
      await page
        .getByRole('status')
        .getByText(`Transferred the car ending ${lastFour(deviceId)}`)
        .waitFor();
      const theirs = await call(service.url, 'GET', '/api/v1/cars', { token: newOwner.token });
      assert.deepEqual(
        theirs.body.cars.map((listed: { device_id: string }) => listed.device_id),
        [deviceId],
      );
      const mine = await call(service.url, 'GET', '/api/v1/cars', { token: owner.token });
      assert.deepEqual(mine.body.cars, []);

      // Not an admin: the admin pages say so.
      await page.goto(`${service.url}/console/fleet`);
      await page.getByText('Only admins provision cars.').waitFor();
    });

    test('when an admin provisions a car then its password is shown once with a warning and a copy button, and finding, rotating and decommissioning it work, each asked first', async () => {
      const { page } = await visit();
      await signIn(page, service.url, adminEmail);
      await page.getByRole('link', { name: 'Fleet' }).click();
      await page.getByRole('heading', { level: 1, name: 'Fleet' }).waitFor();
      await checkPage(page, 'fleet');

      const deviceId = `brand_b:console-fleet-${process.pid}`;
      await page.getByLabel('Brand').selectOption('brand_b');
      await page.getByLabel('Device id', { exact: true }).fill(deviceId);
      await page.getByRole('button', { name: 'Provision' }).click();
      const secret = page.getByRole('region', { name: /is provisioned: its password/ });
      await secret.getByText('Shown only this once.').waitFor();
      const password = ((await secret.locator('code.password').textContent()) ?? '').trim();
      assert.match(password, /^mq_/);
      assert.ok(await signsIn(service.mqttUrl, deviceId, password), 'the password shown signs the car in');
      await secret.getByRole('button', { name: 'Copy password shown once' }).click();
      await secret.getByText('Copied.').waitFor();
      assert.equal(await clipboard(page), password);
      assert.ok(!(await inPage(page, 'console-fleet-')), 'the full device id is nowhere in the page');
      await checkPage(page, 'fleet-secret');

      await secret.getByRole('button', { name: 'I have saved the password' }).click();
      await page.getByRole('status').getByText('The password is no longer shown').waitFor();
      assert.ok(!(await inPage(page, password)));
      await page.reload();
      await page.getByRole('heading', { level: 1, name: 'Fleet' }).waitFor();
      await page
        .getByRole('list', { name: 'Every car, newest first' })
        .getByText(redactDeviceId(deviceId))
        .waitFor();
      assert.ok(!(await inPage(page, password)), 'never shown again');

      // Find it by its id, and give it a new password (asked first).
      await page.getByLabel('Device id to find').fill(deviceId);
      await page.getByRole('button', { name: 'Find' }).click();
      const found = page.getByRole('list', { name: 'Car found' }).getByRole('listitem');
      await found.getByText(redactDeviceId(deviceId)).waitFor();
      assert.match((await found.textContent()) ?? '', /nobody \(unpaired\)/);
      await found.getByRole('button', { name: /Rotate credential/ }).click();
      const rotateDialog = page.getByRole('dialog', { name: /A new password for the car ending/ });
      await rotateDialog.waitFor();
      await checkPage(page, 'fleet-rotate');
      await rotateDialog.getByRole('button', { name: 'Rotate credential' }).click();
      const rotated = page.getByRole('region', { name: /has a new password/ });
      const newPassword = ((await rotated.locator('code.password').textContent()) ?? '').trim();
      assert.match(newPassword, /^mq_/);
      assert.notEqual(newPassword, password);
      assert.equal(await signsIn(service.mqttUrl, deviceId, password), false, 'the old password stopped');
      await rotated.getByRole('button', { name: 'I have saved the password' }).click();

      // Not found: said so, not shown as an error.
      await page.getByLabel('Device id to find').fill('brand_b:never-provisioned');
      await page.getByRole('button', { name: 'Find' }).click();
      await page.getByText('No car with this id is provisioned.').waitFor();

      await page.getByLabel('Device id to find').fill(deviceId);
      await page.getByRole('button', { name: 'Find' }).click();
      await found.getByRole('button', { name: /Decommission/ }).click();
      const decommissionDialog = page.getByRole('dialog', { name: /Decommission the car ending/ });
      await decommissionDialog.getByRole('button', { name: 'Decommission' }).click();
      await page
        .getByRole('status')
        .getByText(/Decommissioned the car ending/)
        .waitFor();
      const listed = await call(
        service.url,
        'GET',
        `/api/v1/admin/cars?device_id=${encodeURIComponent(deviceId)}`,
        {
          token: admin.token,
        },
      );
      assert.deepEqual(listed.body.cars, []);
    });

    test('when an admin makes a brand connector then its password is shown once, and removing it asks first', async () => {
      const { page } = await visit(360);
      await signIn(page, service.url, adminEmail);
      await page.getByRole('link', { name: 'Brand connectors' }).click();
      await page.getByRole('heading', { level: 1, name: 'Brand connectors' }).waitFor();
      await page.getByText('No connectors yet.').waitFor();
      await page.getByLabel('Brand').selectOption('brand_c');
      await page.getByLabel('Name').fill('fleet-eu');
      await page.getByRole('button', { name: 'Make connector' }).click();
      const secret = page.getByRole('region', { name: 'connector:brand_c:fleet-eu is made: its password' });
      await secret.getByText('Shown only this once.').waitFor();
      const password = ((await secret.locator('code.password').textContent()) ?? '').trim();
      assert.ok(await signsIn(service.mqttUrl, 'connector:brand_c:fleet-eu', password));
      await checkPage(page, 'connectors-secret');
      await secret.getByRole('button', { name: 'I have saved the password' }).click();

      const connectors = page.getByRole('list', { name: 'Brand connectors' }).getByRole('listitem');
      await connectors.getByRole('button', { name: 'Remove connector:brand_c:fleet-eu' }).click();
      const dialog = page.getByRole('dialog', { name: 'Remove connector:brand_c:fleet-eu?' });
      await dialog.getByRole('button', { name: 'Remove connector' }).click();
      await page.getByRole('status').getByText('Removed connector:brand_c:fleet-eu').waitFor();
      await page.getByText('No connectors yet.').waitFor();
      await checkPage(page, 'connectors');
    });

    test('when the car pages were used then nothing was fetched from outside this machine, and no page logged an error', () => {
      const origin = new URL(service.url).origin;
      const requests = visitors.flatMap((visitor) => visitor.requests);
      assert.ok(requests.length > 10);
      assert.deepEqual(
        requests.filter((request) => new URL(request.split(' ')[1] ?? '').origin !== origin),
        [],
      );
      // A location not sent yet is a 404 the page expects (and says in words); nothing else may fail.
      assert.deepEqual(
        visitors.flatMap((visitor) => visitor.errors).filter((error) => !/status of 404/.test(error)),
        [],
      );
    });
  },
);

async function waitForCode(simulator: WatchedSimulator, deviceId: string): Promise<string> {
  await eventually('the car shows a pairing code', () => simulator.codesShownBy(deviceId).length > 0);
  return simulator.codesShownBy(deviceId).at(-1) as string;
}
