/**
 * @svc/sdk ships to mini-apps, which run in a browser: every entry it exports bundles for one,
 * with nothing of the SSH sign-in code (that lives in @svc/ssh, for the CLI and the server).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { describe, test } from 'vitest';
import { sourceCondition } from '../../scripts/build-sdk.ts';
import { repoRoot } from '../../scripts/repo-root.ts';

const clientRoot = join(repoRoot, 'client');

interface PackageManifest {
  exports: Record<string, string | Record<string, string>>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const manifest: PackageManifest = JSON.parse(readFileSync(join(clientRoot, 'package.json'), 'utf8'));

/** The packages the SSH code is built on; none belongs in what a mini-app loads. */
const sshPackages = ['sshpk', '@types/sshpk', 'bcrypt-pbkdf'];

async function bundleForBrowser(entry: string): Promise<{ code: string; inputs: string[] }> {
  const result = await build({
    entryPoints: [join(clientRoot, entry)],
    bundle: true,
    platform: 'browser',
    // As a mini-app's bundler sees the SDK's dependencies; an import of a Node module fails the build.
    conditions: ['module'],
    format: 'esm',
    write: false,
    metafile: true,
    logLevel: 'silent',
    // Inputs are then named from the repository's top, as `ssh/src/…` or `node_modules/sshpk/…`.
    absWorkingDir: repoRoot,
  });
  return {
    code: result.outputFiles.map((file) => file.text).join('\n'),
    inputs: Object.keys(result.metafile.inputs),
  };
}

describe('@svc/sdk in a browser', () => {
  test('when the SDK lists what it depends on, then no SSH package is among them', () => {
    const dependencies = Object.keys({ ...manifest.dependencies, ...manifest.devDependencies });
    assert.deepEqual(
      dependencies.filter((name) => sshPackages.includes(name)),
      [],
    );
  });

  const codeEntries = Object.entries(manifest.exports).flatMap(([subpath, target]) =>
    typeof target === 'object' && target[sourceCondition]
      ? [[subpath, target[sourceCondition]] as const]
      : [],
  );

  test('when the package lists its entries, then each has its TypeScript source for this repository', () => {
    assert.ok(codeEntries.length > 0);
    assert.deepEqual(
      codeEntries.map(([subpath]) => subpath),
      Object.keys(manifest.exports).filter((subpath) => subpath !== './package.json'),
    );
  });

  for (const [subpath, entry] of codeEntries) {
    test(`when "${subpath}" is bundled for a browser, then it holds no SSH code`, async () => {
      const { code, inputs } = await bundleForBrowser(entry);
      assert.deepEqual(
        inputs.filter(
          (input) => input.startsWith('ssh/') || /node_modules\/(sshpk|bcrypt-pbkdf)\//.test(input),
        ),
        [],
      );
      assert.doesNotMatch(code, /SSHSIG|OPENSSH PRIVATE KEY|ssh-ed25519/);
    });
  }
});
