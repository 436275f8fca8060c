import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { type Developer, signUpAdmin, signUpDeveloper } from './support/accounts.ts';
import { call, eventually, putPackage } from './support/http.ts';
import { makePackage, manifestFor, type TestPackage } from './support/packages.ts';
import { startTestService, type TestService } from './support/service.ts';
import { paxRecords, tarArchive } from './support/tar-writer.ts';

describe('publishing mini-apps', () => {
  let service: TestService;
  let url: string;
  let developer: Developer;
  let admin: Developer;

  beforeAll(async () => {
    service = await startTestService({
      SVC_ADMIN_EMAILS: 'reviewer@example.com',
      SVC_MAX_PACKAGE_BYTES: '200000',
    });
    url = service.url;
    developer = await signUpDeveloper(url);
    admin = await signUpAdmin(service, 'reviewer@example.com');
  });
  afterAll(() => service.stop());

  const uploadUrl = (who: Developer, pkg: { appId: string; version: string; size: number; sha256: string }) =>
    call(url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: who.token,
      body: { app_id: pkg.appId, version: pkg.version, size: pkg.size, sha256: pkg.sha256 },
    });

  async function publish(who: Developer, pkg: TestPackage) {
    service.clock.advance(1_000); // so that submission times differ, and queue order means something
    const target = await uploadUrl(who, pkg);
    // What submit would refuse is refused here, before any byte is sent.
    if (target.status !== 201) return target;
    const uploaded = await putPackage(target.body.upload_url, pkg.bytes);
    assert.equal(uploaded.status, 201, JSON.stringify(uploaded.body));
    return call(url, 'POST', '/api/v1/mini-apps/submit', {
      token: who.token,
      body: { upload_id: target.body.upload_id },
    });
  }

  const move = (who: Developer, versionId: string, to: string, reason?: string) =>
    call(url, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
      token: who.token,
      body: reason ? { to, reason } : { to },
    });

  /** A PUT without Content-Length (chunked), so that only the streaming count can catch a wrong size. */
  function putChunked(target: string, chunks: Buffer[], options: { abortAfter?: number } = {}) {
    return new Promise<{ status: number; body: { code?: string } | undefined } | 'aborted'>(
      (resolve, reject) => {
        const req = request(
          target,
          { method: 'PUT', headers: { 'content-type': 'application/gzip' } },
          (res) => {
            let text = '';
            res.on('data', (chunk: Buffer) => {
              text += chunk.toString();
            });
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }),
            );
          },
        );
        req.on('error', (error) => (options.abortAfter === undefined ? reject(error) : resolve('aborted')));
        chunks.forEach((chunk, i) => {
          req.write(chunk);
          if (i + 1 === options.abortAfter) {
            setTimeout(() => {
              req.destroy();
              resolve('aborted');
            }, 100);
          }
        });
        if (options.abortAfter === undefined) req.end();
      },
    );
  }

  const storedFiles = () => {
    const blobs = join(service.config.dataDir, 'blobs');
    return [...readdirSync(join(blobs, 'incoming')), ...readdirSync(join(blobs, 'packages'))].length;
  };

  test('when an upload URL is asked for then it is signed for the size and hash, and expires in 15 minutes', async () => {
    const pkg = makePackage(manifestFor('com.example.signed', '1.0.0'));
    const target = await uploadUrl(developer, pkg);
    assert.equal(target.status, 201);
    assert.equal(target.body.method, 'PUT');
    assert.deepEqual(target.body.headers, {
      'content-type': 'application/gzip',
      'content-length': String(pkg.size),
    });
    assert.match(
      target.body.upload_url,
      new RegExp(`^${url}/uploads/${target.body.upload_id}\\?expires=\\d+&signature=[\\w-]+$`),
    );
    assert.equal(Date.parse(target.body.expires_at) - service.clock.now, 15 * 60_000);
  });

  test('when the package is over SVC_MAX_PACKAGE_BYTES then the upload URL is refused with 413', async () => {
    const reply = await uploadUrl(developer, {
      appId: 'com.example.big',
      version: '1.0.0',
      size: 200_001,
      sha256: 'a'.repeat(64),
    });
    assert.equal(reply.status, 413);
    assert.equal(reply.body.code, 'package_too_large');
  });

  test('when the URL is tampered with then 403, and nothing is stored', async () => {
    const pkg = makePackage(manifestFor('com.example.tampered', '1.0.0'));
    const target = (await uploadUrl(developer, pkg)).body;
    const before = storedFiles();
    for (const forged of [
      target.upload_url.replace(/signature=[\w-]+/, 'signature=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'),
      target.upload_url.replace(/expires=(\d+)/, (_: string, e: string) => `expires=${Number(e) + 3600}`),
    ]) {
      const reply = await putPackage(forged, pkg.bytes);
      assert.equal(reply.status, 403);
      assert.equal(reply.body.code, 'invalid_upload_url');
    }
    assert.equal(storedFiles(), before);
  });

  test('when the URL has expired then 403', async () => {
    const pkg = makePackage(manifestFor('com.example.expired', '1.0.0'));
    const target = (await uploadUrl(developer, pkg)).body;
    service.clock.advance(15 * 60_000);
    const reply = await putPackage(target.upload_url, pkg.bytes);
    assert.equal(reply.status, 403);
    assert.equal(reply.body.code, 'upload_url_expired');
  });

  test('when the body has the wrong length or hash then 400, 413 or 422, nothing is stored, and the URL still works', async () => {
    const pkg = makePackage(manifestFor('com.example.lengths', '1.0.0'));
    const target = (await uploadUrl(developer, pkg)).body;
    const before = storedFiles();
    assert.equal((await putPackage(target.upload_url, pkg.bytes.subarray(1))).status, 400);
    assert.equal(
      (await putPackage(target.upload_url, Buffer.concat([pkg.bytes, Buffer.from('x')]))).status,
      413,
    );
    const altered = Buffer.from(pkg.bytes);
    altered[altered.length - 1] = (altered[altered.length - 1] ?? 0) ^ 1;
    const mismatch = await putPackage(target.upload_url, altered);
    assert.equal(mismatch.status, 422);
    assert.equal(mismatch.body.code, 'sha256_mismatch');
    assert.equal(storedFiles(), before, 'a failed upload leaves nothing behind');

    assert.equal((await putPackage(target.upload_url, pkg.bytes)).status, 201);
    const again = await putPackage(target.upload_url, pkg.bytes);
    assert.equal(again.status, 409, 'a URL works once');
    assert.equal(again.body.code, 'upload_used');
  });

  test('when a chunked body runs long or short, or the client goes away, then 413, 400 or nothing, and nothing is kept', async () => {
    const pkg = makePackage(manifestFor('com.example.chunked', '1.0.0'));
    const target = (await uploadUrl(developer, pkg)).body;
    const before = storedFiles();
    const half = Math.floor(pkg.size / 2);
    const long = await putChunked(target.upload_url, [pkg.bytes, Buffer.from('more')]);
    assert.deepEqual(long !== 'aborted' && [long.status, long.body?.code], [413, 'wrong_length']);
    const short = await putChunked(target.upload_url, [pkg.bytes.subarray(0, half)]);
    assert.deepEqual(short !== 'aborted' && [short.status, short.body?.code], [400, 'wrong_length']);
    assert.equal(
      await putChunked(target.upload_url, [pkg.bytes.subarray(0, half), pkg.bytes.subarray(half)], {
        abortAfter: 1,
      }),
      'aborted',
    );
    // The abandoned upload is cleaned up once the service hears the client went away.
    await eventually('nothing is kept of a failed or abandoned upload', () => storedFiles() === before);
    assert.ok(
      !service.logs.some((line) => line.includes('request failed')),
      'an abandoned upload is no server error',
    );
    const whole = await putChunked(target.upload_url, [
      pkg.bytes.subarray(0, half),
      pkg.bytes.subarray(half),
    ]);
    assert.deepEqual(whole !== 'aborted' && whole.status, 201, 'the URL still works after failed tries');
  });

  test('when an Authorization header is sent with the PUT then it changes nothing: the URL is the credential', async () => {
    const pkg = makePackage(manifestFor('com.example.noauth', '1.0.0'));
    const target = (await uploadUrl(developer, pkg)).body;
    assert.equal(
      (await putPackage(target.upload_url, pkg.bytes, { authorization: 'Bearer svc_nonsense' })).status,
      201,
    );
  });

  test('when a package is submitted then it is version 1.0.0 in submitted, and the app is mine', async () => {
    const submitted = await publish(developer, makePackage(manifestFor('com.example.hello', '1.0.0')));
    assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
    assert.equal(submitted.body.review_state, 'submitted');
    assert.equal(submitted.body.version, '1.0.0');
    assert.equal(submitted.body.manifest.id, 'com.example.hello');
    const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    const app = mine.body.mini_apps.find((a: { id: string }) => a.id === 'com.example.hello');
    assert.equal(app.latest_version.review_state, 'submitted');
    assert.equal(app.live_version, null);
  });

  test('when another developer submits the same app id then 403', async () => {
    const stranger = await signUpDeveloper(url);
    const reply = await publish(stranger, makePackage(manifestFor('com.example.hello', '2.0.0')));
    assert.equal(reply.status, 403);
    assert.equal(reply.body.code, 'app_owned_by_another');
  });

  test('when the version is not greater than every earlier one then 409', async () => {
    await publish(developer, makePackage(manifestFor('com.example.versions', '1.2.0')));
    const same = await publish(developer, makePackage(manifestFor('com.example.versions', '1.2.0')));
    assert.equal(same.status, 409);
    assert.equal(same.body.code, 'version_exists');
    const lower = await publish(developer, makePackage(manifestFor('com.example.versions', '1.10.0-beta.1')));
    assert.equal(lower.status, 201, '1.10.0-beta.1 is greater than 1.2.0');
    const older = await publish(developer, makePackage(manifestFor('com.example.versions', '1.9.9')));
    assert.equal(older.status, 409);
    assert.equal(older.body.code, 'version_not_greater');
  });

  test('when a version has a leading zero in a numeric identifier (1.0.0-01) then 422, and the app takes a good version after', async () => {
    for (const version of ['1.0.0-01', '1.0.0-rc.007', '01.0.0']) {
      const asked = await uploadUrl(developer, makePackage(manifestFor('com.example.zeros', version)));
      assert.equal(asked.status, 400, version);
      assert.equal(asked.body.errors[0].path, '/body/version');
      // A package whose manifest says it, uploaded under a good version: submit's own check.
      const pkg = { ...makePackage(manifestFor('com.example.zeros', version)), version: '1.0.0' };
      const reply = await publish(developer, pkg);
      assert.equal(reply.status, 422, `${version}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.code, 'manifest_invalid');
      assert.ok(reply.body.errors.some((e: { path: string }) => e.path === '/manifest/version'));
    }
    const good = await publish(developer, makePackage(manifestFor('com.example.zeros', '1.0.0-1')));
    assert.equal(good.status, 201, JSON.stringify(good.body));
  });

  test('when a version stored before the grammar was whole does not parse then the app still takes new versions and publishes', async () => {
    const first = await publish(developer, makePackage(manifestFor('com.example.planted', '1.0.0')));
    assert.equal(first.status, 201);
    // What an older service let in: the version column is what ordering reads.
    await service.store.db('mini_app_versions').where({ id: first.body.id }).update({ version: '1.0.0-01' });
    const next = await publish(developer, makePackage(manifestFor('com.example.planted', '1.1.0')));
    assert.equal(next.status, 201, JSON.stringify(next.body));
    for (const to of ['in_review', 'approved'])
      assert.equal((await move(admin, next.body.id, to)).status, 200);
    assert.equal((await move(developer, next.body.id, 'published')).status, 200);
    const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    assert.equal(mine.status, 200);
    const app = mine.body.mini_apps.find((a: { id: string }) => a.id === 'com.example.planted');
    assert.equal(app.live_version, '1.1.0');
  });

  test('when the package fails its checks then 422 naming the problem, and no version is made', async () => {
    const reply = await publish(
      developer,
      makePackage(manifestFor('com.example.broken', '1.0.0', { network: ['http://plain.example.com'] })),
    );
    assert.equal(reply.status, 422);
    assert.equal(reply.body.code, 'manifest_invalid');
    const noEntry = await publish(
      developer,
      makePackage(manifestFor('com.example.broken', '1.0.0'), { 'other.html': 'x' }),
    );
    assert.equal(noEntry.status, 422);
    assert.equal(noEntry.body.code, 'entry_missing');
    const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    assert.ok(!mine.body.mini_apps.some((a: { id: string }) => a.id === 'com.example.broken'));
  });

  test('when a global pax header would move every entry out of the folder then submit is 422 and nothing is listed', async () => {
    const manifest = JSON.stringify(manifestFor('com.example.escape', '1.0.0'));
    const tar = tarArchive([
      { path: 'pax_global_header', type: 'g', body: paxRecords({ path: '../../evil' }) },
      { path: 'manifest.json', body: manifest },
      { path: 'index.html', body: '<h1>hello</h1>' },
    ]);
    const bytes = gzipSync(tar);
    const pkg = {
      appId: 'com.example.escape',
      version: '1.0.0',
      path: '',
      bytes,
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    };
    const reply = await publish(developer, pkg);
    assert.equal(reply.status, 422, JSON.stringify(reply.body));
    assert.equal(reply.body.code, 'unsafe_path');
    const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    assert.ok(!mine.body.mini_apps.some((a: { id: string }) => a.id === 'com.example.escape'));
  });

  test('when the upload URL is asked for an app id of another developer or a version not greater then it is refused before any byte is sent', async () => {
    const owner = await signUpDeveloper(url);
    const first = await publish(owner, makePackage(manifestFor('com.example.owned', '2.0.0')));
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const intruder = await uploadUrl(developer, makePackage(manifestFor('com.example.owned', '3.0.0')));
    assert.equal(intruder.status, 403);
    assert.equal(intruder.body.code, 'app_owned_by_another');
    for (const [version, code] of [
      ['2.0.0', 'version_exists'],
      ['1.9.0', 'version_not_greater'],
    ] as const) {
      const refused = await uploadUrl(owner, makePackage(manifestFor('com.example.owned', version)));
      assert.equal(refused.status, 409, version);
      assert.equal(refused.body.code, code);
    }
    const next = await uploadUrl(owner, makePackage(manifestFor('com.example.owned', '2.1.0')));
    assert.equal(next.status, 201);
  });

  test('when a package is refused at submit then its file is deleted, and submitting it again says it was refused', async () => {
    const pkg = makePackage(manifestFor('com.example.refused', '1.0.0'), { 'other.html': 'x' });
    const target = (await uploadUrl(developer, pkg)).body;
    assert.equal((await putPackage(target.upload_url, pkg.bytes)).status, 201);
    const stored = join(service.config.dataDir, 'blobs', 'packages', `${target.upload_id}.tar.gz`);
    assert.ok(existsSync(stored));
    const submit = () =>
      call(url, 'POST', '/api/v1/mini-apps/submit', {
        token: developer.token,
        body: { upload_id: target.upload_id },
      });
    const refused = await submit();
    assert.equal(refused.status, 422);
    assert.equal(refused.body.code, 'entry_missing');
    assert.ok(!existsSync(stored), 'the refused package is deleted');
    const again = await submit();
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'upload_refused');
  });

  test('when the package says another app or version than its upload URL was asked for then submit is 422', async () => {
    const pkg = makePackage(manifestFor('com.example.switched', '1.0.0'));
    const target = await call(url, 'POST', '/api/v1/mini-apps/upload-url', {
      token: developer.token,
      body: { app_id: 'com.example.switched', version: '5.0.0', size: pkg.size, sha256: pkg.sha256 },
    });
    assert.equal(target.status, 201);
    assert.equal((await putPackage(target.body.upload_url, pkg.bytes)).status, 201);
    const submitted = await call(url, 'POST', '/api/v1/mini-apps/submit', {
      token: developer.token,
      body: { upload_id: target.body.upload_id },
    });
    assert.equal(submitted.status, 422);
    assert.equal(submitted.body.code, 'package_mismatch');
  });

  test('when an upload is submitted twice then the second is 409', async () => {
    const pkg = makePackage(manifestFor('com.example.twice', '1.0.0'));
    const target = (await uploadUrl(developer, pkg)).body;
    await putPackage(target.upload_url, pkg.bytes);
    const submit = () =>
      call(url, 'POST', '/api/v1/mini-apps/submit', {
        token: developer.token,
        body: { upload_id: target.upload_id },
      });
    assert.equal((await submit()).status, 201);
    assert.equal((await submit()).status, 409);
  });

  test('when a version goes through review then published supersedes the one before, with reasons shown', async () => {
    const first = (await publish(developer, makePackage(manifestFor('com.example.review', '1.0.0')))).body;
    assert.equal(
      (await move(developer, first.id, 'in_review')).status,
      403,
      'a developer cannot start a review',
    );
    assert.equal((await move(admin, first.id, 'approved')).status, 409, 'not from submitted');
    assert.equal((await move(admin, first.id, 'in_review')).status, 200);
    assert.equal((await move(admin, first.id, 'approved')).status, 200);
    assert.equal(
      (await move(admin, first.id, 'published')).status,
      403,
      "publishing is the developer's move",
    );
    const live = await move(developer, first.id, 'published');
    assert.equal(live.body.review_state, 'published');

    const second = (await publish(developer, makePackage(manifestFor('com.example.review', '1.1.0')))).body;
    await move(admin, second.id, 'in_review');
    const rejected = await move(admin, second.id, 'rejected');
    assert.equal(rejected.status, 422, 'a rejection needs a reason');
    const withReason = await move(
      admin,
      second.id,
      'rejected',
      'Calls an origin its manifest does not declare.',
    );
    assert.equal(withReason.body.reason, 'Calls an origin its manifest does not declare.');

    const third = (await publish(developer, makePackage(manifestFor('com.example.review', '1.2.0')))).body;
    await move(admin, third.id, 'in_review');
    await move(admin, third.id, 'approved');
    await move(developer, third.id, 'published');
    const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    const app = mine.body.mini_apps.find((a: { id: string }) => a.id === 'com.example.review');
    assert.equal(app.live_version, '1.2.0');
    const firstNow = await call(url, 'POST', `/api/v1/mini-apps/versions/${first.id}/transitions`, {
      token: admin.token,
      body: { to: 'removed', reason: 'x' },
    });
    assert.equal(firstNow.status, 409, 'the first version was superseded, so it cannot be removed');
  });

  test('when an older approved version is published while a newer one is live then 409, and the newer stays live', async () => {
    const older = (await publish(developer, makePackage(manifestFor('com.example.order', '1.0.0')))).body;
    const newer = (await publish(developer, makePackage(manifestFor('com.example.order', '2.0.0')))).body;
    for (const version of [older, newer]) {
      await move(admin, version.id, 'in_review');
      await move(admin, version.id, 'approved');
    }
    assert.equal((await move(developer, newer.id, 'published')).status, 200);
    const refused = await move(developer, older.id, 'published');
    assert.equal(refused.status, 409);
    assert.equal(refused.body.code, 'newer_version_live');
    const mine = await call(url, 'GET', '/api/v1/mini-apps/mine', { token: developer.token });
    assert.equal(
      mine.body.mini_apps.find((a: { id: string }) => a.id === 'com.example.order').live_version,
      '2.0.0',
    );
  });

  test('when a developer moves a version of someone else then 404', async () => {
    const version = (await publish(developer, makePackage(manifestFor('com.example.private', '1.0.0')))).body;
    const stranger = await signUpDeveloper(url);
    assert.equal((await move(stranger, version.id, 'withdrawn')).status, 404);
  });

  test('when the review queue is read then it lists what waits, oldest first, and what is live, to admins only', async () => {
    const queue = await call(url, 'GET', '/api/v1/admin/review-queue', { token: admin.token });
    assert.equal(queue.status, 200);
    const times = queue.body.versions.map((v: { submitted_at: string }) => Date.parse(v.submitted_at));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => a - b),
    );
    assert.ok(
      queue.body.versions.every((v: { review_state: string }) =>
        ['submitted', 'in_review'].includes(v.review_state),
      ),
    );
    assert.ok(queue.body.versions.length > 0);
    // The versions live on cars come with it, for an admin to remove: 2.0.0 superseded 1.0.0.
    const live = queue.body.published.map((v: { app_id: string; version: string; review_state: string }) =>
      [v.app_id, v.version, v.review_state].join(' '),
    );
    assert.ok(live.includes('com.example.order 2.0.0 published'), live.join(', '));
    assert.ok(!live.includes('com.example.order 1.0.0 published'));
    assert.ok(live.every((line: string) => line.endsWith(' published')));
    assert.equal(
      (await call(url, 'GET', '/api/v1/admin/review-queue', { token: developer.token })).status,
      403,
    );
  });
});
