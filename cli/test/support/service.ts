/** A real svc service for CLI tests: `server/src/main.ts` in its own process, embedded storage, a free port. */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const serverMain = join(import.meta.dirname, '../../../server/src/main.ts');

export interface RunningService {
  url: string;
  stop(): Promise<void>;
}

export async function startService(env: Record<string, string> = {}): Promise<RunningService> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-service-'));
  const { DATABASE_URL: _embedded, ...inherited } = process.env;
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', serverMain], {
    env: { ...inherited, PORT: '0', DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let banner = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      banner += chunk.toString();
      const match = /API\s+(http:\/\/\S+)\/api\/v1/.exec(banner);
      if (match?.[1] && banner.includes('Stop with')) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`the service exited with ${code}:\n${banner}`)));
  });
  return {
    url,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
