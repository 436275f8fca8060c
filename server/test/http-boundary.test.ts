/** Guards issue 11's rule: only `server/src/http/` knows how an error is answered over HTTP. */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { afterAll, describe, test } from 'vitest';
import { repoRoot } from '../../scripts/repo-root.ts';

/** The HTTP layer's own error type; services throw the domain errors of `server/src/errors.ts`. */
const httpOnlyName = /\bProblemError\b/;

interface Found {
  filesRead: number;
  /** `path:line`, relative to the searched folder, with `/` on every platform. */
  hits: string[];
}

/** Every TypeScript module below `src` that names ProblemError, leaving out `src/http/`. */
function findOutsideHttp(src: string): Found {
  const found: Found = { filesRead: 0, hits: [] };
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const shown = relative(src, path).split(sep).join('/');
      if (entry.isDirectory()) {
        if (shown !== 'http') walk(path);
        continue;
      }
      if (!entry.isFile() || !/\.[cm]?tsx?$/.test(entry.name)) continue;
      found.filesRead += 1;
      readFileSync(path, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          if (httpOnlyName.test(line)) found.hits.push(`${shown}:${index + 1}`);
        });
    }
  };
  walk(src);
  return found;
}

describe('the HTTP boundary of the server', () => {
  test('when server/src is searched then no module outside http/ names ProblemError', () => {
    const { filesRead, hits } = findOutsideHttp(join(repoRoot, 'server', 'src'));
    assert.ok(filesRead > 10, `read only ${filesRead} files`);
    assert.deepEqual(
      hits,
      [],
      'throw a domain error from server/src/errors.ts instead; server/src/http/ maps it to problem+json',
    );
  });
});

describe('the ProblemError search', () => {
  const roots: string[] = [];
  /** A scratch `src` holding `files`, by path. */
  const plant = (files: Record<string, string>): string => {
    const root = mkdtempSync(join(tmpdir(), 'http-boundary-'));
    roots.push(root);
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    }
    return root;
  };
  const httpLayer = {
    'http/problem.ts': 'export class ProblemError extends Error {}\n',
    'http/handlers/keys.ts': "import { ProblemError } from '../problem.ts';\n",
    'uploads/upload-service.ts': "import { ConflictError } from '../errors.ts';\n",
  };

  afterAll(() => {
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });

  test('when modules outside http/ import ProblemError then each is reported with its line', () => {
    const root = plant({
      ...httpLayer,
      'accounts/account-service.ts': "// signs up\nimport { ProblemError } from '../http/problem.ts';\n",
      'services.ts': "import type { ProblemError } from './http/problem.ts';\n",
    });
    assert.deepEqual(findOutsideHttp(root).hits.sort(), ['accounts/account-service.ts:2', 'services.ts:1']);
  });

  test('when only http/ names ProblemError then nothing is reported', () => {
    assert.deepEqual(findOutsideHttp(plant(httpLayer)), { filesRead: 1, hits: [] });
  });
});
