/**
 * A broken manifest is said in one set of words, svc's: each problem names the field as svc prints
 * it and as the service's problem points at it, and says what to do.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { checkManifestSchema, describeManifestErrors, type ManifestProblem } from '@svc/manifest';
import { afterAll, describe, test } from 'vitest';
import { checkManifest, formatManifestProblem } from '../../cli/src/publish/manifest.ts';
import { listPackageFiles, packPackage } from '../../cli/src/publish/pack.ts';
import { checkPackage } from '../../server/src/mini-apps/package-check.ts';

const valid = {
  id: 'com.example.hello-car',
  name: 'Hello Car',
  version: '1.0.0',
  entry: 'index.html',
  network: ['https://api.example.com'],
};

function problemsOf(value: unknown): ManifestProblem[] {
  return describeManifestErrors(checkManifestSchema(value).errors, value);
}

describe('describeManifestErrors', () => {
  test('when the manifest is valid then it has no problems', () => {
    assert.deepEqual(problemsOf(valid), []);
  });

  test('when a field is missing then it is named, and the message says what to give', () => {
    const { version: _version, ...withoutVersion } = valid;
    assert.deepEqual(problemsOf(withoutVersion), [
      {
        field: 'version',
        pointer: '/manifest/version',
        message: 'is missing: give the semantic version of this package, such as "1.0.0"',
      },
    ]);
  });

  test('when a brand is unknown then the message lists the brands there are', () => {
    assert.deepEqual(problemsOf({ ...valid, brands: ['brand_a', 'brand_z'] }), [
      {
        field: 'brands[1]',
        pointer: '/manifest/brands/1',
        message: '"brand_z" is not a known brand: the brands are brand_a, brand_b, brand_c, brand_d',
      },
    ]);
  });

  test('when a value breaks its pattern then the message says the form and what is wrong with this one', () => {
    assert.deepEqual(problemsOf({ ...valid, id: 'Com.Example.App', version: 'v1.0.0' }), [
      {
        field: 'id',
        pointer: '/manifest/id',
        message:
          '"Com.Example.App" must be a reverse-DNS id such as "com.example.hello-car": two or more labels ' +
          'joined by ".", each of lowercase letters, digits and "-" and starting with a letter: it has capital letters',
      },
      {
        field: 'version',
        pointer: '/manifest/version',
        message:
          '"v1.0.0" must be a semantic version MAJOR.MINOR.PATCH, such as "1.0.0" or "1.2.0-beta.1": leave out the "v"',
      },
    ]);
  });

  test('when a value is too long then the message counts its characters against the limit', () => {
    assert.deepEqual(problemsOf({ ...valid, name: 'é'.repeat(101) }), [
      {
        field: 'name',
        pointer: '/manifest/name',
        message: 'is 101 characters long: at most 100 are allowed',
      },
    ]);
  });

  test('when an item is listed twice then the later one is named, with the earlier', () => {
    const problems = problemsOf({
      ...valid,
      network: ['https://a.example', 'https://a.example'],
      brands: ['brand_a', 'brand_b', 'brand_a'],
    });
    assert.deepEqual(problems, [
      {
        field: 'network[1]',
        pointer: '/manifest/network/1',
        message: '"https://a.example" is listed twice (also as network[0]): list each origin once',
      },
      {
        field: 'brands[2]',
        pointer: '/manifest/brands/2',
        message: '"brand_a" is listed twice (also as brands[0])',
      },
    ]);
  });

  test('when a value has the wrong type then the message says what it must be and what it is', () => {
    assert.deepEqual(problemsOf({ ...valid, network: 'https://api.example.com' }), [
      { field: 'network', pointer: '/manifest/network', message: 'must be an array, not a string' },
    ]);
    assert.deepEqual(problemsOf([valid]), [
      { pointer: '/manifest', message: 'must hold one JSON object, {…}, not an array' },
    ]);
  });

  test('when a field name would not read as one then svc quotes it and the pointer escapes it', () => {
    assert.deepEqual(problemsOf({ ...valid, 'a/b c': 1 }), [
      {
        field: '"a/b c"',
        pointer: '/manifest/a~1b c',
        message: 'is not a manifest field: the fields are id, name, version, entry, network, brands',
      },
    ]);
  });
});

describe('svc and the service on one broken manifest', () => {
  const made: string[] = [];
  afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

  test('when svc checks the folder and the service its package then both say the same problems in the same words', async () => {
    const { entry: _entry, ...withoutEntry } = valid;
    const broken = {
      ...withoutEntry,
      id: 'hello',
      name: '',
      network: ['http://api.example.com', 'https://API.example.com'],
      brands: ['brand_z', 'brand_z'],
      colour: 'red',
    };
    const dir = await mkdtemp(join(tmpdir(), 'svc-manifest-words-'));
    made.push(dir);
    await writeFile(join(dir, 'manifest.json'), JSON.stringify(broken));
    await writeFile(join(dir, 'index.html'), '<h1>hi</h1>\n');

    const cli = checkManifest(dir).problems;
    const packed = await packPackage(dir, await listPackageFiles(dir));
    made.push(dirname(packed.path));
    const refusal = (await checkPackage(packed.path, packed.size).then(
      () => assert.fail('the service took a broken manifest'),
      (error: unknown) => error,
    )) as { code: string; message: string; errors: { path: string; message: string }[] };

    assert.equal(refusal.code, 'manifest_invalid');
    const printed = cli.map(formatManifestProblem);
    assert.equal(printed.length, 9, printed.join('\n'));
    // Each of svc's lines is the service's entry, under the field's pointer.
    assert.deepEqual(
      refusal.errors.map((error) => error.message),
      cli.map((problem) => problem.message),
    );
    assert.deepEqual(
      refusal.errors.map((error) => error.path),
      cli.map((problem) => (problem as ManifestProblem).pointer),
    );
    // The detail says them as svc prints them, less the file name before each.
    for (const line of printed)
      assert.ok(refusal.message.includes(line.replace(/^manifest\.json: /, '')), line);
  });
});
