/**
 * The production build as an operator makes it (docs/operating.md, "A production build"): a
 * clean copy of this repository, `npm ci`, `npm run build`, `npm prune --omit=dev`, then
 * `npm run serve`, plain `node` with no development dependency left to lean on.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { release } from '../src/release.ts';
import { call } from './support/http.ts';
import { exitOf } from './support/service-process.ts';

const repoRoot = join(import.meta.dirname, '../..');

/** The environment without what npm sets for the scripts it runs (`npm test`): each step is npm's own. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'DATABASE_URL'),
  );
  return { ...env, ...extra };
}

/**
 * The working tree's files as git sees them (tracked, and new ones not ignored) copied into
 * `target`: a clean clone of what is here now, without node_modules or anything built. Outside a
 * git checkout (an exported tree), everything but those.
 */
function copyWorkingTree(target: string): void {
  mkdirSync(target);
  const inGit = spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: repoRoot }).status === 0;
  const files = inGit
    ? 'git ls-files -z --cached --others --exclude-standard'
    : "find . -path ./.git -prune -o -name node_modules -prune -o -name dist -prune -o -name '.svc-data' -prune -o -type f -print0";
  execFileSync(
    'sh',
    ['-c', `${files} | tar -c --null --ignore-failed-read -T - -f - 2>/dev/null | tar -x -C "$0"`, target],
    { cwd: repoRoot },
  );
}

function npm(cwd: string, args: string[]): void {
  execFileSync('npm', [...args, '--no-audit', '--no-fund'], {
    cwd,
    env: cleanEnv(),
    stdio: ['ignore', 'ignore', 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
}

describe('when the repository is installed, built and pruned of its development dependencies', () => {
  const workDir = mkdtempSync(join(tmpdir(), 'svc-production-'));
  const checkout = join(workDir, 'svc');
  const dataDir = join(workDir, 'data');
  let service: ChildProcess | undefined;
  let banner = '';
  let url = '';

  beforeAll(async () => {
    copyWorkingTree(checkout);
    // From npm's cache where it can: only what is missing comes from the registry.
    npm(checkout, ['ci', '--prefer-offline']);
    npm(checkout, ['run', 'build', '--silent']);
    npm(checkout, ['prune', '--omit=dev']);
    service = spawn('npm', ['run', 'serve', '--silent'], {
      cwd: checkout,
      env: cleanEnv({ PORT: '0', METRICS_PORT: '0', MQTT_PORT: '0', DATA_DIR: dataDir }),
      stdio: ['ignore', 'pipe', 'pipe'],
      // A group of its own: npm does not pass SIGTERM on to the service it started.
      detached: true,
    });
    url = await new Promise<string>((resolve, reject) => {
      service?.stdout?.on('data', (chunk: Buffer) => {
        banner += chunk.toString();
        const match = /API\s+(http:\/\/\S+)\/api\/v1/.exec(banner);
        if (match?.[1] && banner.includes('Stop with')) resolve(match[1]);
      });
      let stderr = '';
      service?.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      service?.once('exit', (code) =>
        reject(new Error(`npm run serve exited with ${code}:\n${banner}${stderr}`)),
      );
    });
  }, 600_000);

  afterAll(async () => {
    if (service?.pid !== undefined && service.exitCode === null) {
      const exited = exitOf(service);
      process.kill(-service.pid, 'SIGTERM');
      await exited;
    }
    rmSync(workDir, { recursive: true, force: true });
  });

  test('then npm run serve answers /healthz with its release, the contract, the console, and a sign-up', async () => {
    assert.match(banner, new RegExp(`^svc ${release.replaceAll('.', '\\.')} is running`));
    const health = await call(url, 'GET', '/healthz');
    assert.deepEqual(health.body, { status: 'ok', version: release });
    const contract = await call(url, 'GET', '/openapi.json');
    assert.equal(contract.status, 200);
    assert.equal((contract.body as { info: { title: string } }).info.title.length > 0, true);
    const consolePage = await fetch(`${url}/console`);
    assert.equal(consolePage.status, 200);
    assert.match(await consolePage.text(), /<script[^>]+src="\/console\/assets\//);
    const signUp = await call(url, 'POST', '/api/v1/account/signup', {
      body: { email: 'operator@example.com', password: 'correct horse battery staple', name: 'Operator' },
    });
    assert.equal(signUp.status, 201, JSON.stringify(signUp.body));
  });

  test('then the built simulator runs with plain node', () => {
    const help = execFileSync(process.execPath, [join(checkout, 'simulator/dist/svc-car-sim.js'), '--help'], {
      env: cleanEnv(),
      encoding: 'utf8',
    });
    assert.match(help, /svc-car-sim/);
  });
});
