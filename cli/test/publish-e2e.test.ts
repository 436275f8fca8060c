import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { call } from '../../server/test/support/http.ts';
import { makeKey } from '../../server/test/support/ssh.ts';
import { runSvc } from './support/run-svc.ts';
import { type RunningService, startServiceProcess } from './support/service.ts';
import { svc, userEnv } from './support/svc.ts';
import { onTerminal } from './support/terminal.ts';

const example = join(import.meta.dirname, '../../examples/hello-car');

describe('publishing with svc, end to end', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-publish-'));
  const app = join(home, 'hello-car');
  let service: RunningService;
  let env: NodeJS.ProcessEnv;
  let adminToken = '';
  let developerToken = '';

  const setVersion = (version: string) => {
    const manifest = JSON.parse(readFileSync(join(app, 'manifest.json'), 'utf8'));
    writeFileSync(join(app, 'manifest.json'), JSON.stringify({ ...manifest, version }, null, 2));
  };
  // Checks and refusals run inside the test process (`runSvc`); the publishing itself runs the
  // built binary against the service, as a developer would.
  const status = async () => {
    const run = await runSvc(['status', '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    return JSON.parse(run.stdout).mini_apps.find((a: { id: string }) => a.id === 'com.example.hello-car');
  };
  const move = (token: string, versionId: string, to: string, reason?: string) =>
    call(service.url, 'POST', `/api/v1/mini-apps/versions/${versionId}/transitions`, {
      token,
      body: reason ? { to, reason } : { to },
    });

  beforeAll(async () => {
    service = await startServiceProcess({
      env: { SVC_ADMIN_EMAILS: 'reviewer@example.com', SVC_MAX_PACKAGE_BYTES: '100000' },
    });
    env = userEnv(home, { SVC_API_URL: service.url });
    cpSync(example, app, { recursive: true });
    mkdirSync(join(home, '.ssh'), { mode: 0o700 });
    const key = makeKey(join(home, '.ssh'), 'id_ed25519');
    const password = 'correct horse battery staple';
    for (const email of ['ada@example.com', 'reviewer@example.com']) {
      assert.equal(
        (await call(service.url, 'POST', '/api/v1/account/signup', { body: { email, password, name: 'x' } }))
          .status,
        201,
      );
    }
    developerToken = (
      await call(service.url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'ada@example.com', password },
      })
    ).body.access_token;
    adminToken = (
      await call(service.url, 'POST', '/api/v1/account/sessions', {
        body: { email: 'reviewer@example.com', password },
      })
    ).body.access_token;
    // The reviewer claims the role with the code the service printed for the operator.
    const adminCode = /reviewer@example\.com\s+(svcadmin_\S+)/.exec(service.banner)?.[1];
    assert.ok(adminCode, service.banner);
    const claimed = await call(service.url, 'POST', '/api/v1/account/admin-claims', {
      token: adminToken,
      body: { code: adminCode },
    });
    assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
    assert.equal(
      (
        await call(service.url, 'POST', '/api/v1/dev/keys', {
          token: developerToken,
          body: { public_key: key.publicLine },
        })
      ).status,
      201,
    );
    const login = await svc(['login'], env);
    assert.equal(login.code, 0, login.stderr);
  });

  afterAll(async () => {
    await service.stop();
    rmSync(home, { recursive: true, force: true });
  });

  test('when the example is published then status shows it submitted, with one summary line of upload', async () => {
    const run = await svc(['publish', app], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^Submitted com\.example\.hello-car 1\.0\.0 for review: submitted \(version [0-9a-f-]{36}\)\n$/,
    );
    assert.match(run.stderr, /^uploaded .* in .*s \(.*\/s\)$/m);
    const listed = await svc(['status'], env);
    assert.match(listed.stdout, /com\.example\.hello-car\s+Hello Car\s+1\.0\.0\s+submitted\s+-/);
    assert.equal((await status()).latest_version.review_state, 'submitted');
  });

  test('when the admin reviews and the developer publishes then status follows, and a second version supersedes the first', async () => {
    const first = (await status()).latest_version.id;
    assert.equal((await move(adminToken, first, 'in_review')).status, 200);
    assert.equal((await move(adminToken, first, 'approved')).status, 200);
    assert.equal((await status()).latest_version.review_state, 'approved');
    assert.equal((await move(developerToken, first, 'published')).status, 200);
    assert.equal((await status()).live_version, '1.0.0');

    setVersion('1.1.0');
    const run = await svc(['publish', app, '--json'], env);
    assert.equal(run.code, 0, run.stderr);
    const second = JSON.parse(run.stdout).version;
    assert.equal(second.version, '1.1.0');
    await move(adminToken, second.id, 'in_review');
    await move(adminToken, second.id, 'approved');
    await move(developerToken, second.id, 'published');
    const app1 = await status();
    assert.equal(app1.live_version, '1.1.0');
    const queue = await call(service.url, 'GET', '/api/v1/admin/review-queue', { token: adminToken });
    assert.equal(queue.body.versions.length, 0);
    // The first version is now superseded: an admin can no longer remove it.
    const removed = await call(service.url, 'POST', `/api/v1/mini-apps/versions/${first}/transitions`, {
      token: adminToken,
      body: { to: 'removed', reason: 'x' },
    });
    assert.equal(removed.status, 409);
    assert.match(removed.body.detail, /superseded/);
  });

  test('when the same version is published twice then it is refused clearly and nothing is stored', async () => {
    const run = await runSvc(['publish', app], env);
    assert.equal(run.code, 1);
    assert.match(
      run.stderr,
      /com\.example\.hello-car 1\.1\.0 was submitted already: raise the version in manifest\.json/,
    );
    assert.doesNotMatch(run.stderr, /uploaded/, 'refused before anything is uploaded');
    assert.equal((await status()).latest_version.version, '1.1.0');
  });

  test('when the manifest is bad then nothing is sent, and every problem is named', async () => {
    const manifest = JSON.parse(readFileSync(join(app, 'manifest.json'), 'utf8'));
    writeFileSync(
      join(app, 'manifest.json'),
      JSON.stringify({ ...manifest, version: '2.0', network: ['http://x.example.com'] }),
    );
    try {
      const run = await runSvc(['publish', app], env);
      assert.equal(run.code, 1);
      assert.match(run.stderr, /version: "2\.0" must be a semantic version/);
      assert.match(run.stderr, /network\[0\]: "http:\/\/x\.example\.com" must be an https:\/\/ origin/);
    } finally {
      writeFileSync(join(app, 'manifest.json'), JSON.stringify(manifest, null, 2));
    }
  });

  test('when the package is over the limit then it is refused before uploading, and nothing is stored', async () => {
    setVersion('1.2.0');
    const big = join(app, 'big.bin');
    writeFileSync(big, randomBytes(150_000)); // random: it does not compress
    try {
      const run = await runSvc(['publish', app], env);
      assert.equal(run.code, 1);
      assert.match(run.stderr, /a package may be at most 100000 bytes/);
      assert.equal((await status()).latest_version.version, '1.1.0');
    } finally {
      rmSync(big);
    }
  });

  test("when a dry run packs what the service would refuse then it fails with the service's own limit, and nothing is sent", async () => {
    const big = join(app, 'big.bin');
    writeFileSync(big, randomBytes(150_000));
    try {
      const run = await runSvc(['publish', app, '--dry-run'], env);
      assert.equal(run.code, 1, run.stdout);
      assert.match(
        run.stderr,
        /this package would be refused: the package is \d+ bytes, and a package may be at most 100000 bytes/,
      );
      assert.doesNotMatch(run.stderr, /default package limits/, 'signed in: the service said its limits');
    } finally {
      rmSync(big);
    }
  });

  test('when the limits are asked for then the service says its own, as set by its operator', async () => {
    const limits = await call(service.url, 'GET', '/api/v1/mini-apps/limits', { token: developerToken });
    assert.equal(limits.status, 200);
    assert.deepEqual(limits.body, {
      max_package_bytes: 100000,
      max_entries: 2000,
      max_unpacked_bytes: 209715200,
      max_unpacked_ratio: 10,
    });
  });

  test('when published on a terminal then a progress bar shows bytes, rate and time left', async () => {
    setVersion('1.3.0');
    const { code, screen } = await onTerminal(['publish', app], env, '');
    assert.equal(code, 0, screen);
    assert.match(screen, /\[#+-*\] [\d.]+ (B|KiB) \/ [\d.]+ KiB +[\d.]+ (B|KiB|MiB)\/s +\S+ left/);
    assert.match(screen, /Submitted com\.example\.hello-car 1\.3\.0 for review: submitted/);
  });

  test('when --dry-run is given then the files, sizes, total and sha256 are printed, and nothing is uploaded', async () => {
    const before = (await status()).updated_at;
    const run = await svc(['publish', app, '--dry-run'], env);
    assert.equal(run.code, 0, run.stderr);
    for (const file of ['app.js', 'index.html', 'manifest.json', 'style.css'])
      assert.match(run.stdout, new RegExp(`\\d+  ${file}\\n`));
    assert.doesNotMatch(run.stdout, /README\.md/, '.svcignore leaves it out');
    assert.match(run.stdout, /\d+ files, \d+ bytes; package \d+ bytes, sha256 [0-9a-f]{64}/);
    const again = await svc(['publish', app, '--dry-run', '--json'], env);
    assert.equal(
      JSON.parse(again.stdout).sha256,
      /sha256 ([0-9a-f]{64})/.exec(run.stdout)?.[1],
      'the same folder gives the same sha256',
    );
    assert.equal((await status()).updated_at, before);
    assert.deepEqual(
      readdirSync(home).filter((name) => name.endsWith('.tar.gz')),
      [],
    );
  });

  test('when an admin removes the live version while a newer one waits then status shows the removal and its reason', async () => {
    setVersion('1.4.0');
    assert.equal((await svc(['publish', app], env)).code, 0);
    const live = (await status()).versions.find((v: { version: string }) => v.version === '1.1.0');
    const reason = 'Sends the location without asking.';
    assert.equal((await move(adminToken, live.id, 'removed', reason)).status, 200);
    const run = await svc(['status'], env);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /com\.example\.hello-car\s+\S.*\s+1\.4\.0\s+submitted\s+-\s/);
    assert.match(
      run.stdout,
      /com\.example\.hello-car 1\.1\.0 was removed by an admin: Sends the location without asking\./,
    );
    const removed = (await status()).versions.find((v: { version: string }) => v.version === '1.1.0');
    assert.deepEqual([removed.review_state, removed.reason], ['removed', reason]);
  });
});
