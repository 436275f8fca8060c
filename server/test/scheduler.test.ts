/** The scheduler the service's sweeps run on: periods, no overlap, failures logged, a clean stop. */
import assert from 'node:assert/strict';
import knex from 'knex';
import { afterEach, beforeEach, describe, test, vi } from 'vitest';
import { createScheduler } from '../src/scheduler.ts';

/** A run that lasts until the test ends it. */
function heldRun() {
  let end = () => {};
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  return { ended, end };
}

function recordingLogger() {
  const errors: { message: string; fields?: Record<string, unknown> }[] = [];
  const warnings: { message: string; fields?: Record<string, unknown> }[] = [];
  const debug: { message: string; fields?: Record<string, unknown> }[] = [];
  return {
    errors,
    warnings,
    debug,
    logger: {
      debug: (message: string, fields?: Record<string, unknown>) => debug.push({ message, fields }),
      error: (message: string, fields?: Record<string, unknown>) => errors.push({ message, fields }),
      warn: (message: string, fields?: Record<string, unknown>) => warnings.push({ message, fields }),
    },
  };
}

describe('scheduler', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  test('when a task is declared then it first runs one period after start, and every period after', async () => {
    const scheduler = createScheduler(recordingLogger());
    let runs = 0;
    scheduler.scheduleTask({ id: 'count', periodMs: 1000, fn: async () => void runs++ });
    await vi.advanceTimersByTimeAsync(5000);
    assert.equal(runs, 0, 'nothing runs before start');
    scheduler.start();
    await vi.advanceTimersByTimeAsync(999);
    assert.equal(runs, 0);
    await vi.advanceTimersByTimeAsync(1);
    assert.equal(runs, 1);
    await vi.advanceTimersByTimeAsync(2000);
    assert.equal(runs, 3);
    await scheduler.stop();
  });

  test('when a task runs at start then its first run begins as the scheduler starts, or as it is declared on a started one', async () => {
    const scheduler = createScheduler(recordingLogger());
    const runs: string[] = [];
    scheduler.scheduleTask({
      id: 'early',
      periodMs: 1000,
      runAtStart: true,
      fn: async () => void runs.push('early'),
    });
    assert.equal(runs.length, 0);
    scheduler.start();
    assert.deepEqual(runs, ['early']);
    scheduler.scheduleTask({
      id: 'late',
      periodMs: 1000,
      runAtStart: true,
      fn: async () => void runs.push('late'),
    });
    assert.deepEqual(runs, ['early', 'late']);
    await vi.advanceTimersByTimeAsync(1000);
    assert.deepEqual(runs.sort(), ['early', 'early', 'late', 'late']);
    await scheduler.stop();
  });

  test('when a run outlasts its period then the runs that come due meanwhile are skipped, not queued', async () => {
    const scheduler = createScheduler(recordingLogger());
    let started = 0;
    let running = 0;
    let mostAtOnce = 0;
    const first = heldRun();
    scheduler.scheduleTask({
      id: 'slow',
      periodMs: 1000,
      fn: async () => {
        started++;
        running++;
        mostAtOnce = Math.max(mostAtOnce, running);
        if (started === 1) await first.ended;
        running--;
      },
    });
    scheduler.start();
    await vi.advanceTimersByTimeAsync(1000);
    assert.equal(started, 1);
    // Three periods come due while the first run lasts.
    await vi.advanceTimersByTimeAsync(3000);
    assert.equal(started, 1);
    first.end();
    await vi.advanceTimersByTimeAsync(0);
    assert.equal(started, 1, 'the skipped runs do not run on the first one ending');
    await vi.advanceTimersByTimeAsync(1000);
    assert.equal(started, 2, 'the next period runs again');
    assert.equal(mostAtOnce, 1);
    await scheduler.stop();
  });

  test('when a run fails then it is logged with its task id, and the next run still comes', async () => {
    const { errors, logger } = recordingLogger();
    const scheduler = createScheduler({ logger });
    let runs = 0;
    scheduler.scheduleTask({
      id: 'flaky',
      periodMs: 1000,
      fn: async () => {
        runs++;
        if (runs === 1) throw new Error('store away');
      },
    });
    scheduler.start();
    await vi.advanceTimersByTimeAsync(1000);
    assert.deepEqual(
      errors.map(({ message, fields }) => ({
        message,
        task: fields?.task,
        error: (fields?.error as Error | undefined)?.message,
      })),
      [{ message: 'scheduled task failed', task: 'flaky', error: 'store away' }],
    );
    await vi.advanceTimersByTimeAsync(1000);
    assert.equal(runs, 2);
    assert.equal(errors.length, 1);
    await scheduler.stop();
  });

  test('when a run fails because the store takes no connection then it is said at debug, naming why, not as an error', async () => {
    const { errors, warnings, debug, logger } = recordingLogger();
    const scheduler = createScheduler({ logger });
    scheduler.scheduleTask({
      id: 'command-sweep',
      periodMs: 1000,
      fn: async () => {
        throw new knex.KnexTimeoutError('Knex: Timeout acquiring a connection. The pool is probably full.');
      },
    });
    scheduler.start();
    await vi.advanceTimersByTimeAsync(1000);
    assert.deepEqual(errors, []);
    assert.deepEqual(warnings, []);
    assert.deepEqual(debug, [
      {
        message: 'scheduled task failed: the store is unavailable',
        fields: { task: 'command-sweep', reason: 'timed out waiting for a connection' },
      },
    ]);
    await scheduler.stop();
  });

  test('when stopped during a run then stop waits for it, and no run starts after', async () => {
    const scheduler = createScheduler(recordingLogger());
    let started = 0;
    let finished = 0;
    const held = heldRun();
    scheduler.scheduleTask({
      id: 'held',
      periodMs: 1000,
      fn: async () => {
        started++;
        await held.ended;
        finished++;
      },
    });
    scheduler.start();
    await vi.advanceTimersByTimeAsync(1000);
    assert.equal(started, 1);
    let stopped = false;
    const stopping = scheduler.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(5000);
    assert.equal(stopped, false, 'stop waits for the run in progress');
    held.end();
    await stopping;
    assert.equal(finished, 1);
    // Neither its period nor a task declared now nor another start runs anything.
    scheduler.scheduleTask({ id: 'after', periodMs: 1000, runAtStart: true, fn: async () => void started++ });
    scheduler.start();
    await vi.advanceTimersByTimeAsync(5000);
    assert.equal(started, 1);
  });

  test('when an id is declared twice then the second is refused', () => {
    const scheduler = createScheduler(recordingLogger());
    scheduler.scheduleTask({ id: 'once', periodMs: 1000, fn: async () => {} });
    assert.throws(
      () => scheduler.scheduleTask({ id: 'once', periodMs: 1000, fn: async () => {} }),
      /declared already/,
    );
  });
});
