/**
 * The key-encryption key, and the secrets the database keeps sealed with it (AES-256-GCM): the
 * signing keys' private halves and the broker secrets. A dump or a backup of the database alone
 * gives none of them away. Each sealed value names the key that sealed it (the first bytes of
 * the key's SHA-256) and the algorithm, so a rotation knows what to re-seal and a service being
 * rotated opens values sealed under either key.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.ts';

/** JOSE's name for AES-256-GCM, as stored beside each ciphertext. */
export const encryptionAlgorithm = 'A256GCM';

export interface Sealed {
  /** base64url of the 12-byte IV, the ciphertext and the 16-byte tag, in that order. */
  ciphertext: string;
  /** Which key-encryption key sealed it: `keyEncryptionKeyId` of that key. */
  keyId: string;
  algorithm: string;
}

/** A mistake in the setup that the operator fixes: said in one line, never as a stack. */
export class KeyEncryptionError extends Error {
  override readonly name = 'KeyEncryptionError';
}

/** 16 hex digits of the key's SHA-256: names a key in the database and in logs without revealing it. */
export function keyEncryptionKeyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

export interface KeyRing {
  /** The key everything is sealed with now. */
  keyId: string;
  /**
   * `context` names where the value is kept (table and row): it is authenticated with the value,
   * so a ciphertext copied into another row does not open there.
   */
  seal(plaintext: string, context: string): Sealed;
  open(sealed: Sealed, context: string): string;
}

/** `current` seals; it and each of `older` open. `where` says where the keys come from, for messages. */
export function createKeyRing(
  current: Buffer,
  older: Buffer[] = [],
  where = 'SVC_KEY_ENCRYPTION_KEY',
): KeyRing {
  const keys = new Map<string, Buffer>();
  for (const key of [current, ...older]) keys.set(keyEncryptionKeyId(key), key);
  const keyId = keyEncryptionKeyId(current);
  return {
    keyId,
    seal(plaintext, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', current, iv);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return {
        ciphertext: Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url'),
        keyId,
        algorithm: encryptionAlgorithm,
      };
    },
    open(sealed, context) {
      if (sealed.algorithm !== encryptionAlgorithm) {
        throw new KeyEncryptionError(
          `${context} is encrypted with ${sealed.algorithm}, which this build does not know: run the build that wrote it, or a newer one`,
        );
      }
      const key = keys.get(sealed.keyId);
      if (!key) {
        throw new KeyEncryptionError(
          `${context} is encrypted with key-encryption key ${sealed.keyId}, and ${where} is key ${keyId}: set SVC_KEY_ENCRYPTION_KEY to the key the database was encrypted with (during a rotation, the old one as SVC_PREVIOUS_KEY_ENCRYPTION_KEY)`,
        );
      }
      const bytes = Buffer.from(sealed.ciphertext, 'base64url');
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, 12));
        decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(bytes.subarray(bytes.length - 16));
        return Buffer.concat([
          decipher.update(bytes.subarray(12, bytes.length - 16)),
          decipher.final(),
        ]).toString('utf8');
      } catch {
        throw new KeyEncryptionError(
          `${context} does not decrypt with key-encryption key ${sealed.keyId}: the stored value was changed or damaged; restore it from a backup`,
        );
      }
    },
  };
}

/** Embedded mode keeps its key-encryption key here, unless SVC_KEY_ENCRYPTION_KEY gives one. */
export function keyEncryptionKeyFile(dataDir: string): string {
  return join(dataDir, 'key-encryption-key');
}

function readKeyFile(file: string): Buffer {
  // Like ssh with a private key: a key others may read is no secret, so refuse to use it.
  if ((statSync(file).mode & 0o077) !== 0) {
    throw new KeyEncryptionError(
      `${file} may be read by other users: make it the service user's alone (chmod 600 ${file})`,
    );
  }
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
  if (key.length !== 32) {
    throw new KeyEncryptionError(
      `${file} holds no key-encryption key (32 bytes in base64): restore it from where you keep it apart from backups`,
    );
  }
  return key;
}

/**
 * The service's key ring: SVC_KEY_ENCRYPTION_KEY seals; SVC_PREVIOUS_KEY_ENCRYPTION_KEY opens what
 * was sealed before a rotation. Embedded mode without SVC_KEY_ENCRYPTION_KEY uses (and on its
 * first start makes, mode 0600) `DATA_DIR/key-encryption-key`; with it, that file still opens.
 */
export function loadKeyRing(
  config: Pick<Config, 'keyEncryptionKey' | 'previousKeyEncryptionKey' | 'databaseUrl' | 'dataDir'>,
): KeyRing {
  const previous = config.previousKeyEncryptionKey ? [config.previousKeyEncryptionKey] : [];
  if (config.databaseUrl) {
    if (!config.keyEncryptionKey)
      throw new KeyEncryptionError('SVC_KEY_ENCRYPTION_KEY must be set with DATABASE_URL');
    return createKeyRing(config.keyEncryptionKey, previous);
  }
  const file = keyEncryptionKeyFile(config.dataDir);
  const fileKey = existsSync(file) ? readKeyFile(file) : undefined;
  if (config.keyEncryptionKey) {
    return createKeyRing(config.keyEncryptionKey, [...previous, ...(fileKey ? [fileKey] : [])]);
  }
  if (fileKey) return createKeyRing(fileKey, previous, file);
  const made = randomBytes(32);
  // `wx`: two starts at once cannot both make one; the loser reads the winner's.
  try {
    writeFileSync(file, `${made.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST')
      return createKeyRing(readKeyFile(file), previous, file);
    throw error;
  }
  return createKeyRing(made, previous, file);
}
