/**
 * SQL for what cars report over MQTT. Every write names the car and stores nothing when no such
 * car is provisioned (it says so by returning false, or by leaving the car out of what it
 * returns), so the bridge needs no look-up of its own and a decommissioned car's late messages
 * are not kept.
 */
import type { Db } from '../store/db.ts';

export interface StatusReport {
  deviceId: string;
  hostVersion: string;
  installedApps: { app_id: string; version: string }[];
  state: Record<string, unknown>;
  reportedAt: string;
  receivedAt: Date;
}

export interface TelemetryRow {
  device_id: string;
  recorded_at: string;
  received_at: string;
  latitude: number;
  longitude: number;
  accuracy_m: number | null;
  heading_deg: number | null;
  speed_kmh: number | null;
  odometer_km: number | null;
  battery_percent: number | null;
  /** Whether the message came live (not a retained replay), so that it counts as a sighting. */
  live: boolean;
}

/** `last_seen` moves forward only: a sighting older than the one kept changes nothing. */
export const upsertSeen = `
  on conflict (device_id) do update
  set last_seen = greatest(car_presence.last_seen, excluded.last_seen)`;

/** One status report of a batch, with when the service saw the car send it (undefined: a retained replay). */
export interface StatusWrite {
  report: StatusReport;
  seenAt: Date | undefined;
}

/**
 * What became of a report: `stored` (it is the car's report now), `stale` (the car's kept report
 * is newer: by the car's own `reported_at`, not by arrival, since the bridge takes one car's
 * messages on several connections) or `unknown_car` (no such car is provisioned; nothing is kept).
 */
export type StatusWritten = 'stored' | 'stale' | 'unknown_car';

/**
 * A batch of reports, at most one per car (Postgres lets one statement change a row once), in one
 * statement (store/group-write.ts): each replaces the car's kept report unless that one is newer,
 * and a live message moves the car's last seen. Answers for each report, in order.
 */
export async function saveStatusReports(db: Db, writes: StatusWrite[]): Promise<StatusWritten[]> {
  const batch = writes.map(({ report, seenAt }, seq) => ({
    seq,
    device_id: report.deviceId,
    host_version: report.hostVersion,
    installed_apps: report.installedApps,
    state: report.state,
    reported_at: report.reportedAt,
    received_at: report.receivedAt,
    seen_at: seenAt ?? null,
  }));
  const { rows } = await db.raw(
    `with batch as (
       select b.* from jsonb_to_recordset(?::jsonb) as b(
         seq int, device_id text, host_version text, installed_apps jsonb, state jsonb,
         reported_at timestamptz, received_at timestamptz, seen_at timestamptz)
       where exists (select 1 from cars where cars.device_id = b.device_id)
     ),
     kept as (
       select device_id, reported_at from car_status_reports
       where device_id in (select device_id from batch)
     ),
     report as (
       insert into car_status_reports (device_id, host_version, installed_apps, state, reported_at, received_at)
       select device_id, host_version, installed_apps, state, reported_at, received_at from batch
       on conflict (device_id) do update
       set host_version = excluded.host_version, installed_apps = excluded.installed_apps,
           state = excluded.state, reported_at = excluded.reported_at, received_at = excluded.received_at
       where excluded.reported_at >= car_status_reports.reported_at
     ),
     seen as (
       insert into car_presence (device_id, last_seen)
       select device_id, seen_at from batch where seen_at is not null
       ${upsertSeen}
     )
     select batch.seq, kept.reported_at is null or batch.reported_at >= kept.reported_at as fresh
     from batch left join kept using (device_id)`,
    [JSON.stringify(batch)],
  );
  const written: StatusWritten[] = writes.map(() => 'unknown_car');
  for (const row of rows as { seq: number; fresh: boolean }[]) {
    written[row.seq] = row.fresh ? 'stored' : 'stale';
  }
  return written;
}

/** One presence message of a batch: `at` is the time the car made the connection it speaks of. */
export interface PresenceWrite {
  deviceId: string;
  online: boolean;
  at: string;
  seenAt: Date | undefined;
}

/**
 * Online or offline, as each car's newest presence message says, for a batch of at most one message
 * per car in one statement; `seenAt` as for status. Newest by the message's `at` (the time the car made that connection,
 * which its `online` and its last will share), not by arrival: an old connection's will arriving
 * after a new connection's `online` changes nothing. At the same `at`, `offline` wins: it ends the
 * connection that `online` began. Answers for each message whether its car is online now
 * (undefined: no such car is provisioned).
 */
export async function savePresences(db: Db, writes: PresenceWrite[]): Promise<(boolean | undefined)[]> {
  const batch = writes.map((write, seq) => ({
    seq,
    device_id: write.deviceId,
    online: write.online,
    at: write.at,
    seen_at: write.seenAt ?? null,
  }));
  const { rows } = await db.raw(
    `with batch as (
       select b.* from jsonb_to_recordset(?::jsonb) as b(
         seq int, device_id text, online boolean, at timestamptz, seen_at timestamptz)
       where exists (select 1 from cars where cars.device_id = b.device_id)
     ),
     saved as (
       insert into car_presence (device_id, online, presence_at, last_seen)
       select device_id, online, at, seen_at from batch
       on conflict (device_id) do update
       set online = case
             when car_presence.presence_at is null
               or excluded.presence_at > car_presence.presence_at
               or (excluded.presence_at = car_presence.presence_at and not excluded.online)
             then excluded.online
             else car_presence.online end,
           presence_at = greatest(car_presence.presence_at, excluded.presence_at),
           last_seen = greatest(car_presence.last_seen, excluded.last_seen)
       returning device_id, online
     )
     select batch.seq, saved.online from batch join saved using (device_id)`,
    [JSON.stringify(batch)],
  );
  const online: (boolean | undefined)[] = writes.map(() => undefined);
  for (const row of rows as { seq: number; online: boolean }[]) online[row.seq] = row.online;
  return online;
}

/** Which of `deviceIds` are online as their last presence said, their rows locked until the transaction ends. */
export async function lockPresences(db: Db, deviceIds: string[]): Promise<Set<string>> {
  const rows: { device_id: string }[] = await db('car_presence')
    .whereIn('device_id', deviceIds)
    .andWhere({ online: true })
    .forUpdate()
    .select('device_id');
  return new Set(rows.map((row) => row.device_id));
}

/** Whether the car is online as its last presence said, its row locked until the transaction ends. */
export async function lockPresence(db: Db, deviceId: string): Promise<boolean> {
  const row = await db('car_presence').where({ device_id: deviceId }).forUpdate().first('online');
  return row?.online === true;
}

/** A car heard from: at `seenAt` for a live message, undefined for a retained replay. */
export interface Sighting {
  deviceId: string;
  seenAt: Date | undefined;
}

/**
 * Whether each car is provisioned; a live sighting moves its car's last seen, as any message of the
 * car does. One statement for the group (the cars' acknowledgements, which keep nothing else of the
 * car's here), each car in it once (a statement may change a row once).
 */
export async function saveSightings(db: Db, sightings: readonly Sighting[]): Promise<boolean[]> {
  const batch = sightings.map(({ deviceId, seenAt }, seq) => ({
    seq,
    device_id: deviceId,
    seen_at: seenAt ?? null,
  }));
  const { rows } = await db.raw(
    `with batch as (
       select b.* from jsonb_to_recordset(?::jsonb) as b(seq int, device_id text, seen_at timestamptz)
       where exists (select 1 from cars where cars.device_id = b.device_id)
     ),
     seen as (
       insert into car_presence (device_id, last_seen)
       select device_id, seen_at from batch where seen_at is not null
       ${upsertSeen}
     )
     select seq from batch`,
    [JSON.stringify(batch)],
  );
  const known = sightings.map(() => false);
  for (const row of rows as { seq: number }[]) known[row.seq] = true;
  return known;
}

/**
 * Offline now, whatever `at` the car's last presence carried: the service ended its connection
 * (a rotated credential). A car's clock may run ahead of the service's (car-time.ts), and its
 * `online` must not outrank this; `presence_at` keeps the later of the two, so that what the old
 * connection still had on its way changes nothing.
 */
export async function endPresence(db: Db, deviceId: string, at: Date): Promise<void> {
  await db.raw(
    `insert into car_presence (device_id, online, presence_at)
     select device_id, false, ?::timestamptz from cars where device_id = ?
     on conflict (device_id) do update
     set online = false, presence_at = greatest(car_presence.presence_at, excluded.presence_at)`,
    [at, deviceId],
  );
}

/**
 * One batch of telemetry in one statement: every fix into the history, each car's newest fix (by
 * its own `recorded_at`, not by arrival) as its location unless the one kept is newer, and its
 * last live message as last seen. Returns the device id of each row stored; rows of cars not
 * provisioned are left out.
 */
export async function saveTelemetry(db: Db, rows: TelemetryRow[]): Promise<string[]> {
  const batch = rows.map((row, seq) => ({ ...row, seq }));
  const { rows: stored } = await db.raw(
    `with batch as (
       select b.* from jsonb_to_recordset(?::jsonb) as b(
         seq int, device_id text, recorded_at timestamptz, received_at timestamptz,
         latitude float8, longitude float8, accuracy_m float8, heading_deg float8, speed_kmh float8,
         odometer_km float8, battery_percent float8, live boolean)
       where exists (select 1 from cars where cars.device_id = b.device_id)
     ),
     last_fix as (
       insert into car_locations (device_id, latitude, longitude, accuracy_m, heading_deg, speed_kmh, recorded_at)
       select distinct on (device_id) device_id, latitude, longitude, accuracy_m, heading_deg, speed_kmh, recorded_at
       from batch order by device_id, recorded_at desc, seq desc
       on conflict (device_id) do update
       set latitude = excluded.latitude, longitude = excluded.longitude, accuracy_m = excluded.accuracy_m,
           heading_deg = excluded.heading_deg, speed_kmh = excluded.speed_kmh, recorded_at = excluded.recorded_at
       where excluded.recorded_at >= car_locations.recorded_at
     ),
     seen as (
       insert into car_presence (device_id, last_seen)
       select device_id, max(received_at) from batch where live group by device_id
       ${upsertSeen}
     )
     insert into car_telemetry (device_id, recorded_at, received_at, latitude, longitude, accuracy_m,
                                heading_deg, speed_kmh, odometer_km, battery_percent)
     select device_id, recorded_at, received_at, latitude, longitude, accuracy_m,
            heading_deg, speed_kmh, odometer_km, battery_percent
     from batch order by seq
     returning device_id`,
    [JSON.stringify(batch)],
  );
  return stored.map((row: { device_id: string }) => row.device_id);
}

export interface CarStatusRow {
  device_id: string;
  brand: string;
  owner_id: string | null;
  online: boolean | null;
  last_seen: Date | null;
  state: Record<string, unknown> | null;
  host_version: string | null;
  installed_apps: { app_id: string; version: string }[] | null;
  reported_at: Date | null;
}

/**
 * The car with its presence and last report; the report's columns are null before the first. Plain
 * SQL, not knex's builder: this is the vehicle read every car screen polls, and the builder made the
 * same statement again at every call (bench:api, the largest JavaScript cost of a status read).
 */
export async function findCarStatus(db: Db, deviceId: string): Promise<CarStatusRow | undefined> {
  const { rows } = await db.raw(
    `select cars.device_id, cars.brand, cars.owner_id, car_presence.online, car_presence.last_seen,
            car_status_reports.state, car_status_reports.host_version,
            car_status_reports.installed_apps, car_status_reports.reported_at
     from cars
     left join car_presence on car_presence.device_id = cars.device_id
     left join car_status_reports on car_status_reports.device_id = cars.device_id
     where cars.device_id = ?`,
    [deviceId],
  );
  return (rows as CarStatusRow[])[0];
}

export interface CarLocationRow {
  device_id: string;
  brand: string;
  owner_id: string | null;
  latitude: number | null;
  longitude: number | null;
  accuracy_m: number | null;
  heading_deg: number | null;
  speed_kmh: number | null;
  recorded_at: Date | null;
}

/** The car with its last fix; the fix's columns are null before the first. Plain SQL, as above. */
export async function findCarLocation(db: Db, deviceId: string): Promise<CarLocationRow | undefined> {
  const { rows } = await db.raw(
    `select cars.device_id, cars.brand, cars.owner_id, car_locations.latitude, car_locations.longitude,
            car_locations.accuracy_m, car_locations.heading_deg, car_locations.speed_kmh,
            car_locations.recorded_at
     from cars left join car_locations on car_locations.device_id = cars.device_id
     where cars.device_id = ?`,
    [deviceId],
  );
  return (rows as CarLocationRow[])[0];
}

/** Cars whose last presence message said online. */
export async function countOnlineCars(db: Db): Promise<number> {
  const row = await db('car_presence')
    .where({ online: true })
    .count<{ count: string | number }>('* as count')
    .first();
  return Number(row?.count ?? 0);
}
