/**
 * svc and the service judge a manifest by one rule: the validator `npm run generate` compiles from
 * the contract and the rules of `@svc/manifest`. Each manifest below is checked by both, the CLI
 * on the app folder and the service on the package svc makes of it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, test } from 'vitest';
import { checkManifest } from '../../cli/src/publish/manifest.ts';
import { listPackageFiles, packPackage } from '../../cli/src/publish/pack.ts';
import { repoRoot } from '../../scripts/repo-root.ts';
import { checkPackage } from '../../server/src/mini-apps/package-check.ts';

const valid = {
  id: 'com.example.hello-car',
  name: 'Hello Car',
  version: '1.0.0',
  entry: 'index.html',
  network: ['https://api.example.com'],
};

const cases: [string, Record<string, unknown>, boolean][] = [
  ['a valid manifest', valid, true],
  ['no network origins and two brands', { ...valid, network: [], brands: ['brand_a', 'brand_b'] }, true],
  ['an origin with capitals', { ...valid, network: ['https://API.example.com'] }, false],
  ['an origin with its default port', { ...valid, network: ['https://api.example.com:443'] }, false],
  ['one origin spelled twice', { ...valid, network: ['https://a.example', 'https://A.example'] }, false],
  ['an http:// origin', { ...valid, network: ['http://api.example.com'] }, false],
  ['an entry written with ./', { ...valid, entry: './index.html' }, false],
  ['an entry outside the package', { ...valid, entry: '../index.html' }, false],
  ['an unknown brand', { ...valid, brands: ['brand_z'] }, false],
  ['a field the contract does not have', { ...valid, colour: 'red' }, false],
  ['a name with a control character', { ...valid, name: 'Hello\u0007Car' }, false],
  ['a version that is not semver', { ...valid, version: '1.0' }, false],
];

const made: string[] = [];
afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

for (const [what, manifest, accepted] of cases) {
  test(`when a manifest has ${what} then svc and the service both ${accepted ? 'accept' : 'refuse'} it`, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-one-rule-'));
    made.push(dir);
    await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest));
    await writeFile(join(dir, 'index.html'), '<h1>hi</h1>\n');

    const cli = checkManifest(dir);
    assert.equal(cli.problems.length === 0, accepted, JSON.stringify(cli.problems));

    const packed = await packPackage(dir, await listPackageFiles(dir));
    made.push(dirname(packed.path));
    const service = await checkPackage(packed.path, packed.size).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (accepted) assert.equal(service, undefined);
    // The refusal's code, whatever kind of error carries it.
    else assert.equal((service as { code?: unknown } | undefined)?.code, 'manifest_invalid', String(service));
  });
}

test('when the sources are searched then only the code generator compiles a schema with ajv', async () => {
  const compilers: string[] = [];
  for (const workspace of ['cli/src', 'server/src', 'client/src', 'manifest/src']) {
    const root = join(repoRoot, workspace);
    for (const name of await readdir(root, { recursive: true })) {
      if (!name.endsWith('.ts')) continue;
      const text = await readFile(join(root, name), 'utf8');
      if (/from 'ajv\/dist\/(2020|ajv|standalone)/.test(text) || /new Ajv/.test(text)) {
        compilers.push(`${workspace}/${name}`);
      }
    }
  }
  assert.deepEqual(compilers, []);
});
