/**
 * Slows down guessing and mass sign-up. Each attempt is recorded under subjects (`key:<fingerprint>`,
 * `ip:<address>`, `email:<address>`, `signup:<address>`); a subject over its kind's limit within
 * its window is refused (too many requests) until its oldest counted attempt leaves the window. The account limit
 * (`email:`) is higher than the address limit, so that one address guessing cannot lock the
 * account's owner out from everywhere. Attempts live in the SQL store, so every replica of the
 * API sees the same count.
 */
import type { Clock } from '../clock.ts';
import { TooManyRequestsError } from '../errors.ts';
import type { Db } from '../store/db.ts';

interface Limit {
  max: number;
  windowMs: number;
  /** What the refusal says was too many. */
  what: string;
}

const minute = 60_000;
const signInFailures = 'Too many failed sign-in attempts';

export const limits = {
  key: { max: 10, windowMs: minute, what: signInFailures },
  ip: { max: 10, windowMs: minute, what: signInFailures },
  email: { max: 50, windowMs: 15 * minute, what: `${signInFailures} for this account` },
  signup: { max: 20, windowMs: 60 * minute, what: 'Too many accounts made from this address' },
} as const satisfies Record<string, Limit>;

export type Subject = `${keyof typeof limits}:${string}`;

function limitOf(subject: Subject): Limit {
  return limits[subject.slice(0, subject.indexOf(':')) as keyof typeof limits];
}

export interface FailureLimit {
  /** Throws a TooManyRequestsError, with when to try again, when any subject is at its limit. */
  assertAllowed(subjects: Subject[]): Promise<void>;
  recordFailure(subjects: Subject[]): Promise<void>;
  /**
   * Starts an attempt: it counts as a failure from the start, so that a burst of parallel guesses
   * cannot all pass the check before any of them is recorded; refused when it is one too many. Call
   * the returned function when the attempt succeeds, to take it back.
   */
  begin(subjects: Subject[]): Promise<() => Promise<void>>;
}

export function createFailureLimit(db: Db, clock: Clock): FailureLimit {
  async function insertFailures(subjects: Subject[]): Promise<string[]> {
    const at = clock();
    // Attempts older than their window count for nothing: dropping them here keeps the table small.
    for (const subject of subjects) {
      await db('sign_in_failures')
        .where({ subject })
        .where('at', '<=', new Date(at.getTime() - limitOf(subject).windowMs))
        .delete();
    }
    const rows: { id: string | number }[] = await db('sign_in_failures')
      .insert(subjects.map((subject) => ({ subject, at })))
      .returning('id');
    return rows.map((row) => String(row.id));
  }

  /** Refuses when any subject has `extra` more than its limit of attempts in its window. */
  async function assertUnder(subjects: Subject[], extra: number): Promise<void> {
    const now = clock().getTime();
    let refusal: { retryAfter: number; what: string } | undefined;
    for (const subject of subjects) {
      const limit = limitOf(subject);
      const row: { failures?: number | string; oldest?: Date | null } | undefined = await db(
        'sign_in_failures',
      )
        .count({ failures: '*' })
        .min({ oldest: 'at' })
        .where({ subject })
        .where('at', '>', new Date(now - limit.windowMs))
        .first();
      if (!row?.oldest || Number(row.failures) < limit.max + extra) continue;
      const retryAfter = Math.max(
        1,
        Math.ceil((new Date(row.oldest).getTime() + limit.windowMs - now) / 1000),
      );
      if (!refusal || retryAfter > refusal.retryAfter) refusal = { retryAfter, what: limit.what };
    }
    if (!refusal) return;
    throw new TooManyRequestsError(
      'rate_limited',
      `${refusal.what}. Try again in ${refusal.retryAfter} seconds.`,
      refusal.retryAfter,
    );
  }

  return {
    assertAllowed: (subjects) => assertUnder(subjects, 0),

    async recordFailure(subjects) {
      await insertFailures(subjects);
    },

    async begin(subjects) {
      const ids = await insertFailures(subjects);
      // This attempt is among the rows counted, so one more than the limit is allowed here.
      await assertUnder(subjects, 1);
      return async () => {
        await db('sign_in_failures').whereIn('id', ids).delete();
      };
    },
  };
}
