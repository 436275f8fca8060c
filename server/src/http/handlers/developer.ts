/** The signed-in developer: identity probe and SSH keys. */
import { toApiAccount } from '../../accounts/account-service.ts';
import type { Services } from '../../services.ts';
import { toApiSshKey } from '../../ssh-keys/key-service.ts';
import type { Handlers } from '../bind-handlers.ts';

export function developerHandlers({ keys }: Services) {
  return {
    getMe: (_request, { principal }) => ({
      status: 200,
      body: {
        account: toApiAccount(
          {
            id: principal.accountId,
            email: principal.email,
            name: principal.name,
            created_at: principal.createdAt,
          },
          principal.isAdmin,
        ),
        token: {
          source: principal.token.source,
          ...(principal.token.sshKeyId ? { key_id: principal.token.sshKeyId } : {}),
          ...(principal.token.keyFingerprint ? { key_fingerprint: principal.token.keyFingerprint } : {}),
          expires_at: principal.token.expiresAt.toISOString(),
        },
      },
    }),

    listSshKeys: async (_request, { principal }) => ({
      status: 200,
      body: { keys: (await keys.list(principal.accountId)).map(toApiSshKey) },
    }),

    addSshKey: async ({ body }, { principal }) => ({
      status: 201,
      body: toApiSshKey(await keys.add(principal.accountId, body)),
    }),

    removeSshKey: async ({ params }, { principal }) => {
      await keys.remove(principal.accountId, params.key_id);
      return { status: 204 };
    },
  } satisfies Partial<Handlers>;
}
