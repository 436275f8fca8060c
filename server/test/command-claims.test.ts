/**
 * The command lifecycle and outbox of two replicas on one database, without the rest of the
 * service: a command made on a replica that holds no broker connection is published by the one
 * that does, woken by Postgres at commit rather than by a sweep; two replicas publishing at once
 * send each command once; a command whose transaction rolls back is never sent nor counted.
 *
 * The broker is a recording publisher here (the broker's own part is the end-to-end tests'
 * business: car-commands, command-replicas, command-outbox-faults); the store is real.
 */
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { insertCar } from '../src/cars/car-repository.ts';
import { systemClock } from '../src/clock.ts';
import { type CommandLifecycle, createCommandLifecycle } from '../src/commands/command-lifecycle.ts';
import { createCommandMetrics } from '../src/commands/command-metrics.ts';
import {
  type CommandOutbox,
  type CommandPublisher,
  createCommandOutbox,
} from '../src/commands/command-outbox.ts';
import { type ParsedDeviceId, parseDeviceId } from '../src/device-id.ts';
import { silentLogger } from '../src/logger.ts';
import { type Db, openStore } from '../src/store/db.ts';
import { eventually } from './support/http.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const onPostgres = Boolean(process.env.DATABASE_URL);

/** A broker that takes every publication after a moment, and remembers each command it took. */
function recordingBroker(connected = true) {
  const published: string[] = [];
  const publisher: CommandPublisher = {
    connected,
    async publish(_topic, payload) {
      await new Promise((resolve) => setTimeout(resolve, 2));
      published.push((JSON.parse(payload) as { command_id: string }).command_id);
    },
  };
  return { publisher, published };
}

interface Replica {
  db: Db;
  lifecycle: CommandLifecycle;
  outbox: CommandOutbox;
  registry: Registry;
}

/** A replica's command half: no sweep runs, so only a wake-up can get a command published. */
function replicaOn(db: Db, publisher?: CommandPublisher): Replica {
  const registry = new Registry();
  const lifecycle = createCommandLifecycle({
    db,
    clock: systemClock,
    metrics: createCommandMetrics(registry),
  });
  const outbox = createCommandOutbox({ db, clock: systemClock, logger: silentLogger, lifecycle });
  if (publisher) outbox.attach(publisher);
  outbox.start();
  return { db, lifecycle, outbox, registry };
}

async function counted(replica: Replica, state: string): Promise<number> {
  const metric = await replica.registry.getSingleMetric('svc_commands_total')?.get();
  return (metric?.values ?? [])
    .filter((value) => value.labels.state === state)
    .reduce((sum, value) => sum + value.value, 0);
}

function lockDoors(replica: Replica, car: ParsedDeviceId, trx: Db) {
  return replica.lifecycle.enqueue(trx, {
    car,
    name: 'doors.lock',
    args: {},
    createdBy: null,
    expiresAt: new Date(Date.now() + 60_000),
  });
}

describe('commands of two replicas on one database', () => {
  let store: TestStore;
  /** The second replica's own connection pool, as another process would have. */
  let otherDb: Db;
  const car = parseDeviceId('brand_a:1HGCM82633A004352');
  const started: Replica[] = [];

  beforeAll(async () => {
    store = await openTestStore();
    otherDb = store.databaseUrl ? openStore({ databaseUrl: store.databaseUrl }) : store.db;
    await insertCar(store.db, {
      device_id: car.deviceId,
      brand: car.brand,
      provisioned_at: new Date(),
      owner_id: null,
      paired_at: null,
    });
  });
  afterAll(async () => {
    for (const replica of started) await replica.outbox.stop();
    if (otherDb !== store.db) await otherDb.destroy();
    await store?.close();
  });

  test.skipIf(!onPostgres)(
    'when a replica without the broker makes a command then the replica with it publishes it at once, woken by the database, with no sweep',
    async () => {
      const broker = recordingBroker();
      const maker = replicaOn(store.db);
      const publisher = replicaOn(otherDb, broker.publisher);
      started.push(maker, publisher);
      // The publisher listens from its start; give its connection a moment to say LISTEN.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const made = await store.db.transaction((trx) => lockDoors(maker, car, trx));
      await eventually('the other replica publishes the command', () =>
        broker.published.includes(made.command_id),
      );
      await eventually('it is sent', async () => {
        const row = await store.db('car_commands').where({ command_id: made.command_id }).first();
        return row?.state === 'sent';
      });
      // Made on one replica and sent by the other: each move counted once, where it happened.
      assert.equal(await counted(maker, 'queued'), 1);
      assert.equal(await counted(publisher, 'sent'), 1);
      assert.equal(await counted(maker, 'sent'), 0);
      for (const replica of started.splice(0)) await replica.outbox.stop();
    },
  );

  test('when two replicas publish at once then each command goes to the broker once', async () => {
    const first = recordingBroker();
    const second = recordingBroker();
    // Neither can reach the broker while the commands are made, so both find all of them due.
    const a = replicaOn(store.db);
    const b = replicaOn(otherDb);
    started.push(a, b);
    const made = await store.db.transaction(async (trx) => {
      const rows = [];
      for (let i = 0; i < 150; i += 1) rows.push(await lockDoors(a, car, trx));
      return rows.map((row) => row.command_id);
    });
    // Then both can, and both look at once.
    a.outbox.attach(first.publisher);
    b.outbox.attach(second.publisher);
    a.outbox.wake();
    b.outbox.wake();
    const all = () => [...first.published, ...second.published];
    await eventually('every command is published', () => made.every((id) => all().includes(id)), 20_000);
    await eventually('every command is sent', async () => {
      const left = await store.db('car_commands').whereIn('command_id', made).whereNot({ state: 'sent' });
      return left.length === 0;
    });
    const times = new Map<string, number>();
    for (const id of all()) times.set(id, (times.get(id) ?? 0) + 1);
    const twice = [...times].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], 'no command was published twice');
    assert.equal((await counted(a, 'sent')) + (await counted(b, 'sent')), made.length);
    for (const replica of started.splice(0)) await replica.outbox.stop();
  });

  test('when the transaction that made a command rolls back then it is never published nor counted', async () => {
    const broker = recordingBroker();
    const replica = replicaOn(store.db, broker.publisher);
    started.push(replica);
    let madeId: string | undefined;
    await assert.rejects(
      store.db.transaction(async (trx) => {
        madeId = (await lockDoors(replica, car, trx)).command_id;
        throw new Error('the caller changed its mind');
      }),
      /changed its mind/,
    );
    // A command made after it is published; the one rolled back is not there to publish.
    const after = await store.db.transaction((trx) => lockDoors(replica, car, trx));
    await eventually('the later command is published', () => broker.published.includes(after.command_id));
    assert.ok(madeId);
    assert.equal(broker.published.includes(madeId), false);
    assert.equal(await store.db('car_commands').where({ command_id: madeId }).first(), undefined);
    assert.equal(await counted(replica, 'queued'), 1);
  });
});
