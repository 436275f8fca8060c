/**
 * `svc` as a user installs it outside this repository: the packed @svc/cli tarball, installed
 * globally into a prefix of its own, run from an app's folder with plain Node (no TypeScript loader).
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { repoRoot } from '../../scripts/repo-root.ts';

const run = promisify(execFile);

describe('svc installed from its package', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'svc-install-'));
  const prefix = join(scratch, 'prefix');
  const app = join(scratch, 'my-app');
  // What a user's shell has: Node and the prefix's bin, none of the variables `npm test` sets.
  const env: NodeJS.ProcessEnv = {
    PATH: [join(prefix, 'bin'), dirname(process.execPath), '/usr/bin', '/bin'].join(':'),
    HOME: join(scratch, 'home'),
    NO_COLOR: '1',
    npm_config_cache: process.env.npm_config_cache ?? join(process.env.HOME ?? scratch, '.npm'),
  };

  // npm itself runs with the user's own npm settings and certificates, as it would in their shell:
  // `--prefix` would otherwise move the global npmrc (where a registry's CA file may be named).
  const npmEnv: NodeJS.ProcessEnv = {
    ...env,
    PATH: process.env.PATH,
    npm_config_userconfig: process.env.npm_config_userconfig ?? join(homedir(), '.npmrc'),
    npm_config_globalconfig: execFileSync('npm', ['config', 'get', 'globalconfig'], {
      encoding: 'utf8',
    }).trim(),
    ...Object.fromEntries(
      Object.entries(process.env).filter(([name]) =>
        /^(node_extra_ca_certs|ssl_cert_file|https?_proxy|no_proxy)$/i.test(name),
      ),
    ),
  };

  beforeAll(async () => {
    mkdirSync(env.HOME as string);
    const packDir = join(scratch, 'pack');
    mkdirSync(packDir);
    await run('npm', ['pack', '-w', 'cli', '--pack-destination', packDir], {
      cwd: repoRoot,
      env: npmEnv,
    });
    const [tarball] = readdirSync(packDir);
    assert.ok(tarball, 'npm pack made a tarball');
    await run(
      'npm',
      [
        'install',
        '-g',
        join(packDir, tarball),
        '--prefix',
        prefix,
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
      ],
      { cwd: scratch, env: npmEnv },
    );
    cpSync(join(repoRoot, 'examples/hello-car'), app, { recursive: true });
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  test('when installed with npm install -g then svc runs from an app folder and says its version', async () => {
    const { stdout } = await run('svc', ['--version'], { cwd: app, env });
    assert.match(stdout, /^5\.6\.\d+\n$/);
  });

  test('when svc publish --dry-run runs in the app folder then it checks and packs the app there', async () => {
    const { stdout } = await run('svc', ['publish', '--dry-run'], { cwd: app, env });
    assert.match(stdout, /\d+ {2}manifest\.json\n/);
    assert.match(stdout, /com\.example\.hello-car 1\.0\.0: nothing was uploaded \(--dry-run\)/);
  });
});
