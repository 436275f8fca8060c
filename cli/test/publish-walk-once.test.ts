import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, test, vi } from 'vitest';
import { preparePackage } from '../src/publish/publish-steps.ts';

// The file system as the CLI's modules see it, with its reads counted.
vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return { ...real, readFileSync: vi.fn(real.readFileSync), readdirSync: vi.fn(real.readdirSync) };
});

const made: string[] = [];
afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

test('when a folder is published then it is listed and its .svcignore read once', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-walk-once-'));
  made.push(dir);
  await mkdir(join(dir, 'app'));
  await writeFile(join(dir, 'app/index.html'), '<h1>hi</h1>\n');
  await writeFile(join(dir, 'notes.txt'), 'left out\n');
  await writeFile(join(dir, '.svcignore'), 'notes.txt\n');
  await writeFile(
    join(dir, 'manifest.json'),
    JSON.stringify({
      id: 'com.example.walk',
      name: 'Walk',
      version: '1.0.0',
      entry: 'app/index.html',
      network: [],
    }),
  );
  vi.mocked(fs.readFileSync).mockClear();
  vi.mocked(fs.readdirSync).mockClear();

  const { summary, packed } = await preparePackage(dir);
  await packed.remove();

  assert.deepEqual(
    summary.files.map((file) => file.path),
    ['.svcignore', 'app/index.html', 'manifest.json'],
  );
  const reads = (spy: typeof fs.readFileSync | typeof fs.readdirSync, path: string) =>
    vi.mocked(spy).mock.calls.filter(([read]) => String(read) === path).length;
  assert.equal(reads(fs.readFileSync, join(dir, '.svcignore')), 1, '.svcignore read once');
  assert.equal(reads(fs.readdirSync, dir), 1, 'the folder listed once');
  assert.equal(reads(fs.readdirSync, join(dir, 'app')), 1, 'app/ listed once');
});
