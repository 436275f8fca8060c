/**
 * Slows down guessing: after 10 failed sign-ins from one key or one address within a minute,
 * further attempts from it get 429 until the oldest of those failures is a minute old. Failures
 * live in the SQL store, so every replica of the API sees the same count.
 */
import type { Clock } from '../clock.ts';
import { ProblemError } from '../http/problem.ts';
import type { Db } from '../store/db.ts';

export const maxFailures = 10;
export const failureWindowMs = 60_000;

export interface FailureLimit {
  /** Throws 429 with Retry-After when any subject (`key:…`, `ip:…`, `email:…`) is over the limit. */
  assertAllowed(subjects: string[]): Promise<void>;
  recordFailure(subjects: string[]): Promise<void>;
  /**
   * Starts an attempt: it counts as a failure from the start, so that a burst of parallel guesses
   * cannot all pass the check before any of them is recorded; 429 when it is one too many. Call
   * the returned function when the attempt succeeds, to take it back.
   */
  begin(subjects: string[]): Promise<() => Promise<void>>;
}

export function createFailureLimit(db: Db, clock: Clock): FailureLimit {
  async function insertFailures(subjects: string[]): Promise<string[]> {
    const at = clock();
    // Failures older than the window count for nothing: dropping them here keeps the table small.
    await db('sign_in_failures')
      .whereIn('subject', subjects)
      .where('at', '<=', new Date(at.getTime() - failureWindowMs))
      .delete();
    const rows: { id: string | number }[] = await db('sign_in_failures')
      .insert(subjects.map((subject) => ({ subject, at })))
      .returning('id');
    return rows.map((row) => String(row.id));
  }

  /** 429 when any subject has `allowed` or more failures in the window. */
  async function assertUnder(subjects: string[], allowed: number): Promise<void> {
    const now = clock().getTime();
    const rows: { subject: string; failures: number | string; oldest: Date }[] = await db('sign_in_failures')
      .select('subject')
      .count({ failures: '*' })
      .min({ oldest: 'at' })
      .whereIn('subject', subjects)
      .where('at', '>', new Date(now - failureWindowMs))
      .groupBy('subject');
    const over = rows.filter((row) => Number(row.failures) >= allowed);
    if (over.length === 0) return;
    const oldest = Math.min(...over.map((row) => new Date(row.oldest).getTime()));
    const retryAfter = Math.max(1, Math.ceil((oldest + failureWindowMs - now) / 1000));
    throw new ProblemError(
      429,
      'rate_limited',
      `Too many failed sign-in attempts. Try again in ${retryAfter} seconds.`,
      {
        headers: { 'Retry-After': String(retryAfter) },
      },
    );
  }

  return {
    assertAllowed: (subjects) => assertUnder(subjects, maxFailures),

    async recordFailure(subjects) {
      await insertFailures(subjects);
    },

    async begin(subjects) {
      const ids = await insertFailures(subjects);
      // This attempt is among the rows counted, so one more than the limit is allowed here.
      await assertUnder(subjects, maxFailures + 1);
      return async () => {
        await db('sign_in_failures').whereIn('id', ids).delete();
      };
    },
  };
}
