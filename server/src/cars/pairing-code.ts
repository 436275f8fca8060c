/**
 * One-time pairing codes: 8 digits drawn uniformly by the system's CSPRNG, kept only as an
 * HMAC-SHA256 under a salt of their own, and compared in constant time.
 */
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

export const pairingCodeDigits = 8;

/** `randomInt` draws without modulo bias: every code from 00000000 to 99999999 alike. */
export function newPairingCode(): string {
  return String(randomInt(0, 10 ** pairingCodeDigits)).padStart(pairingCodeDigits, '0');
}

export interface HashedCode {
  salt: string;
  hash: string;
}

function hmac(salt: string, code: string): Buffer {
  return createHmac('sha256', Buffer.from(salt, 'hex')).update(code, 'utf8').digest();
}

export function hashPairingCode(code: string): HashedCode {
  const salt = randomBytes(16).toString('hex');
  return { salt, hash: hmac(salt, code).toString('hex') };
}

export function pairingCodeMatches(code: string, stored: HashedCode): boolean {
  const expected = Buffer.from(stored.hash, 'hex');
  const actual = hmac(stored.salt, code);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/** The code as typed, without the spaces and dashes people put between digit groups. */
export function normalizePairingCode(typed: string): string {
  return typed.replace(/[\s-]/g, '');
}
