/** SQL for the broker credentials: the record the key-value store and the broker are rebuilt from. */
import { type Db, openOwnConnection } from '../store/db.ts';
import type { Sealed } from '../store/key-encryption.ts';
import type { BrokerRole } from './credentials.ts';

/** Where a broker secret is kept, as its sealed value is bound to it. */
export const secretContext = (username: string) => `broker credential ${username}`;

export interface BrokerCredentialRow {
  username: string;
  role: BrokerRole;
  brand: string;
  /** Lowercase hex SHA-256 of the secret: what decides sign-ins. */
  secretSha256: string;
  /** The secret, for Mosquitto; absent for a credential issued before it was kept. */
  secret?: Sealed;
}

interface Columns {
  username: string;
  role: BrokerRole;
  brand: string;
  secret_sha256: string;
  secret_ciphertext: string | null;
  key_encryption_key_id: string | null;
  encryption_algorithm: string | null;
}

function fromDb(row: Columns): BrokerCredentialRow {
  const {
    secret_ciphertext: ciphertext,
    key_encryption_key_id: keyId,
    encryption_algorithm: algorithm,
  } = row;
  return {
    username: row.username,
    role: row.role,
    brand: row.brand,
    secretSha256: row.secret_sha256,
    ...(ciphertext !== null && keyId && algorithm ? { secret: { ciphertext, keyId, algorithm } } : {}),
  };
}

function toDb(row: BrokerCredentialRow, now: Date) {
  return {
    username: row.username,
    role: row.role,
    brand: row.brand,
    secret_sha256: row.secretSha256,
    secret_ciphertext: row.secret?.ciphertext ?? null,
    key_encryption_key_id: row.secret?.keyId ?? null,
    encryption_algorithm: row.secret?.algorithm ?? null,
    updated_at: now,
  };
}

/** Makes or replaces the credential of `row.username`. */
export async function putBrokerCredential(db: Db, row: BrokerCredentialRow, now: Date): Promise<void> {
  await db('broker_credentials').insert(toDb(row, now)).onConflict('username').merge();
}

/** Keeps a credential found only in the key-value store (issued before this table); never replaces one. */
export async function adoptBrokerCredential(db: Db, row: BrokerCredentialRow, now: Date): Promise<void> {
  await db('broker_credentials').insert(toDb(row, now)).onConflict('username').ignore();
}

export async function deleteBrokerCredential(db: Db, username: string): Promise<void> {
  await db('broker_credentials').where({ username }).delete();
}

export async function findBrokerCredential(
  db: Db,
  username: string,
): Promise<BrokerCredentialRow | undefined> {
  const row: Columns | undefined = await db('broker_credentials').where({ username }).first();
  return row && fromDb(row);
}

export async function listBrokerCredentials(db: Db): Promise<BrokerCredentialRow[]> {
  const rows: Columns[] = await db('broker_credentials').orderBy('username');
  return rows.map(fromDb);
}

/** The credentials whose secret is sealed with another key-encryption key than `keyId`. */
export async function listSecretsNotSealedWith(db: Db, keyId: string): Promise<BrokerCredentialRow[]> {
  const rows: Columns[] = await db('broker_credentials')
    .whereNotNull('secret_ciphertext')
    .whereNot('key_encryption_key_id', keyId);
  return rows.map(fromDb);
}

/** Replaces the sealed secret only (a rotation of the key-encryption key). */
export async function resealSecret(db: Db, username: string, sealed: Sealed): Promise<void> {
  await db('broker_credentials').where({ username }).update({
    secret_ciphertext: sealed.ciphertext,
    key_encryption_key_id: sealed.keyId,
    encryption_algorithm: sealed.algorithm,
  });
}

/**
 * `work` while the credential syncs of every other replica (and the operator's command) wait, on a
 * Postgres connection of its own (a sync may take long; provisioning does not wait). PGlite has
 * one process and one connection: `work` runs on it as it is.
 */
export async function withCredentialSyncLock<T>(db: Db, work: (db: Db) => Promise<T>): Promise<T> {
  const own = openOwnConnection(db, {});
  if (!own) return work(db);
  try {
    return await own.transaction(async (trx) => {
      await trx.raw("select pg_advisory_xact_lock(hashtext('svc:broker-credential-sync'))");
      return work(trx);
    });
  } finally {
    await own.destroy();
  }
}
