/**
 * The service's identity-token signing keys: an ES256 key made on first start and kept in the
 * SQL store, so every replica signs with the same key and the JWKS stays stable across restarts.
 */
import { generateKeyPairSync, type JsonWebKey, randomBytes } from 'node:crypto';
import type { components } from '../../../generated/openapi.ts';
import type { Clock } from '../clock.ts';
import type { Db } from '../store/db.ts';

export type Jwks = components['schemas']['Jwks'];
type PublicJwk = Jwks['keys'][number];

interface SigningKeyRow {
  kid: string;
  public_jwk: PublicJwk;
  private_jwk: JsonWebKey;
  created_at: Date;
}

export async function ensureSigningKey(db: Db, clock: Clock): Promise<void> {
  const existing = await db('signing_keys').first('kid');
  if (existing) return;
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = randomBytes(8).toString('base64url');
  const jwk = publicKey.export({ format: 'jwk' });
  const row: SigningKeyRow = {
    kid,
    public_jwk: {
      kty: 'EC',
      crv: 'P-256',
      x: String(jwk.x),
      y: String(jwk.y),
      kid,
      alg: 'ES256',
      use: 'sig',
    },
    private_jwk: privateKey.export({ format: 'jwk' }),
    created_at: clock(),
  };
  // Two replicas starting at once may each add a key; both are then published, and either verifies.
  await db('signing_keys')
    .insert({
      ...row,
      public_jwk: JSON.stringify(row.public_jwk),
      private_jwk: JSON.stringify(row.private_jwk),
    })
    .onConflict('kid')
    .ignore();
}

export async function publicJwks(db: Db): Promise<Jwks> {
  const rows: Pick<SigningKeyRow, 'public_jwk'>[] = await db('signing_keys')
    .select('public_jwk')
    .orderBy('created_at');
  return {
    keys: rows.map((row) =>
      typeof row.public_jwk === 'string' ? JSON.parse(row.public_jwk) : row.public_jwk,
    ),
  };
}
