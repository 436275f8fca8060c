/**
 * Presigned uploads (DESIGN.md §8): a URL signed for one package (exact size and sha256) that
 * works once, until it expires. The PUT streams to a temporary file while it is hashed and
 * counted, and is renamed into place only when size and hash match; a failed upload leaves
 * nothing behind and the URL can be tried again until it expires.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { type Readable, Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { components } from '../../../generated/openapi.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { ProblemError } from '../http/problem.ts';
import type { Db } from '../store/db.ts';
import type { BlobStore } from './blob-store.ts';
import {
  claimUpload,
  findUpload,
  insertUpload,
  markStored,
  releaseUpload,
  type UploadRow,
} from './upload-repository.ts';
import { signUpload, uploadSigningKey, verifyUploadSignature } from './upload-signature.ts';

export type UploadUrl = components['schemas']['UploadUrl'];
export type PackageUpload = components['schemas']['PackageUpload'];

export const packageContentType = 'application/gzip';

/**
 * Streams the request body through `count` into `file`. Unlike `pipeline(body, …)` it never
 * destroys the request when `count` refuses (too many bytes): the request's socket is the one
 * the 413 must go out on. A client that goes away fails the transfer instead.
 */
async function receiveInto(body: Readable, count: Transform, file: Writable): Promise<void> {
  const gone = () => count.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
  body.once('aborted', gone);
  body.once('error', gone);
  body.once('close', () => {
    if (!body.readableEnded) gone();
  });
  body.pipe(count);
  try {
    await pipeline(count, file);
  } catch (error) {
    body.unpipe(count);
    // Whatever else the client sends is read and dropped, so the answer can still reach it.
    body.resume();
    throw error;
  }
}

export function toApiPackageUpload(row: UploadRow): PackageUpload {
  return {
    upload_id: row.id,
    size: row.size,
    sha256: row.sha256,
    received_at: (row.stored_at ?? row.created_at).toISOString(),
  };
}

export interface UploadService {
  createUploadUrl(accountId: string, input: { size: number; sha256: string }): Promise<UploadUrl>;
  /** Receives the PUT body; the URL's query carries `expires` and `signature`. */
  receive(
    uploadId: string,
    query: { expires: string; signature: string },
    body: Readable,
    declaredLength: string | undefined,
  ): Promise<UploadRow>;
}

export function createUploadService(deps: {
  db: Db;
  config: Config;
  clock: Clock;
  blobs: BlobStore;
  /** The service's public base URL, which upload URLs start with. */
  baseUrl: () => string;
}): UploadService {
  const { db, config, clock, blobs } = deps;
  let signingKey: Promise<Buffer> | undefined;
  const key = () => {
    // A failed first read is not kept: the next request tries again.
    signingKey ??= uploadSigningKey(db, clock).catch((error: unknown) => {
      signingKey = undefined;
      throw error;
    });
    return signingKey;
  };

  return {
    async createUploadUrl(accountId, { size, sha256 }) {
      if (size > config.maxPackageBytes) {
        throw new ProblemError(
          413,
          'package_too_large',
          `The package is ${size} bytes; this service takes packages of at most ${config.maxPackageBytes} bytes.`,
        );
      }
      const now = clock();
      // Whole seconds: the expiry travels in the URL as seconds since the epoch.
      const expires = Math.floor(now.getTime() / 1000) + config.uploadUrlTtlSeconds;
      const upload: UploadRow = {
        id: randomUUID(),
        account_id: accountId,
        size,
        sha256,
        created_at: now,
        expires_at: new Date(expires * 1000),
        receiving_since: null,
        stored_at: null,
        submitted_at: null,
      };
      await insertUpload(db, upload);
      const signature = signUpload(await key(), { uploadId: upload.id, size, sha256, expires });
      return {
        upload_id: upload.id,
        upload_url: `${deps.baseUrl()}/uploads/${upload.id}?expires=${expires}&signature=${signature}`,
        method: 'PUT',
        headers: { 'content-type': packageContentType, 'content-length': String(size) },
        expires_at: upload.expires_at.toISOString(),
      };
    },

    async receive(uploadId, query, body, declaredLength) {
      const upload = await findUpload(db, uploadId);
      const expires = Number(query.expires);
      const signed =
        upload !== undefined &&
        Math.floor(upload.expires_at.getTime() / 1000) === expires &&
        verifyUploadSignature(
          await key(),
          { uploadId, size: upload.size, sha256: upload.sha256, expires },
          query.signature,
        );
      if (!upload || !signed) {
        throw new ProblemError(
          403,
          'invalid_upload_url',
          'This upload URL is not valid: ask for a new one (svc publish does).',
        );
      }
      const now = clock();
      if (upload.expires_at.getTime() <= now.getTime()) {
        throw new ProblemError(403, 'upload_url_expired', 'This upload URL has expired: ask for a new one.');
      }
      if (upload.stored_at) {
        throw new ProblemError(409, 'upload_used', 'This upload URL was used already: ask for a new one.');
      }
      if (declaredLength !== undefined) {
        const length = Number(declaredLength);
        if (length > upload.size) {
          throw new ProblemError(
            413,
            'wrong_length',
            `This URL takes exactly ${upload.size} bytes, not ${length}.`,
          );
        }
        if (length < upload.size) {
          throw new ProblemError(
            400,
            'wrong_length',
            `This URL takes exactly ${upload.size} bytes, not ${length}.`,
          );
        }
      }
      const staleBefore = new Date(now.getTime() - config.uploadUrlTtlSeconds * 1000);
      if (!(await claimUpload(db, uploadId, now, staleBefore))) {
        throw new ProblemError(409, 'upload_in_progress', 'Another upload to this URL is in progress.');
      }

      const temporary = blobs.temporaryPath();
      try {
        const hash = createHash('sha256');
        let received = 0;
        const count = new Transform({
          transform(chunk: Buffer, _encoding, done) {
            received += chunk.length;
            if (received > upload.size) {
              done(
                new ProblemError(
                  413,
                  'wrong_length',
                  `This URL takes exactly ${upload.size} bytes, and more came.`,
                ),
              );
              return;
            }
            hash.update(chunk);
            done(null, chunk);
          },
        });
        await receiveInto(body, count, createWriteStream(temporary, { flags: 'wx', mode: 0o600 }));
        if (received < upload.size) {
          throw new ProblemError(
            400,
            'wrong_length',
            `This URL takes exactly ${upload.size} bytes; ${received} came.`,
          );
        }
        const sha256 = hash.digest('hex');
        if (sha256 !== upload.sha256) {
          throw new ProblemError(
            422,
            'sha256_mismatch',
            `The package's sha256 is ${sha256}, not the ${upload.sha256} the URL was made for.`,
          );
        }
        await blobs.keep(temporary, uploadId);
        const storedAt = clock();
        await markStored(db, uploadId, storedAt);
        return { ...upload, stored_at: storedAt };
      } catch (error) {
        await blobs.discard(temporary);
        await releaseUpload(db, uploadId);
        throw error;
      }
    },
  };
}
