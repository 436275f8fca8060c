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

/** Where a page of cars starts: after this car, in newest-first order. */
export interface CarPosition {
  provisionedAt: Date;
  deviceId: string;
}

/** Newest first; `limit + 1` rows are read so the caller knows whether another page follows. */
export async function listCars(db: Db, limit: number, after?: CarPosition): Promise<CarRow[]> {
  const query = db<CarRow>('cars')
    .orderBy([
      { column: 'provisioned_at', order: 'desc' },
      { column: 'device_id', order: 'desc' },
    ])
    .limit(limit + 1);
  if (after) {
    query.where((older) =>
      older
        .where('provisioned_at', '<', after.provisionedAt)
        .orWhere((same) =>
          same.where('provisioned_at', '=', after.provisionedAt).andWhere('device_id', '<', after.deviceId),
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
