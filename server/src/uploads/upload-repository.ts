/** SQL for presigned uploads. */
import type { Db } from '../store/db.ts';

export interface UploadRow {
  id: string;
  account_id: string;
  size: number;
  sha256: string;
  created_at: Date;
  expires_at: Date;
  receiving_since: Date | null;
  stored_at: Date | null;
  submitted_at: Date | null;
}

// pg returns bigint columns as strings.
function fromDb(row: UploadRow | undefined): UploadRow | undefined {
  return row && { ...row, size: Number(row.size) };
}

export async function insertUpload(db: Db, row: UploadRow): Promise<void> {
  await db('uploads').insert(row);
}

export async function findUpload(db: Db, id: string): Promise<UploadRow | undefined> {
  return fromDb(await db<UploadRow>('uploads').where({ id }).first());
}

/**
 * Starts receiving: only one PUT at a time, never after the package is stored. A claim older
 * than `staleBefore` belongs to a PUT that died without releasing it.
 */
export async function claimUpload(
  db: Db,
  id: string,
  at: Date,
  staleBefore: Date,
): Promise<UploadRow | undefined> {
  const [row] = await db<UploadRow>('uploads')
    .where({ id })
    .whereNull('stored_at')
    .where((q) => q.whereNull('receiving_since').orWhere('receiving_since', '<', staleBefore))
    .update({ receiving_since: at })
    .returning('*');
  return fromDb(row);
}

export async function releaseUpload(db: Db, id: string): Promise<void> {
  await db('uploads').where({ id }).whereNull('stored_at').update({ receiving_since: null });
}

export async function markStored(db: Db, id: string, at: Date): Promise<void> {
  await db('uploads').where({ id }).update({ stored_at: at, receiving_since: null });
}

/** Marks the upload submitted; false when it was submitted already (two submits race). */
export async function markSubmitted(db: Db, id: string, at: Date): Promise<boolean> {
  const updated = await db('uploads')
    .where({ id })
    .whereNull('submitted_at')
    .update({ submitted_at: at })
    .returning('id');
  return updated.length > 0;
}
