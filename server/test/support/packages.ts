/** Mini-app packages for tests: a folder with manifest.json, packed by the system tar. */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPackage {
  /** What the manifest says, for the upload URL (a stand-in when the manifest is not an app's). */
  appId: string;
  version: string;
  path: string;
  bytes: Buffer;
  size: number;
  sha256: string;
}

export function manifestFor(id: string, version: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    name: 'Hello Car',
    version,
    entry: 'index.html',
    network: ['https://api.hello-car.example.com'],
    ...extra,
  };
}

export function makePackage(
  manifest: unknown,
  files: Record<string, string> = { 'index.html': '<h1>hello</h1>' },
): TestPackage {
  const dir = mkdtempSync(join(tmpdir(), 'svc-package-'));
  const root = join(dir, 'app');
  mkdirSync(root);
  writeFileSync(
    join(root, 'manifest.json'),
    typeof manifest === 'string' ? manifest : JSON.stringify(manifest),
  );
  for (const [name, content] of Object.entries(files)) writeFileSync(join(root, name), content);
  const path = join(dir, 'package.tar.gz');
  execFileSync('tar', ['-czf', path, '-C', root, 'manifest.json', ...Object.keys(files)]);
  const bytes = readFileSync(path);
  const said = typeof manifest === 'object' && manifest !== null ? (manifest as Record<string, unknown>) : {};
  return {
    appId: typeof said.id === 'string' ? said.id : 'com.example.unnamed',
    version: typeof said.version === 'string' ? said.version : '0.0.1',
    path,
    bytes,
    size: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}
