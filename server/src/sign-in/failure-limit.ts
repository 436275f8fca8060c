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
}

export function createFailureLimit(db: Db, clock: Clock): FailureLimit {
  return {
    async assertAllowed(subjects) {
      const now = clock().getTime();
      const since = new Date(now - failureWindowMs);
      const rows: { subject: string; failures: number | string; oldest: Date }[] = await db(
        'sign_in_failures',
      )
        .select('subject')
        .count({ failures: '*' })
        .min({ oldest: 'at' })
        .whereIn('subject', subjects)
        .where('at', '>', since)
        .groupBy('subject');
      const over = rows.filter((row) => Number(row.failures) >= maxFailures);
      if (over.length === 0) return;
      const oldest = Math.min(...over.map((row) => new Date(row.oldest).getTime()));
      const retryAfter = Math.max(1, Math.ceil((oldest + failureWindowMs - now) / 1000));
      throw new ProblemError(
        429,
        'rate_limited',
        `Too many failed sign-in attempts. Try again in ${retryAfter} seconds.`,
        { headers: { 'Retry-After': String(retryAfter) } },
      );
    },

    async recordFailure(subjects) {
      const at = clock();
      // Failures older than the window count for nothing: dropping them here keeps the table small.
      await db('sign_in_failures')
        .whereIn('subject', subjects)
        .where('at', '<=', new Date(at.getTime() - failureWindowMs))
        .delete();
      await db('sign_in_failures').insert(subjects.map((subject) => ({ subject, at })));
    },
  };
}
