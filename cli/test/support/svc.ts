/** Runs `svc`: the built binary as a user would, with a HOME and environment of the test's choosing. */
import { execFile } from 'node:child_process';
import { join } from 'node:path';

export const svcBinary = join(import.meta.dirname, '../../dist/svc.js');

export interface SvcRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment a test user has: their HOME, no credential store, nothing from the developer's shell. */
export function userEnv(home: string, extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, NO_COLOR: '1', ...extra };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete env[name];
  return env;
}

export function svc(args: string[], env: NodeJS.ProcessEnv): Promise<SvcRun> {
  return new Promise((resolve) => {
    execFile(process.execPath, [svcBinary, ...args], { env, timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
