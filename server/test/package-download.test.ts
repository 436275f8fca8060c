/**
 * A version's package, downloaded: an admin reads what they are asked to approve, and the app's
 * developer what they submitted, byte for byte; anyone else finds nothing there.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { call, eventually, putPackage } from './support/http.ts';
import { makePackage, manifestFor, type TestPackage } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';

const adminEmail = 'package-reviewer@example.com';

describe('downloading the package of a version', () => {
  let service: TestService;
  let developer: Developer;
  let admin: Developer;
  let stranger: Developer;

  beforeAll(async () => {
    service = await startTestService({ SVC_ADMIN_EMAILS: adminEmail });
    developer = await signUpDeveloper(service.url);
    admin = await signUpAdmin(service, adminEmail);
    stranger = await signUpDeveloper(service.url);
  });
  afterAll(() => service.stop());

  /** Uploads and submits `pkg` as `who`; the new version's id and its upload's. */
  async function submit(who: Developer, pkg: TestPackage) {
    const target = await call(service.url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: who.token,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(target.status, 201, JSON.stringify(target.body));
    assert.equal((await putPackage(target.body.upload_url, pkg.bytes)).status, 201);
    const submitted = await call(service.url, 'POST', '/api/v1/mini-apps/submit', {
      token: who.token,
      body: { upload_id: target.body.upload_id },
    });
    assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
    return { versionId: submitted.body.id as string, uploadId: target.body.upload_id as string };
  }

  const download = (
    versionId: string,
    token?: string,
    method = 'GET',
    headers: Record<string, string> = {},
  ) =>
    fetch(`${service.url}/api/v1/mini-apps/versions/${versionId}/package`, {
      method,
      headers: { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    });

  test('when an admin or the app’s developer downloads a version’s package then they get the bytes submitted, named for the app and version, in any review state', async () => {
    const pkg = makePackage(manifestFor('com.example.download', '1.2.3-beta.1+build.7'), {
      'index.html': '<h1>review me</h1>',
      'app.js': 'console.log("what the car will run")',
    });
    const { versionId } = await submit(developer, pkg);

    for (const who of [admin, developer]) {
      const answer = await download(versionId, who.token);
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get('content-type'), 'application/gzip');
      assert.equal(answer.headers.get('content-length'), String(pkg.size));
      assert.equal(
        answer.headers.get('content-disposition'),
        'attachment; filename="com.example.download-1.2.3-beta.1+build.7.tgz"',
      );
      assert.equal(answer.headers.get('cache-control'), 'private, no-store');
      assert.equal(answer.headers.get('x-content-type-options'), 'nosniff');
      const bytes = Buffer.from(await answer.arrayBuffer());
      assert.equal(createHash('sha256').update(bytes).digest('hex'), pkg.sha256);
      assert.deepEqual(bytes, pkg.bytes);
    }

    // HEAD says what a GET would bring, without the bytes.
    const head = await download(versionId, admin.token, 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(pkg.size));
    assert.equal((await head.arrayBuffer()).byteLength, 0);

    // Rejected, the version keeps its package: the developer can still see what was refused.
    for (const body of [{ to: 'in_review' }, { to: 'rejected', reason: 'app.js logs to the console' }]) {
      const moved = await call(service.url, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
        token: admin.token,
        body,
      });
      assert.equal(moved.status, 200, JSON.stringify(moved.body));
    }
    const after = await download(versionId, developer.token);
    assert.equal(after.status, 200);
    assert.deepEqual(Buffer.from(await after.arrayBuffer()), pkg.bytes);
  });

  test('when another developer, nobody, or a malformed id asks then nothing of the package is answered', async () => {
    const pkg = makePackage(manifestFor('com.example.private', '1.0.0'), { 'index.html': 'secret sauce' });
    const { versionId } = await submit(developer, pkg);

    const others = await download(versionId, stranger.token);
    assert.equal(others.status, 404);
    assert.match(others.headers.get('content-type') ?? '', /^application\/problem\+json/);
    const problem = (await others.json()) as { code: string; detail: string; instance: string };
    assert.equal(problem.code, 'version_not_found');
    // Exactly what an id that names nothing gets: the stranger cannot tell the version exists.
    const nobodys = '00000000-0000-4000-8000-000000000000';
    const unknown = await download(nobodys, stranger.token);
    // An admin is not told "of yours": every version is theirs to read.
    const toAdmin = (await (await download(nobodys, admin.token)).json()) as { detail: string };
    assert.equal(toAdmin.detail, `No mini-app version ${nobodys} exists.`);
    assert.equal(unknown.status, 404);
    const same = (body: { detail: string; instance: string }) => ({
      ...body,
      detail: body.detail.replace(nobodys, versionId),
      instance: body.instance.replace(nobodys, versionId),
    });
    assert.deepEqual(same((await unknown.json()) as typeof problem), problem);

    const anonymous = await download(versionId);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer');

    const malformed = await download('not-a-uuid', admin.token);
    assert.equal(malformed.status, 400);
    assert.match(JSON.stringify(await malformed.json()), /version_id/);
  });

  test('when the stored file is gone then the answer is an error the operator finds logged', async () => {
    const pkg = makePackage(manifestFor('com.example.vanished', '1.0.0'));
    const { versionId, uploadId } = await submit(developer, pkg);
    rmSync(join(service.config.dataDir, 'blobs', 'packages', `${uploadId}.tar.gz`));

    const from = service.logs.length;
    const answer = await download(versionId, admin.token, 'GET', { 'x-request-id': 'vanished-file' });
    assert.equal(answer.status, 500);
    assert.equal(((await answer.json()) as { code: string }).code, 'internal_error');
    const failed = service.logs
      .slice(from)
      .map((line) => JSON.parse(line))
      .find((line) => line.message === 'request failed' && JSON.stringify(line).includes('ENOENT'));
    assert.ok(failed, service.logs.slice(from).join('\n'));
    // The operator finds the request's own line, and its answer's, by the id the client gave.
    assert.equal(failed.request_id, 'vanished-file');
    assert.equal(failed.route, '/api/v1/mini-apps/versions/{version_id}/package');
  });

  test('when the stored file was changed since it was submitted then the answer ends short, never complete with other bytes, and the operator finds it logged', async () => {
    const pkg = makePackage(manifestFor('com.example.tampered', '1.0.0'), {
      // Several chunks of a read stream, and no ratio of packing the service would refuse.
      'index.html': randomBytes(150_000).toString('base64'),
    });
    const { versionId, uploadId } = await submit(developer, pkg);
    const stored = join(service.config.dataDir, 'blobs', 'packages', `${uploadId}.tar.gz`);
    const changed = Buffer.from(pkg.bytes);
    changed[changed.length - 20] = (changed[changed.length - 20] ?? 0) ^ 0xff;
    writeFileSync(stored, changed);

    const from = service.logs.length;
    const answer = await download(versionId, admin.token);
    // The headers left before the last bytes were read; the body stops short of what they said.
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('content-length'), String(pkg.size));
    await assert.rejects(answer.arrayBuffer());
    await eventually('the operator is told', () =>
      service.logs
        .slice(from)
        .some((line) => line.includes('request failed') && line.includes('is not the one submitted')),
    );

    // Put back, it is served whole again.
    writeFileSync(stored, pkg.bytes);
    const restored = await download(versionId, admin.token);
    assert.deepEqual(Buffer.from(await restored.arrayBuffer()), pkg.bytes);
  });
});
