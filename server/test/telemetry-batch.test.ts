// The telemetry batch on its own: with a store whose writes finish when the test says, whether the
// bridge may take the next message while a batch is being written; with a real store (PGlite, or
// Postgres with DATABASE_URL), that a row the store refuses costs no other row, even when the store
// goes away meanwhile.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertCar } from '../src/cars/car-repository.ts';
import {
  createTelemetryBatch,
  type TelemetryBatchMetrics,
  type TelemetryRow,
} from '../src/cars/telemetry-batch.ts';
import { createLogger, silentLogger } from '../src/logger.ts';
import { type Db, migrateToLatest } from '../src/store/db.ts';
import { eventually } from './support/http.ts';
import { openTestStore, type TestStore } from './support/store.ts';

/** A store whose every write waits until `finishNext` is called; it keeps every row. */
function heldStore() {
  const held: (() => void)[] = [];
  const written: number[] = [];
  const db = {
    raw(_sql: string, [json]: [string]) {
      const rows = JSON.parse(json) as TelemetryRow[];
      return new Promise((resolve) => {
        held.push(() => {
          written.push(rows.length);
          resolve({ rows: rows.map((row) => ({ device_id: row.device_id })) });
        });
      });
    },
  } as unknown as Db;
  return {
    db,
    written,
    writing: () => held.length,
    finishNext: () => held.shift()?.(),
  };
}

const metrics: TelemetryBatchMetrics = { stored() {}, dropped() {} };

function fix(n: number): TelemetryRow {
  return {
    device_id: 'brand_a:1HGCM82633A004352',
    recorded_at: new Date(n * 1000).toISOString(),
    received_at: new Date(n * 1000).toISOString(),
    latitude: 48.1,
    longitude: 11.5,
    accuracy_m: null,
    heading_deg: null,
    speed_kmh: null,
    odometer_km: null,
    battery_percent: null,
    live: true,
  };
}

/** Whether the promise settles on its own within a few turns of the event loop. */
async function settles(promise: Promise<void>): Promise<boolean> {
  let settled = false;
  void promise.then(() => {
    settled = true;
  });
  for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('a telemetry batch', () => {
  it('when a full batch is being written then the next rows are taken at once, and a second full batch waits for the first', async () => {
    const store = heldStore();
    const batch = createTelemetryBatch({
      db: store.db,
      logger: silentLogger,
      metrics,
      options: { maxRows: 3, maxDelayMs: 60_000 },
    });

    for (let n = 0; n < 2; n++) expect(await settles(batch.add(fix(n)))).toBe(true);
    // The third row fills the first batch: its write starts, and the bridge goes on.
    expect(await settles(batch.add(fix(2)))).toBe(true);
    expect(store.writing()).toBe(1);
    for (let n = 3; n < 5; n++) expect(await settles(batch.add(fix(n)))).toBe(true);

    // The sixth row fills a second batch while the first is still being written: it waits.
    const sixth = batch.add(fix(5));
    expect(await settles(sixth)).toBe(false);

    store.finishNext();
    expect(await settles(sixth)).toBe(true);
    expect(store.written).toEqual([3]);
    expect(store.writing()).toBe(1);
    store.finishNext();
    await new Promise((resolve) => setImmediate(resolve));
    expect(store.written).toEqual([3, 3]);
  });
});

/** Metrics that remember what was counted, as `telemetry stored` or `telemetry dropped reason`. */
function countingMetrics() {
  const counts = new Map<string, number>();
  const add = (key: string, count: number) => counts.set(key, (counts.get(key) ?? 0) + count);
  const metrics: TelemetryBatchMetrics = {
    stored: (count) => add('telemetry stored', count),
    dropped: (reason, count = 1) => add(`telemetry dropped ${reason}`, count),
  };
  return { metrics, count: (key: string) => counts.get(key) ?? 0 };
}

describe('a telemetry batch the store refuses a row of', () => {
  let store: TestStore;
  const cars = [1, 2, 3].map((n) => `brand_b:refused-row-${process.pid}-${n}`);
  const base = Date.parse('2026-11-21T09:00:00Z');

  /** The n-th fix of a car: its own latitude, so that each is told apart in the store. */
  const carFix = (deviceId: string, n: number): TelemetryRow => ({
    ...fix(0),
    device_id: deviceId,
    recorded_at: new Date(base + n * 1000).toISOString(),
    received_at: new Date(base + n * 1000).toISOString(),
    latitude: n,
  });
  /**
   * Rows the bridge would never pass (car-time.ts refuses them when a message is read), forced in
   * here: the store refuses each, as it would a row that got past the bridge for any other reason.
   */
  const refused = (deviceId: string): TelemetryRow[] => [
    { ...carFix(deviceId, 0), recorded_at: '0000-01-01T00:00:00Z' },
    { ...carFix(deviceId, 0), recorded_at: '2026-11-21T09:00:00+23:00' },
  ];
  const storedFixes = async (deviceId: string) =>
    (await store.db('car_telemetry').where({ device_id: deviceId }).orderBy('id').select('latitude')).map(
      (row: { latitude: number }) => row.latitude,
    );

  beforeAll(async () => {
    store = await openTestStore();
    await migrateToLatest(store.db);
    for (const deviceId of cars) {
      await insertCar(store.db, {
        device_id: deviceId,
        brand: 'brand_b',
        provisioned_at: new Date(base),
        owner_id: null,
        paired_at: null,
      });
    }
  });
  afterAll(async () => {
    await store?.close();
  });
  async function clear() {
    await store.db('car_telemetry').whereIn('device_id', cars).delete();
    await store.db('car_locations').whereIn('device_id', cars).delete();
  }

  /** Ten fixes of each car, interleaved as they arrive, with the refused rows among them. */
  function interleaved(): TelemetryRow[] {
    const rows: TelemetryRow[] = [];
    for (let n = 1; n <= 10; n++) {
      for (const deviceId of cars) rows.push(carFix(deviceId, n));
      if (n === 4) rows.push(...refused(cars[0] as string));
    }
    return rows;
  }

  it('when one car sends rows the store refuses then every other row is stored, and only the refused rows are dropped, counted and logged', async () => {
    await clear();
    const { metrics, count } = countingMetrics();
    const logs: string[] = [];
    const batch = createTelemetryBatch({
      db: store.db,
      logger: createLogger({ destination: { write: (line) => logs.push(line) > 0 } }),
      metrics,
      options: { maxRows: 100, maxDelayMs: 60_000 },
    });
    for (const row of interleaved()) await batch.add(row);
    await batch.close();

    const everyFix = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    for (const deviceId of cars) expect(await storedFixes(deviceId), deviceId).toEqual(everyFix);
    // Each car's location is its last fix.
    const locations = await store.db('car_locations').whereIn('device_id', cars).select('latitude');
    expect(locations.map((row: { latitude: number }) => row.latitude)).toEqual([10, 10, 10]);
    expect(count('telemetry stored')).toBe(30);
    expect(count('telemetry dropped handler_failed')).toBe(2);
    expect(count('telemetry dropped store_unavailable')).toBe(0);
    const refusals = logs.filter((line) => line.includes('a telemetry fix the store refused dropped'));
    expect(refusals).toHaveLength(2);
    expect(refusals.every((line) => !line.includes(cars[0] as string))).toBe(true);
  });

  it('when the store goes away while a refused batch is written again then no row is dropped for it, and every row but the refused ones is stored once it is back', async () => {
    await clear();
    const { metrics, count } = countingMetrics();
    // The real store, but from its second statement (the batch's first half, written again after
    // the store refused the whole batch) it fails for half a second as a Postgres shutting down does.
    let statements = 0;
    let awayUntil = 0;
    const goesAway = {
      raw: (...args: Parameters<Db['raw']>) => {
        statements += 1;
        if (statements === 2) awayUntil = Date.now() + 500;
        if (Date.now() < awayUntil) {
          return Promise.reject(
            Object.assign(new Error('terminating connection due to administrator command'), {
              code: '57P01',
            }),
          );
        }
        return store.db.raw(...args);
      },
    } as unknown as Db;
    const batch = createTelemetryBatch({
      db: goesAway,
      logger: silentLogger,
      metrics,
      options: { maxRows: 100, maxDelayMs: 60_000 },
    });
    for (const row of interleaved()) await batch.add(row);
    await batch.flush();
    expect(statements).toBe(2);

    // The batch is tried again after the store's pause (store/outage.ts), and then halved.
    await eventually(
      'every row but the refused ones is stored',
      async () => count('telemetry stored') === 30,
    );
    for (const deviceId of cars) expect(await storedFixes(deviceId), deviceId).toHaveLength(10);
    expect(count('telemetry dropped handler_failed')).toBe(2);
    expect(count('telemetry dropped store_unavailable')).toBe(0);
    await batch.close();
  });
});
