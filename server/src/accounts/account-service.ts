/** Web-console accounts: sign-up and password sign-in. */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/openapi.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { ConflictError, ForbiddenError, InputError, unauthorized } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { type AccountRow, findAccountByEmail, insertAccount } from './account-repository.ts';
import type { Passwords } from './passwords.ts';

export type Account = components['schemas']['Account'];

/** Emails compare case-insensitively everywhere: stored trimmed and lower-cased. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** `admin`: what `isAdmin` (admin-codes.ts) says of the account. */
export function toApiAccount(
  row: Pick<AccountRow, 'id' | 'email' | 'name' | 'created_at'>,
  admin: boolean,
): Account {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    roles: admin ? ['developer', 'admin'] : ['developer'],
    created_at: row.created_at.toISOString(),
  };
}

export interface AccountService {
  signUp(input: { email: string; password: string; name: string }): Promise<AccountRow>;
  /** The account, or an UnauthorizedError that does not say whether the email or the password was wrong. */
  checkPassword(email: string, password: string): Promise<AccountRow>;
}

export function createAccountService(
  db: Db,
  config: Config,
  clock: Clock,
  passwords: Passwords,
): AccountService {
  return {
    async signUp(input) {
      if (config.signup === 'closed') {
        throw new ForbiddenError(
          'signup_closed',
          'Sign-up is closed on this service: ask its operator for an account.',
        );
      }
      const email = normalizeEmail(input.email);
      const name = input.name.trim();
      if (name === '') {
        throw new InputError('validation_failed', 'The name must not be blank.', {
          errors: [{ path: '/body/name', message: 'must not be blank' }],
        });
      }
      // Twelve spaces pass the length rule and guard nothing.
      if (input.password.trim() === '') {
        throw new InputError('validation_failed', 'The password must not be only spaces.', {
          errors: [{ path: '/body/password', message: 'must not be only spaces' }],
        });
      }
      const row = await insertAccount(db, {
        id: randomUUID(),
        email,
        name,
        password_hash: await passwords.hash(input.password),
        created_at: clock(),
      });
      if (!row)
        throw new ConflictError(
          'email_taken',
          `An account with the email ${email} exists already: sign in instead.`,
        );
      return row;
    },

    async checkPassword(email, password) {
      const account = await findAccountByEmail(db, normalizeEmail(email));
      const valid = account?.password_hash
        ? await passwords.verify(password, account.password_hash)
        : await passwords.decoyCheck(password);
      if (!account || !valid) throw unauthorized('The email or the password is not right.');
      return account;
    },
  };
}
