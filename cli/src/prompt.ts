/** Questions on the terminal: a hidden passphrase, a yes-or-no confirmation. Ctrl-C cancels either. */
import type { Readable, Writable } from 'node:stream';
import { Cancelled } from './errors.ts';

interface TtyInput extends Readable {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

export function canPrompt(stdin: Readable): boolean {
  return (stdin as TtyInput).isTTY === true && typeof (stdin as TtyInput).setRawMode === 'function';
}

/** Reads one line without echoing it. */
export function promptHidden(question: string, stdin: Readable, stderr: Writable): Promise<string> {
  return readLine(question, stdin, stderr, false);
}

/** Asks a yes-or-no question; only `y` or `yes` is a yes. */
export async function confirm(question: string, stdin: Readable, stderr: Writable): Promise<boolean> {
  const answer = await readLine(`${question} [y/N] `, stdin, stderr, true);
  return /^(y|yes)$/i.test(answer.trim());
}

/** One line typed on the terminal, read in raw mode so that Ctrl-C is ours to answer (`Cancelled`). */
function readLine(question: string, stdin: Readable, stderr: Writable, echo: boolean): Promise<string> {
  const input = stdin as TtyInput;
  // Raw mode before the question shows, so that nothing typed right after it is echoed by the terminal.
  input.setRawMode?.(true);
  input.resume();
  stderr.write(question);
  return new Promise((resolve, reject) => {
    let answer = '';
    const finish = (error?: Error) => {
      input.setRawMode?.(false);
      input.pause();
      input.off('data', onData);
      stderr.write('\n');
      if (error) reject(error);
      else resolve(answer);
    };
    const onData = (chunk: Buffer) => {
      for (const char of chunk.toString('utf8')) {
        if (char === '\r' || char === '\n') return finish();
        if (char === '\u0003') return finish(new Cancelled());
        if (char === '\u007f' || char === '\b') {
          if (echo && answer.length > 0) stderr.write('\b \b');
          answer = answer.slice(0, -1);
        } else {
          answer += char;
          if (echo) stderr.write(char);
        }
      }
    };
    input.on('data', onData);
  });
}
