/** SQL for accounts. */
import type { Db } from '../store/db.ts';

export interface AccountRow {
  id: string;
  email: string;
  name: string;
  password_hash: string | null;
  created_at: Date;
  /** When the account redeemed an admin code; the role also needs its email in SVC_ADMIN_EMAILS. */
  admin_claimed_at: Date | null;
}

export async function insertAccount(
  db: Db,
  row: Omit<AccountRow, 'admin_claimed_at'>,
): Promise<AccountRow | undefined> {
  const [inserted] = await db<AccountRow>('accounts').insert(row).onConflict('email').ignore().returning('*');
  return inserted;
}

export async function findAccountByEmail(db: Db, email: string): Promise<AccountRow | undefined> {
  return db<AccountRow>('accounts').where({ email }).first();
}

export async function findAccountById(db: Db, id: string): Promise<AccountRow | undefined> {
  return db<AccountRow>('accounts').where({ id }).first();
}
