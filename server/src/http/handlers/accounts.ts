/** Web-console accounts: sign-up, password sign-in, sign-out, and claiming the admin role. */

import { normalizeEmail, toApiAccount } from '../../accounts/account-service.ts';
import { isAdmin } from '../../accounts/admin-codes.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { toApiAccessToken } from './sign-in.ts';

export function accountHandlers({ accounts, adminCodes, tokens, failures, config }: Services) {
  return {
    signUp: async ({ body }, { req }) => {
      // Every sign-up counts, made or refused: an address making accounts in bulk gets 429.
      await failures.begin([`signup:${req.ip ?? 'unknown'}`]);
      const account = await accounts.signUp(body);
      return { status: 201, body: toApiAccount(account, isAdmin(account, config)) };
    },

    claimAdmin: async ({ body }, { principal }) => {
      const account = await adminCodes.claim(principal, body.code);
      // The cached check of this token (and any other) still says "not admin".
      tokens.forgetCached();
      return { status: 200, body: toApiAccount(account, isAdmin(account, config)) };
    },

    createSession: async ({ body }, { req }) => {
      const succeeded = await failures.begin([
        `email:${normalizeEmail(body.email)}`,
        `ip:${req.ip ?? 'unknown'}`,
      ]);
      const account = await accounts.checkPassword(body.email, body.password);
      await succeeded();
      const token = await tokens.mint({ accountId: account.id, source: 'web_session' });
      return { status: 201, body: toApiAccessToken(token) };
    },

    endSession: async (_request, { principal }) => {
      await tokens.revoke(principal);
      return { status: 204 };
    },
  } satisfies Partial<Handlers>;
}
