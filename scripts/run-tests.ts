/**
 * `npm test`: every `test/**\/*.test.ts` of the workspaces, on Node's own test runner with tsx.
 * Node 20 cannot expand globs for --test itself, hence this file. Arguments narrow the run to
 * the test files whose path contains one of them: `npm test -- device-id`.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { repoRoot } from './repo-root.ts';

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'fixtures' ? [] : testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

const filters = process.argv.slice(2);
const files = ['scripts', 'client', 'server', 'cli']
  .flatMap((pkg) => {
    try {
      return testFiles(join(repoRoot, pkg, 'test'));
    } catch {
      return [];
    }
  })
  .map((file) => relative(repoRoot, file))
  .filter((file) => filters.length === 0 || filters.some((f) => file.includes(f)))
  .sort();

if (files.length === 0) {
  process.stderr.write('no test files found\n');
  process.exit(1);
}
const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', ...files], {
  cwd: repoRoot,
  stdio: 'inherit',
});
process.exit(run.status ?? 1);
