/**
 * The presigned upload URL: an HMAC over method, upload id, exact size, sha256 and expiry, with a
 * key the service makes on first start and keeps in the SQL store (every replica signs alike).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { Db } from '../store/db.ts';

export interface SignedFields {
  uploadId: string;
  size: number;
  sha256: string;
  /** Seconds since the epoch. */
  expires: number;
}

export async function uploadSigningKey(db: Db, clock: Clock): Promise<Buffer> {
  const name = 'upload_url_hmac';
  await db('service_secrets')
    .insert({ name, value: randomBytes(32).toString('base64'), created_at: clock() })
    .onConflict('name')
    .ignore();
  const row: { value: string } = await db('service_secrets').where({ name }).first('value');
  return Buffer.from(row.value, 'base64');
}

function mac(key: Buffer, fields: SignedFields): Buffer {
  const canonical = ['PUT', fields.uploadId, String(fields.size), fields.sha256, String(fields.expires)].join(
    '\n',
  );
  return createHmac('sha256', key).update(canonical).digest();
}

export function signUpload(key: Buffer, fields: SignedFields): string {
  return mac(key, fields).toString('base64url');
}

/**
 * `expires` exactly as `signUpload`'s URL writes it: decimal digits without a leading zero, sign or
 * space. Any other spelling of the same number is a rewritten URL, refused like a forged one.
 */
export function parseCanonicalExpires(raw: string): number | undefined {
  return /^[1-9][0-9]{0,11}$/.test(raw) ? Number(raw) : undefined;
}

/**
 * A signature exactly as `signUpload` writes it: unpadded base64url whose decoding encodes back to
 * the same text. Decoders skip characters outside the alphabet and ignore the last character's
 * unused bits, so several strings decode to one MAC; only one of them was issued.
 */
export function isCanonicalSignature(signature: string): boolean {
  // 43 characters: the 32 bytes of an HMAC-SHA256.
  return signature.length === 43 && Buffer.from(signature, 'base64url').toString('base64url') === signature;
}

/** Constant-time: a wrong signature takes as long to refuse whatever byte it differs in. */
export function verifyUploadSignature(key: Buffer, fields: SignedFields, signature: string): boolean {
  const expected = mac(key, fields);
  const given = Buffer.from(signature, 'base64url');
  return (
    isCanonicalSignature(signature) && given.length === expected.length && timingSafeEqual(given, expected)
  );
}
