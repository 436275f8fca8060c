/**
 * The OpenAPI half of `npm run lint:spec`: `redocly lint` with redocly.yaml, where a warning
 * fails as surely as an error (Redocly itself exits 0 on warnings).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from './repo-root.ts';

interface RedoclyProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { source: { ref: string }; pointer?: string }[];
}

interface RedoclyReport {
  totals: { errors: number; warnings: number };
  problems: RedoclyProblem[];
}

export function lintOpenApi(root: string, entry = 'openapi/openapi.yaml'): RedoclyReport {
  const run = spawnSync(
    process.execPath,
    [
      join(repoRoot, 'node_modules/@redocly/cli/bin/cli.js'),
      'lint',
      entry,
      '--config',
      join(root, 'redocly.yaml'),
      '--format',
      'json',
    ],
    { cwd: root, encoding: 'utf8' },
  );
  const start = run.stdout.indexOf('{');
  if (start < 0) throw new Error(`redocly lint printed no report:\n${run.stderr}`);
  return JSON.parse(run.stdout.slice(start)) as RedoclyReport;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const report = lintOpenApi(repoRoot);
  for (const problem of report.problems) {
    const where = problem.location[0];
    process.stderr.write(
      `${problem.severity} ${problem.ruleId}: ${problem.message}\n  at ${where?.source.ref ?? '?'}${where?.pointer ?? ''}\n`,
    );
  }
  const { errors, warnings } = report.totals;
  if (errors + warnings > 0) {
    process.stderr.write(`openapi/: ${errors} errors, ${warnings} warnings (both must be zero)\n`);
    process.exit(1);
  }
  process.stdout.write('openapi/: redocly lint clean (0 errors, 0 warnings)\n');
}
