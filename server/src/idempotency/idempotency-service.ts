/**
 * Idempotency keys: a retry of a request that was carried out, with its `Idempotency-Key`, gets
 * that request's answer again instead of a second run. Which answers are kept, and of which
 * operations, is the HTTP layer's to say (http/idempotency.ts); this keeps them, per account.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../clock.ts';
import { ConflictError, InvalidError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { claimKey, deleteExpiredKeys, findKey, finishKey, releaseKey } from './idempotency-repository.ts';

/** How long an answer is given again: the contract's 24 hours, from the first request. */
export const keyLifetimeMs = 24 * 60 * 60 * 1000;

/**
 * After how long a key still `running` is taken for one whose run died (a crash, a lost store)
 * without letting it go. Far longer than any request runs: a request's deadline is 30 s by
 * default, and no operation behind a key does more than a few statements and a package check.
 */
export const staleRunMs = 5 * 60 * 1000;

export interface KeptAnswer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** The request is the first with its key (or the first since its key expired or went stale). */
export interface KeyRun {
  kind: 'run';
  /** Keeps the answer, to give again. */
  finish(answer: KeptAnswer): Promise<void>;
  /** Lets the key go, as if it had never been used: a retry will run. */
  release(): Promise<void>;
}

/** The request is a retry of one that was carried out: here is its answer. */
export interface KeyReplay {
  kind: 'replay';
  answer: KeptAnswer;
}

export function createIdempotencyService(deps: { db: Db; clock: Clock }) {
  const { db, clock } = deps;

  return {
    /**
     * Claims `key` for a run of the request `fingerprint` names, or gives the answer it got. The
     * same key with another fingerprint is 422 `idempotency_key_reused`; a key whose run has not
     * finished is 409 `idempotency_key_in_use`.
     */
    async begin(input: {
      accountId: string;
      key: string;
      operation: string;
      fingerprint: string;
    }): Promise<KeyRun | KeyReplay> {
      // A key its run let go between our claim and our look (it failed) is tried once more.
      for (let attempt = 0; attempt < 2; attempt++) {
        const now = clock();
        const claim = randomUUID();
        const claimed = await claimKey(
          db,
          {
            account_id: input.accountId,
            key: input.key,
            fingerprint: input.fingerprint,
            operation: input.operation,
            claim,
            created_at: now,
          },
          {
            expiredBefore: new Date(now.getTime() - keyLifetimeMs),
            staleBefore: new Date(now.getTime() - staleRunMs),
          },
        );
        const held = { accountId: input.accountId, key: input.key, claim };
        if (claimed) {
          return {
            kind: 'run',
            async finish(answer) {
              // A run whose key was taken over meanwhile keeps nothing: the key is its taker's.
              await finishKey(db, held, {
                status: answer.status,
                body: answer.body === undefined ? null : JSON.stringify(answer.body),
                headers: JSON.stringify(answer.headers),
              });
            },
            release: () => releaseKey(db, held),
          };
        }
        const row = await findKey(db, input.accountId, input.key);
        if (!row) continue;
        if (row.fingerprint !== input.fingerprint) {
          throw new InvalidError(
            'idempotency_key_reused',
            'This Idempotency-Key was used in the last 24 hours for another request (another operation, path or body): send a new key with a new request.',
          );
        }
        if (row.state === 'running' || row.status === null) break;
        return {
          kind: 'replay',
          answer: {
            status: row.status,
            body: row.body === null ? undefined : JSON.parse(row.body),
            headers: row.headers === null ? {} : JSON.parse(row.headers),
          },
        };
      }
      throw new ConflictError(
        'idempotency_key_in_use',
        'A request with this Idempotency-Key is still running: try again in a moment with the same key to get its answer.',
      );
    },

    /** Deletes the keys whose 24 hours are over (they are taken as new anyway): storage only. */
    async sweep(): Promise<number> {
      const before = new Date(clock().getTime() - keyLifetimeMs);
      let deleted = 0;
      for (
        let batch = await deleteExpiredKeys(db, before);
        batch > 0;
        batch = await deleteExpiredKeys(db, before)
      ) {
        deleted += batch;
      }
      return deleted;
    },
  };
}

export type IdempotencyService = ReturnType<typeof createIdempotencyService>;
