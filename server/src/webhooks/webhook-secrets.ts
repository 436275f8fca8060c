/**
 * An endpoint's signing secrets, kept sealed with the key-encryption key as the store's other
 * secrets are (store/key-encryption.ts): a dump of the database signs no webhook. Each is bound to
 * its endpoint and its place, so a ciphertext copied to another row or column does not open there.
 */
import type { Db } from '../store/db.ts';
import type { KeyRing, Sealed } from '../store/key-encryption.ts';
import {
  type EndpointRow,
  listEndpointsSealedWithOtherKeys,
  sealedSecret,
  secretColumns,
} from './webhook-repository.ts';

const contextOf = (endpointId: string, which: 'secret' | 'previous_secret') =>
  `webhook endpoint ${endpointId} ${which}`;

export function sealSecret(
  keyRing: KeyRing,
  endpointId: string,
  which: 'secret' | 'previous_secret',
  secret: string,
): Sealed {
  return keyRing.seal(secret, contextOf(endpointId, which));
}

export function openSecret(keyRing: KeyRing, endpoint: EndpointRow, which: 'secret' | 'previous_secret') {
  const sealed = sealedSecret(endpoint, which);
  return sealed && keyRing.open(sealed, contextOf(endpoint.id, which));
}

/** The secrets that sign at `at`: the current one, and the previous one until its overlap ends. */
export function endpointSecrets(endpoint: EndpointRow, keyRing: KeyRing, at: Date): string[] {
  const secrets = [openSecret(keyRing, endpoint, 'secret') as string];
  const expires = endpoint.previous_secret_expires_at;
  if (expires && expires > at) {
    const previous = openSecret(keyRing, endpoint, 'previous_secret');
    if (previous) secrets.push(previous);
  }
  return secrets;
}

/**
 * Re-seals with the key ring's current key every endpoint secret sealed with another (a rotation of
 * the key-encryption key, `npm run rotate-key-encryption-key`); how many secrets.
 */
export async function resealWebhookSecrets(db: Db, keyRing: KeyRing): Promise<number> {
  let resealed = 0;
  for (const endpoint of await listEndpointsSealedWithOtherKeys(db, keyRing.keyId)) {
    const changes: Record<string, string> = {};
    for (const which of ['secret', 'previous_secret'] as const) {
      const sealed = sealedSecret(endpoint, which);
      if (!sealed || sealed.keyId === keyRing.keyId) continue;
      const secret = openSecret(keyRing, endpoint, which) as string;
      Object.assign(changes, secretColumns(sealSecret(keyRing, endpoint.id, which, secret), which));
      resealed += 1;
    }
    await db('webhook_endpoints').where({ id: endpoint.id }).update(changes);
  }
  return resealed;
}
