/**
 * Packages as objects in an S3-compatible bucket (`S3_BUCKET`), so that every replica reads what
 * any one received. A package streams in as a multipart upload (a single PutObject when it fits
 * in one part) and shows under its key only once complete: a body that fails before its end
 * completes nothing. Reads stream the object; the package check reads a temporary file.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Client } from '@aws-sdk/client-s3';
import type { PackageBucket } from '../config.ts';
import type { Logger } from '../logger.ts';
import {
  checkedAgainst,
  type PackageStore,
  PackageStoreSetupError,
  packageMissing,
} from './package-store.ts';

/**
 * The multipart upload's part, and how many go up at once: what one PUT holds in memory at most,
 * whatever the package's size (8 MiB × 4 plus the part being filled).
 */
export const bucketPartBytes = 8 * 1024 * 1024;
export const bucketPartsAtOnce = 4;

/** The HTTP status of an S3 error answer, if the error is one. */
const statusOf = (error: unknown) =>
  (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;

const isNotFound = (error: unknown) =>
  statusOf(error) === 404 || ['NoSuchKey', 'NotFound'].includes((error as Error | undefined)?.name ?? '');

/**
 * The SDK and a client of the bucket. Loaded when first needed, so that a service without a
 * bucket (the embedded default, every test that needs none) never spends the time.
 */
async function connect(settings: PackageBucket) {
  // The SDK's plain-text notice on Node 20 would be the one line of stderr that is not the
  // logger's JSON; the lock file holds a release that runs on Node 20 (docs/adr/0040-packages-in-a-bucket.md).
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const [s3, { Upload }] = await Promise.all([import('@aws-sdk/client-s3'), import('@aws-sdk/lib-storage')]);
  const client: S3Client = new s3.S3Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle,
    // By default the SDK sends bodies `aws-chunked` with trailing checksums, which S3-compatible
    // servers (s3rver among them) cannot read. Integrity needs none of it: every read of a package
    // is checked against the sha256 it was received with.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: { connectionTimeout: 10_000 },
  });
  return { s3, Upload, client };
}

export function createBucketPackageStore(settings: PackageBucket, options: { logger: Logger }): PackageStore {
  const { bucket } = settings;
  let connecting: ReturnType<typeof connect> | undefined;
  // A failed load is not kept: the next call tries again.
  const connected = () => {
    connecting ??= connect(settings).catch((error: unknown) => {
      connecting = undefined;
      throw error;
    });
    return connecting;
  };
  const keyOf = (uploadId: string) => `packages/${uploadId}.tar.gz`;
  const where = settings.endpoint ?? `AWS S3 (${settings.region})`;

  /** The object's body, streaming; a missing object is an `ENOENT` error, as a missing file is. */
  async function getObject(uploadId: string): Promise<Readable> {
    const { s3, client } = await connected();
    try {
      const { Body } = await client.send(new s3.GetObjectCommand({ Bucket: bucket, Key: keyOf(uploadId) }));
      if (!Body) throw new Error(`bucket ${bucket} answered no body for ${keyOf(uploadId)}`);
      return Body as Readable;
    } catch (error) {
      if (isNotFound(error)) throw packageMissing(`ENOENT: no object ${keyOf(uploadId)} in bucket ${bucket}`);
      throw error;
    }
  }

  return {
    async verify() {
      const { s3, client } = await connected();
      try {
        await client.send(new s3.HeadBucketCommand({ Bucket: bucket }));
      } catch (error) {
        throw new PackageStoreSetupError(bucketProblem(settings, where, error));
      }
    },

    async writePackage(uploadId, _claim, body) {
      const { s3, Upload, client } = await connected();
      const upload = new Upload({
        client,
        params: { Bucket: bucket, Key: keyOf(uploadId), Body: body, ContentType: 'application/gzip' },
        partSize: bucketPartBytes,
        queueSize: bucketPartsAtOnce,
        // Aborted below, where a server that cannot abort (s3rver) is no failure of the PUT's.
        leavePartsOnError: true,
      });
      try {
        await upload.done();
      } catch (error) {
        // The parts already sent are no object; a bucket lifecycle rule deletes what an abort
        // that fails (or a process that dies) leaves (docs/operating.md).
        if (upload.uploadId) {
          await client
            .send(
              new s3.AbortMultipartUploadCommand({
                Bucket: bucket,
                Key: keyOf(uploadId),
                UploadId: upload.uploadId,
              }),
            )
            .catch((abortError: unknown) =>
              options.logger.debug('multipart upload not aborted: the bucket lifecycle rule deletes it', {
                uploadId,
                error: abortError,
              }),
            );
        }
        throw error;
      }
    },

    async withPackageFile(uploadId, read) {
      const object = await getObject(uploadId);
      let folder: string | undefined;
      try {
        // A folder only this user may enter, and a file only this user may read.
        folder = await mkdtemp(join(tmpdir(), 'svc-package-'));
        const path = join(folder, 'package.tar.gz');
        await pipeline(object, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
        return await read(path);
      } finally {
        object.destroy();
        if (folder) await rm(folder, { recursive: true, force: true });
      }
    },

    async readPackage(uploadId, expected) {
      // Asked for before the answer starts, so that a missing object is an error, not a short body.
      const object = await getObject(uploadId);
      const checked = checkedAgainst(expected, `${keyOf(uploadId)} in bucket ${bucket}`);
      object.on('error', (error) => checked.destroy(error));
      // A reader that goes away lets go of the bucket's connection too.
      checked.on('close', () => object.destroy());
      return object.pipe(checked);
    },

    async removePackage(uploadId) {
      const { s3, client } = await connected();
      await client
        .send(new s3.DeleteObjectCommand({ Bucket: bucket, Key: keyOf(uploadId) }))
        .catch((error) => {
          if (!isNotFound(error)) throw error;
        });
    },

    // Nothing shows under a key before its upload completes.
    partials: async () => [],
    async discardPartial() {},

    close() {
      void connecting?.then(
        ({ client }) => client.destroy(),
        () => undefined,
      );
    },
  };
}

/** One line for the operator: why the bucket cannot be used, and which setting to change. */
function bucketProblem(settings: PackageBucket, where: string, error: unknown): string {
  const { bucket } = settings;
  const { name, message, code } = (error ?? {}) as { name?: string; message?: string; code?: string };
  const status = statusOf(error);
  if (status === 404 || name === 'NotFound' || name === 'NoSuchBucket') {
    return `S3_BUCKET names the bucket "${bucket}", which does not exist at ${where}: create it (see "Packages in a bucket" in docs/operating.md) or set S3_BUCKET to a bucket that exists.`;
  }
  if (status === 301) {
    return `S3_BUCKET "${bucket}" is in another region than S3_REGION ${settings.region}: set S3_REGION to the bucket's region.`;
  }
  if (status === 403 || status === 401) {
    return `S3_BUCKET "${bucket}" at ${where} refused the credentials (${status}): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to a key that may read, write and delete objects in it.`;
  }
  if (name === 'CredentialsProviderError') {
    return `S3_BUCKET is set but no credentials for it were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or another source of the standard AWS chain, such as AWS_PROFILE).`;
  }
  const reason = code ?? name ?? 'no answer';
  if (status === undefined) {
    return `${settings.endpoint ? 'S3_ENDPOINT' : 'S3'} ${where} cannot be reached (${reason}): check that the bucket's server runs there, or unset S3_BUCKET to keep packages in DATA_DIR.`;
  }
  return `S3_BUCKET "${bucket}" at ${where} cannot be used (${status} ${reason}${message ? `: ${message}` : ''}).`;
}
