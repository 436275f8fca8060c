/**
 * Broker credentials, kept as the key-value entry `mqtt:auth:{username}` (the username of a car is
 * its full prefixed device id): a table of the SQL store in embedded mode, Redis when REDIS_URL is
 * set. Only a hash of the secret is kept. The secret is 192 random bits, so one SHA-256 is as safe
 * as a slow hash would be, and cheap enough to check on every connect.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Brand } from '@svc/sdk';
import { Redis } from 'ioredis';
import { UnavailableError } from '../errors.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import { readinessTimeoutMs, within } from '../store/readiness.ts';

/** A car speaks for itself; a brand connector for every car of its brand. */
export type BrokerRole = 'car' | 'connector';

export interface BrokerCredential {
  role: BrokerRole;
  brand: Brand;
  /** Lowercase hex SHA-256 of the secret. */
  secretSha256: string;
}

export interface CredentialStore {
  get(username: string): Promise<BrokerCredential | undefined>;
  put(username: string, credential: BrokerCredential): Promise<void>;
  /** Whether there was one to delete. */
  delete(username: string): Promise<boolean>;
  /** The user names it holds a credential for (what a sync compares with SQL). */
  usernames(): Promise<string[]>;
  /**
   * Whether the store answers within about a second (/readyz `checks.key_value_store`); undefined
   * for the SQL table, which the store's own check covers (see operations.ts).
   */
  ready?(): Promise<boolean>;
  /**
   * Calls `listener` each time the store answers again after its connection closed: a Redis that
   * restarted (it may hold nothing now) or one that was away at start. Not for the SQL table.
   */
  onReconnected?(listener: () => void): void;
  close(): Promise<void>;
}

const mqttAuthPrefix = 'mqtt:auth:';

export function mqttAuthKey(username: string): string {
  return `${mqttAuthPrefix}${username}`;
}

/** A new broker password: `mq_` and 32 base64url characters. */
export function newBrokerSecret(): string {
  return `mq_${randomBytes(24).toString('base64url')}`;
}

export function hashBrokerSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export function secretMatches(secret: string, credential: BrokerCredential): boolean {
  const expected = Buffer.from(credential.secretSha256, 'hex');
  const actual = Buffer.from(hashBrokerSecret(secret), 'hex');
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

function encode(credential: BrokerCredential): string {
  return JSON.stringify({
    role: credential.role,
    brand: credential.brand,
    secret_sha256: credential.secretSha256,
  });
}

/** A stored value this service did not write, or a damaged one, is no credential. */
function decode(value: string | null | undefined): BrokerCredential | undefined {
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(value) as { role?: unknown; brand?: unknown; secret_sha256?: unknown };
    if (parsed.role !== 'car' && parsed.role !== 'connector') return undefined;
    if (typeof parsed.brand !== 'string' || typeof parsed.secret_sha256 !== 'string') return undefined;
    if (!/^[0-9a-f]{64}$/.test(parsed.secret_sha256)) return undefined;
    return { role: parsed.role, brand: parsed.brand as Brand, secretSha256: parsed.secret_sha256 };
  } catch {
    return undefined;
  }
}

export function createSqlCredentialStore(db: Db): CredentialStore {
  return {
    async get(username) {
      const row = await db('key_values')
        .where({ key: mqttAuthKey(username) })
        .first('value');
      return decode(row?.value);
    },
    async put(username, credential) {
      await db('key_values')
        .insert({ key: mqttAuthKey(username), value: encode(credential), updated_at: new Date() })
        .onConflict('key')
        .merge();
    },
    async delete(username) {
      return (
        (await db('key_values')
          .where({ key: mqttAuthKey(username) })
          .delete()) > 0
      );
    },
    async usernames() {
      const rows: { key: string }[] = await db('key_values')
        .where('key', 'like', `${mqttAuthPrefix}%`)
        .select('key');
      return rows.map((row) => row.key.slice(mqttAuthPrefix.length));
    },
    async close() {},
  };
}

/** While Redis stays away with the same failure, it is logged again at most this often. */
export const redisErrorRepeatMs = 60_000;

/**
 * ioredis reports every failed (re)connection as an `error` event, several a second while Redis
 * is away, and prints each to stderr as plain text when no one listens. The operator gets one
 * warn line when Redis goes (or fails anew), one a minute while it stays away with the count of
 * failures since, and one info line when it answers again. The URL's password is never logged.
 */
function logRedisErrors(redis: Redis, url: string, logger: Logger): void {
  const { hostname, port } = new URL(url);
  const store = `redis ${hostname}:${port || 6379}`;
  let away: { reason: string; loggedAt: number; failures: number } | undefined;
  redis.on('error', (error: NodeJS.ErrnoException) => {
    const reason = error.code ?? error.message;
    if (away && away.reason === reason && Date.now() - away.loggedAt < redisErrorRepeatMs) {
      away.failures += 1;
      return;
    }
    logger.warn('key-value store unreachable', {
      store,
      reason,
      ...(away && away.reason === reason ? { failuresSinceLastLine: away.failures + 1 } : {}),
    });
    away = { reason, loggedAt: Date.now(), failures: 0 };
  });
  redis.on('ready', () => {
    if (away) logger.info('key-value store reachable again', { store });
    away = undefined;
  });
}

export function createRedisCredentialStore(url: string, logger: Logger): CredentialStore {
  // A command fails after one retry rather than waiting forever while Redis is away.
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  logRedisErrors(redis, url, logger);
  // A 'ready' after a 'close' is a connection made again: the Redis there may be a new, empty one.
  let closed = false;
  const reconnected: (() => void)[] = [];
  redis.on('close', () => {
    closed = true;
  });
  redis.on('ready', () => {
    if (!closed) return;
    closed = false;
    for (const listener of reconnected) listener();
  });
  async function answer<T>(command: Promise<T>): Promise<T> {
    try {
      return await command;
    } catch {
      throw new UnavailableError(
        'key_value_store_unavailable',
        'The key-value store does not answer just now: try again in a few seconds.',
      );
    }
  }
  return {
    async get(username) {
      return decode(await answer(redis.get(mqttAuthKey(username))));
    },
    async put(username, credential) {
      await answer(redis.set(mqttAuthKey(username), encode(credential)));
    },
    async delete(username) {
      return (await answer(redis.del(mqttAuthKey(username)))) > 0;
    },
    async usernames() {
      const names: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await answer(redis.scan(cursor, 'MATCH', `${mqttAuthPrefix}*`, 'COUNT', 1000));
        cursor = next;
        names.push(...keys.map((key) => key.slice(mqttAuthPrefix.length)));
      } while (cursor !== '0');
      return names;
    },
    async ready() {
      try {
        return (await within(readinessTimeoutMs, redis.ping())) === 'PONG';
      } catch {
        return false;
      }
    },
    onReconnected(listener) {
      reconnected.push(listener);
    },
    async close() {
      reconnected.length = 0;
      redis.disconnect();
    },
  };
}
