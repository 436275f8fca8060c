/**
 * `BENCH_BUSY_CORES=<n>`: n processes that spin for a whole configuration, so that a run "with a
 * core taken by other work" is one anybody can repeat rather than whatever the machine was doing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';

/** Started at the start of a configuration; `stop` ends them (their own pids, nothing else). */
export interface BusyCores {
  count: number;
  stop(): Promise<void>;
}

/** `BENCH_BUSY_CORES` from the environment: 0 (none) unless set. */
export function busyCoresSetting(): number {
  const raw = process.env.BENCH_BUSY_CORES?.trim() || '0';
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`BENCH_BUSY_CORES must be a whole number of cores (0 or more), not "${raw}"`);
  }
  return value;
}

/**
 * `count` processes each running a loop that never yields: a node with no event loop to serve,
 * at the same priority as the service, as another program's work would be.
 */
export async function keepCoresBusy(count: number): Promise<BusyCores> {
  const spinners: ChildProcess[] = [];
  for (let index = 0; index < count; index++) {
    const spinner = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
    spinner.on('error', () => {});
    spinners.push(spinner);
  }
  await Promise.all(spinners.map((spinner) => once(spinner, 'spawn')));
  return {
    count,
    async stop() {
      await Promise.all(
        spinners.map(async (spinner) => {
          if (spinner.exitCode !== null || spinner.signalCode !== null) return;
          const exited = once(spinner, 'exit');
          spinner.kill('SIGKILL');
          await exited;
        }),
      );
    },
  };
}
