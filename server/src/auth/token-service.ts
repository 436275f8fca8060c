/**
 * Access tokens: minted at sign-in, checked on every request. A check is answered from a short
 * in-process cache when it can be, so most requests cost no database round trip; the cache
 * lives 5 seconds, so a token whose key was removed stops working within 5 seconds everywhere.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { isAdmin } from '../accounts/admin-codes.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { Db } from '../store/db.ts';
import type { Principal, TokenSource } from './principal.ts';
import {
  deleteExpiredTokens,
  deleteToken,
  findTokenByHash,
  insertToken,
  type TokenWithAccount,
} from './token-repository.ts';

export const tokenPrefix = 'svc_';
export const tokenCacheTtlMs = 5_000;
const cacheMaxEntries = 10_000;

export interface MintedToken {
  accessToken: string;
  expiresAt: Date;
}

export interface TokenService {
  mint(input: { accountId: string; source: TokenSource; sshKeyId?: string | null }): Promise<MintedToken>;
  /** The principal behind a token, or undefined when it is unknown, expired or revoked. */
  authenticate(accessToken: string): Promise<Principal | undefined>;
  /** Ends the session of a token (sign-out): at once here, within 5 s on other processes. */
  revoke(principal: Principal): Promise<void>;
  /** Forgets cached checks at once in this process (other processes follow within 5 s). */
  forgetCached(): void;
}

export function hashToken(accessToken: string): string {
  return createHash('sha256').update(accessToken).digest('hex');
}

function toPrincipal(row: TokenWithAccount, config: Config): Principal {
  return {
    accountId: row.account_id,
    email: row.email,
    name: row.name,
    createdAt: row.account_created_at,
    isAdmin: isAdmin(row, config),
    token: {
      id: row.id,
      source: row.source,
      sshKeyId: row.ssh_key_id,
      keyFingerprint: row.key_fingerprint,
      expiresAt: row.expires_at,
    },
  };
}

export function createTokenService(db: Db, config: Config, clock: Clock): TokenService {
  const cache = new Map<string, { principal: Principal | undefined; until: number }>();

  return {
    async mint({ accountId, source, sshKeyId = null }) {
      const accessToken = `${tokenPrefix}${randomBytes(32).toString('base64url')}`;
      const now = clock();
      const expiresAt = new Date(now.getTime() + config.tokenTtlSeconds * 1000);
      await deleteExpiredTokens(db, accountId, now);
      await insertToken(db, {
        id: randomUUID(),
        token_hash: hashToken(accessToken),
        account_id: accountId,
        ssh_key_id: sshKeyId,
        source,
        created_at: now,
        expires_at: expiresAt,
      });
      return { accessToken, expiresAt };
    },

    async authenticate(accessToken) {
      if (!accessToken.startsWith(tokenPrefix)) return undefined;
      const tokenHash = hashToken(accessToken);
      const now = clock().getTime();
      let entry = cache.get(tokenHash);
      if (!entry || entry.until <= now) {
        const row = await findTokenByHash(db, tokenHash);
        entry = { principal: row && toPrincipal(row, config), until: now + tokenCacheTtlMs };
        if (cache.size >= cacheMaxEntries) cache.clear();
        cache.set(tokenHash, entry);
      }
      const principal = entry.principal;
      return principal && principal.token.expiresAt.getTime() > now ? principal : undefined;
    },

    async revoke(principal) {
      await deleteToken(db, principal.token.id);
      cache.clear();
    },

    forgetCached() {
      cache.clear();
    },
  };
}
