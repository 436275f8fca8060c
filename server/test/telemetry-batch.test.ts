// The telemetry batch on its own, with a store whose writes finish when the test says: whether the
// bridge may take the next message while a batch is being written.
import { describe, expect, it } from 'vitest';
import type { TelemetryRow } from '../src/cars/car-report-repository.ts';
import { silentLogger } from '../src/logger.ts';
import type { BridgeMetrics } from '../src/mqtt/bridge-metrics.ts';
import { createTelemetryBatch } from '../src/mqtt/telemetry-batch.ts';
import type { Db } from '../src/store/db.ts';

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

const metrics: BridgeMetrics = { counted() {}, dropped() {} };

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
