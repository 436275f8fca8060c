/** Bundles the split contract in openapi/ into one document with Redocly, as lint sees it. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../repo-root.ts';

export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, unknown> } & Record<string, unknown>;
  [key: string]: unknown;
}

export function bundleOpenApi(root: string): OpenApiDocument {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bundle-'));
  try {
    const out = join(dir, 'openapi.json');
    execFileSync(
      process.execPath,
      [
        join(repoRoot, 'node_modules/@redocly/cli/bin/cli.js'),
        'bundle',
        'openapi/openapi.yaml',
        '--config',
        'redocly.yaml',
        '--output',
        out,
      ],
      { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    return JSON.parse(readFileSync(out, 'utf8')) as OpenApiDocument;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
