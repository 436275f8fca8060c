/**
 * The service's periodic work (sweeps, checks): each task declared once with its period, run from
 * the service's start to its stop, never overlapping itself. backstage's `scheduleTask` habit, in
 * one process: what must happen once across replicas is the task's own business (a row lock).
 */
import type { Logger } from './logger.ts';
import { storeUnavailableReason } from './store/unavailable.ts';

export interface ScheduledTask {
  /** Names the task in the log. */
  id: string;
  /** From one run's start to the next's. */
  periodMs: number;
  fn: () => Promise<unknown>;
  /** A first run as the scheduler starts (or at once, if it has started); otherwise one period in. */
  runAtStart?: boolean;
}

export interface Scheduler {
  /** Before or after `start`; an id is declared once. */
  scheduleTask(task: ScheduledTask): void;
  start(): void;
  /** No run starts after this; resolves once the runs in progress have ended. */
  stop(): Promise<void>;
}

export function createScheduler({ logger }: { logger: Pick<Logger, 'error' | 'warn' | 'debug'> }): Scheduler {
  const declared = new Map<string, ScheduledTask>();
  const timers = new Set<NodeJS.Timeout>();
  const inProgress = new Set<Promise<void>>();
  let state: 'declaring' | 'started' | 'stopped' = 'declaring';

  function begin(task: ScheduledTask): void {
    let running: Promise<void> | undefined;
    const run = async (): Promise<void> => {
      try {
        await task.fn();
      } catch (error) {
        // Logged, and the task keeps its schedule: the next run is the retry. A store that takes no
        // connection is an outage the requests and /readyz report already (at debug here); a query
        // of the task's own that timed out is the task's (warn); anything else is a fault.
        const reason = storeUnavailableReason(error);
        if (!reason) logger.error('scheduled task failed', { task: task.id, error });
        else if (reason === 'query timed out') {
          logger.warn('scheduled task failed: its query timed out', { task: task.id, reason });
        } else logger.debug('scheduled task failed: the store is unavailable', { task: task.id, reason });
      }
    };
    const due = (): void => {
      // A run that comes due while the last still runs is skipped, not queued: the next due one
      // does the same work, and queued runs would pile up behind a slow store.
      if (running) return;
      const current = run();
      running = current;
      inProgress.add(current);
      void current.then(() => {
        inProgress.delete(current);
        running = undefined;
      });
    };
    // Unref'd: a sweep waiting for its turn never keeps the process up.
    timers.add(setInterval(due, task.periodMs).unref());
    if (task.runAtStart) due();
  }

  return {
    scheduleTask(task) {
      if (declared.has(task.id)) throw new Error(`scheduled task ${task.id} is declared already`);
      declared.set(task.id, task);
      if (state === 'started') begin(task);
    },
    start() {
      if (state !== 'declaring') return;
      state = 'started';
      for (const task of declared.values()) begin(task);
    },
    async stop() {
      state = 'stopped';
      for (const timer of timers) clearInterval(timer);
      timers.clear();
      await Promise.all(inProgress);
    },
  };
}
