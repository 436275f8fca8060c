/** SQL for provisioned cars and brand connectors. */
import type { Db } from '../store/db.ts';

export interface CarRow {
  device_id: string;
  brand: string;
  provisioned_at: Date;
  owner_id: string | null;
  paired_at: Date | null;
}

export interface ConnectorRow {
  brand: string;
  name: string;
  created_at: Date;
}

/** The car, or undefined when one with this device id exists already. */
export async function insertCar(db: Db, row: CarRow): Promise<CarRow | undefined> {
  const [inserted] = await db<CarRow>('cars').insert(row).onConflict('device_id').ignore().returning('*');
  return inserted;
}

export async function findCar(db: Db, deviceId: string): Promise<CarRow | undefined> {
  return db<CarRow>('cars').where({ device_id: deviceId }).first();
}

/** The car, its row locked until the transaction `trx` ends: its ownership changes one at a time. */
export async function findCarForUpdate(trx: Db, deviceId: string): Promise<CarRow | undefined> {
  return trx<CarRow>('cars').where({ device_id: deviceId }).forUpdate().first();
}

export async function setCarOwner(
  db: Db,
  deviceId: string,
  owner: Pick<CarRow, 'owner_id' | 'paired_at'>,
): Promise<CarRow> {
  const [row] = await db<CarRow>('cars').where({ device_id: deviceId }).update(owner).returning('*');
  if (!row) throw new Error(`car ${deviceId} vanished while its owner changed`);
  return row;
}

export async function deleteCar(db: Db, deviceId: string): Promise<boolean> {
  return (await db<CarRow>('cars').where({ device_id: deviceId }).delete()) > 0;
}

/** Every provisioned car's device id. */
export async function allDeviceIds(db: Db): Promise<string[]> {
  return db<CarRow>('cars').pluck('device_id');
}

/** Where a page of cars starts: after this car, in newest-first order. */
export interface CarPosition {
  provisionedAt: Date;
  deviceId: string;
}

/** A car with its presence and the apps of its last report; those columns are null before the first. */
export interface CarSummaryRow extends CarRow {
  online: boolean | null;
  last_seen: Date | null;
  installed_apps: { app_id: string; version: string }[] | null;
  reported_at: Date | null;
}

function carSummaries(db: Db) {
  return db<CarSummaryRow>('cars')
    .leftJoin('car_presence', 'car_presence.device_id', 'cars.device_id')
    .leftJoin('car_status_reports', 'car_status_reports.device_id', 'cars.device_id')
    .select(
      'cars.*',
      'car_presence.online',
      'car_presence.last_seen',
      'car_status_reports.installed_apps',
      'car_status_reports.reported_at',
    );
}

export async function findCarSummary(db: Db, deviceId: string): Promise<CarSummaryRow | undefined> {
  return carSummaries(db).where('cars.device_id', deviceId).first();
}

/**
 * Newest first, every car or only `ownerId`'s; `limit + 1` rows are read so the caller knows
 * whether another page follows.
 */
export async function listCars(
  db: Db,
  page: { limit: number; after?: CarPosition | undefined; ownerId?: string | undefined },
): Promise<CarSummaryRow[]> {
  const { limit, after, ownerId } = page;
  const query = carSummaries(db)
    .orderBy([
      { column: 'cars.provisioned_at', order: 'desc' },
      { column: 'cars.device_id', order: 'desc' },
    ])
    .limit(limit + 1);
  if (ownerId !== undefined) query.where('cars.owner_id', ownerId);
  if (after) {
    query.where((older) =>
      older
        .where('cars.provisioned_at', '<', after.provisionedAt)
        .orWhere((same) =>
          same
            .where('cars.provisioned_at', '=', after.provisionedAt)
            .andWhere('cars.device_id', '<', after.deviceId),
        ),
    );
  }
  return query;
}

export async function insertConnector(db: Db, row: ConnectorRow): Promise<ConnectorRow | undefined> {
  const [inserted] = await db<ConnectorRow>('brand_connectors')
    .insert(row)
    .onConflict(['brand', 'name'])
    .ignore()
    .returning('*');
  return inserted;
}

export async function findConnector(db: Db, brand: string, name: string): Promise<ConnectorRow | undefined> {
  return db<ConnectorRow>('brand_connectors').where({ brand, name }).first();
}

export async function deleteConnector(db: Db, brand: string, name: string): Promise<boolean> {
  return (await db<ConnectorRow>('brand_connectors').where({ brand, name }).delete()) > 0;
}

export async function listConnectors(db: Db): Promise<ConnectorRow[]> {
  return db<ConnectorRow>('brand_connectors').orderBy(['brand', 'name']);
}
