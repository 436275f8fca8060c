// The cars' acknowledgements of their commands, written in groups on a real store (PGlite, or
// Postgres with DATABASE_URL): the bridge takes them on several connections at once, and those that
// arrive while a write is on its way go to the store together. Each still moves its own command only
// along the lifecycle's allowed moves, each caller hears what became of its own, and one the store
// refuses costs no other its move.
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CarCommandAck } from '../../generated/mqtt.ts';
import { insertCar } from '../src/cars/car-repository.ts';
import { systemClock } from '../src/clock.ts';
import { type CommandLifecycle, createCommandLifecycle } from '../src/commands/command-lifecycle.ts';
import { createCommandMetrics } from '../src/commands/command-metrics.ts';
import { parseDeviceId } from '../src/device-id.ts';
import { migrateToLatest } from '../src/store/db.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const car = parseDeviceId('brand_a:1HGCM82633A004352');
const otherCar = parseDeviceId('brand_a:1HGCM82633A004353');

describe("the cars' acknowledgements, written in groups", () => {
  let store: TestStore;
  let lifecycle: CommandLifecycle;
  /** Statements that moved commands as cars said, counted as the store was asked. */
  let ackStatements = 0;

  beforeAll(async () => {
    store = await openTestStore();
    await migrateToLatest(store.db);
    for (const { deviceId, brand } of [car, otherCar]) {
      await insertCar(store.db, {
        device_id: deviceId,
        brand,
        provisioned_at: new Date(),
        owner_id: null,
        paired_at: null,
      });
    }
    store.db.on('query', (query: { sql: string }) => {
      if (query.sql.includes('update car_commands c')) ackStatements += 1;
    });
  });
  afterAll(async () => {
    await store?.close();
  });
  beforeEach(() => {
    lifecycle = createCommandLifecycle({
      db: store.db,
      clock: systemClock,
      metrics: createCommandMetrics(new Registry()),
    });
    ackStatements = 0;
  });

  /** A `doors.lock` for `to`, `queued`, as the commands API makes it; its id. */
  async function command(to = car): Promise<string> {
    const made = await store.db.transaction((trx) =>
      lifecycle.enqueue(trx, {
        car: to,
        name: 'doors.lock',
        args: {},
        createdBy: null,
        expiresAt: new Date(Date.now() + 60_000),
      }),
    );
    return made.command_id;
  }

  const ack = (commandId: string, outcome: CarCommandAck['outcome'], from = car): CarCommandAck => ({
    command_id: commandId,
    device_id: from.deviceId,
    brand: from.brand,
    outcome,
    at: new Date().toISOString(),
  });

  const stateOf = async (commandId: string) =>
    (await store.db('car_commands').where({ command_id: commandId }).first('state'))?.state;

  it('when acknowledgements of several commands arrive at once then one statement moves them, and each caller hears of its own', async () => {
    const [first, second, ofTheOtherCar] = [await command(), await command(), await command(otherCar)];
    const unknown = '7d1c2f0e-8b7a-4c1e-9f0a-3b2c1d0e9f8a';

    const handled = await Promise.all([
      lifecycle.acknowledge(car.deviceId, ack(first, 'accepted')),
      lifecycle.acknowledge(car.deviceId, ack(second, 'completed')),
      lifecycle.acknowledge(car.deviceId, ack(unknown, 'completed')),
      lifecycle.acknowledge(car.deviceId, ack(ofTheOtherCar, 'completed')),
    ]);

    expect(handled).toEqual(['stored', 'stored', 'unknown_command', 'command_of_another_car']);
    expect(ackStatements).toBe(1);
    expect(await stateOf(first)).toBe('accepted');
    expect(await stateOf(second)).toBe('completed');
    expect(await stateOf(ofTheOtherCar)).toBe('queued');
  });

  it("when a command's acknowledgements arrive together then they are written in turn, and a late `accepted` reopens nothing", async () => {
    const doors = await command();

    const handled = await Promise.all([
      lifecycle.acknowledge(car.deviceId, ack(doors, 'completed')),
      lifecycle.acknowledge(car.deviceId, ack(doors, 'accepted')),
    ]);

    expect(handled).toEqual(['stored', 'ignored']);
    expect(ackStatements).toBe(2);
    expect(await stateOf(doors)).toBe('completed');
  });

  it('when the store refuses one acknowledgement of a group then the others still move', async () => {
    const doors = await command();

    const handled = await Promise.allSettled([
      lifecycle.acknowledge(car.deviceId, ack(doors, 'completed')),
      // No command id the store can hold: the contract's check would have dropped it before.
      lifecycle.acknowledge(car.deviceId, ack('not-a-command-id', 'completed')),
    ]);

    expect(handled[0]).toEqual({ status: 'fulfilled', value: 'stored' });
    expect(handled[1]?.status).toBe('rejected');
    expect(await stateOf(doors)).toBe('completed');
  });
});
