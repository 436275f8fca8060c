/** Web-console accounts: sign-up and password sign-in. */
import { normalizeEmail, toApiAccount } from '../../accounts/account-service.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { toApiAccessToken } from './sign-in.ts';

export function accountHandlers({ accounts, tokens, failures, config }: Services) {
  return {
    signUp: async ({ body }) => ({ status: 201, body: toApiAccount(await accounts.signUp(body), config) }),

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
  } satisfies Partial<Handlers>;
}
