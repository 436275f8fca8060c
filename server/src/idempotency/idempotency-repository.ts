/** SQL for idempotency keys: claim, finish, release, read and sweep. */
import type { Db } from '../store/db.ts';

export interface IdempotencyKeyRow {
  account_id: string;
  key: string;
  fingerprint: string;
  operation: string;
  state: 'running' | 'done';
  claim: string;
  status: number | null;
  /** The answer's JSON body as sent; null while running, or for an answer without one. */
  body: string | null;
  /** JSON object of the answer's headers kept for a replay. */
  headers: string | null;
  created_at: Date;
}

export interface KeyClaim {
  account_id: string;
  key: string;
  fingerprint: string;
  operation: string;
  claim: string;
  created_at: Date;
}

/**
 * Claims the key for one run, in one statement, so that of two requests with one key exactly one
 * runs. A new key is inserted. A key claimed before `expiredBefore` is over its 24 hours and is
 * taken as if new, whatever it held. A key still `running` since before `staleBefore`, with this
 * same fingerprint, belongs to a run that died without letting it go, and is taken over. Any
 * other key that exists is left alone: undefined, and the caller reads what holds it.
 */
export async function claimKey(
  db: Db,
  claim: KeyClaim,
  limits: { expiredBefore: Date; staleBefore: Date },
): Promise<IdempotencyKeyRow | undefined> {
  const [row] = await db<IdempotencyKeyRow>('idempotency_keys')
    .insert({ ...claim, state: 'running', status: null, body: null, headers: null })
    .onConflict(['account_id', 'key'])
    .merge(['fingerprint', 'operation', 'state', 'claim', 'status', 'body', 'headers', 'created_at'])
    .where('idempotency_keys.created_at', '<', limits.expiredBefore)
    .orWhere((stale) =>
      stale
        .where('idempotency_keys.state', 'running')
        .where('idempotency_keys.created_at', '<', limits.staleBefore)
        .where('idempotency_keys.fingerprint', claim.fingerprint),
    )
    .returning('*');
  return row;
}

export async function findKey(
  db: Db,
  accountId: string,
  key: string,
): Promise<IdempotencyKeyRow | undefined> {
  return db<IdempotencyKeyRow>('idempotency_keys').where({ account_id: accountId, key }).first();
}

/** Keeps the answer of the run holding `claim`; false when the key is no longer its own (taken over). */
export async function finishKey(
  db: Db,
  held: { accountId: string; key: string; claim: string },
  answer: { status: number; body: string | null; headers: string },
): Promise<boolean> {
  const updated = await db('idempotency_keys')
    .where({ account_id: held.accountId, key: held.key, claim: held.claim, state: 'running' })
    .update({ state: 'done', ...answer })
    .returning('key');
  return updated.length > 0;
}

/** Lets the key go, as if never used, when the run holding `claim` answered nothing worth keeping. */
export async function releaseKey(
  db: Db,
  held: { accountId: string; key: string; claim: string },
): Promise<void> {
  await db('idempotency_keys')
    .where({ account_id: held.accountId, key: held.key, claim: held.claim, state: 'running' })
    .delete();
}

/** Deletes keys claimed before `before`, at most `limit`; how many went. */
export async function deleteExpiredKeys(db: Db, before: Date, limit = 1000): Promise<number> {
  const deleted: { key: string }[] = await db('idempotency_keys')
    .whereIn(
      ['account_id', 'key'],
      db('idempotency_keys').select('account_id', 'key').where('created_at', '<', before).limit(limit),
    )
    .delete()
    .returning('key');
  return deleted.length;
}
