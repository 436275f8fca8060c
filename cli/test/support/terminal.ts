/** Runs `svc` on a real pseudo-terminal (util-linux `script`), as a person at a terminal would. */
import { spawn } from 'node:child_process';
import { svcBinary } from './svc.ts';

/** Types `typed` when `prompt` (by default the passphrase question) shows on the screen. */
export function onTerminal(
  args: string[],
  env: NodeJS.ProcessEnv,
  typed: string,
  prompt = 'Passphrase for',
): Promise<{ code: number | null; screen: string }> {
  const command = [process.execPath, svcBinary, ...args]
    .map((word) => `'${word.replaceAll("'", "'\\''")}'`)
    .join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let screen = '';
  child.stdout.on('data', (chunk: Buffer) => {
    screen += chunk.toString();
    if (screen.includes(prompt) && typed) {
      child.stdin.write(typed.endsWith('\u0003') ? typed : `${typed}\r`);
      typed = '';
    }
  });
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, screen })));
}
