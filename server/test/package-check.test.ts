import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, test } from 'vitest';
import { DomainError } from '../src/errors.ts';
import { type ProblemError, problemFor } from '../src/http/problem.ts';
import { type CheckedPackage, checkPackage, type PackageLimits } from '../src/mini-apps/package-check.ts';
import {
  endOfArchive,
  paxRecords,
  type TarEntry,
  tarArchive,
  tarEntry,
  tarHeader,
  writeGzipped,
  zeros,
} from './support/tar-writer.ts';

const manifest = {
  id: 'com.example.hello-car',
  name: 'Hello Car',
  version: '1.0.0',
  entry: 'index.html',
  network: ['https://api.hello-car.example.com'],
  brands: ['brand_a', 'brand_b'],
};
const manifestJson = JSON.stringify(manifest);
const indexHtml = '<!doctype html><title>Hello Car</title>';
const mebibyte = 1024 * 1024;

describe('package check', () => {
  let dir: string;
  let made = 0;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-package-check-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** A fresh path in the temporary folder. */
  const scratch = (name: string) => {
    made += 1;
    return join(dir, `${made}-${name}`);
  };

  /** An app folder with these files (path → content); returns its path. */
  const appFolder = (files: Record<string, string>) => {
    const root = scratch('app');
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  };
  const validApp = () => appFolder({ 'manifest.json': manifestJson, 'index.html': indexHtml });

  /** Runs the system tar with these arguments after `-czf <package>`; returns the package path. */
  const systemTar = (...args: string[]) => {
    const path = scratch('package.tar.gz');
    execFileSync('tar', ['-czf', path, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    return path;
  };
  const storedFile = (bytes: Buffer) => {
    const path = scratch('package');
    writeFileSync(path, bytes);
    return path;
  };
  const handWritten = (entries: TarEntry[]) => storedFile(gzipSync(tarArchive(entries)));
  const withValidApp = (...entries: TarEntry[]): TarEntry[] => [
    { path: 'manifest.json', body: manifestJson },
    { path: 'index.html', body: indexHtml },
    ...entries,
  ];

  const check = (path: string, limits?: Partial<PackageLimits>) =>
    checkPackage(path, statSync(path).size, limits);

  async function refusal(path: string, limits?: Partial<PackageLimits>): Promise<ProblemError> {
    let accepted: CheckedPackage;
    try {
      accepted = await check(path, limits);
    } catch (error) {
      assert.ok(error instanceof DomainError, `not a problem: ${String(error)}`);
      const problem = problemFor(error);
      assert.ok(problem);
      assert.equal(problem.status, 422);
      return problem;
    }
    assert.fail(`the package was accepted: ${JSON.stringify(accepted)}`);
  }

  describe('when the package is well formed', () => {
    test('then packing the app folder with tar gives back the manifest and the counts', async () => {
      const app = appFolder({
        'manifest.json': manifestJson,
        'index.html': indexHtml,
        'assets/app.js': 'console.log(1);',
      });
      const checked = await check(systemTar('-C', app, '.'));
      assert.deepEqual(checked.manifest, manifest);
      // ./, ./manifest.json, ./index.html, ./assets/, ./assets/app.js
      assert.equal(checked.entries, 5);
      assert.equal(checked.unpackedBytes, manifestJson.length + indexHtml.length + 'console.log(1);'.length);
    });

    test('then files named without ./, long paths in pax records and a UTF-8 BOM pass', async () => {
      const deep = `${'folder/'.repeat(30)}page.html`;
      const checked = await check(
        handWritten([
          { path: 'manifest.json', body: `\uFEFF${JSON.stringify({ ...manifest, entry: deep })}` },
          { path: deep, body: indexHtml },
        ]),
      );
      assert.equal(checked.manifest.entry, deep);
      assert.equal(checked.entries, 2);
    });

    test('then 2000 entries are allowed', async () => {
      const files = Array.from({ length: 1998 }, (_, n) => ({ path: `files/${n}.txt`, body: '' }));
      const checked = await check(handWritten(withValidApp(...files)));
      assert.equal(checked.entries, 2000);
    });
  });

  describe('when the package is not a gzip tar', () => {
    test('then a plain tar is refused as not_gzip', async () => {
      const path = scratch('plain.tar');
      execFileSync('tar', ['-cf', path, '-C', validApp(), '.']);
      const problem = await refusal(path);
      assert.equal(problem.code, 'not_gzip');
      assert.match(problem.message, /tar archive without compression/);
    });

    test('then a zip, random bytes and an empty file are refused as not_gzip', async () => {
      const zip = Buffer.concat([Buffer.from('PK\x03\x04'), randomBytes(200)]);
      for (const bytes of [zip, randomBytes(4096), Buffer.alloc(0)]) {
        assert.equal((await refusal(storedFile(bytes))).code, 'not_gzip');
      }
    });

    test('then gzip of garbage, of nothing, or of another gzip is refused as not_tar', async () => {
      const tar = tarArchive(withValidApp());
      for (const inner of [randomBytes(4096), Buffer.alloc(0), gzipSync(tar)]) {
        assert.equal((await refusal(storedFile(gzipSync(inner)))).code, 'not_tar');
      }
    });

    test('then a tar cut off inside an entry is refused as not_tar', async () => {
      const tar = tarArchive(withValidApp({ path: 'big.bin', body: randomBytes(4096) }), { end: false });
      const problem = await refusal(storedFile(gzipSync(tar.subarray(0, tar.length - 2048))));
      assert.equal(problem.code, 'not_tar');
      assert.match(problem.message, /Truncated/);
    });

    test('then a truncated gzip is refused as corrupt_gzip', async () => {
      const whole = gzipSync(tarArchive(withValidApp({ path: 'noise.bin', body: randomBytes(8192) })));
      const problem = await refusal(storedFile(whole.subarray(0, Math.floor(whole.length / 2))));
      assert.equal(problem.code, 'corrupt_gzip');
    });

    test('then entries after a single zero block, where some readers stop, are refused as not_tar', async () => {
      const tar = Buffer.concat([
        tarEntry({ path: 'manifest.json', body: manifestJson }),
        Buffer.alloc(512),
        tarEntry({ path: 'index.html', body: indexHtml }),
        endOfArchive,
      ]);
      assert.equal((await refusal(storedFile(gzipSync(tar)))).code, 'not_tar');
    });
  });

  describe('when the manifest is missing or wrong', () => {
    test('then a package without manifest.json is refused as manifest_missing', async () => {
      const problem = await refusal(systemTar('-C', appFolder({ 'index.html': indexHtml }), '.'));
      assert.equal(problem.code, 'manifest_missing');
    });

    test('then a manifest in a subfolder only is refused, and the detail says where it is', async () => {
      const app = validApp();
      const problem = await refusal(systemTar('-C', dirname(app), app.slice(dirname(app).length + 1)));
      assert.equal(problem.code, 'manifest_missing');
      assert.match(problem.message, /-app\/manifest\.json/);
    });

    test('then a manifest that is not JSON is refused as manifest_invalid', async () => {
      const problem = await refusal(handWritten([{ path: 'manifest.json', body: '{"id": ' }]));
      assert.equal(problem.code, 'manifest_invalid');
      assert.equal(problem.errors?.[0]?.path, '/manifest');
    });

    test('then a manifest failing the schema is refused, naming each wrong field', async () => {
      const { entry: _entry, ...withoutEntry } = manifest;
      const wrong = {
        ...withoutEntry,
        network: ['https://api.example.com', 'http://plain.example.com'],
        brands: ['brand_z'],
        colour: 'red',
      };
      const problem = await refusal(handWritten([{ path: 'manifest.json', body: JSON.stringify(wrong) }]));
      assert.equal(problem.code, 'manifest_invalid');
      const paths = problem.errors?.map((error) => error.path).sort();
      assert.deepEqual(paths, [
        '/manifest/brands/0',
        '/manifest/colour',
        '/manifest/entry',
        '/manifest/network/1',
      ]);
      // svc's words, field by field, in the detail and in each entry.
      assert.match(problem.message, /^manifest\.json has 4 problems: entry: is missing: give the path/);
      assert.match(
        problem.message,
        /network\[1\]: "http:\/\/plain\.example\.com" must be an https:\/\/ origin/,
      );
      assert.deepEqual(
        problem.errors?.find((error) => error.path === '/manifest/brands/0'),
        {
          path: '/manifest/brands/0',
          message: '"brand_z" is not a known brand: the brands are brand_a, brand_b, brand_c, brand_d',
        },
      );
    });

    test('then a mistyped field is named with the field it most likely meant, as svc names it', async () => {
      const { entry, ...withoutEntry } = manifest;
      const typo = { ...withoutEntry, entyr: entry };
      const problem = await refusal(handWritten([{ path: 'manifest.json', body: JSON.stringify(typo) }]));
      assert.deepEqual(
        problem.errors?.find((error) => error.path === '/manifest/entyr'),
        {
          path: '/manifest/entyr',
          message:
            'is not a manifest field (did you mean "entry"?): the fields are id, name, version, entry, network, brands',
        },
      );
    });

    test('then a manifest over 64 KiB, or a folder named manifest.json, is refused as manifest_invalid', async () => {
      const huge = JSON.stringify({ ...manifest, name: 'x'.repeat(70 * 1024) });
      assert.equal(
        (await refusal(handWritten([{ path: 'manifest.json', body: huge }]))).code,
        'manifest_invalid',
      );
      const folder = handWritten([{ path: 'manifest.json/', type: '5' }]);
      assert.equal((await refusal(folder)).code, 'manifest_invalid');
    });

    test('then an entry path outside the package is refused as manifest_invalid', async () => {
      const body = JSON.stringify({ ...manifest, entry: '../index.html' });
      const problem = await refusal(handWritten([{ path: 'manifest.json', body }]));
      assert.equal(problem.code, 'manifest_invalid');
      assert.deepEqual(
        problem.errors?.map((error) => error.path),
        ['/manifest/entry'],
      );
    });

    test('then network origins svc would refuse (capitals, the default port, one origin twice) are refused, naming each', async () => {
      const network = ['https://api.example.com', 'https://API.example.com', 'https://b.example:443'];
      const body = JSON.stringify({ ...manifest, network });
      const problem = await refusal(handWritten([{ path: 'manifest.json', body }]));
      assert.equal(problem.code, 'manifest_invalid');
      assert.deepEqual(
        problem.errors?.map((error) => error.path),
        ['/manifest/network/1', '/manifest/network/2'],
      );
      assert.match(problem.errors?.[1]?.message ?? '', /reads as "https:\/\/b\.example": write it that way/);
    });

    test('then an entry that is not in the package, or is a folder, is refused as entry_missing', async () => {
      const missing = await refusal(systemTar('-C', appFolder({ 'manifest.json': manifestJson }), '.'));
      assert.equal(missing.code, 'entry_missing');
      assert.match(missing.message, /"index.html" is not in the package/);
      const folder = await refusal(
        handWritten([
          { path: 'manifest.json', body: manifestJson },
          { path: 'index.html/', type: '5' },
        ]),
      );
      assert.equal(folder.code, 'entry_missing');
    });
  });

  describe('when a path could land outside the package or clash', () => {
    test('then an absolute path is refused as unsafe_path', async () => {
      const app = validApp();
      const problem = await refusal(
        systemTar('-P', '-C', app, 'manifest.json', 'index.html', join(app, 'index.html')),
      );
      assert.equal(problem.code, 'unsafe_path');
      assert.match(problem.message, /absolute/);
    });

    test('then a path going up with .. is refused as unsafe_path', async () => {
      const app = validApp();
      const path = systemTar(
        '-P',
        '-C',
        app,
        'manifest.json',
        '--transform',
        's,^index,a/../../index,',
        'index.html',
      );
      const problem = await refusal(path);
      assert.equal(problem.code, 'unsafe_path');
      assert.match(problem.message, /"a\/\.\.\/\.\.\/index\.html"/);
    });

    test('then backslashes, control characters and bytes that are not UTF-8 are refused as unsafe_path', async () => {
      const names = ['a\\..\\..\\evil.html', 'new\nline.html', Buffer.from([0x61, 0xff, 0x62])];
      for (const path of names) {
        const problem = await refusal(handWritten(withValidApp({ path, body: 'x' })));
        assert.equal(problem.code, 'unsafe_path', String(path));
      }
    });

    test('then a path that appears twice is refused as unsafe_path', async () => {
      const problem = await refusal(
        handWritten(withValidApp({ path: './index.html', body: '<p>other</p>' })),
      );
      assert.equal(problem.code, 'unsafe_path');
      assert.match(problem.message, /appears twice/);
    });

    test('then a file with entries inside it is refused as unsafe_path', async () => {
      const problem = await refusal(handWritten(withValidApp({ path: 'index.html/inner.js', body: 'x' })));
      assert.equal(problem.code, 'unsafe_path');
    });
  });

  describe('when a header renames entries, as some readers see it and others do not', () => {
    /** A header of this typeflag (`g`, `x`, `L`, `K`) with this body, before the entries it applies to. */
    const meta = (type: string, body: string | Buffer): TarEntry => ({ path: '././@LongLink', type, body });
    const pax = (records: Record<string, string>) => paxRecords(records);
    const manifestEntry = { path: 'manifest.json', body: manifestJson };
    const indexEntry = { path: 'index.html', body: indexHtml };

    for (const [what, path] of [
      ['..', '../../evil'],
      ['an absolute path', '/tmp/evil'],
      ['a NUL', 'evil\u0000.html'],
    ] as const) {
      test(`then a global pax path with ${what} before the app is refused`, async () => {
        const problem = await refusal(handWritten([meta('g', pax({ path })), manifestEntry, indexEntry]));
        assert.match(problem.code, /^unsafe_(path|entry)$/);
      });

      test(`then a per-entry pax path with ${what} is refused as unsafe_path`, async () => {
        const problem = await refusal(
          handWritten(withValidApp({ path: 'app.js', body: 'x', pax: { path } })),
        );
        assert.equal(problem.code, 'unsafe_path');
      });

      test(`then a GNU long name (L) with ${what} is refused as unsafe_path`, async () => {
        const problem = await refusal(
          handWritten(withValidApp(meta('L', `${path}\u0000`), { path: 'app.js', body: 'x' })),
        );
        assert.equal(problem.code, 'unsafe_path');
      });

      test(`then a GNU long link name (K) with ${what} is refused`, async () => {
        const problem = await refusal(
          handWritten(withValidApp(meta('K', `${path}\u0000`), { path: 'app.js', body: 'x' })),
        );
        assert.match(problem.code, /^unsafe_(path|link)$/);
      });
    }

    test('then a global pax header setting anything but a comment is refused, even a harmless-looking path', async () => {
      for (const records of [{ path: 'index.html' }, { size: '1' }, { uid: '0' }] as Record<
        string,
        string
      >[]) {
        const problem = await refusal(handWritten([meta('g', pax(records)), manifestEntry, indexEntry]));
        assert.equal(problem.code, 'unsafe_entry', JSON.stringify(records));
        assert.match(problem.message, /global pax header/);
      }
    });

    test('then a pax record node-tar would skip (a line break in its value) is refused', async () => {
      // node-tar splits on line breaks and drops the record; GNU tar reads the whole value.
      const record = Buffer.from('29 path=ok.html\n../../evil.h\n');
      assert.equal(record.length, 29);
      const problem = await refusal(
        handWritten(withValidApp(meta('x', record), { path: 'app.js', body: 'x' })),
      );
      assert.match(problem.code, /^unsafe_(path|entry)$/);
    });

    test('then a pax header with a length that does not match its record is refused', async () => {
      const problem = await refusal(
        handWritten(withValidApp(meta('x', '99 path=app.js\n'), { path: 'app.js', body: 'x' })),
      );
      assert.equal(problem.code, 'unsafe_entry');
    });

    test('then pax records that reshape an entry (sparse files, header charset, link targets) are refused', async () => {
      for (const records of [
        { 'GNU.sparse.name': '../../evil' },
        { hdrcharset: 'BINARY' },
        { linkpath: 'index.html' },
      ] as Record<string, string>[]) {
        const problem = await refusal(handWritten(withValidApp({ path: 'app.js', body: 'x', pax: records })));
        assert.match(problem.code, /^unsafe_(entry|link)$/, JSON.stringify(records));
      }
    });

    test('then a package made by git archive (a global pax header with only the commit id) passes', async () => {
      const repo = validApp();
      const git = (...args: string[]) =>
        execFileSync('git', ['-C', repo, ...args], {
          env: {
            ...process.env,
            GIT_AUTHOR_NAME: 't',
            GIT_AUTHOR_EMAIL: 't@example.com',
            GIT_COMMITTER_NAME: 't',
            GIT_COMMITTER_EMAIL: 't@example.com',
          },
        });
      git('init', '-q');
      git('add', '.');
      git('commit', '-q', '-m', 'app');
      const path = scratch('package.tar.gz');
      git('archive', '--format=tar.gz', '-o', path, 'HEAD');
      const checked = await check(path);
      assert.equal(checked.manifest.id, manifest.id);
    });

    test('then GNU and POSIX long names of safe paths pass', async () => {
      const long = `${'folder-with-a-long-name/'.repeat(5)}app.js`;
      for (const format of ['gnu', 'posix']) {
        const app = appFolder({ 'manifest.json': manifestJson, 'index.html': indexHtml, [long]: 'x' });
        const checked = await check(systemTar(`--format=${format}`, '-C', app, '.'));
        assert.equal(checked.manifest.id, manifest.id, format);
      }
    });
  });

  describe('when the package holds something other than files and folders', () => {
    test('then a symbolic link leading out is refused as unsafe_link', async () => {
      const app = validApp();
      symlinkSync('/etc/passwd', join(app, 'passwd'));
      const problem = await refusal(systemTar('-C', app, '.'));
      assert.equal(problem.code, 'unsafe_link');
      assert.match(problem.message, /"\.\/passwd" is a symbolic link \(to "\/etc\/passwd"\)/);
    });

    test('then a symbolic link staying inside is refused as well', async () => {
      const app = validApp();
      symlinkSync('index.html', join(app, 'home.html'));
      assert.equal((await refusal(systemTar('-C', app, '.'))).code, 'unsafe_link');
    });

    test('then a hard link is refused as unsafe_link', async () => {
      const app = validApp();
      linkSync(join(app, 'index.html'), join(app, 'copy.html'));
      const problem = await refusal(systemTar('-C', app, '.'));
      assert.equal(problem.code, 'unsafe_link');
      assert.match(problem.message, /hard link/);
    });

    test('then a FIFO is refused as unsupported_entry', async () => {
      const app = validApp();
      execFileSync('mkfifo', [join(app, 'pipe')]);
      const problem = await refusal(systemTar('-C', app, '.'));
      assert.equal(problem.code, 'unsupported_entry');
      assert.match(problem.message, /named pipe/);
    });

    test('then devices and unknown entry types are refused as unsupported_entry', async () => {
      const hostile: TarEntry[] = [
        { path: 'tty', type: '3' },
        { path: 'disk', type: '4' },
        { path: 'sparse.bin', type: 'S', body: 'x' },
        { path: 'odd', type: 'Z', body: 'x' },
      ];
      for (const entry of hostile) {
        assert.equal(
          (await refusal(handWritten(withValidApp(entry)))).code,
          'unsupported_entry',
          String(entry.path),
        );
      }
    });
  });

  describe('when the package is too big once unpacked', () => {
    test('then 2001 entries are refused as too_many_entries', async () => {
      const files = Array.from({ length: 1999 }, (_, n) => ({ path: `files/${n}.txt`, body: '' }));
      const problem = await refusal(handWritten(withValidApp(...files)));
      assert.equal(problem.code, 'too_many_entries');
    });

    test('then a small package unpacking to more than 10 times its size is refused', async () => {
      const path = handWritten(withValidApp({ path: 'padding.txt', body: 'a'.repeat(mebibyte) }));
      assert.ok(statSync(path).size < 10 * 1024);
      const problem = await refusal(path);
      assert.equal(problem.code, 'too_large_unpacked');
      assert.match(problem.message, /more than 10 times its own size/);
    });

    /** Checks a package, counting what it read and inflated before it stopped. */
    async function meteredRefusal(path: string, limits?: Partial<PackageLimits>) {
      const metered = { read: 0, inflated: 0 };
      const probe = {
        onRead: (bytes: number) => {
          metered.read += bytes;
        },
        onInflate: (bytes: number) => {
          metered.inflated += bytes;
        },
      };
      const problem = await checkPackage(path, statSync(path).size, limits, probe).then(
        () => assert.fail('the package was accepted'),
        (error: unknown) => error,
      );
      assert.ok(problem instanceof DomainError, String(problem));
      return { problem, ...metered };
    }

    test('then a gzip bomb with one entry of 300 MiB of zeros is refused from its header', async () => {
      const path = scratch('bomb-one-entry.tar.gz');
      const size = 300 * mebibyte;
      const bytes = await writeGzipped(path, [
        tarEntry({ path: 'manifest.json', body: manifestJson }),
        tarHeader({ path: Buffer.from('zeros.bin'), type: '0', size }),
        ...zeros(size),
        endOfArchive,
      ]);
      const { problem, read, inflated } = await meteredRefusal(path);
      assert.equal(problem.code, 'too_large_unpacked');
      assert.ok(read < bytes / 2, `read ${read} of ${bytes} bytes`);
      assert.ok(inflated < mebibyte, `inflated ${inflated} bytes`);
    });

    test('then 256 entries of 1 MiB of zeros stop being read once past 200 MiB', async () => {
      const path = scratch('bomb-many-entries.tar.gz');
      function* entries() {
        for (let n = 0; n < 256; n += 1) {
          yield tarHeader({ path: Buffer.from(`zeros-${n}.bin`), type: '0', size: mebibyte });
          yield* zeros(mebibyte);
        }
      }
      const bytes = await writeGzipped(path, [
        tarEntry({ path: 'manifest.json', body: manifestJson }),
        ...entries(),
        endOfArchive,
      ]);
      // Without the ratio limit, which would stop it far sooner, only the 200 MiB limit is left.
      const { problem, read, inflated } = await meteredRefusal(path, { maxRatio: Number.POSITIVE_INFINITY });
      assert.equal(problem.code, 'too_large_unpacked');
      assert.match(problem.message, /more than 200 MiB/);
      assert.ok(read < bytes, `read ${read} of ${bytes} bytes`);
      assert.ok(inflated < 201 * mebibyte, `inflated ${inflated} bytes`);
      // With the ratio limit, a package this small stops after a few MiB.
      const ratio = await meteredRefusal(path);
      assert.equal(ratio.problem.code, 'too_large_unpacked');
      assert.ok(ratio.inflated < 20 * mebibyte, `inflated ${ratio.inflated} bytes`);
    });

    test('then 300 MiB of zeros after the end of the archive are not read through', async () => {
      const path = scratch('bomb-after-end.tar.gz');
      const bytes = await writeGzipped(path, [tarArchive(withValidApp()), ...zeros(300 * mebibyte)]);
      const { problem, read, inflated } = await meteredRefusal(path);
      assert.equal(problem.code, 'too_large_unpacked');
      assert.ok(read < bytes / 2, `read ${read} of ${bytes} bytes`);
      assert.ok(inflated < 30 * mebibyte, `inflated ${inflated} bytes`);
    });
  });

  test('when the stored size disagrees with the file then the check fails as a server error', async () => {
    const path = systemTar('-C', validApp(), '.');
    await assert.rejects(checkPackage(path, statSync(path).size + 1), (error: unknown) => {
      assert.ok(!(error instanceof DomainError));
      return true;
    });
  });
});
