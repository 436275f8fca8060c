/** Bearer access tokens on secured operations. */
import type { Request } from 'express';
import type { Principal } from '../auth/principal.ts';
import type { TokenService } from '../auth/token-service.ts';
import { unauthorized } from '../errors.ts';
import { ProblemError } from './problem.ts';

/**
 * RFC 6750 §3.1: a request that carried a bearer token the service refuses (expired, revoked,
 * its key removed, never issued) is told so with `error="invalid_token"`; one that carried none
 * gets the bare challenge, which the error middleware adds to every 401.
 */
const invalidTokenChallenge = { 'WWW-Authenticate': 'Bearer error="invalid_token"' };

export function bearerAuthenticator(tokens: TokenService) {
  return async (req: Request): Promise<Principal> => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
    if (!match?.[1])
      throw unauthorized(
        'Sign in first: `svc login` (or set SVC_TOKEN), the web console at /console, or a password session (POST /api/v1/account/sessions).',
      );
    const principal = await tokens.authenticate(match[1]);
    if (!principal) {
      const refused = unauthorized();
      throw new ProblemError(401, refused.code, refused.message, { headers: invalidTokenChallenge });
    }
    return principal;
  };
}
