/** Password hashing for web-console accounts: scrypt with a per-account salt, compared in constant time. */
import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';

/** The scrypt cost of new hashes. A stored hash names its own cost, so either may change later. */
export interface PasswordCost {
  N: number;
  r: number;
  p: number;
}

/** What the service hashes with: about 100 ms and 32 MiB a hash on one core. */
export const passwordCost: PasswordCost = { N: 2 ** 15, r: 8, p: 1 };

const maxmem = 64 * 1024 * 1024;
const keyLength = 32;

function derive(password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, keyLength, { ...options, maxmem }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

export type Passwords = ReturnType<typeof createPasswords>;

/**
 * Hashing at `cost`. Only tests pass a lower one, so that signing up a hundred accounts does not
 * spend their time in scrypt; the service always uses `passwordCost`.
 */
export function createPasswords(cost: PasswordCost = passwordCost) {
  /** `scrypt$N$r$p$<salt b64>$<hash b64>`: the parameters travel with the hash so they can change later. */
  async function hash(password: string): Promise<string> {
    const salt = randomBytes(16);
    const key = await derive(password, salt, cost);
    return ['scrypt', cost.N, cost.r, cost.p, salt.toString('base64'), key.toString('base64')].join('$');
  }

  async function verify(password: string, stored: string): Promise<boolean> {
    const [scheme, n, r, p, salt, expectedKey] = stored.split('$');
    if (scheme !== 'scrypt' || !salt || !expectedKey) return false;
    const expected = Buffer.from(expectedKey, 'base64');
    const actual = await derive(password, Buffer.from(salt, 'base64'), {
      N: Number(n),
      r: Number(r),
      p: Number(p),
    });
    return actual.length === expected.length && timingSafeEqual(actual, expected);
  }

  /** Spent on unknown emails too, so that the answer's timing does not tell which accounts exist. */
  let decoy: Promise<string> | undefined;
  async function decoyCheck(password: string): Promise<false> {
    decoy ??= hash('decoy password that matches nothing');
    await verify(password, await decoy);
    return false;
  }

  return { hash, verify, decoyCheck };
}
