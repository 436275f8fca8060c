/**
 * An S3-compatible server for tests (s3rver from npm: no MinIO package is reachable here), on a
 * free port with its files in a temporary folder, and one bucket. s3rver checks no request
 * signatures and has neither ListMultipartUploads nor AbortMultipartUpload.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';

interface S3rverServer {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
  httpServer?: { closeAllConnections(): void };
}
type S3rverClass = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}) => S3rverServer;

// A CommonJS package without types of its own.
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;

/** The key pair s3rver's one account has. */
export const s3rverCredentials = {
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  // Never the instance-metadata address (not on this machine), should a chain look for one.
  AWS_EC2_METADATA_DISABLED: 'true',
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
};

export interface TestBucket {
  endpoint: string;
  bucket: string;
  /** The service's settings for this bucket, credentials included. */
  env: Record<string, string>;
  /** The keys of the objects in the bucket. */
  keys(): Promise<string[]>;
  /** Writes `bytes` under `key`, as someone with access to the bucket could. */
  put(key: string, bytes: Buffer): Promise<void>;
  /** The sha256 of the object under `key`, or undefined when there is none. */
  sha256Of(key: string): Promise<string | undefined>;
  /**
   * The parts stored so far of multipart uploads to `key` that were never completed (read from
   * s3rver's folder: s3rver cannot list multipart uploads).
   */
  partsUnderWay(key: string): number;
  stop(): Promise<void>;
}

export async function startS3rver(bucket = 'svc-packages'): Promise<TestBucket> {
  const directory = mkdtempSync(join(tmpdir(), 'svc-s3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const uploads = join(directory, bucket, '._S3rver_uploads');
  return {
    endpoint,
    bucket,
    env: { S3_BUCKET: bucket, S3_ENDPOINT: endpoint, S3_FORCE_PATH_STYLE: 'true', ...s3rverCredentials },
    async keys() {
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
      return (listed.Contents ?? []).flatMap((object) => (object.Key ? [object.Key] : []));
    },
    async put(key, bytes) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes }));
    },
    async sha256Of(key) {
      try {
        const { Body } = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        const hash = createHash('sha256');
        for await (const chunk of Body as Readable) hash.update(chunk);
        return hash.digest('hex');
      } catch (error) {
        if ((error as Error).name === 'NoSuchKey') return undefined;
        throw error;
      }
    },
    partsUnderWay(key) {
      if (!existsSync(uploads)) return 0;
      return readdirSync(uploads)
        .map((id) => join(uploads, id))
        .filter(
          (upload) => existsSync(join(upload, 'key')) && readFileSync(join(upload, 'key'), 'utf8') === key,
        )
        .flatMap((upload) => readdirSync(upload).filter((name) => /^\d+\.md5$/.test(name))).length;
    },
    async stop() {
      client.destroy();
      // Whatever keeps a connection open (a service not stopped) holds the test no longer.
      const closed = server.close();
      server.httpServer?.closeAllConnections();
      await closed;
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
