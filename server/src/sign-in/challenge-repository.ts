/** SQL for one-time sign-in challenges. */
import type { Db } from '../store/db.ts';

export interface ChallengeRow {
  id: string;
  fingerprint: string;
  message: string;
  expires_at: Date;
  consumed_at: Date | null;
}

export async function insertChallenge(db: Db, row: ChallengeRow): Promise<void> {
  await db<ChallengeRow>('login_challenges').insert(row);
}

/**
 * Marks the challenge used and returns it, in one statement: of two concurrent exchanges of
 * one challenge exactly one gets the row, the other gets undefined.
 */
export async function consumeChallenge(db: Db, id: string, at: Date): Promise<ChallengeRow | undefined> {
  const [row] = await db<ChallengeRow>('login_challenges')
    .where({ id })
    .whereNull('consumed_at')
    .update({ consumed_at: at })
    .returning('*');
  return row;
}

export async function deleteChallengesExpiredBefore(db: Db, before: Date): Promise<void> {
  await db('login_challenges').where('expires_at', '<', before).delete();
}
