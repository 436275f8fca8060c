/**
 * Pairing a car with the code it shows (DESIGN §9), with simulated cars on the embedded broker:
 * the code reaches the car (also one that comes online later), one live code per car, wrong,
 * spent and expired codes each say so, concurrent tries never exceed five, the code is never kept
 * or shown in the clear once used, and the paired owner (and nobody else) then sees the car.
 */
import assert from 'node:assert/strict';
import { type CarCredential, provisionCars } from '@svc/car-simulator';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import {
  type BareCar,
  carPath,
  commandsOf,
  connectBareCar,
  startWatchedSimulator,
  type WatchedSimulator,
} from './support/commands.ts';
import { call, eventually } from './support/http.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'pairing-admin@example.com';

describe('pairing a car with the code it shows', () => {
  let service: TestService;
  let admin: Developer;
  let commands: ReturnType<typeof commandsOf>;
  const simulators: WatchedSimulator[] = [];
  const bareCars: BareCar[] = [];

  const provision = async () =>
    (
      await provisionCars({ apiUrl: service.url, token: admin.token, count: 1, brand: 'brand_a' })
    )[0] as CarCredential;
  async function simulate(credential: CarCredential) {
    const simulator = await startWatchedSimulator(service.mqttUrl, [credential]);
    simulators.push(simulator);
    return simulator;
  }
  async function bareCar(credential: CarCredential) {
    const car = await connectBareCar(service.mqttUrl, credential);
    bareCars.push(car);
    return car;
  }
  /** The code of the pairing command `commandId`, as the bare car received it. */
  async function codeReceivedBy(car: BareCar, commandId: string): Promise<string> {
    await eventually('the car receives the pairing code', () =>
      car.received.some((command) => command.command_id === commandId),
    );
    const command = car.received.find((received) => received.command_id === commandId);
    assert.ok(command?.name === 'pairing.show_code', JSON.stringify(command));
    return command.args.code;
  }
  const wrongCodeFor = (code: string) => String((Number(code) + 1) % 100_000_000).padStart(8, '0');

  beforeAll(async () => {
    service = await startTestService(
      { SVC_ADMIN_EMAILS: adminEmail, SVC_COMMAND_SWEEP: '1s' },
      { clockRuns: true },
    );
    admin = await signUpAdmin(service, adminEmail);
    commands = commandsOf(service.url);
  });
  afterAll(async () => {
    await Promise.all(bareCars.map((car) => car.end()));
    await Promise.all(simulators.map((simulator) => simulator.stop()));
    await service?.stop();
  });

  test('when a user asks to pair a connected car then 202, the car shows an 8-digit code, and asking again while it lives sends nothing new', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    const simulator = await simulate(credential);

    const asked = await commands.pair(user.token, credential.deviceId);
    assert.equal(asked.status, 202, JSON.stringify(asked.body));
    assert.equal(asked.body.device_id, credential.deviceId);
    assert.equal(asked.body.brand, 'brand_a');
    const fiveMinutes = Date.parse(asked.body.expires_at) - service.clock.now;
    assert.ok(fiveMinutes > 295_000 && fiveMinutes <= 300_000, `expires in ${fiveMinutes} ms`);
    await commands.until(admin.token, credential.deviceId, asked.body.command_id, 'completed');
    const [code] = simulator.codesShownBy(credential.deviceId);
    assert.match(code ?? '', /^\d{8}$/);

    const again = await commands.pair(user.token, credential.deviceId, {});
    assert.equal(again.status, 202);
    assert.deepEqual(again.body, asked.body, 'the same command and expiry');
    const listed = await commands.list(admin.token, credential.deviceId);
    assert.deepEqual(
      listed.body.commands.map((command: { name: string; args: unknown }) => [command.name, command.args]),
      [['pairing.show_code', {}]],
      'one command, and the code is not shown to whoever reads the list',
    );
    assert.deepEqual(simulator.codesShownBy(credential.deviceId), [code], 'the car showed one code');

    // Stored as a salted hash; the command that carried it forgets it once the car showed it.
    const [stored] = await service.store.db('pairing_codes').where({ device_id: credential.deviceId });
    assert.ok(stored);
    assert.ok(!JSON.stringify(stored).includes(code as string), 'no code in the clear');
    const [carried] = await service.store.db('car_commands').where({ command_id: asked.body.command_id });
    assert.ok(!JSON.stringify(carried).includes(code as string), 'the command forgot the code');
  });

  test('when wrong codes are typed then each says how many tries are left, a code with too few digits costs none, after five the code is spent even for the right one, and a new code pairs, typed with spaces and dashes', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    const car = await bareCar(credential);
    const first = await commands.pair(user.token, credential.deviceId);
    const code = await codeReceivedBy(car, first.body.command_id);

    const typo = await commands.pair(user.token, credential.deviceId, { code: '1234' });
    assert.equal(typo.status, 422);
    assert.equal(typo.body.code, 'wrong_pairing_code');
    assert.match(typo.body.detail, /8 digits; this has 4/);
    for (const left of [4, 3, 2, 1]) {
      const wrong = await commands.pair(user.token, credential.deviceId, { code: wrongCodeFor(code) });
      assert.equal(wrong.status, 422);
      assert.equal(wrong.body.code, 'wrong_pairing_code');
      assert.match(wrong.body.detail, new RegExp(`${left} tr(y is|ies are) left`));
    }
    const last = await commands.pair(user.token, credential.deviceId, { code: wrongCodeFor(code) });
    assert.equal(last.body.code, 'wrong_pairing_code');
    assert.match(last.body.detail, /last try: ask for a new one/);
    const spent = await commands.pair(user.token, credential.deviceId, { code });
    assert.equal(spent.status, 422);
    assert.equal(spent.body.code, 'pairing_code_spent');
    // The spent code's command ends: it is never sent again.
    assert.equal(
      (await commands.read(admin.token, credential.deviceId, first.body.command_id)).body.state,
      'expired',
    );

    const second = await commands.pair(user.token, credential.deviceId);
    assert.equal(second.status, 202);
    assert.notEqual(second.body.command_id, first.body.command_id, 'a new code');
    const newCode = await codeReceivedBy(car, second.body.command_id);
    const typed = `${newCode.slice(0, 4)} - ${newCode.slice(4)}`;
    const paired = await commands.pair(user.token, credential.deviceId, { code: typed });
    assert.equal(paired.status, 200, JSON.stringify(paired.body));
    assert.equal(paired.body.owner_id, user.accountId);
    assert.equal(paired.body.device_id, credential.deviceId);
    assert.ok(paired.body.paired_at);
    assert.equal(
      await service.store.db('pairing_codes').where({ device_id: credential.deviceId }).first(),
      undefined,
      'a used code is gone',
    );
  });

  test('when the car is paired then its owner sees it, anyone else gets 409 for pairing and 404 for the rest, and the owner asking again gets the car with nothing sent', async () => {
    const owner = await signUpDeveloper(service.url);
    const stranger = await signUpDeveloper(service.url);
    const credential = await provision();
    const car = await bareCar(credential);
    const asked = await commands.pair(owner.token, credential.deviceId);
    const code = await codeReceivedBy(car, asked.body.command_id);

    const beforePairing = await call(service.url, 'GET', carPath(credential.deviceId, 'status'), {
      token: owner.token,
    });
    assert.equal(beforePairing.status, 404, 'asking for a code makes nobody an owner');
    assert.equal((await commands.pair(owner.token, credential.deviceId, { code })).status, 200);

    const status = await call(service.url, 'GET', carPath(credential.deviceId, 'status'), {
      token: owner.token,
    });
    assert.equal(status.status, 200, JSON.stringify(status.body));
    // The code came by the outbox; the car's `online` by the bridge, which may be a moment behind.
    await eventually(
      'the owner sees the car online',
      async () =>
        (await call(service.url, 'GET', carPath(credential.deviceId, 'status'), { token: owner.token })).body
          .online === true,
    );
    for (const body of [undefined, { code }]) {
      const taken = await commands.pair(stranger.token, credential.deviceId, body);
      assert.equal(taken.status, 409, JSON.stringify(body));
      assert.equal(taken.body.code, 'car_already_paired');
    }
    for (const read of ['status', 'install', 'commands']) {
      const reply = await call(service.url, 'GET', carPath(credential.deviceId, read), {
        token: stranger.token,
      });
      assert.equal(reply.status, 404, read);
      assert.equal(reply.body.code, 'car_not_found', read);
    }
    const commandsBefore = (await commands.list(owner.token, credential.deviceId)).body.commands.length;
    for (const body of [undefined, { code }]) {
      const again = await commands.pair(owner.token, credential.deviceId, body);
      assert.equal(again.status, 200, JSON.stringify(body));
      assert.equal(again.body.owner_id, owner.accountId);
    }
    assert.equal(
      (await commands.list(owner.token, credential.deviceId)).body.commands.length,
      commandsBefore,
    );
  });

  test('when the code is older than five minutes then 422 pairing_code_expired, and its command expires with it', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    const car = await bareCar(credential);
    const asked = await commands.pair(user.token, credential.deviceId);
    const code = await codeReceivedBy(car, asked.body.command_id);
    service.clock.advance(5 * 60_000 + 1000);
    const late = await commands.pair(user.token, credential.deviceId, { code });
    assert.equal(late.status, 422);
    assert.equal(late.body.code, 'pairing_code_expired');
    assert.match(late.body.detail, /ask for a new one/);
    await commands.until(admin.token, credential.deviceId, asked.body.command_id, 'expired');

    const fresh = await commands.pair(user.token, credential.deviceId);
    assert.notEqual(fresh.body.command_id, asked.body.command_id);
    const freshCode = await codeReceivedBy(car, fresh.body.command_id);
    assert.equal((await commands.pair(user.token, credential.deviceId, { code: freshCode })).status, 200);
  });

  test('when a sixth code within an hour is asked for then 429 too_many_pairing_codes with Retry-After, and an hour after the first one it is sent', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    // Five codes, each spent by five wrong guesses, so that the next ask makes a new one.
    for (let made = 0; made < 5; made++) {
      const asked = await commands.pair(user.token, credential.deviceId);
      assert.equal(asked.status, 202, JSON.stringify(asked.body));
      for (let guess = 0; guess < 5; guess++) {
        const wrong = await commands.pair(user.token, credential.deviceId, { code: '00000000' });
        assert.equal(wrong.status, 422);
      }
    }
    const refused = await commands.pair(user.token, credential.deviceId);
    assert.equal(refused.status, 429, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'too_many_pairing_codes');
    const retryAfter = Number(refused.headers['retry-after']);
    assert.ok(retryAfter > 59 * 60 && retryAfter <= 60 * 60, `Retry-After ${retryAfter}`);
    // An hour on for this car (the service's clock stays, so that the accounts' tokens do too).
    await service.store
      .db('car_commands')
      .where({ device_id: credential.deviceId })
      .update({ created_at: service.store.db.raw("created_at - interval '61 minutes'") });
    assert.equal((await commands.pair(user.token, credential.deviceId)).status, 202);
  });

  test('when a code is typed but none was asked for then 422 no_pairing_code; a car never provisioned is 404', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    const none = await commands.pair(user.token, credential.deviceId, { code: '12345678' });
    assert.equal(none.status, 422);
    assert.equal(none.body.code, 'no_pairing_code');
    for (const body of [undefined, { code: '12345678' }]) {
      const missing = await commands.pair(user.token, 'brand_a:1HGCM82633A004352', body);
      assert.equal(missing.status, 404);
      assert.equal(missing.body.code, 'car_not_found');
    }
  });

  test('when many tries arrive at once then no more than five are judged, and the rest find the code spent', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    const car = await bareCar(credential);
    const asked = await commands.pair(user.token, credential.deviceId);
    const code = await codeReceivedBy(car, asked.body.command_id);
    const replies = await Promise.all(
      Array.from({ length: 12 }, () =>
        commands.pair(user.token, credential.deviceId, { code: wrongCodeFor(code) }),
      ),
    );
    const codes = replies.map((reply) => reply.body.code).sort();
    assert.deepEqual(
      codes,
      [...Array(5).fill('wrong_pairing_code'), ...Array(7).fill('pairing_code_spent')].sort(),
    );

    // The right code among wrong ones: it pairs unless five wrong ones came first.
    const stranger = await signUpDeveloper(service.url);
    const next = await commands.pair(user.token, credential.deviceId);
    const nextCode = await codeReceivedBy(car, next.body.command_id);
    const mixed = await Promise.all([
      ...Array.from({ length: 6 }, () =>
        commands.pair(stranger.token, credential.deviceId, { code: wrongCodeFor(nextCode) }),
      ),
      commands.pair(user.token, credential.deviceId, { code: nextCode }),
    ]);
    const said = mixed.map((reply) => reply.body.code ?? reply.status);
    const wrong = said.filter((code) => code === 'wrong_pairing_code').length;
    assert.ok(wrong <= 5, JSON.stringify(said));
    const paired = mixed.at(-1);
    if (paired?.status === 200) {
      assert.equal(paired.body.owner_id, user.accountId);
      assert.ok(
        said.slice(0, -1).every((code) => ['wrong_pairing_code', 'car_already_paired'].includes(code)),
      );
    } else {
      assert.equal(wrong, 5, JSON.stringify(said));
      assert.equal(paired?.body.code, 'pairing_code_spent');
    }
    const [row] = await service.store.db('pairing_codes').where({ device_id: credential.deviceId });
    assert.ok(!row || row.tries_left >= 0);
  });

  test('when the car is offline as the code is asked for then it shows the code once it connects, while the code lives', async () => {
    const user = await signUpDeveloper(service.url);
    const credential = await provision();
    const asked = await commands.pair(user.token, credential.deviceId);
    assert.equal(asked.status, 202);
    const simulator = await simulate(credential);
    await eventually(
      'the car shows the code',
      () => simulator.codesShownBy(credential.deviceId).length === 1,
    );
    const [code] = simulator.codesShownBy(credential.deviceId);
    const paired = await commands.pair(user.token, credential.deviceId, { code });
    assert.equal(paired.status, 200, JSON.stringify(paired.body));
    assert.equal(paired.body.owner_id, user.accountId);
  });
});
