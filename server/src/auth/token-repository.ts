/** SQL for access tokens. Only the SHA-256 of a token is stored. */
import type { Db } from '../store/db.ts';
import type { TokenSource } from './principal.ts';

export interface TokenRow {
  id: string;
  token_hash: string;
  account_id: string;
  ssh_key_id: string | null;
  source: TokenSource;
  created_at: Date;
  expires_at: Date;
}

export interface TokenWithAccount extends TokenRow {
  email: string;
  name: string;
  account_created_at: Date;
  admin_claimed_at: Date | null;
  key_fingerprint: string | null;
}

export async function insertToken(db: Db, row: TokenRow): Promise<void> {
  await db<TokenRow>('access_tokens').insert(row);
}

export async function findTokenByHash(db: Db, tokenHash: string): Promise<TokenWithAccount | undefined> {
  return db('access_tokens as t')
    .join('accounts as a', 'a.id', 't.account_id')
    .leftJoin('ssh_keys as k', 'k.id', 't.ssh_key_id')
    .where('t.token_hash', tokenHash)
    .first(
      't.*',
      'a.email',
      'a.name',
      'a.created_at as account_created_at',
      'a.admin_claimed_at',
      'k.fingerprint as key_fingerprint',
    );
}

/** Ends one token (a sign-out). */
export async function deleteToken(db: Db, tokenId: string): Promise<void> {
  await db('access_tokens').where({ id: tokenId }).delete();
}

/** An account's tokens that can no longer be used; cleared as it signs in again, so the table stays small. */
export async function deleteExpiredTokens(db: Db, accountId: string, now: Date): Promise<void> {
  await db('access_tokens').where({ account_id: accountId }).where('expires_at', '<=', now).delete();
}
