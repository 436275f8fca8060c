import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { isGlobalInstall, UpgradeError, type UpgradeOptions, upgrade } from '../src/global-upgrade.ts';
import { isolatedNpmEnv, type NpmRegistry, startNpmRegistry } from './support/npm-registry.ts';

const execFileAsync = promisify(execFile);
const packageName = '@svc/cli';

describe('svc upgrade against a registry of our own, with the real npm', () => {
  let root = '';
  let prefix = '';
  let registry: NpmRegistry;
  let env: NodeJS.ProcessEnv;
  let messages: string[] = [];

  const globalPackageDir = () =>
    process.platform === 'win32'
      ? join(prefix, 'node_modules', '@svc', 'cli')
      : join(prefix, 'lib', 'node_modules', '@svc', 'cli');
  const installedVersion = async () =>
    (JSON.parse(await readFile(join(globalPackageDir(), 'package.json'), 'utf8')) as { version: string })
      .version;
  const options = (overrides: Partial<UpgradeOptions>): UpgradeOptions => ({
    packageName,
    currentVersion: '5.6.0',
    installedAt: join(globalPackageDir(), 'bin', 'svc.js'),
    env,
    log: (message) => messages.push(message),
    ...overrides,
  });

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'svc-upgrade-'));
    const folders = { home: join(root, 'home'), cache: join(root, 'cache'), prefix: join(root, 'prefix') };
    prefix = folders.prefix;
    await mkdir(folders.home);
    registry = await startNpmRegistry({
      packageName,
      versions: ['5.6.0', '5.7.0', '5.8.0-beta.1'],
      distTags: { latest: '5.7.0', next: '5.8.0-beta.1' },
      workDir: join(root, 'registry'),
      // Its own cache: npm pack stores what it packs there, and installs would then skip the download.
      env: isolatedNpmEnv({ ...folders, cache: join(root, 'pack-cache') }, 'http://127.0.0.1:9/'),
    });
    env = isolatedNpmEnv(folders, registry.url);
    await execFileAsync('npm', ['install', '-g', `${packageName}@5.6.0`], { env, cwd: root });
    assert.equal(await installedVersion(), '5.6.0');
  });

  afterAll(async () => {
    await registry?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  const fresh = () => {
    registry.requests.length = 0;
    messages = [];
  };

  test('when this copy is the latest release then nothing is installed', async () => {
    fresh();
    const result = await upgrade(options({ currentVersion: '5.7.0' }));
    assert.deepEqual(result, { status: 'up-to-date', version: '5.7.0' });
    assert.deepEqual(registry.tarballRequests(), []);
    assert.ok(
      messages.some((m) => m.includes(registry.url)),
      messages.join('\n'),
    );
  });

  test('when this copy is a pre-release ahead of latest then it is not taken back down', async () => {
    fresh();
    const result = await upgrade(options({ currentVersion: '5.8.0-beta.1' }));
    assert.deepEqual(result, { status: 'up-to-date', version: '5.8.0-beta.1' });
    assert.deepEqual(registry.tarballRequests(), []);
  });

  test('when this copy runs from a source checkout then the exact npm command is given, nothing installed', async () => {
    fresh();
    const result = await upgrade(options({ installedAt: fileURLToPath(import.meta.url) }));
    assert.equal(result.status, 'manual');
    assert.equal(result.status === 'manual' && result.command, 'npm install -g @svc/cli@5.7.0');
    assert.match(result.status === 'manual' ? result.reason : '', /outside npm's global packages/);
    assert.deepEqual(registry.tarballRequests(), []);
  });

  test("when this copy sits in a project's node_modules then it is left alone, and the global npm command is given", async () => {
    fresh();
    const project = join(root, 'project');
    const bin = join(project, 'node_modules', '@svc', 'cli', 'bin');
    await mkdir(bin, { recursive: true });
    await writeFile(join(project, 'package.json'), '{"name":"project","private":true}\n');
    await writeFile(join(bin, 'svc.js'), '');
    const result = await upgrade(options({ installedAt: join(bin, 'svc.js') }));
    assert.deepEqual(result, {
      status: 'manual',
      from: '5.6.0',
      to: '5.7.0',
      command: 'npm install -g @svc/cli@5.7.0',
      reason:
        `This copy runs from ${await realpath(join(bin, 'svc.js'))}, outside npm's global packages ` +
        `(${await realpath(globalPackageDir())}), and only a global npm install is upgraded in place`,
    });
    assert.deepEqual(registry.tarballRequests(), []);
    assert.equal(await installedVersion(), '5.6.0');
  });

  test('when the registry cannot be reached then the error names it, quickly', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const down = `http://127.0.0.1:${(closed.address() as AddressInfo).port}/`;
    await new Promise((resolve) => closed.close(resolve));
    const started = Date.now();
    await assert.rejects(upgrade(options({ env: { ...env, npm_config_registry: down } })), (error) => {
      assert.ok(error instanceof UpgradeError);
      assert.match(error.message, /^could not reach the npm registry /);
      assert.ok(error.message.includes(down), error.message);
      return true;
    });
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  });

  test('when a scope has its own registry in .npmrc then that one is asked and named', async () => {
    fresh();
    const home = join(root, 'scoped-home');
    await mkdir(home, { recursive: true });
    await writeFile(join(home, '.npmrc'), `@svc:registry=${registry.url}\n`);
    const result = await upgrade(
      options({
        currentVersion: '5.7.0',
        env: { ...env, HOME: home, npm_config_registry: 'http://127.0.0.1:9/' },
      }),
    );
    assert.deepEqual(result, { status: 'up-to-date', version: '5.7.0' });
    assert.ok(
      messages.some((m) => m.includes(registry.url)),
      messages.join('\n'),
    );
  });

  test('when npm cannot install then the error carries its output and the command to run by hand', async () => {
    fresh();
    registry.tarballStatus = 503;
    try {
      await assert.rejects(upgrade(options({})), (error) => {
        assert.ok(error instanceof UpgradeError);
        assert.equal(error.command, 'npm install -g @svc/cli@5.7.0');
        assert.match(error.message, /^`npm install -g @svc\/cli@5\.7\.0` failed:\n/);
        assert.match(error.npmOutput ?? '', /503/);
        assert.match(
          error.message,
          /Run it yourself once the cause is fixed: npm install -g @svc\/cli@5\.7\.0$/,
        );
        return true;
      });
    } finally {
      registry.tarballStatus = 200;
    }
    assert.equal(await installedVersion(), '5.6.0');
  });

  test('when a newer release is tagged latest then npm installs it over the global copy', async () => {
    fresh();
    // Started through its bin link, as a shell runs it: the link must be followed into the package.
    const binLink =
      process.platform === 'win32' ? join(globalPackageDir(), 'bin', 'svc.js') : join(prefix, 'bin', 'svc');
    const result = await upgrade(options({ installedAt: binLink }));
    assert.deepEqual(result, { status: 'upgraded', from: '5.6.0', to: '5.7.0' });
    assert.equal(await installedVersion(), '5.7.0');
    assert.deepEqual(registry.tarballRequests(), ['/@svc/cli/-/cli-5.7.0.tgz']);
    if (process.platform !== 'win32') {
      const { stdout } = await execFileAsync(binLink, [], { env });
      assert.equal(stdout.trim(), '5.7.0');
    }
  });
});

test('when a copy lies inside the global package folder then it is the global install, and anywhere else it is not', () => {
  const linuxGlobal = '/usr/local/lib/node_modules/@svc/cli';
  const windowsGlobal = 'c:\\users\\dev\\appdata\\roaming\\npm\\node_modules\\@svc\\cli';
  const table: [string, string, NodeJS.Platform, boolean][] = [
    ['/usr/local/lib/node_modules/@svc/cli/dist/svc.js', linuxGlobal, 'linux', true],
    [
      'C:\\Users\\dev\\AppData\\Roaming\\npm\\node_modules\\@svc\\cli\\dist\\svc.js',
      windowsGlobal,
      'win32',
      true,
    ],
    ['/home/dev/.npm/_npx/0a1b2c/node_modules/@svc/cli/dist/svc.js', linuxGlobal, 'linux', false],
    ['/home/dev/app/node_modules/@svc/cli/dist/svc.js', linuxGlobal, 'linux', false],
    ['C:\\src\\app\\node_modules\\@svc\\cli\\dist\\svc.js', windowsGlobal, 'win32', false],
    [
      '/home/dev/.nvm/versions/node/v18.20.0/lib/node_modules/@svc/cli/dist/svc.js',
      '/home/dev/.nvm/versions/node/v20.19.0/lib/node_modules/@svc/cli',
      'linux',
      false,
    ],
    [
      '/opt/homebrew/Cellar/svc/5.6.0/libexec/lib/node_modules/@svc/cli/svc.js',
      '/opt/homebrew/lib/node_modules/@svc/cli',
      'darwin',
      false,
    ],
    ['/home/dev/svc/cli/dist/svc.js', linuxGlobal, 'linux', false],
    // A copy bundled inside another global package is not the one `npm install -g` replaces.
    ['/usr/local/lib/node_modules/other/node_modules/@svc/cli/svc.js', linuxGlobal, 'linux', false],
    // Nor is a package whose name only starts the same.
    ['/usr/local/lib/node_modules/@svc/cli-extra/svc.js', linuxGlobal, 'linux', false],
  ];
  for (const [installedAt, packageDir, platform, expected] of table) {
    assert.equal(isGlobalInstall(installedAt, packageDir, platform), expected, installedAt);
  }
});
