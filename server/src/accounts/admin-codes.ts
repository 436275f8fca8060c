/**
 * Who is an admin. Emails are not verified and sign-up may be open, so an email listed in
 * SVC_ADMIN_EMAILS proves nothing by itself: the account must also redeem the one-time code the
 * service prints to its operator at start for that email. Both must hold: taking an email off
 * the list takes the role away again.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { InvalidError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { AccountRow } from './account-repository.ts';

export const adminCodeTtlMs = 24 * 60 * 60 * 1000;

export interface AdminCode {
  email: string;
  code: string;
  expiresAt: Date;
}

export interface AdminCodeService {
  /**
   * A fresh code for each listed email whose account has not claimed the role yet (whether or not
   * the account exists); the codes printed before stop working.
   */
  issue(): Promise<AdminCode[]>;
  /** Makes the account an admin when `code` is the live code for its email. */
  claim(account: { accountId: string; email: string }, code: string): Promise<AccountRow>;
}

/** The account's roles: admin takes the listed email and a claimed code. */
export function isAdmin(
  account: { email: string; admin_claimed_at: Date | null },
  config: Pick<Config, 'adminEmails'>,
): boolean {
  return account.admin_claimed_at !== null && config.adminEmails.has(account.email);
}

const hashCode = (code: string) => createHash('sha256').update(code).digest();

export function createAdminCodeService(db: Db, config: Config, clock: Clock): AdminCodeService {
  return {
    async issue() {
      const claimed = new Set(
        (
          await db('accounts')
            .whereIn('email', [...config.adminEmails])
            .whereNotNull('admin_claimed_at')
            .select('email')
        ).map((row: { email: string }) => row.email),
      );
      const expiresAt = new Date(clock().getTime() + adminCodeTtlMs);
      const codes: AdminCode[] = [];
      for (const email of [...config.adminEmails].filter((listed) => !claimed.has(listed)).sort()) {
        const code = `svcadmin_${randomBytes(32).toString('base64url')}`;
        await db('admin_codes')
          .insert({ email, code_hash: hashCode(code).toString('hex'), expires_at: expiresAt })
          .onConflict('email')
          .merge();
        codes.push({ email, code, expiresAt });
      }
      return codes;
    },

    async claim(account, code) {
      const refused = (why: string) =>
        new InvalidError('admin_code_invalid', why, {
          errors: [{ path: '/body/code', message: 'is not the live admin code for this account' }],
        });
      if (!config.adminEmails.has(account.email)) {
        throw refused(
          `${account.email} is not listed in the service's SVC_ADMIN_EMAILS: ask its operator to list it and restart.`,
        );
      }
      return db.transaction(async (trx) => {
        const row = await trx('admin_codes').where({ email: account.email }).forUpdate().first();
        const given = hashCode(code);
        const matches = row ? timingSafeEqual(Buffer.from(row.code_hash, 'hex'), given) : false;
        if (!row || !matches || new Date(row.expires_at).getTime() <= clock().getTime()) {
          throw refused(
            `That is not the live admin code for ${account.email}: use the newest one the service printed when it started (each works once, for 24 hours).`,
          );
        }
        await trx('admin_codes').where({ email: account.email }).delete();
        const [claimed] = await trx<AccountRow>('accounts')
          .where({ id: account.accountId })
          .update({ admin_claimed_at: clock() })
          .returning('*');
        if (!claimed) throw new Error(`account ${account.accountId} vanished while claiming admin`);
        return claimed;
      });
    },
  };
}
