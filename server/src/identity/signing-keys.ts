/**
 * The identity-token signing keys and their rotation (docs/adr/0022-signing-key-rotation.md).
 * Keys live in the SQL store, so every replica signs with the key the store calls current and
 * serves the same JWKS. A key is `next` (published, signs nothing) for a whole rotation period,
 * then `current` (signs every token), then `retired`: published until the last token it signed
 * has expired, then deleted.
 */
import { generateKeyPairSync, type JsonWebKey, randomBytes } from 'node:crypto';
import { importJWK } from 'jose';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, ForbiddenError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { KeyRing } from '../store/key-encryption.ts';
import {
  deleteRetiredKeys,
  findKeyInState,
  findPrivateKey,
  insertSigningKey,
  listKeysNotSealedWith,
  listPublishedJwks,
  listSigningKeys,
  lockSigningKeys,
  moveSigningKey,
  type SigningKeyRow,
  type StoredPrivateKey,
  sealPrivateKey,
} from './signing-key-repository.ts';

export type Jwks = components['schemas']['Jwks'];
export type SigningKeyList = components['schemas']['SigningKeyList'];

/** How long an identity token lives (`exp` − `iat`). */
export const identityTokenLifetimeSeconds = 600;

/**
 * How long a verifier may cache the JWKS (`Cache-Control: max-age`). A next key is published at
 * least this long before it signs, so a cached set always holds the key of a fresh token.
 */
export const jwksMaxAgeSeconds = 300;

/** Replicas' and verifiers' clocks disagree a little: retired keys stay published this much longer. */
export const clockSkewSeconds = 60;

/** How long a retired key stays in the JWKS: the last token it signed has expired by then. */
export const retiredKeyPublishedSeconds = identityTokenLifetimeSeconds + clockSkewSeconds;

type PrivateKey = Awaited<ReturnType<typeof importJWK>>;

export interface Signer {
  kid: string;
  key: PrivateKey;
}

/** Where a key's private half is kept, as its sealed value is bound to it. */
const sealContext = (kid: string) => `signing key ${kid}`;

function openPrivateKey(kid: string, stored: StoredPrivateKey, keyRing: KeyRing): JsonWebKey {
  return 'plain' in stored ? stored.plain : JSON.parse(keyRing.open(stored.sealed, sealContext(kid)));
}

/**
 * Seals with the ring's key each private half stored in plain text (by a build before keys at
 * rest) and, with `reseal`, each sealed with an older key-encryption key; how many.
 */
export async function sealSigningKeys(
  db: Db,
  keyRing: KeyRing,
  options: { reseal: boolean },
): Promise<number> {
  let sealed = 0;
  for (const { kid, privateKey } of await listKeysNotSealedWith(db, keyRing.keyId)) {
    if (!('plain' in privateKey) && !options.reseal) continue;
    const jwk = openPrivateKey(kid, privateKey, keyRing);
    await sealPrivateKey(db, kid, keyRing.seal(JSON.stringify(jwk), sealContext(kid)));
    sealed += 1;
  }
  return sealed;
}

function newKey(state: 'next' | 'current', now: Date): { row: SigningKeyRow; privateJwk: JsonWebKey } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = randomBytes(8).toString('base64url');
  const jwk = publicKey.export({ format: 'jwk' });
  const row: SigningKeyRow = {
    kid,
    state,
    public_jwk: {
      kty: 'EC',
      crv: 'P-256',
      x: String(jwk.x),
      y: String(jwk.y),
      kid,
      alg: 'ES256',
      use: 'sig',
    },
    created_at: now,
    activated_at: state === 'current' ? now : null,
    retired_at: null,
  };
  return { row, privateJwk: privateKey.export({ format: 'jwk' }) };
}

const secondsAfter = (date: Date, seconds: number) => new Date(date.getTime() + seconds * 1000);

export function createSigningKeyService(deps: {
  db: Db;
  clock: Clock;
  /** How long a key signs before the schedule retires it (`SVC_SIGNING_KEY_ROTATION`), in seconds. */
  rotationSeconds: number;
  logger: Logger;
  /** Seals the private halves in the store. */
  keyRing: KeyRing;
}) {
  const { db, clock, rotationSeconds, logger, keyRing } = deps;
  /** Private keys already imported, by kid: a key is read from the store once per process. */
  const imported = new Map<string, PrivateKey>();

  /** `work` with every other rotation (of any replica) waiting until it ends. */
  function withKeysLocked<T>(work: (trx: Db) => Promise<T>): Promise<T> {
    return db.transaction(async (trx) => {
      await lockSigningKeys(trx);
      return work(trx);
    });
  }

  /** When the next key may sign: once verifiers that cache the JWKS have had it. */
  const nextMaySignAt = (next: Pick<SigningKeyRow, 'created_at'>) =>
    secondsAfter(next.created_at, jwksMaxAgeSeconds);

  async function insertNewKey(trx: Db, state: 'next' | 'current', now: Date): Promise<void> {
    const { row, privateJwk } = newKey(state, now);
    await insertSigningKey(trx, row, keyRing.seal(JSON.stringify(privateJwk), sealContext(row.kid)));
  }

  /** There is a current and a next key; makes what is missing. Under the lock. */
  async function completeLocked(trx: Db, now: Date): Promise<void> {
    if (!(await findKeyInState(trx, 'current'))) {
      // A first start: no verifier holds anything yet, so a fresh current key is safe. A store
      // with a next key and no current one (emptied by hand) promotes the next: it is published.
      const next = await findKeyInState(trx, 'next');
      if (next) await moveSigningKey(trx, next.kid, { state: 'current', activated_at: now });
      else await insertNewKey(trx, 'current', now);
    }
    if (!(await findKeyInState(trx, 'next'))) await insertNewKey(trx, 'next', now);
  }

  /**
   * next → current, current → retired, a new next. Under the lock. A store without both (emptied
   * by hand) is only completed: a key never published must not sign.
   */
  async function rotateLocked(trx: Db, now: Date, by: 'schedule' | 'admin'): Promise<boolean> {
    const current = await findKeyInState(trx, 'current');
    const next = await findKeyInState(trx, 'next');
    if (current && next) {
      await moveSigningKey(trx, current.kid, { state: 'retired', retired_at: now });
      await moveSigningKey(trx, next.kid, { state: 'current', activated_at: now });
      logger.info('identity-token signing keys rotated', { by, retired: current.kid, current: next.kid });
    }
    await completeLocked(trx, now);
    return current !== undefined && next !== undefined;
  }

  /** When the schedule retires the current key: a period after it began to sign, once the next may. */
  function dueAt(
    current: Pick<SigningKeyRow, 'activated_at' | 'created_at'>,
    next?: Pick<SigningKeyRow, 'created_at'>,
  ) {
    const periodOver = secondsAfter(current.activated_at ?? current.created_at, rotationSeconds);
    const nextReady = next ? nextMaySignAt(next) : periodOver;
    return new Date(Math.max(periodOver.getTime(), nextReady.getTime()));
  }

  async function list(): Promise<SigningKeyList> {
    const rows = await listSigningKeys(db);
    const now = clock();
    const current = rows.find((row) => row.state === 'current');
    const next = rows.find((row) => row.state === 'next');
    const publishedAfter = secondsAfter(now, -retiredKeyPublishedSeconds);
    return {
      keys: rows.map((row) => ({
        kid: row.kid,
        state: row.state,
        created_at: row.created_at.toISOString(),
        activated_at: row.activated_at?.toISOString() ?? null,
        retired_at: row.retired_at?.toISOString() ?? null,
        in_jwks: row.state !== 'retired' || (row.retired_at !== null && row.retired_at > publishedAfter),
        public_jwk: row.public_jwk,
      })),
      rotation_period_seconds: rotationSeconds,
      next_rotation_at: (current ? dueAt(current, next) : now).toISOString(),
    };
  }

  async function ensure(): Promise<void> {
    await withKeysLocked(async (trx) => {
      const sealed = await sealSigningKeys(trx, keyRing, { reseal: false });
      if (sealed > 0) {
        logger.info('signing keys stored in plain text are now encrypted at rest', {
          keys: sealed,
          keyEncryptionKey: keyRing.keyId,
        });
      }
      await completeLocked(trx, clock());
    });
    // The key ring opens the current key, or start-up stops here saying which key it needs.
    await currentSigner();
  }

  async function currentSigner(): Promise<Signer> {
    let current = await findKeyInState(db, 'current');
    if (!current) {
      await ensure();
      current = await findKeyInState(db, 'current');
    }
    if (!current) throw new Error('no current signing key, even after making one');
    let key = imported.get(current.kid);
    if (!key) {
      const stored = await findPrivateKey(db, current.kid);
      if (!stored) throw new Error(`signing key ${current.kid} vanished while it was current`);
      const jwk = openPrivateKey(current.kid, stored, keyRing);
      key = await importJWK({ ...jwk, alg: 'ES256' } as Parameters<typeof importJWK>[0], 'ES256');
      // Keys retire; a process that runs for years needs no more than the last few.
      if (imported.size >= 8) imported.clear();
      imported.set(current.kid, key);
    }
    return { kid: current.kid, key };
  }

  return {
    /** At start-up: a current and a next key exist (two replicas starting at once make one of each). */
    ensure,

    /**
     * The key every token is signed with now: the store's current key, read on each call, so a
     * rotation by any replica takes effect in every replica at once.
     */
    currentSigner,

    /** What `/.well-known/jwks.json` serves: next, current, and keys retired of late. */
    async jwks(): Promise<Jwks> {
      return { keys: await listPublishedJwks(db, secondsAfter(clock(), -retiredKeyPublishedSeconds)) };
    },

    /** For admins: every key in the store, its state, and when the schedule next rotates. */
    async list(principal: Principal): Promise<SigningKeyList> {
      if (!principal.isAdmin) throw new ForbiddenError('admins_only', 'Only admins see the signing keys.');
      return list();
    },

    /**
     * An admin's rotation, now. Refused (409 `rotation_too_soon`) while the next key is younger
     * than verifiers may cache the JWKS, which also makes two rotations asked at once one.
     */
    async rotate(principal: Principal): Promise<SigningKeyList> {
      if (!principal.isAdmin) {
        throw new ForbiddenError('admins_only', 'Only admins may rotate the signing keys.');
      }
      await withKeysLocked(async (trx) => {
        const now = clock();
        const next = await findKeyInState(trx, 'next');
        if (next && now < nextMaySignAt(next)) {
          const waitMs = nextMaySignAt(next).getTime() - now.getTime();
          throw new ConflictError(
            'rotation_too_soon',
            `The next key was published at ${next.created_at.toISOString()} and verifiers may cache the JWKS for ${jwksMaxAgeSeconds} seconds, so it may sign from ${nextMaySignAt(next).toISOString()}: rotate then.`,
            { retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) },
          );
        }
        await rotateLocked(trx, now, 'admin');
      });
      return list();
    },

    /** The schedule: rotates when the current key has signed for a period; true when it did. */
    async rotateIfDue(): Promise<boolean> {
      // Most ticks find nothing due, and take no lock to find it.
      const current = await findKeyInState(db, 'current');
      if (current && clock() < dueAt(current, await findKeyInState(db, 'next'))) return false;
      return withKeysLocked(async (trx) => {
        // Another replica may have rotated while this one waited for the lock: look again.
        const now = clock();
        const lockedCurrent = await findKeyInState(trx, 'current');
        if (lockedCurrent && now < dueAt(lockedCurrent, await findKeyInState(trx, 'next'))) return false;
        return rotateLocked(trx, now, 'schedule');
      });
    },

    /** Deletes keys retired longer ago than any token they signed can live; how many. */
    async deleteExpiredKeys(): Promise<number> {
      return deleteRetiredKeys(db, secondsAfter(clock(), -retiredKeyPublishedSeconds));
    },
  };
}

export type SigningKeyService = ReturnType<typeof createSigningKeyService>;
