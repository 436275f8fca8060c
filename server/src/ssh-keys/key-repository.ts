/** SQL for the SSH public keys developers sign in with. */
import type { Db } from '../store/db.ts';

export interface SshKeyRow {
  id: string;
  account_id: string;
  public_key: string;
  fingerprint: string;
  title: string;
  created_at: Date;
  last_used_at: Date | null;
}

/** The inserted row, or undefined when the key (by fingerprint) is registered already. */
export async function insertKey(db: Db, row: SshKeyRow): Promise<SshKeyRow | undefined> {
  const [inserted] = await db<SshKeyRow>('ssh_keys')
    .insert(row)
    .onConflict('fingerprint')
    .ignore()
    .returning('*');
  return inserted;
}

export async function listKeys(db: Db, accountId: string): Promise<SshKeyRow[]> {
  return db<SshKeyRow>('ssh_keys')
    .where({ account_id: accountId })
    .orderBy([{ column: 'created_at' }, { column: 'id' }]);
}

export async function findKeyByFingerprint(db: Db, fingerprint: string): Promise<SshKeyRow | undefined> {
  return db<SshKeyRow>('ssh_keys').where({ fingerprint }).first();
}

/** Removes one of the account's keys; its tokens go with it (ON DELETE CASCADE). */
export async function deleteKey(db: Db, accountId: string, keyId: string): Promise<boolean> {
  // `returning` rather than the affected count: PGlite's driver reports the count differently from pg.
  const removed = await db('ssh_keys').where({ id: keyId, account_id: accountId }).delete().returning('id');
  return removed.length > 0;
}

export async function touchKey(db: Db, keyId: string, at: Date): Promise<void> {
  await db('ssh_keys').where({ id: keyId }).update({ last_used_at: at });
}
