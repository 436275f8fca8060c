/** SQL for pairing: the car's one pairing code, and the car's owner. */
import { type CommandState, pairingCommand } from '../commands/command-states.ts';
import type { Db } from '../store/db.ts';
import type { CarRow } from './car-repository.ts';

export interface PairingCodeRow {
  device_id: string;
  code_hash: string;
  salt: string;
  tries_left: number;
  command_id: string;
  created_at: Date;
  expires_at: Date;
}

/** The car, locked until the transaction ends: pairing requests for one car take turns. */
export async function lockCar(db: Db, deviceId: string): Promise<CarRow | undefined> {
  return db<CarRow>('cars').where({ device_id: deviceId }).forUpdate().first();
}

/** The car's pairing code and where its command stands; undefined when none was asked for. */
export async function findPairingCode(
  db: Db,
  deviceId: string,
): Promise<(PairingCodeRow & { command_state: CommandState }) | undefined> {
  return db('pairing_codes')
    .join('car_commands', 'car_commands.command_id', 'pairing_codes.command_id')
    .where('pairing_codes.device_id', deviceId)
    .first('pairing_codes.*', 'car_commands.state as command_state');
}

/** The car's new code, in place of the one before. */
export async function savePairingCode(db: Db, row: PairingCodeRow): Promise<void> {
  await db('pairing_codes').insert(row).onConflict('device_id').merge();
}

export async function setTriesLeft(db: Db, deviceId: string, triesLeft: number): Promise<void> {
  await db('pairing_codes').where({ device_id: deviceId }).update({ tries_left: triesLeft });
}

export async function deletePairingCode(db: Db, deviceId: string): Promise<void> {
  await db('pairing_codes').where({ device_id: deviceId }).delete();
}

export async function setOwner(db: Db, deviceId: string, ownerId: string, at: Date): Promise<CarRow> {
  const [row] = await db<CarRow>('cars')
    .where({ device_id: deviceId })
    .update({ owner_id: ownerId, paired_at: at })
    .returning('*');
  return row as CarRow;
}

/** When each pairing code made for the car since `since` was made, oldest first (its command's time). */
export async function codesMadeSince(db: Db, deviceId: string, since: Date): Promise<Date[]> {
  const rows = await db('car_commands')
    .where({ device_id: deviceId, name: pairingCommand })
    .andWhere('created_at', '>', since)
    .orderBy('created_at')
    .select('created_at');
  return rows.map((row: { created_at: Date }) => row.created_at);
}
