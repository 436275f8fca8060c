/** Bearer access tokens on secured operations. */
import type { Request } from 'express';
import type { Principal } from '../auth/principal.ts';
import type { TokenService } from '../auth/token-service.ts';
import { unauthorized } from '../errors.ts';

export function bearerAuthenticator(tokens: TokenService) {
  return async (req: Request): Promise<Principal> => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
    if (!match?.[1])
      throw unauthorized(
        'Sign in first: `svc login` (or set SVC_TOKEN), or a password session (POST /api/v1/account/sessions).',
      );
    const principal = await tokens.authenticate(match[1]);
    if (!principal) throw unauthorized();
    return principal;
  };
}
