/**
 * Packages in an S3-compatible bucket (S3_BUCKET): two replicas on one store and one bucket, each
 * with a data folder of its own, so that a package any one received is one every other reads.
 * The upload URL stays the service's own (its HMAC, single use, exact size and sha256).
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { bucketPartBytes } from '../src/uploads/bucket-package-store.ts';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import { call, eventually, putPackage, sameUrlOn, startRequest } from './support/http.ts';
import { testKeyEncryptionKey } from './support/key-encryption.ts';
import { makePackage, manifestFor, type TestPackage } from './support/packages.ts';
import { s3rverCredentials, startS3rver, type TestBucket } from './support/s3rver.ts';
import { startTestService, type TestService } from './support/service.ts';
import {
  exitOf,
  runServiceToExit,
  type ServiceProcess,
  startServiceProcess,
} from './support/service-process.ts';
import { openTestStore, type TestStore } from './support/store.ts';

const mib = 1024 * 1024;
const keyOf = (uploadId: string) => `packages/${uploadId}.tar.gz`;
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** A package of several multipart parts: random text, which packs to about three quarters. */
function multipartPackage(appId: string): TestPackage {
  const pkg = makePackage(manifestFor(appId, '1.0.0'), {
    'index.html': '<h1>big</h1>',
    'assets.txt': randomBytes(Math.ceil(bucketPartBytes * 1.25)).toString('base64'),
  });
  assert.ok(pkg.size > bucketPartBytes + mib, `${pkg.size} bytes is not over one part`);
  return pkg;
}

async function askUploadUrl(base: string, who: Developer, pkg: TestPackage) {
  const target = await call(base, 'POST', '/api/v1/mini-apps/upload-url', {
    token: who.token,
    body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
  });
  assert.equal(target.status, 201, JSON.stringify(target.body));
  return { uploadId: target.body.upload_id as string, uploadUrl: target.body.upload_url as string };
}

async function downloadSha256(base: string, who: Developer, versionId: string): Promise<string> {
  const answer = await fetch(`${base}/api/v1/mini-apps/versions/${versionId}/package`, {
    headers: { authorization: `Bearer ${who.token}` },
  });
  assert.equal(answer.status, 200, await answer.clone().text());
  return sha256(Buffer.from(await answer.arrayBuffer()));
}

/** PUTs `pkg` to `url` until the hold of a dead receiver has lapsed (it answers Retry-After). */
async function putOnceHoldLapses(url: string, pkg: TestPackage) {
  for (let tries = 0; ; tries += 1) {
    const reply = await putPackage(url, pkg.bytes);
    if (reply.status !== 409 || reply.body?.code !== 'upload_in_progress' || tries === 5) return reply;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** `npm start` with `env`, run to its exit in a data folder of its own: the exit code and stderr. */
async function runToExit(env: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bucket-refused-'));
  try {
    return await runServiceToExit({ DATA_DIR: dataDir, ...env });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('packages in an S3-compatible bucket', () => {
  let bucket: TestBucket;
  let store: TestStore;
  const replicas: TestService[] = [];
  let developer: Developer;

  beforeAll(async () => {
    // The replicas run in this process: the SDK finds the key pair where it looks, the environment.
    Object.assign(process.env, s3rverCredentials);
    bucket = await startS3rver();
    store = await openTestStore();
    for (let i = 0; i < 2; i += 1) {
      replicas.push(
        await startTestService(
          { ...bucket.env, SVC_REPLICA_ID: `replica-${i + 1}` },
          { store, clockRuns: true },
        ),
      );
    }
    developer = await signUpDeveloper((replicas[0] as TestService).url);
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
    await store?.close();
    await bucket?.stop();
  });

  test('when a package is uploaded through one replica then it is submitted through the other and downloads through both with the sha256 uploaded, in one part or several', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const packages = [
      makePackage(manifestFor('com.example.bucket.small', '1.0.0')),
      multipartPackage('com.example.bucket.large'),
    ];
    for (const pkg of packages) {
      const { uploadId, uploadUrl } = await askUploadUrl(a.url, developer, pkg);
      const put = await putPackage(uploadUrl, pkg.bytes);
      assert.equal(put.status, 201, JSON.stringify(put.body));
      assert.equal(await bucket.sha256Of(keyOf(uploadId)), pkg.sha256);
      // The URL works once, on every replica.
      assert.equal((await putPackage(sameUrlOn(b, uploadUrl), pkg.bytes)).body?.code, 'upload_used');

      const submitted = await call(b.url, 'POST', '/api/v1/mini-apps/submit', {
        token: developer.token,
        body: { upload_id: uploadId },
      });
      assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
      for (const replica of [a, b]) {
        assert.equal(await downloadSha256(replica.url, developer, submitted.body.id), pkg.sha256);
      }
    }
    // Nothing of the packages on either replica's disk.
    for (const replica of [a, b]) assert.equal(existsSync(join(replica.config.dataDir, 'blobs')), false);
  });

  test('when the body has another sha256 than its URL says then 422 and, though parts reached the bucket, no object is under the key; the right body goes in after', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const pkg = multipartPackage('com.example.bucket.wrong');
    const { uploadId, uploadUrl } = await askUploadUrl(a.url, developer, pkg);
    const wrong = Buffer.from(pkg.bytes);
    wrong[wrong.length - 1] = (wrong[wrong.length - 1] ?? 0) ^ 0xff;

    const refused = await putPackage(uploadUrl, wrong);
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.code, 'sha256_mismatch');
    assert.ok(
      bucket.partsUnderWay(keyOf(uploadId)) >= 1,
      'the first part went up before the last bytes came',
    );
    assert.equal(await bucket.sha256Of(keyOf(uploadId)), undefined);

    const put = await putPackage(sameUrlOn(b, uploadUrl), pkg.bytes);
    assert.equal(put.status, 201, JSON.stringify(put.body));
    assert.equal(await bucket.sha256Of(keyOf(uploadId)), pkg.sha256);
  });

  test('when the object in the bucket was changed since it was submitted then its download ends short, never complete with other bytes', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const pkg = makePackage(manifestFor('com.example.bucket.changed', '1.0.0'), {
      'index.html': randomBytes(150_000).toString('base64'),
    });
    const { uploadId, uploadUrl } = await askUploadUrl(a.url, developer, pkg);
    assert.equal((await putPackage(uploadUrl, pkg.bytes)).status, 201);
    const submitted = await call(a.url, 'POST', '/api/v1/mini-apps/submit', {
      token: developer.token,
      body: { upload_id: uploadId },
    });
    assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
    const changed = Buffer.from(pkg.bytes);
    changed[changed.length - 20] = (changed[changed.length - 20] ?? 0) ^ 0xff;
    await bucket.put(keyOf(uploadId), changed);

    const answer = await fetch(`${b.url}/api/v1/mini-apps/versions/${submitted.body.id}/package`, {
      headers: { authorization: `Bearer ${developer.token}` },
    });
    assert.equal(answer.status, 200);
    await assert.rejects(answer.arrayBuffer());
    await eventually('the operator is told', () =>
      b.logs.some((line) => line.includes('request failed') && line.includes('is not the one submitted')),
    );
  });

  test('when the upload URL is tampered with then 403 on every replica and nothing is stored; the URL as issued works', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const pkg = makePackage(manifestFor('com.example.bucket.tampered', '1.0.0'));
    const { uploadId, uploadUrl } = await askUploadUrl(a.url, developer, pkg);
    const url = new URL(uploadUrl);
    const signature = url.searchParams.get('signature') ?? '';
    const forged = new URL(url);
    forged.searchParams.set(
      'signature',
      `${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`,
    );
    const later = new URL(url);
    later.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3600));
    for (const replica of [a, b]) {
      for (const target of [forged, later]) {
        const reply = await putPackage(sameUrlOn(replica, target.href), pkg.bytes);
        assert.equal(reply.status, 403, JSON.stringify(reply.body));
        assert.equal(reply.body.code, 'invalid_upload_url');
      }
    }
    assert.equal(await bucket.sha256Of(keyOf(uploadId)), undefined);
    assert.equal((await putPackage(uploadUrl, pkg.bytes)).status, 201);
    assert.equal(await bucket.sha256Of(keyOf(uploadId)), pkg.sha256);
  });

  test('when a replica is killed mid-upload then no object is under the package key, and the URL works again once its hold lapses', async () => {
    const [a] = replicas as [TestService];
    const pkg = multipartPackage('com.example.bucket.killed');
    // On Postgres the killed replica shares the other replicas' database, and the URL is tried
    // again through one of them; on PGlite, through the replica started again on its data folder.
    // (with the replicas' key-encryption key, which Postgres needs).
    const shared: Record<string, string> = store.databaseUrl
      ? { DATABASE_URL: store.databaseUrl, SVC_KEY_ENCRYPTION_KEY: testKeyEncryptionKey }
      : {};
    const env = { ...bucket.env, ...shared, SVC_UPLOAD_LEASE: '1s' };
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-bucket-killed-'));
    let again: ServiceProcess | undefined;
    try {
      const doomed = await startServiceProcess({ dataDir, env });
      const who = await signUpDeveloper(doomed.url);
      const { uploadId, uploadUrl } = await askUploadUrl(doomed.url, who, pkg);
      const { host, pathname, search } = new URL(uploadUrl);
      const stalled = startRequest(
        doomed.url,
        `PUT ${pathname}${search} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/gzip\r\n` +
          `Content-Length: ${pkg.size}\r\nConnection: close\r\n\r\n`,
      );
      stalled.send(pkg.bytes.subarray(0, bucketPartBytes + mib));
      await eventually('a part is in the bucket', () => bucket.partsUnderWay(keyOf(uploadId)) >= 1, 30_000);
      const exited = exitOf(doomed.child);
      doomed.child.kill('SIGKILL');
      await exited;
      stalled.abandon();

      assert.equal(await bucket.sha256Of(keyOf(uploadId)), undefined);
      assert.ok(!(await bucket.keys()).includes(keyOf(uploadId)));

      if (!store.databaseUrl) again = await startServiceProcess({ dataDir, env });
      const retry = again ?? a;
      const reply = await putOnceHoldLapses(sameUrlOn(retry, uploadUrl), pkg);
      assert.equal(reply.status, 201, JSON.stringify(reply.body));
      assert.equal(await bucket.sha256Of(keyOf(uploadId)), pkg.sha256);
    } finally {
      await again?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test('when S3_BUCKET names a bucket that does not exist then the start stops with one line naming it, exit 2', async () => {
    const run = await runToExit({ ...bucket.env, S3_BUCKET: 'no-such-bucket' });
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.match(
      run.stderr,
      new RegExp(
        `^svc: S3_BUCKET names the bucket "no-such-bucket", which does not exist at ${bucket.endpoint.replaceAll('.', '\\.')}: create it`,
      ),
    );
  });

  test('when S3_ENDPOINT answers nothing then the start stops with one line naming it, exit 2', async () => {
    // A port nothing listens on: taken a moment, then let go.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as { port: number };
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const run = await runToExit({ ...bucket.env, S3_ENDPOINT: `http://127.0.0.1:${port}` });
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.match(
      run.stderr,
      new RegExp(`^svc: S3_ENDPOINT http://127\\.0\\.0\\.1:${port} cannot be reached \\(ECONNREFUSED\\)`),
    );
  });
});
