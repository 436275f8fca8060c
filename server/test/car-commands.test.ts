/**
 * Commands for cars on the embedded broker, with simulated cars and bare mqtt.js cars: a command
 * goes from `queued` to `completed` and its effect shows in the car's reports; what the contract
 * refuses is 422 and never published; a car that was offline gets its command when it connects;
 * a command not final by its expiry is `expired` and stays so; acknowledgements move a command
 * only forwards, and one of a command the car was not sent is dropped and counted; `app.install`
 * installs only a published version; and nobody but the owner and admins sees any of it.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { redactDeviceId } from '@svc/sdk';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { makeOwner } from './support/cars.ts';
import {
  type BareCar,
  carPath,
  commandsOf,
  connectBareCar,
  pairWithShownCode,
  publishMiniApp,
  startWatchedSimulator,
  type WatchedSimulator,
} from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { sample, scrape } from './support/metrics.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'commands-admin@example.com';

describe('car commands on the embedded broker', () => {
  let service: TestService;
  let admin: Developer;
  let owner: Developer;
  let stranger: Developer;
  let commands: ReturnType<typeof commandsOf>;
  let simulated: CarCredential;
  let simulator: WatchedSimulator;
  const bareCars: BareCar[] = [];
  const simulators: WatchedSimulator[] = [];

  const provision = async (count = 1) =>
    provisionCars({ apiUrl: service.url, token: admin.token, count, brand: 'brand_a' });
  async function bareCar(credential: CarCredential): Promise<BareCar> {
    const car = await connectBareCar(service.mqttUrl, credential);
    bareCars.push(car);
    return car;
  }
  async function simulate(credential: CarCredential): Promise<WatchedSimulator> {
    const started = await startWatchedSimulator(service.mqttUrl, [credential]);
    simulators.push(started);
    return started;
  }
  /** Waits until the car has received the command, and returns each copy it received. */
  async function receivedBy(car: BareCar, commandId: string) {
    await eventually('the car receives the command', () =>
      car.received.some((command) => command.command_id === commandId),
    );
    return car.received.filter((command) => command.command_id === commandId);
  }

  beforeAll(async () => {
    // The service's clock follows real time, as the simulated cars' do, and can be moved ahead.
    service = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail, SVC_COMMAND_SWEEP: '1s' },
      { clockRuns: true },
    );
    commands = commandsOf(service.url);
    admin = await signUpAdmin(service, adminEmail);
    owner = await signUpDeveloper(service.url);
    stranger = await signUpDeveloper(service.url);
    [simulated] = (await provision()) as [CarCredential];
    simulator = await simulate(simulated);
    await pairWithShownCode(service.url, owner, simulator, simulated.deviceId);
  });
  afterAll(async () => {
    await Promise.all(bareCars.map((car) => car.end()));
    await Promise.all(simulators.map((running) => running.stop()));
    await service?.stop();
  });

  test('when the owner locks the doors of a connected car then the command goes to completed, the car reports the doors locked, and each state is counted', async () => {
    const sent = await commands.send(owner.token, simulated.deviceId, { name: 'doors.lock' });
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    assert.equal(sent.body.name, 'doors.lock');
    assert.deepEqual(sent.body.args, {});
    assert.equal(sent.body.device_id, simulated.deviceId);
    assert.equal(sent.body.brand, 'brand_a');
    assert.ok(['queued', 'sent'].includes(sent.body.state), sent.body.state);
    assert.equal(sent.body.detail, null);
    assert.equal(
      Date.parse(sent.body.expires_at) - Date.parse(sent.body.created_at),
      300_000,
      'the default ttl',
    );

    const done = await commands.until(owner.token, simulated.deviceId, sent.body.command_id, 'completed');
    assert.equal(done.detail, null);
    assert.ok(Date.parse(done.updated_at) >= Date.parse(done.created_at));
    // The car reports its new state before it says `completed`.
    const status = await call(service.url, 'GET', carPath(simulated.deviceId, 'status'), {
      token: owner.token,
    });
    assert.equal(status.body.state.doors_locked, true);

    const listed = await commands.list(owner.token, simulated.deviceId);
    assert.equal(listed.status, 200);
    assert.equal(listed.body.commands[0].command_id, sent.body.command_id, 'newest first');
    assert.equal(listed.body.commands[0].state, 'completed');

    // Each move is counted once the store has it, a moment after a reader may see it. `sent` is
    // not looked for here: a car's `accepted` may overtake the broker's PUBACK (see the offline car).
    await eventually('the moves are counted', async () => {
      const metrics = await scrape(service);
      return (
        ['queued', 'accepted', 'completed'].every(
          (state) => sample(metrics, 'svc_commands_total', { name: 'doors.lock', state }) >= 1,
        ) && sample(metrics, 'svc_commands_total', { name: 'pairing.show_code', state: 'completed' }) >= 1
      );
    });
  });

  test('when the name is unknown or reserved, or the arguments do not fit, then 422 says what is wrong and nothing reaches the car', async () => {
    const [credential] = (await provision()) as [CarCredential];
    const car = await bareCar(credential);
    const refusals: [body: unknown, code: string, detail: RegExp][] = [
      [
        { name: 'doors.open' },
        'unknown_command',
        /no command "doors\.open".*doors\.lock, doors\.unlock, app\.install, app\.uninstall/,
      ],
      [
        { name: 'pairing.show_code', args: { code: '12345678' } },
        'unknown_command',
        /no command "pairing\.show_code"/,
      ],
      // Before the contract listed the names, a name of another form was the validator's 400; it
      // is no command all the same, and said so like any other.
      [{ name: 'Doors.Lock' }, 'unknown_command', /no command "Doors\.Lock"; the commands are doors\.lock/],
      [{ name: '' }, 'unknown_command', /no command ""/],
      // A name of any length is repeated only in part.
      [{ name: `doors.${'x'.repeat(5000)}` }, 'unknown_command', /^There is no command "doors\.x{94}…"; /],
      [{ name: 'app.install', args: {} }, 'invalid_command_args', /app\.install needs args\.app_id/],
      [
        { name: 'app.install', args: { app_id: 'Not An Id', version: '1.0' } },
        'invalid_command_args',
        /args\.app_id must be a mini-app id.*args\.version must be a semantic version/,
      ],
      [{ name: 'app.uninstall', args: { app_id: 7 } }, 'invalid_command_args', /args\.app_id must be string/],
      [
        { name: 'doors.lock', args: { force: true } },
        'invalid_command_args',
        /doors\.lock takes no argument force/,
      ],
    ];
    for (const [body, code, detail] of refusals) {
      const reply = await commands.send(admin.token, credential.deviceId, body);
      assert.equal(reply.status, 422, JSON.stringify(body));
      assert.equal(reply.body.code, code, JSON.stringify(reply.body));
      assert.match(reply.body.detail, detail);
    }
    const missing = await commands.send(admin.token, credential.deviceId, { name: 'app.install', args: {} });
    assert.deepEqual(missing.body.errors, [
      { path: '/body/args/app_id', message: 'app.install needs args.app_id' },
      { path: '/body/args/version', message: 'app.install needs args.version' },
    ]);
    // Without a version, the version the car should run: of an app that does not exist, none.
    const noApp = await commands.send(admin.token, credential.deviceId, {
      name: 'app.install',
      args: { app_id: 'com.example.parking' },
    });
    assert.equal(noApp.status, 404, JSON.stringify(noApp.body));
    assert.equal(noApp.body.code, 'app_not_found');
    // What every command's body shares is the contract validator's to refuse, as before.
    const malformed: unknown[] = [
      ...[0, 86_401].map((ttl) => ({ name: 'doors.lock', ttl_seconds: ttl })),
      { name: 'doors.lock', args: 'force' },
      { name: 7 },
      { name: 'doors.lock', force: true },
      { args: {} },
    ];
    for (const body of malformed) {
      const reply = await commands.send(admin.token, credential.deviceId, body);
      assert.equal(reply.status, 400, JSON.stringify(body));
      assert.equal(reply.body.code, 'validation_failed', JSON.stringify(reply.body));
    }

    // Publications leave in the order commands are made: had any refused one gone out, the car
    // would have it before this one.
    const accepted = await commands.send(admin.token, credential.deviceId, {
      name: 'doors.unlock',
    });
    assert.equal(accepted.status, 202);
    await receivedBy(car, accepted.body.command_id);
    assert.deepEqual(
      [...new Set(car.received.map((command) => command.command_id))],
      [accepted.body.command_id],
    );
    const [payload] = car.received;
    assert.deepEqual(payload, {
      command_id: accepted.body.command_id,
      device_id: credential.deviceId,
      brand: 'brand_a',
      name: 'doors.unlock',
      args: {},
      issued_at: accepted.body.created_at,
      expires_at: accepted.body.expires_at,
    });
    const listed = await commands.list(admin.token, credential.deviceId);
    assert.deepEqual(
      listed.body.commands.map((command: { name: string }) => command.name),
      ['doors.unlock'],
    );
  });

  test('when someone who neither owns the car nor is an admin asks about its commands then 404 car_not_found, as for a car that does not exist', async () => {
    const sent = await commands.send(owner.token, simulated.deviceId, { name: 'doors.unlock' });
    assert.equal(sent.status, 202);
    const never = 'brand_a:1HGCM82633A004352';
    const asks: [
      string,
      (deviceId: string) => Promise<{ status: number; body: { code: string; detail: string } }>,
    ][] = [
      ['send', (deviceId) => commands.send(stranger.token, deviceId, { name: 'doors.unlock' })],
      ['list', (deviceId) => commands.list(stranger.token, deviceId)],
      ['read', (deviceId) => commands.read(stranger.token, deviceId, sent.body.command_id)],
    ];
    for (const [what, ask] of asks) {
      const reply = await ask(simulated.deviceId);
      assert.equal(reply.status, 404, what);
      assert.equal(reply.body.code, 'car_not_found', what);
      const absent = await ask(never);
      assert.equal(absent.status, 404, what);
      assert.equal(absent.body.detail, reply.body.detail.replace(simulated.deviceId, never), what);
    }
    const asAdmin = await commands.read(admin.token, simulated.deviceId, sent.body.command_id);
    assert.equal(asAdmin.status, 200, 'an admin sees every car');
    assert.equal(asAdmin.body.command_id, sent.body.command_id);
  });

  test('when a command is asked for under another car, or does not exist, then 404 command_not_found', async () => {
    const sent = await commands.send(owner.token, simulated.deviceId, { name: 'doors.lock' });
    const [other] = (await provision()) as [CarCredential];
    const underOther = await commands.read(admin.token, other.deviceId, sent.body.command_id);
    assert.equal(underOther.status, 404);
    assert.equal(underOther.body.code, 'command_not_found');
    const none = await commands.read(admin.token, simulated.deviceId, randomUUID());
    assert.equal(none.status, 404);
    assert.equal(none.body.code, 'command_not_found');
    const notAnId = await commands.read(admin.token, simulated.deviceId, 'not-a-uuid');
    assert.equal(notAnId.status, 400);
  });

  test("when a car's commands are listed a page at a time then the pages follow newest first, and a cursor the service did not give is 400 invalid_cursor", async () => {
    const [credential] = (await provision()) as [CarCredential];
    const made: string[] = [];
    for (const name of ['doors.lock', 'doors.unlock', 'doors.lock', 'doors.unlock', 'doors.lock']) {
      made.push((await commands.send(admin.token, credential.deviceId, { name })).body.command_id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<typeof commands.list>> = await commands.list(
        admin.token,
        credential.deviceId,
        `?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      assert.equal(page.status, 200, JSON.stringify(page.body));
      assert.ok(page.body.commands.length <= 2);
      seen.push(...page.body.commands.map((command: { command_id: string }) => command.command_id));
      cursor = page.body.next_cursor;
    } while (cursor);
    assert.deepEqual(seen, [...made].reverse());

    const forged = Buffer.from(JSON.stringify(['2026-11-21T10:00:00Z', 'x'])).toString('base64url');
    for (const bad of ['not-a-cursor', forged]) {
      const reply = await commands.list(admin.token, credential.deviceId, `?cursor=${bad}`);
      assert.equal(reply.status, 400, bad);
      assert.equal(reply.body.code, 'invalid_cursor');
    }
  });

  test('when a car is offline when the command is made then it gets the command when it connects, and runs it', async () => {
    const [credential] = (await provision()) as [CarCredential];
    const sentBefore = sample(await scrape(service), 'svc_commands_total', {
      name: 'doors.lock',
      state: 'sent',
    });
    const sent = await commands.send(admin.token, credential.deviceId, { name: 'doors.lock' });
    assert.equal(sent.status, 202);
    // Published to a car that is not there: the broker took it, nobody got it.
    await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'sent');
    await eventually(
      '`sent` is counted',
      async () =>
        sample(await scrape(service), 'svc_commands_total', { name: 'doors.lock', state: 'sent' }) ===
        sentBefore + 1,
    );
    await simulate(credential);
    await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'completed');
    const status = await call(service.url, 'GET', carPath(credential.deviceId, 'status'), {
      token: admin.token,
    });
    assert.equal(status.body.state.doors_locked, true);
  });

  test('when the owner transfers the car then what they asked of it and not finished is expired and never reaches it, an admin’s command goes on, and the new owner sees only what came after', async () => {
    const [credential] = (await provision()) as [CarCredential];
    const first = await signUpDeveloper(service.url);
    const second = await signUpDeveloper(service.url);
    await makeOwner(service, credential.deviceId, first);
    const theirs = await commands.send(first.token, credential.deviceId, { name: 'doors.unlock' });
    const admins = await commands.send(admin.token, credential.deviceId, { name: 'doors.lock' });
    await commands.until(admin.token, credential.deviceId, theirs.body.command_id, 'sent');
    await commands.until(admin.token, credential.deviceId, admins.body.command_id, 'sent');

    const moved = await call(service.url, 'POST', carPath(credential.deviceId, 'transfer'), {
      token: first.token,
      body: { to_user: second.accountId },
    });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    const ended = await commands.read(admin.token, credential.deviceId, theirs.body.command_id);
    assert.equal(ended.body.state, 'expired');
    assert.match(ended.body.detail, /changed owner/);

    // The car comes online: the admin's command is sent again, the old owner's is not.
    const car = await bareCar(credential);
    await receivedBy(car, admins.body.command_id);
    assert.ok(!car.received.some((command) => command.command_id === theirs.body.command_id));

    // The new owner sees what was asked of the car since it became theirs, not before.
    const mine = await commands.send(second.token, credential.deviceId, { name: 'doors.lock' });
    const listed = await call(service.url, 'GET', carPath(credential.deviceId, 'commands'), {
      token: second.token,
    });
    assert.deepEqual(
      listed.body.commands.map((command: { command_id: string }) => command.command_id),
      [mine.body.command_id],
    );
    const before = await commands.read(second.token, credential.deviceId, theirs.body.command_id);
    assert.equal(before.status, 404);
    assert.equal(before.body.code, 'command_not_found');
    const all = await call(service.url, 'GET', carPath(credential.deviceId, 'commands'), {
      token: admin.token,
    });
    assert.equal(all.body.commands.length, 3, 'an admin sees them all');
  });

  test('when a command is not final by its expiry then it is expired, is not sent to the car that comes back later, and stays expired', async () => {
    const [credential] = (await provision()) as [CarCredential];
    const before = sample(await scrape(service), 'svc_commands_total', {
      name: 'doors.unlock',
      state: 'expired',
    });
    const sent = await commands.send(admin.token, credential.deviceId, {
      name: 'doors.unlock',
      ttl_seconds: 60,
    });
    await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'sent');
    service.clock.advance(61_000);
    const expired = await commands.until(admin.token, credential.deviceId, sent.body.command_id, 'expired');
    assert.match(expired.detail, /did not acknowledge the command before it expired/);
    await eventually(
      'the expiry is counted',
      async () =>
        sample(await scrape(service), 'svc_commands_total', { name: 'doors.unlock', state: 'expired' }) ===
        before + 1,
    );

    // Sent while the car is away, `later` reaches it only in the pass that sends a returning car
    // what is not final, oldest first: the pass the expired command would be in, ahead of it.
    const later = await commands.send(admin.token, credential.deviceId, { name: 'doors.lock' });
    const car = await bareCar(credential);
    await receivedBy(car, later.body.command_id);
    // A car may be given a command twice (it de-duplicates by id); never the expired one.
    assert.deepEqual(
      [...new Set(car.received.map((command) => command.command_id))],
      [later.body.command_id],
      'the expired command was not sent again',
    );
    // A late word from the car changes nothing: expired is final.
    await car.ack(sent.body.command_id, 'completed');
    await car.ack(later.body.command_id, 'completed');
    await commands.until(admin.token, credential.deviceId, later.body.command_id, 'completed');
    assert.equal(
      (await commands.read(admin.token, credential.deviceId, sent.body.command_id)).body.state,
      'expired',
    );
  });

  test('when a car acknowledges then the command moves only forwards, and keeps the detail the car gave', async () => {
    const [credential] = (await provision()) as [CarCredential];
    const car = await bareCar(credential);
    const first = (await commands.send(admin.token, credential.deviceId, { name: 'doors.lock' })).body;
    await receivedBy(car, first.command_id);
    await car.ack(first.command_id, 'accepted', 'starting');
    const accepted = await commands.until(admin.token, credential.deviceId, first.command_id, 'accepted');
    assert.equal(accepted.detail, null, 'a reason is for rejected and failed');
    // A NUL no store can keep, and half a surrogate pair: replaced, not fatal to the acknowledgement.
    await car.ack(first.command_id, 'failed', 'the driver door is open\u0000\ud800');
    const failed = await commands.until(admin.token, credential.deviceId, first.command_id, 'failed');
    assert.equal(failed.detail, 'the driver door is open\ufffd\ufffd');

    const second = (await commands.send(admin.token, credential.deviceId, { name: 'doors.unlock' })).body;
    await receivedBy(car, second.command_id);
    await car.ack(second.command_id, 'completed');
    await commands.until(admin.token, credential.deviceId, second.command_id, 'completed');
    // Crossed on the wire, or a copy answered late: neither reopens a final command.
    await car.ack(second.command_id, 'accepted');
    await car.ack(first.command_id, 'completed');
    // One car's acknowledgements are handled in order: once this one moved, those before were read.
    const third = (await commands.send(admin.token, credential.deviceId, { name: 'doors.lock' })).body;
    await receivedBy(car, third.command_id);
    await car.ack(third.command_id, 'rejected', 'expired');
    const rejected = await commands.until(admin.token, credential.deviceId, third.command_id, 'rejected');
    assert.equal(rejected.detail, 'expired');
    assert.equal(
      (await commands.read(admin.token, credential.deviceId, second.command_id)).body.state,
      'completed',
    );
    const stillFailed = (await commands.read(admin.token, credential.deviceId, first.command_id)).body;
    assert.equal(stillFailed.state, 'failed');
    assert.equal(stillFailed.detail, 'the driver door is open\ufffd\ufffd');
  });

  test("when a car acknowledges a command it was not sent (unknown, or another car's) then the acknowledgement is dropped, counted and logged with the car's id redacted", async () => {
    const [oneCredential, otherCredential] = (await provision(2)) as [CarCredential, CarCredential];
    const one = await bareCar(oneCredential);
    const other = await bareCar(otherCredential);
    const othersCommand = (await commands.send(admin.token, other.deviceId, { name: 'doors.lock' })).body;
    await receivedBy(other, othersCommand.command_id);

    const dropped = async (reason: string) =>
      sample(await scrape(service), 'svc_mqtt_dropped_total', { reason });
    for (const [reason, commandId] of [
      ['unknown_command', randomUUID()],
      ['command_of_another_car', othersCommand.command_id],
    ] as const) {
      const before = await dropped(reason);
      const from = service.logs.length;
      await one.ack(commandId, 'completed');
      await eventually(`a ${reason} drop is counted`, async () => (await dropped(reason)) === before + 1);
      const lines = service.logs.slice(from).map((line) => JSON.parse(line));
      const line = lines.find((entry) => entry.reason === reason);
      assert.ok(line, `a log line says ${reason}`);
      assert.equal(line.device, redactDeviceId(one.deviceId));
      assert.ok(!service.logs.slice(from).join('\n').includes(one.deviceId), 'the device id is redacted');
    }
    assert.equal(
      (await commands.read(admin.token, other.deviceId, othersCommand.command_id)).body.state,
      'sent',
      "another car's word does not move the command",
    );
    await other.ack(othersCommand.command_id, 'completed');
    await commands.until(admin.token, other.deviceId, othersCommand.command_id, 'completed');
  });

  test('when the owner installs a mini-app then only a published version is sent, the car reports it, and install lists it; uninstall takes it away', async () => {
    const developer = await signUpDeveloper(service.url);
    const appId = `com.example.cars-${randomBytes(3).toString('hex')}`;
    await publishMiniApp(service.url, developer, admin, appId, '1.0.0');
    await publishMiniApp(service.url, developer, admin, appId, '1.1.0', 'approved');

    const refused: [args: Record<string, string>, status: number, code: string][] = [
      [{ app_id: appId, version: '1.1.0' }, 409, 'version_not_published'],
      [{ app_id: appId, version: '9.9.9' }, 404, 'version_not_found'],
      [{ app_id: 'com.example.no-such-app', version: '1.0.0' }, 404, 'app_not_found'],
    ];
    for (const [args, status, code] of refused) {
      const reply = await commands.send(owner.token, simulated.deviceId, { name: 'app.install', args });
      assert.equal(reply.status, status, JSON.stringify(args));
      assert.equal(reply.body.code, code);
    }
    const notPublished = await commands.send(owner.token, simulated.deviceId, {
      name: 'app.install',
      args: { app_id: appId, version: '1.1.0' },
    });
    assert.match(notPublished.body.detail, /1\.1\.0 of .* is approved, not published/);

    const install = await commands.send(owner.token, simulated.deviceId, {
      name: 'app.install',
      args: { app_id: appId, version: '1.0.0' },
      ttl_seconds: 3600,
    });
    assert.equal(install.status, 202, JSON.stringify(install.body));
    assert.deepEqual(install.body.args, { app_id: appId, version: '1.0.0' });
    await commands.until(owner.token, simulated.deviceId, install.body.command_id, 'completed');
    const installed = await call(service.url, 'GET', carPath(simulated.deviceId, 'install'), {
      token: owner.token,
    });
    assert.ok(
      installed.body.installed_apps.some(
        (app: { app_id: string; version: string }) => app.app_id === appId && app.version === '1.0.0',
      ),
      JSON.stringify(installed.body),
    );

    const uninstall = await commands.send(owner.token, simulated.deviceId, {
      name: 'app.uninstall',
      args: { app_id: appId },
    });
    await commands.until(owner.token, simulated.deviceId, uninstall.body.command_id, 'completed');
    const after = await call(service.url, 'GET', carPath(simulated.deviceId, 'install'), {
      token: owner.token,
    });
    assert.ok(!after.body.installed_apps.some((app: { app_id: string }) => app.app_id === appId));
  });
});
