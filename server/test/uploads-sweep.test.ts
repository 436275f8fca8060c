import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { deleteAbandonedUploads } from '../src/uploads/upload-repository.ts';
import { type Developer, signUpDeveloper } from './support/accounts.ts';
import { call, putPackage } from './support/http.ts';
import { makePackage, manifestFor, type TestPackage } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';

const urlLifetimeMs = 15 * 60_000;

describe('abandoned uploads are swept', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-sweep-'));
  // Two replicas on one store and one data folder, with one clock they both read.
  let first: TestService;
  let second: TestService;
  let developer: Developer;
  let appCount = 0;

  beforeAll(async () => {
    first = await startTestService({ SVC_UPLOAD_URL_TTL: '15m', SVC_TOKEN_TTL: '30d' }, { dataDir });
    second = await startTestService(
      { SVC_UPLOAD_URL_TTL: '15m', SVC_TOKEN_TTL: '30d' },
      { dataDir, store: first.store },
    );
    developer = await signUpDeveloper(first.url);
  });
  afterAll(async () => {
    await second.stop();
    await first.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const packageFile = (uploadId: string) => join(dataDir, 'blobs', 'packages', `${uploadId}.tar.gz`);
  const rowOf = async (uploadId: string) => first.store.db('uploads').where({ id: uploadId }).first();
  /** Moves both replicas' clocks together. */
  const advance = (ms: number) => {
    first.clock.advance(ms);
    second.clock.advance(ms);
  };

  async function upload(store = true): Promise<{ id: string; pkg: TestPackage }> {
    appCount += 1;
    const pkg = makePackage(manifestFor(`com.example.sweep${appCount}`, '1.0.0'));
    const target = await call(first.url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: developer.token,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(target.status, 201, JSON.stringify(target.body));
    if (store) assert.equal((await putPackage(target.body.upload_url, pkg.bytes)).status, 201);
    return { id: target.body.upload_id, pkg };
  }

  const submit = (uploadId: string) =>
    call(first.url, 'POST', '/api/v1/mini-apps/submit', {
      token: developer.token,
      body: { upload_id: uploadId },
    });

  test('when an upload URL expired without a submit then, one URL lifetime later, its package, partial file and row are gone; submitted and live ones stay', async () => {
    const abandoned = await upload();
    const neverSent = await upload(false);
    // What a receiver that died mid-upload left in the incoming folder.
    const partial = join(dataDir, 'blobs', 'incoming', `${neverSent.id}.${crypto.randomUUID()}.part`);
    writeFileSync(partial, 'half a package');
    const submitted = await upload();
    assert.equal((await submit(submitted.id)).status, 201);

    advance(urlLifetimeMs + 1_000); // expired, but a late submit still has its time
    await first.app.services.uploads.sweep();
    assert.ok(await rowOf(abandoned.id), 'kept for a late submit');
    assert.ok(existsSync(packageFile(abandoned.id)));

    advance(urlLifetimeMs);
    const live = await upload();
    await first.app.services.uploads.sweep();
    assert.equal(await rowOf(abandoned.id), undefined, 'the abandoned row is deleted');
    assert.ok(!existsSync(packageFile(abandoned.id)), 'and its package');
    assert.equal(await rowOf(neverSent.id), undefined);
    assert.ok(!existsSync(partial), 'and the partial file of an upload never finished');
    assert.ok(await rowOf(submitted.id), 'a submitted upload stays');
    assert.ok(existsSync(packageFile(submitted.id)), 'with the package its version serves');
    assert.ok(await rowOf(live.id), 'an upload whose URL still works stays');
    assert.ok(existsSync(packageFile(live.id)));

    const late = await submit(abandoned.id);
    assert.equal(late.status, 404);
    assert.equal(late.body.code, 'upload_not_found');
  });

  test('when two replicas sweep at once then each abandoned upload is deleted once', async () => {
    const rows = await Promise.all([upload(), upload(), upload(), upload()]);
    advance(2 * urlLifetimeMs + 1_000);
    const now = first.clock.clock();
    const cutoff = new Date(now.getTime() - urlLifetimeMs);
    const [a, b] = await Promise.all([
      deleteAbandonedUploads(first.store.db, cutoff, now),
      deleteAbandonedUploads(second.store.db, cutoff, now),
    ]);
    const deleted = [...a, ...b];
    assert.equal(new Set(deleted).size, deleted.length, 'no upload deleted twice');
    for (const { id } of rows) assert.ok(deleted.includes(id), `${id} deleted`);

    // The services' own sweeps at once: rows and packages go, and neither sweep fails.
    const files = await Promise.all([upload(), upload(), upload(), upload()]);
    advance(2 * urlLifetimeMs + 1_000);
    await Promise.all([first.app.services.uploads.sweep(), second.app.services.uploads.sweep()]);
    const packages = readdirSync(join(dataDir, 'blobs', 'packages'));
    for (const { id } of files) {
      assert.equal(await rowOf(id), undefined);
      assert.ok(!packages.includes(`${id}.tar.gz`));
    }
  });

  test('when a late submit and a sweep race then the version is kept with its package, or the submit is refused and nothing is left', async () => {
    for (let round = 0; round < 4; round++) {
      const late = await upload();
      advance(2 * urlLifetimeMs + 1_000);
      const [submitted] = await Promise.all([submit(late.id), second.app.services.uploads.sweep()]);
      if (submitted.status === 201) {
        assert.ok(existsSync(packageFile(late.id)), 'a submitted version keeps its package');
        assert.ok(await rowOf(late.id));
      } else {
        assert.equal(submitted.status, 404, JSON.stringify(submitted.body));
        assert.equal(await rowOf(late.id), undefined);
        assert.ok(!existsSync(packageFile(late.id)));
      }
    }
  });
});
