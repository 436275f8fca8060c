/**
 * `tsx bench/support/upload-to-bucket.ts <file> <key>`: sends the file into the bucket that
 * S3_BUCKET and S3_ENDPOINT name, as the SDK's multipart upload with the service's own part size
 * and parts in flight, and prints the rate in MiB/s. A process of its own, so that it does not share
 * an event loop with the bucket's server: the ceiling of what the bucket service could reach.
 */
import { createReadStream, statSync } from 'node:fs';
import { S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { bucketPartBytes, bucketPartsAtOnce } from '../../server/src/uploads/bucket-package-store.ts';

const [file, key] = process.argv.slice(2);
const { S3_BUCKET: bucket, S3_ENDPOINT: endpoint } = process.env;
if (!file || !key || !bucket || !endpoint) {
  throw new Error('usage: S3_BUCKET=… S3_ENDPOINT=… tsx upload-to-bucket.ts <file> <key>');
}
const client = new S3Client({
  endpoint,
  region: 'us-east-1',
  forcePathStyle: true,
  requestChecksumCalculation: 'WHEN_REQUIRED',
  responseChecksumValidation: 'WHEN_REQUIRED',
});
const started = performance.now();
await new Upload({
  client,
  params: { Bucket: bucket, Key: key, Body: createReadStream(file) },
  partSize: bucketPartBytes,
  queueSize: bucketPartsAtOnce,
}).done();
const seconds = (performance.now() - started) / 1000;
process.stdout.write(`${statSync(file).size / (1024 * 1024) / seconds}\n`);
client.destroy();
