/** SQL for the identity-token signing keys and their rotation states. */
import type { JsonWebKey } from 'node:crypto';
import type { components } from '../../../generated/openapi.ts';
import type { Db } from '../store/db.ts';
import type { Sealed } from '../store/key-encryption.ts';

export type PublicJwk = components['schemas']['Jwk'];
export type SigningKeyState = components['schemas']['SigningKeyState'];

export interface SigningKeyRow {
  kid: string;
  state: SigningKeyState;
  public_jwk: PublicJwk;
  /** Made, as the next key: published from then on. */
  created_at: Date;
  /** Became current: signs from then on. */
  activated_at: Date | null;
  retired_at: Date | null;
}

/** A private half as stored: sealed, or (written by a build before keys at rest) plain. */
export type StoredPrivateKey = { sealed: Sealed } | { plain: JsonWebKey };

// PGlite may return jsonb as text.
function fromDb<Row extends Partial<SigningKeyRow>>(row: Row): Row {
  const parsed = { ...row };
  if (typeof row.public_jwk === 'string') parsed.public_jwk = JSON.parse(row.public_jwk);
  return parsed;
}

interface PrivateColumns {
  private_jwk: JsonWebKey | string | null;
  private_jwk_ciphertext: string | null;
  key_encryption_key_id: string | null;
  encryption_algorithm: string | null;
}

const privateColumns = [
  'private_jwk',
  'private_jwk_ciphertext',
  'key_encryption_key_id',
  'encryption_algorithm',
];

function storedPrivateKey(row: PrivateColumns): StoredPrivateKey {
  if (row.private_jwk_ciphertext !== null && row.key_encryption_key_id && row.encryption_algorithm) {
    return {
      sealed: {
        ciphertext: row.private_jwk_ciphertext,
        keyId: row.key_encryption_key_id,
        algorithm: row.encryption_algorithm,
      },
    };
  }
  const plain = typeof row.private_jwk === 'string' ? JSON.parse(row.private_jwk) : row.private_jwk;
  return { plain };
}

function sealedColumns(sealed: Sealed) {
  return {
    private_jwk: null,
    private_jwk_ciphertext: sealed.ciphertext,
    key_encryption_key_id: sealed.keyId,
    encryption_algorithm: sealed.algorithm,
  };
}

/**
 * Makes every other rotation, and every start-up's check, wait until `trx` ends; reading the keys
 * (the JWKS, signing) does not wait. Inside it, each statement sees what the last holder wrote.
 */
export async function lockSigningKeys(trx: Db): Promise<void> {
  await trx.raw('lock table signing_keys in share row exclusive mode');
}

export async function findKeyInState(db: Db, state: 'next' | 'current'): Promise<SigningKeyRow | undefined> {
  const row = await db<SigningKeyRow>('signing_keys')
    .where({ state })
    .first('kid', 'state', 'public_jwk', 'created_at', 'activated_at', 'retired_at');
  return row && fromDb(row);
}

export async function findPrivateKey(db: Db, kid: string): Promise<StoredPrivateKey | undefined> {
  const row: PrivateColumns | undefined = await db('signing_keys')
    .where({ kid })
    .first(...privateColumns);
  return row && storedPrivateKey(row);
}

export async function insertSigningKey(db: Db, row: SigningKeyRow, privateKey: Sealed): Promise<void> {
  await db('signing_keys').insert({
    ...row,
    public_jwk: JSON.stringify(row.public_jwk),
    ...sealedColumns(privateKey),
  });
}

/**
 * The keys whose private half is plain, or sealed with another key-encryption key than `keyId`
 * (what a start seals, and what a rotation re-seals).
 */
export async function listKeysNotSealedWith(
  db: Db,
  keyId: string,
): Promise<{ kid: string; privateKey: StoredPrivateKey }[]> {
  const rows: (PrivateColumns & { kid: string })[] = await db('signing_keys')
    .where((notSealed) =>
      notSealed.whereNull('key_encryption_key_id').orWhereNot('key_encryption_key_id', keyId),
    )
    .select('kid', ...privateColumns);
  return rows.map((row) => ({ kid: row.kid, privateKey: storedPrivateKey(row) }));
}

/** Stores the key's private half sealed, and nothing of it in plain text. */
export async function sealPrivateKey(db: Db, kid: string, sealed: Sealed): Promise<void> {
  await db('signing_keys').where({ kid }).update(sealedColumns(sealed));
}

export async function moveSigningKey(
  db: Db,
  kid: string,
  changes: Pick<SigningKeyRow, 'state'> & Partial<Pick<SigningKeyRow, 'activated_at' | 'retired_at'>>,
): Promise<void> {
  await db('signing_keys').where({ kid }).update(changes);
}

/** Every key the store holds, newest first, without private halves. */
export async function listSigningKeys(db: Db): Promise<SigningKeyRow[]> {
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
