/** Registering and removing the ed25519 keys an account signs in with. */
import { randomUUID } from 'node:crypto';
import { fingerprint, parsePublicKeyLine, SshKeyError } from '@svc/ssh';
import type { components } from '../../../generated/openapi.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, InvalidError, NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { deleteKey, insertKey, listKeys, type SshKeyRow } from './key-repository.ts';

export type SshKey = components['schemas']['SshKey'];

export function toApiSshKey(row: SshKeyRow): SshKey {
  return {
    id: row.id,
    type: 'ssh-ed25519',
    fingerprint: row.fingerprint,
    title: row.title,
    public_key: row.public_key,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
  };
}

/** One OpenSSH public-key line, ed25519 only; anything else is invalid, with the parser's reason. */
export function parseEd25519KeyLine(line: string) {
  try {
    const key = parsePublicKeyLine(line);
    return { ...key, fingerprint: fingerprint(key) };
  } catch (error) {
    if (error instanceof SshKeyError) throw new InvalidError(error.code, error.message);
    throw error;
  }
}

export interface KeyService {
  list(accountId: string): Promise<SshKeyRow[]>;
  add(accountId: string, input: { public_key: string; title?: string | undefined }): Promise<SshKeyRow>;
  remove(accountId: string, keyId: string): Promise<void>;
}

export function createKeyService(db: Db, clock: Clock, onRemoved: () => void): KeyService {
  return {
    list: (accountId) => listKeys(db, accountId),

    async add(accountId, input) {
      const key = parseEd25519KeyLine(input.public_key);
      const row = await insertKey(db, {
        id: randomUUID(),
        account_id: accountId,
        public_key: `${key.type} ${key.keyBase64}`,
        fingerprint: key.fingerprint,
        title: input.title?.trim() || key.comment || key.fingerprint,
        created_at: clock(),
        last_used_at: null,
      });
      if (!row) throw new ConflictError('key_exists', `The key ${key.fingerprint} is registered already.`);
      return row;
    },

    async remove(accountId, keyId) {
      if (!(await deleteKey(db, accountId, keyId))) {
        throw new NotFoundError(
          'key_not_found',
          `No SSH key with id ${keyId} is registered to your account.`,
        );
      }
      onRemoved();
    },
  };
}
