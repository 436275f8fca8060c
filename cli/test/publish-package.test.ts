import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import {
  chmod,
  chown,
  cp,
  mkdir,
  mkdtemp,
  readFile,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, describe, test } from 'vitest';
import { CliError } from '../src/errors.ts';
import {
  checkManifest,
  formatManifestProblem,
  type Manifest,
  ManifestError,
  readManifest,
} from '../src/publish/manifest.ts';
import {
  gzipOsByte,
  listPackageFiles,
  type PackageFile,
  packageFiles,
  packPackage,
  walkPackageFolder,
} from '../src/publish/pack.ts';

const validManifest: Manifest = {
  id: 'com.example.hello-car',
  name: 'Hello Car',
  version: '1.0.0',
  entry: 'index.html',
  network: ['https://api.hello-car.example.com'],
  brands: ['brand_a', 'brand_b'],
};

const made: string[] = [];
afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

/** A new folder holding `files` (path → content; a string manifest is written as is). */
async function folder(files: Record<string, string | Buffer>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-publish-test-'));
  made.push(dir);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

/** An app folder whose manifest is `valid` changed by `changes` (undefined removes a field). */
async function app(
  changes: Record<string, unknown> = {},
  files: Record<string, string> = {},
): Promise<string> {
  const manifest: Record<string, unknown> = { ...validManifest, ...changes };
  for (const [key, value] of Object.entries(changes)) if (value === undefined) delete manifest[key];
  return folder({
    'manifest.json': JSON.stringify(manifest, null, 2),
    'index.html': '<h1>hi</h1>\n',
    ...files,
  });
}

/** The problems of the manifest in `dir`, as printed. */
function problemsOf(dir: string): string[] {
  return checkManifest(dir).problems.map(formatManifestProblem);
}

function assertOneProblem(dir: string, expected: RegExp): void {
  const problems = problemsOf(dir);
  assert.equal(problems.length, 1, `one problem expected, got:\n${problems.join('\n')}`);
  assert.match(problems[0] ?? '', expected);
}

async function pack(dir: string) {
  const files = await listPackageFiles(dir);
  const packed = await packPackage(dir, files);
  made.push(dirname(packed.path));
  return { files, ...packed };
}

async function sha256Of(dir: string): Promise<string> {
  return (await pack(dir)).sha256;
}

/** `tar -tzvf` as `{ path, size, mode }`, in archive order. */
function tarListing(archive: string): { path: string; size: number; mode: string; owner: string }[] {
  const out = execFileSync('tar', ['-tzvf', archive], { encoding: 'utf8' });
  return out
    .trimEnd()
    .split('\n')
    .map((line) => {
      const match = /^(\S+)\s+(\S+)\s+(\d+)\s+\S+\s+\S+\s+(.+)$/.exec(line);
      assert.ok(match, `unexpected tar listing line: ${line}`);
      return { mode: match[1] ?? '', owner: match[2] ?? '', size: Number(match[3]), path: match[4] ?? '' };
    });
}

describe('manifest.json check', () => {
  test('when the manifest is valid then it is returned with no problems', async () => {
    const dir = await app();
    assert.deepEqual(checkManifest(dir), { manifest: validManifest, problems: [] });
    assert.deepEqual(readManifest(dir), validManifest);
  });

  test('when brands is left out and network is empty then the manifest is valid', async () => {
    const dir = await app(
      { brands: undefined, network: [], entry: 'app/main.html' },
      { 'app/main.html': 'x' },
    );
    assert.deepEqual(problemsOf(dir), []);
  });

  test('when manifest.json is missing then the problem says where it was looked for', async () => {
    const dir = await folder({ 'index.html': 'x' });
    assertOneProblem(dir, new RegExp(`^manifest\\.json: not found in ${dir}: every package needs`));
  });

  test('when manifest.json is not JSON then the problem gives the line and column', async () => {
    const dir = await folder({ 'manifest.json': '{\n  "id": "com.example.app",\n}\n' });
    assertOneProblem(dir, /^manifest\.json: is not valid JSON: at line 3, column 1: unexpected "}"/);
    const truncated = await folder({
      'manifest.json': '{ "id": "com.example.app", "network": ["https://a.example"',
    });
    assertOneProblem(
      truncated,
      /^manifest\.json: is not valid JSON: at line 1, column 59: the file ends too early/,
    );
    // An emoji is one column, as an editor counts it, though JavaScript counts it as two units.
    const emoji = await folder({ 'manifest.json': '{ "name": "W\u00e4lk 🚗 11" x }' });
    assertOneProblem(emoji, /^manifest\.json: is not valid JSON: at line 1, column 23: unexpected "x"/);
  });

  test('when manifest.json holds an array then the whole file is named', async () => {
    assertOneProblem(await folder({ 'manifest.json': '[]' }), /^manifest\.json: must hold one JSON object/);
  });

  test('when id is missing then the problem names id', async () => {
    assertOneProblem(
      await app({ id: undefined }),
      /^manifest\.json: id: is missing: give the app id in reverse-DNS/,
    );
  });

  for (const id of ['hello-car', 'Com.Example.App', 'com..example', 'com.1example', '.com.example']) {
    test(`when id is ${JSON.stringify(id)} then the problem says it must be reverse-DNS`, async () => {
      assertOneProblem(
        await app({ id }),
        new RegExp(
          `^manifest\\.json: id: ${JSON.stringify(id).replaceAll('.', '\\.')} must be a reverse-DNS id`,
        ),
      );
    });
  }

  for (const version of ['1.0', 'v1.0.0', '01.0.0', '1.0.0-', 'latest', '1.0.0-01']) {
    test(`when version is ${JSON.stringify(version)} then the problem says it must be semver`, async () => {
      assertOneProblem(await app({ version }), /^manifest\.json: version: ".*" must be a semantic version/);
    });
  }

  test('when a pre-release identifier has a leading zero then the problem says to leave it out', async () => {
    assertOneProblem(await app({ version: '1.0.0-rc.01' }), /leave out leading zeros$/);
  });

  for (const [what, name, said] of [
    ['a control character', 'Hello\u0007Car', /holds a control character/],
    ['a line break', 'Hello\nCar', /holds a control character/],
    ['a NUL', 'Hello\u0000Car', /holds a NUL character/],
    ['an unpaired surrogate', 'Hello \ud83d', /is not well-formed Unicode/],
  ] as const) {
    test(`when the name holds ${what} then the problem says so, as the service would`, async () => {
      assertOneProblem(await app({ name }), new RegExp(`^manifest\\.json: name: .*${said.source}`));
    });
  }

  const originCases: [string, string, RegExp][] = [
    ['http://', 'http://api.example.com', /it uses http:\/\//],
    ['a path', 'https://api.example.com/v1', /it has a path \("\/v1"\)/],
    ['a trailing slash', 'https://api.example.com/', /it ends with "\/"/],
    ['a query', 'https://api.example.com?key=1', /it has a query/],
    ['a wildcard', 'https://*.example.com', /it has a wildcard/],
    ['credentials', 'https://user:pw@api.example.com', /it has credentials/],
    ['capitals', 'https://API.example.com', /it reads as "https:\/\/api\.example\.com": write it that way/],
    ['the default port', 'https://api.example.com:443', /it reads as "https:\/\/api\.example\.com"/],
    ['no scheme', 'api.example.com', /it has no scheme: write "https:\/\/api\.example\.com"/],
    ['a bad host character', 'https://api_1.example.com', /its host may hold only letters/],
    ['nothing in it', '', /it is empty: write an origin such as "https:\/\/api\.example\.com"/],
  ];
  for (const [what, origin, reason] of originCases) {
    test(`when a network origin has ${what} then the problem names network[1] and the reason`, async () => {
      const dir = await app({ network: ['https://ok.example.com', origin] });
      const problems = problemsOf(dir);
      assert.equal(problems.length, 1, problems.join('\n'));
      assert.match(
        problems[0] ?? '',
        /^manifest\.json: network\[1\]: ".*" must be an https:\/\/ origin with no path, query, wildcard or credentials: /,
      );
      assert.match(problems[0] ?? '', reason);
    });
  }

  test('when an origin has credentials then they are not echoed', async () => {
    const [problem = ''] = problemsOf(await app({ network: ['https://token1:s3cret@api.example.com'] }));
    assert.match(problem, /"https:\/\/\*\*\*@api\.example\.com"/);
    assert.doesNotMatch(problem, /s3cret|token1/);
  });

  test('when the example of the issue is given then the message reads as the issue says', async () => {
    const dir = await app({ network: ['https://api.example.com', 'http://api.example.com'] });
    assert.equal(
      problemsOf(dir)[0],
      'manifest.json: network[1]: "http://api.example.com" must be an https:// origin with no path, query, ' +
        'wildcard or credentials: it uses http://',
    );
  });

  test('when an origin is listed twice then the later one is named with the earlier', async () => {
    const dir = await app({
      network: ['https://a.example.com', 'https://b.example.com', 'https://a.example.com'],
    });
    assert.deepEqual(problemsOf(dir), [
      'manifest.json: network[2]: "https://a.example.com" is listed twice (also as network[0]): list each origin once',
    ]);
  });

  test('when brands holds an unknown brand or a repeat then each is named', async () => {
    const dir = await app({ brands: ['brand_a', 'brand_x', 'brand_a'] });
    assert.deepEqual(problemsOf(dir), [
      'manifest.json: brands[1]: "brand_x" is not a known brand: the brands are brand_a, brand_b, brand_c, brand_d',
      'manifest.json: brands[2]: "brand_a" is listed twice (also as brands[0])',
    ]);
  });

  test('when brands is empty then it is named', async () => {
    assertOneProblem(await app({ brands: [] }), /^manifest\.json: brands: must list at least one brand/);
  });

  test('when a field is unknown then it is named with the closest known one', async () => {
    assertOneProblem(
      await app({ brand: ['brand_a'] }),
      /^manifest\.json: brand: is not a manifest field \(did you mean "brands"\?\): the fields are id, name/,
    );
  });

  test('when a field has the wrong type then the problem names the field and both types', async () => {
    assertOneProblem(
      await app({ network: 'https://a.example.com' }),
      /^manifest\.json: network: must be an array, not a string$/,
    );
    assertOneProblem(await app({ name: 3 }), /^manifest\.json: name: must be a string, not the number 3$/);
  });

  test('when entry is not in the folder then the problem says so', async () => {
    assertOneProblem(
      await app({ entry: 'main.html' }),
      /^manifest\.json: entry: "main\.html" is not a file in /,
    );
  });

  test('when entry differs from the file only in case then the problem names the file', async () => {
    assertOneProblem(
      await app({ entry: 'Index.html' }),
      /the folder has "index\.html", and names in a package are case-sensitive/,
    );
  });

  test('when entry points outside the folder then the problem says so', async () => {
    const dir = await app({ entry: '../index.html' });
    assertOneProblem(dir, /^manifest\.json: entry: "\.\.\/index\.html" leads outside the package folder/);
    assertOneProblem(await app({ entry: '/etc/passwd' }), /must be relative to the package folder/);
    assertOneProblem(
      await app({ entry: './index.html' }),
      /must be a plain path inside the package: write "index\.html"/,
    );
  });

  test('when entry is a folder, or left out by .svcignore or node_modules, then the problem says so', async () => {
    assertOneProblem(await app({ entry: 'app' }, { 'app/index.html': 'x' }), /"app" is a folder/);
    assertOneProblem(
      await app(
        { entry: 'dist/index.html' },
        { 'dist/index.html': 'x', '.svcignore': '# build output\ndist/\n' },
      ),
      /"dist\/index\.html" is left out of the package: \.svcignore line 2 \("dist\/"\) leaves it out/,
    );
    assertOneProblem(
      await app({ entry: 'node_modules/x/index.html' }, { 'node_modules/x/index.html': 'x' }),
      /left out of the package: "node_modules" is never packed/,
    );
  });

  test('when entry goes through a symbolic link then the problem says so', async () => {
    const dir = await app({ entry: 'linked.html' });
    await symlink('index.html', join(dir, 'linked.html'));
    assertOneProblem(dir, /goes through the symbolic link "linked\.html"/);
  });

  test('when there are several problems then every one is listed, in field order', async () => {
    const dir = await app({
      id: undefined,
      version: '1.0',
      entry: '../escape.html',
      network: ['http://a.example.com', 'https://b.example.com/path', 'https://b.example.com/path'],
      brands: ['brand_z'],
      extra: true,
    });
    const problems = problemsOf(dir);
    assert.deepEqual(
      problems.map((problem) => problem.split(': ')[1]),
      ['id', 'version', 'entry', 'network[0]', 'network[1]', 'network[2]', 'brands[0]', 'extra'],
    );
    assert.throws(
      () => readManifest(dir),
      (error: unknown) => {
        assert.ok(error instanceof ManifestError && error instanceof CliError);
        assert.equal(error.problems.length, 8);
        const [heading, ...lines] = error.message.split('\n');
        assert.equal(heading, `${join(dir, 'manifest.json')} has 8 problems:`);
        assert.deepEqual(
          lines.map((line) => line.trim()),
          problems,
        );
        return true;
      },
    );
  });
});

describe('package files', () => {
  test('when the folder has .git, node_modules and .svcignore patterns then those are left out', async () => {
    const dir = await folder({
      'manifest.json': JSON.stringify(validManifest),
      'index.html': 'x',
      '.git/HEAD': 'ref: refs/heads/main\n',
      'node_modules/dep/index.js': 'x',
      'lib/node_modules/dep/index.js': 'x',
      'lib/.git': 'gitdir: ../.git/modules/lib\n',
      'lib/app.js': 'x',
      '.svcignore': [
        '# comments and blank lines are skipped',
        '',
        '*.log',
        '!keep.log',
        '/build/',
        'docs/**/*.md',
        'secret?.txt',
        '**/cache',
        'notes/',
        '[Tt]emp*',
      ].join('\n'),
      'debug.log': 'x',
      'keep.log': 'x',
      'lib/trace.log': 'x',
      'build/out.js': 'x',
      'src/build/kept.js': 'x',
      'docs/a.md': 'x',
      'docs/deep/er/b.md': 'x',
      'docs/readme.txt': 'x',
      'secret1.txt': 'x',
      'secret10.txt': 'x',
      'lib/cache/x.bin': 'x',
      notes: 'a file, not a folder',
      'Temp.txt': 'x',
      'temp/x': 'x',
    });
    const paths = (await listPackageFiles(dir)).map((file) => file.path);
    assert.deepEqual(paths, [
      '.svcignore',
      'docs/readme.txt',
      'index.html',
      'keep.log',
      'lib/app.js',
      'manifest.json',
      'notes',
      'secret10.txt',
      'src/build/kept.js',
    ]);
  });

  test('when .svcignore re-includes a file inside a left-out folder then, as in git, it stays out', async () => {
    const dir = await folder({
      'manifest.json': '{}',
      '.svcignore': 'logs/\n!logs/keep.txt\ntmp/**\n!tmp/keep.txt\n\\#literal\n',
      'logs/keep.txt': 'x',
      'tmp/drop.txt': 'x',
      'tmp/keep.txt': 'x',
      '#literal': 'x',
    });
    assert.deepEqual(
      (await listPackageFiles(dir)).map((file) => file.path),
      ['.svcignore', 'manifest.json', 'tmp/keep.txt'],
    );
  });

  test('when .svcignore uses negation, ** and anchoring then it leaves out exactly what git would', async () => {
    const svcignore = [
      '/dist', // anchored: the root's dist only
      '*.map',
      '!vendor/*.map', // negation of an earlier line
      'a/**/b.txt', // ** as zero or more folders
      '**/tmp/**', // everything inside any tmp, not tmp itself
      '!**/tmp/keep.txt',
      'docs/*.md', // a middle / anchors too: docs/deep/c.md stays
      'trailing\\ ', // an escaped trailing space is part of the name
    ].join('\n');
    const dir = await folder({
      'manifest.json': '{}',
      '.svcignore': svcignore,
      'dist/app.js': 'x',
      'src/dist/app.js': 'x',
      'app.js.map': 'x',
      'vendor/lib.js.map': 'x',
      'vendor/deep/lib.js.map': 'x',
      'a/b.txt': 'x',
      'a/x/y/b.txt': 'x',
      'b.txt': 'x',
      'tmp/drop.txt': 'x',
      'src/tmp/drop.txt': 'x',
      'src/tmp/keep.txt': 'x',
      'docs/a.md': 'x',
      'docs/deep/c.md': 'x',
      'trailing ': 'x',
      trailing: 'x',
    });
    const packed = (await listPackageFiles(dir)).map((file) => file.path);
    assert.deepEqual(packed, [
      '.svcignore',
      'b.txt',
      'docs/deep/c.md',
      'manifest.json',
      'src/dist/app.js',
      'src/tmp/keep.txt',
      'trailing',
      'vendor/lib.js.map',
    ]);
    // git itself, given the same lines as a .gitignore, keeps the same files.
    const repo = await folder({ '.gitignore': svcignore });
    await cp(dir, repo, { recursive: true });
    await rm(join(repo, '.svcignore'));
    execFileSync('git', ['init', '-q'], { cwd: repo });
    const byGit = execFileSync('git', ['ls-files', '--others', '--exclude-standard', '-z'], {
      cwd: repo,
      encoding: 'utf8',
    })
      .split('\0')
      .filter((path) => path !== '' && path !== '.gitignore')
      .sort();
    assert.deepEqual(
      byGit,
      packed.filter((path) => path !== '.svcignore'),
    );
  });

  test('when the folder changes after it was walked then the manifest check and the packing both go by the walk', async () => {
    const dir = await folder({
      'manifest.json': JSON.stringify({ ...validManifest, entry: 'app/index.html' }),
      'app/index.html': 'x',
      'index.html': 'x',
    });
    const walked = walkPackageFolder(dir);
    // Read once: leaving out app/ now changes neither the entry check nor the files packed.
    await writeFile(join(dir, '.svcignore'), 'app/\n');
    await writeFile(join(dir, 'late.txt'), 'x');
    assert.deepEqual(checkManifest(dir, walked).problems, []);
    assert.deepEqual(
      packageFiles(walked).map((file) => file.path),
      ['app/index.html', 'index.html', 'manifest.json'],
    );
    assertOneProblem(dir, /"app\/index\.html" is left out of the package: \.svcignore line 1/);
  });

  test('when files are listed then paths are POSIX, sorted by bytes, with their sizes', async () => {
    const dir = await folder({
      'manifest.json': '{}',
      'b.txt': '12345',
      'a-b/x': '',
      'a/x': '1',
      'A.txt': '12',
      'é.txt': '123',
      'z.txt': '1',
    });
    assert.deepEqual(await listPackageFiles(dir), [
      { path: 'A.txt', size: 2 },
      { path: 'a-b/x', size: 0 },
      { path: 'a/x', size: 1 },
      { path: 'b.txt', size: 5 },
      { path: 'manifest.json', size: 2 },
      { path: 'z.txt', size: 1 },
      { path: 'é.txt', size: 3 },
    ]);
  });

  test('when the folder holds a symbolic link then packing is refused, naming it', async () => {
    const dir = await folder({ 'manifest.json': '{}', 'index.html': 'x' });
    await mkdir(join(dir, 'assets'));
    await symlink('../index.html', join(dir, 'assets/link.html'));
    await assert.rejects(listPackageFiles(dir), (error: unknown) => {
      assert.ok(error instanceof CliError);
      assert.match(
        error.message,
        /^assets\/link\.html is a symbolic link, and a package holds regular files only/,
      );
      return true;
    });
    await writeFile(join(dir, '.svcignore'), 'assets/link.html\n');
    assert.deepEqual(
      (await listPackageFiles(dir)).map((file) => file.path),
      ['.svcignore', 'index.html', 'manifest.json'],
    );
  });

  test('when a name is not UTF-8 or a path is too long for the archive then packing is refused', async () => {
    const dir = await folder({ 'manifest.json': '{}' });
    const badName = Buffer.concat([
      Buffer.from(`${dir}/bad-`),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('.txt'),
    ]);
    await writeFile(badName, 'x');
    await assert.rejects(listPackageFiles(dir), /"bad-\uFFFD\uFFFD\.txt" has a name that is not valid UTF-8/);
    await rm(badName);
    const longDir = Array.from({ length: 3 }, (_, index) => `${index}`.repeat(90)).join('/');
    await mkdir(join(dir, longDir), { recursive: true });
    await writeFile(join(dir, longDir, 'file.txt'), 'x');
    await assert.rejects(
      listPackageFiles(dir),
      /file\.txt cannot be packed: its path is 281 bytes long, .* at most 256/,
    );
  });

  test('when .svcignore leaves out manifest.json then listing is refused', async () => {
    const dir = await folder({ 'manifest.json': '{}', '.svcignore': '*.json\n' });
    await assert.rejects(listPackageFiles(dir), /manifest\.json must be packed, but \.svcignore line 1/);
  });
});

describe('package archive', () => {
  const files = {
    'manifest.json': JSON.stringify(validManifest, null, 2),
    'index.html': '<h1>Hello</h1>\n',
    'assets/app.js': 'console.log("hi");\n'.repeat(100),
    'assets/empty.txt': '',
    'assets/exactly-512.bin': 'x'.repeat(512),
  };

  test('when the same folder is packed twice then the sha256 is the same', async () => {
    const dir = await folder(files);
    const first = await pack(dir);
    const second = await pack(dir);
    assert.equal(first.sha256, second.sha256);
    assert.equal(first.size, second.size);
    assert.equal(first.size, (await stat(first.path)).size);
    assert.notEqual(first.path, second.path);
  });

  test('when only times, owners, read permissions or creation order differ then the sha256 is the same', async () => {
    const dir = await folder(files);
    const expected = await sha256Of(dir);
    await utimes(join(dir, 'index.html'), new Date('2001-02-03T04:05:06Z'), new Date('2001-02-03T04:05:06Z'));
    await chmod(join(dir, 'assets/app.js'), 0o600);
    if (process.getuid?.() === 0) await chown(join(dir, 'index.html'), 1234, 5678);
    assert.equal(await sha256Of(dir), expected);
    const reversed = await folder(Object.fromEntries(Object.entries(files).reverse()));
    assert.equal(await sha256Of(reversed), expected);
  });

  test('when content or the executable bit changes then the sha256 changes', async () => {
    const dir = await folder(files);
    const before = await sha256Of(dir);
    await writeFile(join(dir, 'index.html'), '<h1>Hello!</h1>\n');
    const edited = await sha256Of(dir);
    assert.notEqual(edited, before);
    await chmod(join(dir, 'assets/app.js'), 0o755);
    assert.notEqual(await sha256Of(dir), edited);
  });

  test('when the archive is read by tar then it lists exactly the files and extracts them byte for byte', async () => {
    const longPath = `${'long-folder-name/'.repeat(8)}${'n'.repeat(90)}.txt`;
    const dir = await folder({ ...files, [longPath]: 'deep\n', 'assets/naïve.txt': 'ü' });
    await chmod(join(dir, 'assets/app.js'), 0o750);
    const packed = await pack(dir);
    assert.ok(Buffer.byteLength(longPath) > 100);
    const listing = tarListing(packed.path);
    assert.deepEqual(
      listing.map(({ path, size }) => ({ path, size })),
      packed.files,
    );
    for (const entry of listing) {
      assert.equal(entry.owner, '0/0');
      assert.equal(entry.mode, entry.path === 'assets/app.js' ? '-rwxr-xr-x' : '-rw-r--r--');
    }
    const out = await mkdtemp(join(tmpdir(), 'svc-publish-extract-'));
    made.push(out);
    execFileSync('tar', ['-xzf', packed.path, '-C', out]);
    for (const { path } of packed.files) {
      assert.deepEqual(await readFile(join(out, path)), await readFile(join(dir, path)), path);
    }
    const extractedTime = (await stat(join(out, 'index.html'))).mtimeMs;
    assert.equal(extractedTime, 0);
  });

  test('when a file changes between listing and packing then packing fails, naming it', async () => {
    const dir = await folder(files);
    const listed = await listPackageFiles(dir);
    await writeFile(join(dir, 'index.html'), 'grown since it was listed');
    await assert.rejects(
      packPackage(dir, listed),
      /^CliError: index\.html changed while it was being packed/,
    );
  });

  test('when the archive is checked by gzip then it is valid, with mtime 0 and a fixed OS byte', async () => {
    const packed = await pack(await folder(files));
    execFileSync('gzip', ['-t', packed.path]);
    const header = await readFile(packed.path).then((bytes) => bytes.subarray(0, 10));
    assert.deepEqual([...header.subarray(0, 3)], [0x1f, 0x8b, 8]);
    assert.deepEqual([...header.subarray(4, 8)], [0, 0, 0, 0]);
    assert.equal(header[9], gzipOsByte);
  });

  test('when a file is big then it is streamed: memory stays far below its size', async () => {
    const dir = await folder({ 'manifest.json': '{}' });
    const mib = 1024 * 1024;
    const fileSize = 50 * mib;
    const out = createWriteStream(join(dir, 'big.bin'));
    for (let written = 0; written < fileSize; written += mib) {
      if (!out.write(randomBytes(mib))) await once(out, 'drain');
    }
    out.end();
    await once(out, 'close');

    // Measured after a full collection, so that what counts is memory held, not garbage not yet collected.
    setFlagsFromString('--expose-gc');
    const collectGarbage = runInNewContext('gc') as () => void;
    const held = () => {
      collectGarbage();
      const { heapUsed, arrayBuffers } = process.memoryUsage();
      return heapUsed + arrayBuffers;
    };
    const baseline = held();
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, held() - baseline);
    }, 50);
    let packed: Awaited<ReturnType<typeof pack>>;
    try {
      packed = await pack(dir);
    } finally {
      clearInterval(sampler);
    }
    const expected: PackageFile[] = [
      { path: 'big.bin', size: fileSize },
      { path: 'manifest.json', size: 2 },
    ];
    assert.deepEqual(packed.files, expected);
    assert.ok(packed.size > fileSize, 'random data does not compress');
    assert.ok(peak < 16 * mib, `memory grew by ${(peak / mib).toFixed(1)} MiB while packing 50 MiB`);
  });
});
