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

/** Constant-time: a wrong signature takes as long to refuse whatever byte it differs in. */
export function verifyUploadSignature(key: Buffer, fields: SignedFields, signature: string): boolean {
  const expected = mac(key, fields);
  const given = Buffer.from(signature, 'base64url');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
