/**
 * Runs `svc` inside the test process: the command line and environment `svc()` would give the
 * binary, without starting node and loading the bundle for each case. stdin is no terminal, and
 * the OS credential store is left alone: tokens stay in the file under the environment's HOME.
 */
import { tmpdir } from 'node:os';
import { PassThrough } from 'node:stream';
import { text } from 'node:stream/consumers';
import { runCli } from '../../src/cli.ts';
import type { SvcRun } from './svc.ts';

export async function runSvc(args: string[], env: NodeJS.ProcessEnv): Promise<SvcRun> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const written = Promise.all([text(stdout), text(stderr)]);
  const code = await runCli(args, {
    env,
    stdin: new PassThrough(),
    stdout,
    stderr,
    colorDepth: 1,
    home: env.HOME ?? tmpdir(),
    keyring: false,
  });
  stdout.end();
  stderr.end();
  const [out, err] = await written;
  return { code, stdout: out, stderr: err };
}
