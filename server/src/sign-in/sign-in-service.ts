/**
 * SSH-key sign-in (DESIGN.md §6): a one-time challenge bound to the key's fingerprint and to this
 * service's public URL, signed by the developer as SSHSIG in namespace `svc-login`, exchanged
 * once for a fresh access token.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { loginNamespace, verifySshsig } from '@svc/ssh';
import type { components } from '../../../generated/openapi.ts';
import type { MintedToken, TokenService } from '../auth/token-service.ts';
import type { Clock } from '../clock.ts';
import { unauthorized } from '../errors.ts';
import { findKeyByFingerprint, touchKey } from '../ssh-keys/key-repository.ts';
import { parseEd25519KeyLine } from '../ssh-keys/key-service.ts';
import type { Db } from '../store/db.ts';
import { consumeChallenge, deleteChallengesExpiredBefore, insertChallenge } from './challenge-repository.ts';
import type { FailureLimit } from './failure-limit.ts';

export type LoginChallenge = components['schemas']['LoginChallenge'];

export const challengeLifetimeMs = 120_000;

/** The exact text the developer signs, one item per line. */
export function challengeMessage(fields: {
  challengeId: string;
  nonce: string;
  audience: string;
  fingerprint: string;
  expiresAt: Date;
}): string {
  return [
    loginNamespace,
    `challenge: ${fields.challengeId}`,
    `nonce: ${fields.nonce}`,
    `audience: ${fields.audience}`,
    `fingerprint: ${fields.fingerprint}`,
    `expires: ${fields.expiresAt.toISOString()}`,
  ].join('\n');
}

export interface SignInService {
  /** `requestHost`: the Host the client called, which picks the audience among the service's own names. */
  createChallenge(publicKeyLine: string, address: string, requestHost?: string): Promise<LoginChallenge>;
  exchange(challengeId: string, signature: string, address: string): Promise<MintedToken>;
}

export function createSignInService(deps: {
  db: Db;
  clock: Clock;
  tokens: TokenService;
  failures: FailureLimit;
  /** The service's public base URL, the audience every challenge is bound to. */
  audience: (requestHost?: string) => string;
}): SignInService {
  const { db, clock, tokens, failures } = deps;

  return {
    async createChallenge(publicKeyLine, address, requestHost) {
      const key = parseEd25519KeyLine(publicKeyLine);
      await failures.assertAllowed([`key:${key.fingerprint}`, `ip:${address}`]);
      const now = clock();
      const challengeId = randomUUID();
      const expiresAt = new Date(now.getTime() + challengeLifetimeMs);
      // Unregistered keys get a challenge too: the answer must not tell which keys exist.
      const message = challengeMessage({
        challengeId,
        nonce: randomBytes(32).toString('base64url'),
        audience: deps.audience(requestHost),
        fingerprint: key.fingerprint,
        expiresAt,
      });
      await deleteChallengesExpiredBefore(db, now);
      await insertChallenge(db, {
        id: challengeId,
        fingerprint: key.fingerprint,
        message,
        expires_at: expiresAt,
        consumed_at: null,
      });
      return {
        challenge_id: challengeId,
        namespace: loginNamespace,
        message,
        expires_at: expiresAt.toISOString(),
      };
    },

    async exchange(challengeId, signature, address) {
      const succeeded = await failures.begin([`ip:${address}`]);
      const now = clock();
      const challenge = await consumeChallenge(db, challengeId, now);
      if (challenge) await failures.assertAllowed([`key:${challenge.fingerprint}`]);
      const key = challenge && (await findKeyByFingerprint(db, challenge.fingerprint));
      const verified =
        challenge !== undefined &&
        key !== undefined &&
        challenge.expires_at.getTime() > now.getTime() &&
        verifySshsig({
          armored: signature,
          message: challenge.message,
          namespace: loginNamespace,
          publicKey: key.public_key,
        });
      if (!verified || !key) {
        // One answer for replay, expiry, unknown or removed key and bad signature alike.
        // The address's failure is counted already (begin); the key's is counted now.
        if (challenge) await failures.recordFailure([`key:${challenge.fingerprint}`]);
        throw unauthorized('The sign-in could not be verified: run `svc login` again.');
      }
      await succeeded();
      await touchKey(db, key.id, now);
      return tokens.mint({ accountId: key.account_id, source: 'ssh_key', sshKeyId: key.id });
    },
  };
}
