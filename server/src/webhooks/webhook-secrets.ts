/**
 * An endpoint's signing secrets, kept sealed with the key-encryption key as the store's other
 * secrets are (store/key-encryption.ts): a dump of the database signs no webhook. Each is bound to
 * its endpoint and its place, so a ciphertext copied to another row or column does not open there.
 */
import type { KeyRing, Sealed } from '../store/key-encryption.ts';
import { type EndpointRow, sealedSecret } from './webhook-repository.ts';

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
