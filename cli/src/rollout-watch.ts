/**
 * `svc rollout status --watch`: the rollout read again every few seconds until it has ended and
 * nothing is left on its way to the cars, or until Ctrl-C. A terminal sees one table redrawn in
 * place; a pipe or a log gets a new table whenever something changed, so that it reads as a history.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SvcContext } from './context.ts';
import { Cancelled, ExitCode } from './errors.ts';
import { formatRollout, isSettled, type Rollout, readRollout } from './rollouts.ts';
import type { Session } from './session.ts';

/** Between two reads: often enough to see a rollout move, and one small request a car never sees. */
export const watchIntervalMs = 2000;

interface WatchOptions {
  json: boolean;
  intervalMs?: number;
}

/** Exit 0 once the rollout completed, 1 once it was rolled back, 130 on Ctrl-C. */
export async function watchRollout(
  session: Session,
  appId: string,
  context: SvcContext,
  { json, intervalMs = watchIntervalMs }: WatchOptions,
): Promise<number> {
  const { stdout, stderr } = context;
  const redraw = !json && (stdout as { isTTY?: boolean }).isTTY === true;
  const interrupt = new AbortController();
  const interrupted = () => interrupt.abort();
  process.once('SIGINT', interrupted);
  let shownLines = 0;
  let shown = '';
  try {
    for (;;) {
      const rollout = await readRollout(session, appId);
      const settled = isSettled(rollout);
      const document = JSON.stringify(rollout);
      if (redraw) {
        const frame = `${formatRollout(rollout)}${footer(settled, intervalMs)}`;
        // Up to where the last frame began, and clear from there down.
        stdout.write(`${shownLines > 0 ? `\u001b[${shownLines}A\u001b[0J` : ''}${frame}`);
        shownLines = frame.split('\n').length - 1;
      } else if (document !== shown) {
        stdout.write(json ? `${document}\n` : `${shown ? '\n' : ''}${formatRollout(rollout)}`);
      }
      shown = document;
      if (settled) return ended(rollout, stderr);
      if (interrupt.signal.aborted) throw new Cancelled();
      await sleep(intervalMs, undefined, { signal: interrupt.signal }).catch(() => {
        throw new Cancelled();
      });
    }
  } finally {
    process.off('SIGINT', interrupted);
  }
}

function footer(settled: boolean, intervalMs: number): string {
  if (settled) return '';
  const time = new Date().toLocaleTimeString();
  return `\nRead at ${time}; again every ${intervalMs / 1000} s until the rollout has ended. Ctrl-C stops watching.\n`;
}

function ended(rollout: Rollout, stderr: SvcContext['stderr']): number {
  const name = `${rollout.app_id} ${rollout.version}`;
  if (rollout.state === 'completed') {
    stderr.write(`The rollout of ${name} completed: it is published for every eligible car.\n`);
    return ExitCode.success;
  }
  const back = rollout.previous_version ? ` to ${rollout.previous_version}` : '';
  stderr.write(`The rollout of ${name} was rolled back: the cars that got it were moved back${back}.\n`);
  return ExitCode.failure;
}
