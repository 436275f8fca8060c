import type { Knex } from 'knex';
import type { Db } from './db.ts';

/**
 * Runs `then` once the transaction `trx` commits (at once outside one); never when it rolls back.
 * A savepoint's end is not its outer transaction's: the outermost is waited for.
 */
export function afterCommit(trx: Db, then: () => void): void {
  let outer = trx as unknown as Partial<Knex.Transaction>;
  while (outer.parentTransaction) outer = outer.parentTransaction;
  if (outer.isTransaction && outer.executionPromise) outer.executionPromise.then(then, () => {});
  else then();
}
