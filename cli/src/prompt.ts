/** A hidden prompt on the terminal, for a key's passphrase. */
import type { Readable, Writable } from 'node:stream';

interface TtyInput extends Readable {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

export function canPrompt(stdin: Readable): boolean {
  return (stdin as TtyInput).isTTY === true && typeof (stdin as TtyInput).setRawMode === 'function';
}

/** Reads one line without echoing it; Ctrl-C aborts. */
export function promptHidden(question: string, stdin: Readable, stderr: Writable): Promise<string> {
  const input = stdin as TtyInput;
  // Echo off before the question shows, so that nothing typed right after it is echoed.
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
        if (char === '\u0003') return finish(new Error('cancelled'));
        if (char === '\u007f' || char === '\b') answer = answer.slice(0, -1);
        else answer += char;
      }
    };
    input.on('data', onData);
  });
}
