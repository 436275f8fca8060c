/** Identity tokens for mini-apps, the keys that verify them, and their rotation. */

import { parseDeviceId } from '../../device-id.ts';
import { jwksMaxAgeSeconds } from '../../identity/signing-keys.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function identityHandlers({ identityTokens, signingKeys }: Services) {
  return {
    createIdentityToken: async ({ params, body }, { principal, req }) => {
      const deviceId = parseDeviceId(params.device_id);
      return {
        status: 201,
        body: await identityTokens.issue(principal, deviceId, body, req.get('host')),
      };
    },

    getJwks: async () => ({
      status: 200,
      body: await signingKeys.jwks(),
      headers: { 'Cache-Control': `public, max-age=${jwksMaxAgeSeconds}` },
    }),

    listSigningKeys: async (_request, { principal }) => ({
      status: 200,
      body: await signingKeys.list(principal),
    }),

    rotateSigningKeys: async (_request, { principal }) => ({
      status: 200,
      body: await signingKeys.rotate(principal),
    }),
  } satisfies Partial<Handlers>;
}
