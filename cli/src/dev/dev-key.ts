/**
 * The dev-server's identity tokens (DESIGN §11): ES256 JWTs with the claims the service signs
 * (DESIGN §10), signed with a key of this machine's own, so that a mini-app's backend verifies
 * them in development with `verifyIdentityToken({ jwksUrl })` exactly as in production, against
 * the dev-server's `/.well-known/jwks.json`.
 *
 * The key is kept in `<home>/.config/svc/dev-signing-key.json` (0600, beside the token file), so
 * that a backend which cached the key set keeps verifying across restarts of `svc dev`. It signs
 * nothing the service would accept: the issuer is `urn:svc:dev-server`, and the service's JWKS
 * never lists it. node:crypto signs; no JWT library is needed for one algorithm.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomUUID,
  sign,
} from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The issuer of every dev-server token: not a URL any service answers on. */
export const devIssuer = 'urn:svc:dev-server';
/** As the service's (DESIGN §10): at most 10 minutes. */
export const devTokenSeconds = 600;

export interface DevSigningKey {
  kid: string;
  /** The user every dev token is signed for: one per machine, kept with the key. */
  userId: string;
  privateKey: KeyObject;
  /** The public half, as `/.well-known/jwks.json` lists it. */
  publicJwk: Record<string, unknown>;
}

interface StoredKey {
  kid: string;
  user_id: string;
  created_at: string;
  private_jwk: Record<string, unknown>;
}

export function devKeyFile(home: string): string {
  return join(home, '.config', 'svc', 'dev-signing-key.json');
}

/**
 * The machine's dev signing key, made on first use. A file that cannot be read as one is
 * replaced (it signs development tokens only), and `replaced` says why.
 */
export function loadDevSigningKey(home: string): { key: DevSigningKey; replaced?: string; warning?: string } {
  const file = devKeyFile(home);
  let replaced: string | undefined;
  try {
    const key = fromStored(JSON.parse(readFileSync(file, 'utf8')) as StoredKey);
    // Used all the same (it signs development tokens only), but its owner should know.
    const mode = statSync(file).mode & 0o777;
    if (mode & 0o077) {
      return {
        key,
        warning: `${file} is readable by others (mode ${mode.toString(8)}): run chmod 600 ${file}`,
      };
    }
    return { key };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      replaced = `${file} could not be read as a signing key (${(error as Error).message}): made a new one`;
    }
  }
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const stored: StoredKey = {
    kid: `dev-${randomUUID()}`,
    user_id: randomUUID(),
    created_at: new Date().toISOString(),
    private_jwk: privateKey.export({ format: 'jwk' }) as Record<string, unknown>,
  };
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  // Written whole, then renamed: a second `svc dev` starting at once reads one key or the other.
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
  chmodSync(partial, 0o600);
  renameSync(partial, file);
  return { key: fromStored(stored), ...(replaced ? { replaced } : {}) };
}

function fromStored(stored: StoredKey): DevSigningKey {
  if (typeof stored.kid !== 'string' || typeof stored.user_id !== 'string') {
    throw new Error('no kid or user_id');
  }
  const privateKey = createPrivateKey({ key: stored.private_jwk as never, format: 'jwk' });
  if (privateKey.asymmetricKeyType !== 'ec' || privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error('not a P-256 key');
  }
  const { kty, crv, x, y } = createPublicKey(privateKey).export({ format: 'jwk' });
  return {
    kid: stored.kid,
    userId: stored.user_id,
    privateKey,
    publicJwk: { kty, crv, x, y, kid: stored.kid, alg: 'ES256', use: 'sig' },
  };
}

export interface DevTokenRequest {
  deviceId: string;
  brand: string;
  appId: string;
  locale: string;
}

/** A token as the service signs one (DESIGN §10), from the dev-server; `now` in ms. */
export function signDevToken(
  key: DevSigningKey,
  request: DevTokenRequest,
  now = Date.now(),
): { token: string; expiresAt: string } {
  const iat = Math.floor(now / 1000);
  const exp = iat + devTokenSeconds;
  const header = { alg: 'ES256', typ: 'JWT', kid: key.kid };
  const claims = {
    sub: key.userId,
    device_id: request.deviceId,
    brand: request.brand,
    locale: request.locale,
    iss: devIssuer,
    aud: request.appId,
    iat,
    exp,
    jti: randomUUID(),
  };
  const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  // JWS wants the signature as r ‖ s (IEEE P1363), not DER.
  const signature = sign('sha256', Buffer.from(signingInput), {
    key: key.privateKey,
    dsaEncoding: 'ieee-p1363',
  });
  return {
    token: `${signingInput}.${signature.toString('base64url')}`,
    expiresAt: new Date(exp * 1000).toISOString(),
  };
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}
