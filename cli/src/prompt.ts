/**
 * Questions on the terminal: a hidden passphrase, a yes-or-no confirmation. Read by npm's `read`
 * (node's readline underneath: line editing, and a character typed in several bytes arrives
 * whole). Ctrl-C, or Ctrl-D on an empty line, cancels either.
 */
import type { Readable, Writable } from 'node:stream';
import { read } from 'read';
import { Cancelled } from './errors.ts';

interface TtyInput extends Readable {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

export function canPrompt(stdin: Readable): boolean {
  return (stdin as TtyInput).isTTY === true && typeof (stdin as TtyInput).setRawMode === 'function';
}

/** Reads one line without echoing it. */
export async function promptHidden(question: string, stdin: Readable, stderr: Writable): Promise<string> {
  const answer = await readLine({ prompt: question, silent: true }, stdin, stderr);
  // The Enter that ended the line was hidden with the rest: what follows starts a line of its own.
  stderr.write('\n');
  return answer;
}

/** Asks a yes-or-no question; only `y` or `yes` is a yes. */
export async function confirm(question: string, stdin: Readable, stderr: Writable): Promise<boolean> {
  const answer = await readLine({ prompt: `${question} [y/N]` }, stdin, stderr);
  return /^(y|yes)$/i.test(answer.trim());
}

async function readLine(
  question: { prompt: string; silent?: boolean },
  stdin: Readable,
  stderr: Writable,
): Promise<string> {
  // readline pauses stdin when it closes: after the line, or on Ctrl-D with nothing typed, which
  // `read` never answers. A pause that no answer follows within the turn is that Ctrl-D.
  let cancel: (error: Error) => void = () => {};
  const closed = new Promise<never>((_, reject) => {
    cancel = reject;
  });
  const onPause = () => setImmediate(() => cancel(new Cancelled()));
  const answered = read({ ...question, input: stdin, output: stderr, terminal: true });
  stdin.once('pause', onPause);
  try {
    return await Promise.race([answered, closed]);
  } catch (error) {
    // `read` answers Ctrl-C with this error; svc ends quietly with 130, as a shell would.
    const cancelled = error instanceof Cancelled || (error instanceof Error && error.message === 'canceled');
    if (!cancelled) throw error;
    stderr.write('\n');
    throw new Cancelled();
  } finally {
    stdin.off('pause', onPause);
  }
}
