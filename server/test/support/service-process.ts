/**
 * The service as `npm start` runs it: `server/src/main.ts` in a process of its own, embedded
 * storage (even when the suite runs against Postgres), a free port. Used by the server's start-up
 * tests and by the CLI's end-to-end tests.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const mainModule = join(import.meta.dirname, '../../src/main.ts');

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  /** What it printed on start. */
  banner: string;
  /** Stops it with SIGTERM, waits for it, and removes its data unless the caller gave the folder. */
  stop(): Promise<void>;
}

export function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

export async function startServiceProcess(
  options: { dataDir?: string; env?: Record<string, string> } = {},
): Promise<ServiceProcess> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'svc-service-'));
  // Under vitest, a new embedded database starts as a copy of the run's migrated one: PGlite's
  // first start (initdb) and every migration would otherwise run again in each process.
  const template = process.env.SVC_TEST_PGLITE_TEMPLATE;
  const db = join(dataDir, 'db');
  if (template && !options.env?.DATA_DIR && !existsSync(db)) cpSync(template, db, { recursive: true });
  const { DATABASE_URL: _embedded, ...inherited } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', mainModule], {
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
    child.once('exit', (code) =>
      reject(new Error(`the service exited with ${code} before starting:\n${banner}`)),
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
