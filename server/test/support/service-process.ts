/**
 * The service as `npm start` runs it: `server/src/main.ts` in a process of its own, embedded
 * storage (even when the suite runs against Postgres), a free port. Used by the server's start-up
 * tests and by the CLI's end-to-end tests. Under vitest the process runs the production build the
 * run's global setup made of that same source (scripts/test/build-cli.global.ts), which starts in
 * half the time: tsx compiled the whole service again in every process a test started.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const sourceDir = join(import.meta.dirname, '../../src');

/** Where a test run's global setup says the service's build of this run is. */
export const serverBundleVariable = 'SVC_TEST_SERVER_BUNDLE';

/**
 * Node's arguments that run the service with `args`: this run's build when the global setup made
 * one, else the source through tsx (a benchmark started outside vitest).
 */
export function serviceArgs(...args: string[]): string[] {
  return programArgs('main', ...args);
}

/**
 * Node's arguments that run one of the service's programs (`main`, or an operator's command such
 * as `rotate-key-encryption-key`) with `args`: its build beside the service's, which
 * `npm run rotate-key-encryption-key` runs too, else its source through tsx, which compiles the
 * whole service again in every process.
 */
export function programArgs(program: string, ...args: string[]): string[] {
  const bundle = process.env[serverBundleVariable];
  return bundle
    ? [join(dirname(bundle), `${program}.js`), ...args]
    : ['--import', 'tsx', join(sourceDir, `${program}.ts`), ...args];
}

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  /** What it printed on start. */
  banner: string;
  /** Stops it with SIGTERM, waits for it, and removes its data unless the caller gave the folder. */
  stop(): Promise<void>;
}

/**
 * Under vitest, a data folder's new embedded database starts as a copy of the run's migrated one:
 * PGlite's first start (initdb) and every migration would otherwise run again in each process.
 * Nothing is done to a folder that has a database, or is no folder.
 */
export function seedDataDir(dataDir: string): void {
  const template = process.env.SVC_TEST_PGLITE_TEMPLATE;
  const db = join(dataDir, 'db');
  if (template && statSync(dataDir, { throwIfNoEntry: false })?.isDirectory() && !existsSync(db)) {
    cpSync(template, db, { recursive: true });
  }
}

export function exitOf(child: ChildProcess): Promise<number | null> {
  // One a signal ended has no exit code, and its 'exit' has passed.
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

export async function startServiceProcess(
  options: { dataDir?: string; env?: Record<string, string> } = {},
): Promise<ServiceProcess> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'svc-service-'));
  if (!options.env?.DATA_DIR) seedDataDir(dataDir);
  const { DATABASE_URL: _embedded, ...inherited } = process.env;
  const child = spawn(process.execPath, serviceArgs(), {
    env: { ...inherited, PORT: '0', METRICS_PORT: '0', MQTT_PORT: '0', DATA_DIR: dataDir, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let banner = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      banner += chunk.toString();
      const match = /API\s+(http:\/\/\S+)\/api\/v1/.exec(banner);
      if (match?.[1] && banner.includes('Stop with')) resolve(match[1]);
    });
    // What it wrote to stderr is read only here: a started service's stays for the test to read.
    child.once('exit', (code, signal) =>
      setImmediate(() =>
        reject(
          new Error(
            `the service exited with ${code ?? signal} before starting:\n${banner}${child.stderr?.read() ?? ''}`,
          ),
        ),
      ),
    );
  });
  return {
    child,
    url,
    banner,
    async stop() {
      const exited = exitOf(child);
      child.kill('SIGTERM');
      await exited;
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The service run to its end with `env` (and `args`), on free ports: for starts that must refuse.
 * Embedded storage unless `env` names a DATABASE_URL, or `inheritDatabaseUrl` keeps the suite's.
 */
export async function runServiceToExit(
  env: Record<string, string>,
  args: string[] = [],
  options: { inheritDatabaseUrl?: boolean } = {},
): Promise<{ code: number | null; stderr: string }> {
  const { DATABASE_URL: databaseUrl, ...inherited } = process.env;
  const suiteStore = options.inheritDatabaseUrl && databaseUrl ? { DATABASE_URL: databaseUrl } : {};
  if (env.DATA_DIR) seedDataDir(env.DATA_DIR);
  const child = spawn(process.execPath, serviceArgs(...args), {
    env: { ...inherited, ...suiteStore, PORT: '0', METRICS_PORT: '0', MQTT_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return { code: await exitOf(child), stderr };
}
