/**
 * The OpenAPI half of `npm run lint:spec`: `redocly lint` with redocly.yaml, Spectral's
 * `spectral:oas` (.spectral.yaml) on the bundled contract as generated/openapi.json holds it, and
 * the contract's examples (scripts/spec-examples.ts). A warning fails as surely as an error
 * (Redocly and Spectral themselves exit 0 on warnings).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jsonBanner, jsonBannerKey } from './codegen/banner.ts';
import { bundleOpenApi, type OpenApiDocument } from './codegen/openapi-bundle.ts';
import { repoRoot } from './repo-root.ts';
import { type ExampleProblem, openApiExampleProblems } from './spec-examples.ts';

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

/** One finding of Spectral; severity 0 is an error, 1 a warning, 2 information, 3 a hint. */
export interface SpectralProblem {
  code: string;
  message: string;
  path: (string | number)[];
  severity: 0 | 1 | 2 | 3;
}

/**
 * Spectral with `root`'s .spectral.yaml on `doc`, written out as `npm run generate` writes
 * generated/openapi.json: what integrators download is what is linted.
 */
export function spectralOpenApi(root: string, doc: OpenApiDocument): SpectralProblem[] {
  const dir = mkdtempSync(join(tmpdir(), 'svc-spectral-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, `${JSON.stringify({ [jsonBannerKey]: jsonBanner('openapi/'), ...doc }, null, 2)}\n`);
    const run = spawnSync(
      process.execPath,
      [
        join(repoRoot, 'node_modules/@stoplight/spectral-cli/dist/index.js'),
        'lint',
        file,
        '--ruleset',
        join(root, '.spectral.yaml'),
        '--format',
        'json',
        '--quiet',
      ],
      { cwd: root, encoding: 'utf8' },
    );
    const start = run.stdout.indexOf('[');
    if (start < 0) throw new Error(`spectral lint printed no report:\n${run.stdout}${run.stderr}`);
    return JSON.parse(run.stdout.slice(start)) as SpectralProblem[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface OpenApiLint {
  redocly: RedoclyReport;
  spectral: SpectralProblem[];
  examples: ExampleProblem[];
}

/** Every check of `npm run lint:spec` on the OpenAPI contract of `root`. */
export function lintOpenApiContract(root: string): OpenApiLint {
  const doc = bundleOpenApi(root);
  return {
    redocly: lintOpenApi(root),
    spectral: spectralOpenApi(root, doc),
    examples: openApiExampleProblems(doc),
  };
}

/** What fails the lint: Redocly's errors and warnings, Spectral's too, every example problem. */
export function failures(lint: OpenApiLint): string[] {
  const pointer = (path: (string | number)[]) =>
    `#/${path.map((key) => String(key).replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`;
  return [
    ...lint.redocly.problems.map((problem) => {
      const where = problem.location[0];
      return `redocly ${problem.severity} ${problem.ruleId}: ${problem.message}\n  at ${where?.source.ref ?? '?'}${where?.pointer ?? ''}`;
    }),
    ...lint.spectral
      .filter((problem) => problem.severity <= 1)
      .map(
        (problem) =>
          `spectral ${problem.severity === 0 ? 'error' : 'warning'} ${problem.code}: ${problem.message}\n  at ${pointer(problem.path)}`,
      ),
    ...lint.examples.map((problem) => `example: ${problem.message}\n  at #${problem.pointer}`),
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Another root (a copy of the repository's contract) is for the tests.
  const lint = lintOpenApiContract(process.argv[2] ? resolve(process.argv[2]) : repoRoot);
  const failing = failures(lint);
  for (const line of failing) process.stderr.write(`${line}\n`);
  if (failing.length > 0) {
    process.stderr.write(
      `openapi/: ${failing.length} problem(s) (Redocly, Spectral and examples must all be clean)\n`,
    );
    process.exit(1);
  }
  process.stdout.write(
    'openapi/: redocly lint clean, spectral:oas clean (0 errors, 0 warnings), every example present and valid\n',
  );
}
