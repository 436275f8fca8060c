// What cars report, written in groups on a real store (PGlite, or Postgres with DATABASE_URL): the
// bridge takes one car's messages on several connections, so they may arrive out of the order the
// car sent them, and several go to the store in one write. A car's kept status, presence and
// location follow the car's own times; one car's bad report costs no other car its own.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { saveTelemetry, type TelemetryRow } from '../src/cars/car-report-repository.ts';
import { createCarReportService } from '../src/cars/car-report-service.ts';
import { insertCar } from '../src/cars/car-repository.ts';
import { migrateToLatest } from '../src/store/db.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const car = 'brand_a:1HGCM82633A004352';
const otherCar = 'brand_a:1HGCM82633A004353';
const notProvisioned = 'brand_a:1HGCM82633A004354';
const base = Date.parse('2026-11-29T08:00:00Z');
const at = (seconds: number) => new Date(base + seconds * 1000).toISOString();

function report(deviceId: string, seconds: number, state: Record<string, unknown> = { n: seconds }) {
  return {
    deviceId,
    hostVersion: '2.14.0',
    installedApps: [],
    state,
    reportedAt: at(seconds),
    receivedAt: new Date(),
  };
}

function fix(deviceId: string, seconds: number): TelemetryRow {
  return {
    device_id: deviceId,
    recorded_at: at(seconds),
    received_at: at(seconds),
    latitude: 48 + seconds / 1000,
    longitude: 11.5,
    accuracy_m: null,
    heading_deg: null,
    speed_kmh: null,
    odometer_km: null,
    battery_percent: null,
    live: true,
  };
}

describe('what cars report, written in groups', () => {
  let store: TestStore;
  /** Statements that wrote status reports, counted as the store was asked. */
  let statusWrites = 0;

  beforeAll(async () => {
    store = await openTestStore();
    await migrateToLatest(store.db);
    for (const deviceId of [car, otherCar]) {
      await insertCar(store.db, {
        device_id: deviceId,
        brand: 'brand_a',
        provisioned_at: new Date(base),
        owner_id: null,
        paired_at: null,
      });
    }
    store.db.on('query', (query: { sql: string }) => {
      if (query.sql.includes('insert into car_status_reports')) statusWrites += 1;
    });
  });
  afterAll(async () => {
    await store?.close();
  });
  beforeEach(async () => {
    for (const table of ['car_status_reports', 'car_presence', 'car_locations', 'car_telemetry']) {
      await store.db(table).delete();
    }
    statusWrites = 0;
  });

  const keptState = async (deviceId: string) =>
    (await store.db('car_status_reports').where({ device_id: deviceId }).first('state'))?.state;

  it('when reports arrive while a write is on its way then they go to the store together, and each caller hears of its own', async () => {
    const reports = createCarReportService({ db: store.db });
    const first = reports.saveStatus(report(car, 1), new Date());
    // The first write has started; these arrive meanwhile.
    await new Promise((resolve) => setImmediate(resolve));
    const more = [2, 3, 4, 5].map((n) => reports.saveStatus(report(n % 2 ? car : otherCar, n), new Date()));
    const unknown = reports.saveStatus(report(notProvisioned, 6), new Date());

    expect(await first).toBe('stored');
    expect(await Promise.all(more)).toEqual(['stored', 'stored', 'stored', 'stored']);
    expect(await unknown).toBe('unknown_car');
    // The first alone; then one write of each car's first report, and one of each car's second.
    expect(statusWrites).toBe(3);
    expect(await keptState(car)).toEqual({ n: 5 });
    expect(await keptState(otherCar)).toEqual({ n: 4 });
    expect(await store.db('car_status_reports').where({ device_id: notProvisioned }).first()).toBeUndefined();
  });

  it("when a car's older report arrives after a newer one then the newer one stays, and the older is said to be stale", async () => {
    const reports = createCarReportService({ db: store.db });
    // Arriving together, out of order.
    expect(
      await Promise.all([
        reports.saveStatus(report(car, 20), new Date()),
        reports.saveStatus(report(car, 10), new Date()),
      ]),
    ).toEqual(['stored', 'stale']);
    expect(await keptState(car)).toEqual({ n: 20 });
    // In a later write.
    expect(await reports.saveStatus(report(car, 15), new Date())).toBe('stale');
    expect(await keptState(car)).toEqual({ n: 20 });
    // The same time again is the car's newer word: arrival decides.
    expect(await reports.saveStatus(report(car, 20, { n: 'again' }), new Date())).toBe('stored');
    expect(await keptState(car)).toEqual({ n: 'again' });
  });

  it('when the store refuses one report of a write then the others of that write are stored', async () => {
    const reports = createCarReportService({ db: store.db });
    const written = await Promise.allSettled([
      reports.saveStatus(report(car, 1), new Date()),
      // Postgres's jsonb cannot hold the NUL character: the store refuses this report alone.
      reports.saveStatus(report(otherCar, 2, { note: 'a\u0000b' }), new Date()),
      reports.saveStatus(report(otherCar, 3), new Date()),
    ]);

    expect(written.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await keptState(car)).toEqual({ n: 1 });
    expect(await keptState(otherCar)).toEqual({ n: 3 });
  });

  it("when a car's presence messages arrive together or out of order then its connection's own time decides", async () => {
    const reports = createCarReportService({ db: store.db });
    const presence = (online: boolean, seconds: number) =>
      reports.savePresence({ deviceId: car, online, at: at(seconds) }, new Date());
    const online = async () =>
      (await store.db('car_presence').where({ device_id: car }).first('online'))?.online;

    // A new connection's `online` with the old one's will, in one write: the new connection counts.
    expect(await Promise.all([presence(true, 10), presence(false, 5)])).toEqual([true, true]);
    expect(await online()).toBe(true);
    // The old connection's will, later still: nothing changes.
    await presence(false, 5);
    expect(await online()).toBe(true);
    // At the same time, `offline` ends the connection `online` began, in whichever order.
    await Promise.all([presence(false, 10), presence(true, 10)]);
    expect(await online()).toBe(false);
    expect(
      await reports.savePresence({ deviceId: notProvisioned, online: true, at: at(1) }, new Date()),
    ).toBe(false);
  });

  it("when a car's fixes arrive out of order then its location is its newest fix by its own time", async () => {
    await saveTelemetry(store.db, [fix(car, 30), fix(car, 10)]);
    await saveTelemetry(store.db, [fix(car, 20)]);

    const location = await store.db('car_locations').where({ device_id: car }).first('recorded_at');
    expect(new Date(location.recorded_at).toISOString()).toBe(at(30));
    const history = await store.db('car_telemetry').where({ device_id: car }).select('recorded_at');
    expect(history).toHaveLength(3);
  });

  it("when cars' acknowledgements are sighted together then their last seen moves in one write, and a car not provisioned is told apart", async () => {
    const reports = createCarReportService({ db: store.db });
    let sightingWrites = 0;
    const countSightings = (query: { sql: string }) => {
      if (query.sql.includes('insert into car_presence (device_id, last_seen)')) sightingWrites += 1;
    };
    store.db.on('query', countSightings);
    const seen = new Date(base + 60_000);

    const known = await Promise.all([
      reports.sighted(car, seen),
      reports.sighted(otherCar, seen),
      reports.sighted(notProvisioned, seen),
      // A retained replay says nothing of now: the car is known, its last seen stays.
      reports.sighted(otherCar, undefined),
    ]);
    store.db.off('query', countSightings);

    expect(known).toEqual([true, true, false, true]);
    expect(sightingWrites).toBe(2);
    const lastSeen = await store.db('car_presence').whereIn('device_id', [car, otherCar]).select('last_seen');
    expect(lastSeen.map((row) => new Date(row.last_seen).getTime())).toEqual([
      seen.getTime(),
      seen.getTime(),
    ]);
    expect(await store.db('car_presence').where({ device_id: notProvisioned }).first()).toBeUndefined();
  });
});
