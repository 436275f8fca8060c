/** SQL for presigned uploads. */
import type { Knex } from 'knex';
import type { Db } from '../store/db.ts';

export interface UploadRow {
  id: string;
  account_id: string;
  size: number;
  sha256: string;
  created_at: Date;
  expires_at: Date;
  receiving_since: Date | null;
  /** The PUT receiving the upload now; it also names that PUT's partial file. */
  receiving_claim: string | null;
  /** Until when the claim holds without being renewed. */
  lease_expires_at: Date | null;
  stored_at: Date | null;
  submitted_at: Date | null;
  /** What the package is said to be; null on uploads made before uploads named it. */
  app_id: string | null;
  version: string | null;
  /** When submit refused the package (and deleted it). */
  refused_at: Date | null;
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
 * Starts receiving under `claim`: only one PUT at a time, never after the package is stored. A
 * claim whose lease has lapsed belongs to a receiver that died or stalled, and is taken over.
 */
export async function claimUpload(
  db: Db,
  id: string,
  claim: { claim: string; at: Date; leaseExpiresAt: Date },
): Promise<UploadRow | undefined> {
  const [row] = await db<UploadRow>('uploads')
    .where({ id })
    .whereNull('stored_at')
    .where((q) => q.whereNull('receiving_claim').orWhere('lease_expires_at', '<', claim.at))
    .update({
      receiving_since: claim.at,
      receiving_claim: claim.claim,
      lease_expires_at: claim.leaseExpiresAt,
    })
    .returning('*');
  return fromDb(row);
}

/** Extends the lease of `claim`; false when the upload is no longer held by it (taken over). */
export async function renewLease(db: Db, id: string, claim: string, leaseExpiresAt: Date): Promise<boolean> {
  const updated = await db('uploads')
    .where({ id, receiving_claim: claim })
    .update({ lease_expires_at: leaseExpiresAt })
    .returning('id');
  return updated.length > 0;
}

const released = { receiving_since: null, receiving_claim: null, lease_expires_at: null };

export async function releaseUpload(db: Db, id: string, claim: string): Promise<void> {
  await db('uploads').where({ id, receiving_claim: claim }).whereNull('stored_at').update(released);
}

/** Releases every claim whose lease lapsed before `now`: their receivers are gone. */
export async function releaseLapsedClaims(db: Db, now: Date): Promise<void> {
  await db('uploads').whereNotNull('receiving_claim').where('lease_expires_at', '<', now).update(released);
}

/** The current claim of each of `ids` that is being received (absent: not held, or no such upload). */
export async function currentClaims(db: Db, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows: { id: string; receiving_claim: string }[] = await db('uploads')
    .whereIn('id', ids)
    .whereNotNull('receiving_claim')
    .select('id', 'receiving_claim');
  return new Map(rows.map((row) => [row.id, row.receiving_claim]));
}

/** Marks the upload stored; false when `claim` no longer holds it. */
export async function markStored(db: Db, id: string, claim: string, at: Date): Promise<boolean> {
  const updated = await db('uploads')
    .where({ id, receiving_claim: claim })
    .update({ stored_at: at, ...released })
    .returning('id');
  return updated.length > 0;
}

/** Marks the upload refused at submit (its package is deleted). */
export async function markRefused(db: Db, id: string, at: Date): Promise<void> {
  await db('uploads').where({ id }).whereNull('submitted_at').update({ refused_at: at });
}

/** Marks the upload submitted; false when it was submitted already (two submits race) or is gone. */
export async function markSubmitted(db: Db, id: string, at: Date): Promise<boolean> {
  const updated = await db('uploads')
    .where({ id })
    .whereNull('submitted_at')
    .update({ submitted_at: at })
    .returning('id');
  return updated.length > 0;
}

/**
 * Deletes uploads abandoned before `cutoff` (never submitted, their URL expired before it, no PUT
 * holding them at `now`) and returns their ids, at most `limit` at a time. One statement: replicas
 * sweeping at once delete each row once, and a row a submit is marking is waited for, then
 * checked again (submitted by then, it stays).
 */
export async function deleteAbandonedUploads(
  db: Db,
  cutoff: Date,
  now: Date,
  limit = 100,
): Promise<string[]> {
  const abandoned = (q: Knex.QueryBuilder) =>
    q
      .whereNull('submitted_at')
      .where('expires_at', '<', cutoff)
      .where((held) => held.whereNull('receiving_claim').orWhere('lease_expires_at', '<', now));
  const rows: { id: string }[] = await abandoned(
    db('uploads').whereIn('id', abandoned(db('uploads').select('id')).limit(limit)),
  )
    .delete()
    .returning('id');
  return rows.map((row) => row.id);
}
