/**
 * Lists the test files that open a store: those whose imports reach server/test/support/store.ts
 * (startTestService, openTestStore); with `--others`, every other test file; with
 * `--reading-database-url`, the store suites but those that run on the machine's Postgres whatever
 * DATABASE_URL says (`postgresServerUrl`); with `--store-dependent`, of those the ones whose tests
 * change with the store, which CI runs again on Postgres (on Node 20).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from './repo-root.ts';

const storeSupport = join(repoRoot, 'server/test/support/store.ts');
const workspaces = ['scripts', 'client', 'ssh', 'manifest', 'server', 'cli', 'console', 'simulator'];

/** The repository's own TypeScript files a file imports (relative specifiers only). */
function localImports(file: string): string[] {
  const source = readFileSync(file, 'utf8');
  const specifiers = [...source.matchAll(/\bfrom\s+'(\.{1,2}\/[^']+\.ts)'/g)].map(
    ([, specifier]) => specifier ?? '',
  );
  return specifiers.map((specifier) => resolve(dirname(file), specifier)).filter((path) => existsSync(path));
}

function reachesStore(file: string, seen = new Set<string>()): boolean {
  if (file === storeSupport) return true;
  if (seen.has(file)) return false;
  seen.add(file);
  return localImports(file).some((imported) => reachesStore(imported, seen));
}

/** Every test file of the workspaces, relative to the repository. */
function testFiles(): string[] {
  return workspaces
    .flatMap((workspace) => {
      const dir = join(repoRoot, workspace, 'test');
      if (!existsSync(dir)) return [];
      return readdirSync(dir, { recursive: true, encoding: 'utf8' })
        .filter((name) => name.endsWith('.test.ts') && !name.includes('fixtures'))
        .map((name) => join(dir, name));
    })
    .sort();
}

export function storeSuites(): string[] {
  return testFiles()
    .filter((file) => reachesStore(file))
    .map((file) => relative(repoRoot, file));
}

/** Store suites that take the machine's Postgres whether or not DATABASE_URL is set. */
function alwaysOnPostgres(file: string): boolean {
  return /\bpostgresServerUrl\b/.test(readFileSync(join(repoRoot, file), 'utf8'));
}

export function suitesReadingDatabaseUrl(): string[] {
  return storeSuites().filter((file) => !alwaysOnPostgres(file));
}

/**
 * Store suites whose tests change with the store: they read DATABASE_URL or the store's kind (an
 * outage made on the server, replicas on one database, Postgres's locks and timeouts).
 */
export function storeDependentSuites(): string[] {
  const dependsOnStore = /process\.env\.DATABASE_URL|\.kind === '(postgres|pglite)'|\.databaseUrl\b/;
  return suitesReadingDatabaseUrl().filter((file) =>
    dependsOnStore.test(readFileSync(join(repoRoot, file), 'utf8')),
  );
}

export function otherSuites(): string[] {
  return testFiles()
    .filter((file) => !reachesStore(file))
    .map((file) => relative(repoRoot, file));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const suites = process.argv.includes('--others')
    ? otherSuites()
    : process.argv.includes('--reading-database-url')
      ? suitesReadingDatabaseUrl()
      : process.argv.includes('--store-dependent')
        ? storeDependentSuites()
        : storeSuites();
  process.stdout.write(`${suites.join('\n')}\n`);
}
