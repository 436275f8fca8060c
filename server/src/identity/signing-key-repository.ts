/** SQL for the identity-token signing keys and their rotation states. */
import type { JsonWebKey } from 'node:crypto';
import type { components } from '../../../generated/openapi.ts';
import type { Db } from '../store/db.ts';

export type PublicJwk = components['schemas']['Jwk'];
export type SigningKeyState = components['schemas']['SigningKeyState'];

export interface SigningKeyRow {
  kid: string;
  state: SigningKeyState;
  public_jwk: PublicJwk;
  private_jwk: JsonWebKey;
  /** Made, as the next key: published from then on. */
  created_at: Date;
  /** Became current: signs from then on. */
  activated_at: Date | null;
  retired_at: Date | null;
}

// PGlite may return jsonb as text.
function fromDb<Row extends Partial<SigningKeyRow>>(row: Row): Row {
  const parsed = { ...row };
  if (typeof row.public_jwk === 'string') parsed.public_jwk = JSON.parse(row.public_jwk);
  if (typeof row.private_jwk === 'string') parsed.private_jwk = JSON.parse(row.private_jwk);
  return parsed;
}

/**
 * Makes every other rotation, and every start-up's check, wait until `trx` ends; reading the keys
 * (the JWKS, signing) does not wait. Inside it, each statement sees what the last holder wrote.
 */
export async function lockSigningKeys(trx: Db): Promise<void> {
  await trx.raw('lock table signing_keys in share row exclusive mode');
}

export async function findKeyInState(
  db: Db,
  state: 'next' | 'current',
): Promise<Omit<SigningKeyRow, 'private_jwk'> | undefined> {
  const row = await db<SigningKeyRow>('signing_keys')
    .where({ state })
    .first('kid', 'state', 'public_jwk', 'created_at', 'activated_at', 'retired_at');
  return row && fromDb(row);
}

export async function findPrivateJwk(db: Db, kid: string): Promise<JsonWebKey | undefined> {
  const row = await db<SigningKeyRow>('signing_keys').where({ kid }).first('private_jwk');
  return row && fromDb(row).private_jwk;
}

export async function insertSigningKey(db: Db, row: SigningKeyRow): Promise<void> {
  await db('signing_keys').insert({
    ...row,
    public_jwk: JSON.stringify(row.public_jwk),
    private_jwk: JSON.stringify(row.private_jwk),
  });
}

export async function moveSigningKey(
  db: Db,
  kid: string,
  changes: Pick<SigningKeyRow, 'state'> & Partial<Pick<SigningKeyRow, 'activated_at' | 'retired_at'>>,
): Promise<void> {
  await db('signing_keys').where({ kid }).update(changes);
}

/** Every key the store holds, newest first, without private halves. */
export async function listSigningKeys(db: Db): Promise<Omit<SigningKeyRow, 'private_jwk'>[]> {
  const rows = await db<SigningKeyRow>('signing_keys')
    .select('kid', 'state', 'public_jwk', 'created_at', 'activated_at', 'retired_at')
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'kid', order: 'desc' },
    ]);
  return rows.map(fromDb);
}

/** The public halves of the next and current keys and of the keys retired after `retiredAfter`. */
export async function listPublishedJwks(db: Db, retiredAfter: Date): Promise<PublicJwk[]> {
  const rows: Pick<SigningKeyRow, 'public_jwk'>[] = await db<SigningKeyRow>('signing_keys')
    .select('public_jwk')
    .whereIn('state', ['next', 'current'])
    .orWhere((retired) => retired.where({ state: 'retired' }).andWhere('retired_at', '>', retiredAfter))
    .orderBy([{ column: 'created_at' }, { column: 'kid' }]);
  return rows.map((row) => fromDb(row).public_jwk);
}

/** Deletes the keys retired at or before `retiredBy`, private halves and all; how many. */
export async function deleteRetiredKeys(db: Db, retiredBy: Date): Promise<number> {
  return db('signing_keys').where({ state: 'retired' }).andWhere('retired_at', '<=', retiredBy).delete();
}
