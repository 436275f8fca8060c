/** SSH-key sign-in: challenge, then token. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function signInHandlers({ signIn }: Services) {
  return {
    createLoginChallenge: async ({ body }, { req }) => ({
      status: 201,
      body: await signIn.createChallenge(body.public_key, req.ip ?? 'unknown', req.get('host')),
    }),

    createAccessToken: async ({ body }, { req }) => {
      const token = await signIn.exchange(body.challenge_id, body.signature, req.ip ?? 'unknown');
      return { status: 201, body: toApiAccessToken(token) };
    },
  } satisfies Partial<Handlers>;
}

export function toApiAccessToken(token: { accessToken: string; expiresAt: Date }) {
  return {
    access_token: token.accessToken,
    token_type: 'Bearer' as const,
    expires_at: token.expiresAt.toISOString(),
  };
}
