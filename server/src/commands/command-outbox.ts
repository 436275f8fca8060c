/**
 * The outbox publisher (DESIGN §9): commands are written to SQL first and published from there, so
 * that neither a car that is offline nor a broker that restarts loses one.
 *
 * - A command written is published at once (`wake`); the broker's PUBACK moves it `queued → sent`.
 *   While the broker cannot be reached it stays `queued`, and is published when the bridge
 *   connects again.
 * - Cars connect with a clean session, so a command published while a car was away is gone from
 *   the broker. When a car says `online` (it subscribes to its `cmd` first, the contract says),
 *   its commands that are not final are published again; after the bridge (re)connects, every
 *   car's are, since a broker that restarted kept nothing. A car runs a command at most once per
 *   `command_id` and answers a copy with its last acknowledgement, which also brings back one
 *   lost on the way.
 * - A slow sweep expires what is not final by its `expires_at`, and publishes anything queued a
 *   wake-up missed (a replica that wrote it and died).
 *
 * Everything goes through one loop per process with a bound on publications in flight (Mosquitto
 * refuses a client that exceeds its receive maximum). Replicas may publish the same command
 * twice; every state move is a conditional UPDATE, so they never corrupt one.
 */
import { redactDeviceId, validateDeviceId } from '@svc/sdk';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import type { CommandMetrics } from './command-metrics.ts';
import { checkCommandPayload, commandPayload, commandTopic, isCommandName } from './command-payload.ts';
import {
  type CommandPosition,
  type CommandRow,
  expireCommands,
  failCommand,
  markSent,
  pendingCommands,
  queuedCommands,
} from './command-repository.ts';

/** Where commands go: the bridge's connection to the broker. */
export interface CommandPublisher {
  /** Whether a publication now can reach the broker. */
  readonly connected: boolean;
  /** Resolves once the broker took the message (QoS 1: its PUBACK); rejects if it did not. */
  publish(topic: string, payload: string): Promise<void>;
}

export interface CommandOutboxOptions {
  /** How often expiry is swept and the queue looked at without a wake-up, in ms. */
  sweepMs: number;
  /** How long a publication may wait for the broker's PUBACK before the loop gives up for now. */
  publishTimeoutMs?: number;
  /** Publications in flight at most. */
  maxInFlight?: number;
}

/** Rows read at a time. */
const batchSize = 100;

export function createCommandOutbox(deps: {
  db: Db;
  clock: Clock;
  logger: Logger;
  metrics: CommandMetrics;
  options: CommandOutboxOptions;
}) {
  const { db, clock, logger, metrics, options } = deps;
  const publishTimeoutMs = options.publishTimeoutMs ?? 10_000;
  const maxInFlight = options.maxInFlight ?? 10;

  let publisher: CommandPublisher | undefined;
  let stopped = false;
  let sweeper: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> = Promise.resolve();
  /** The loop, while it runs; a wake-up meanwhile makes it go round once more. */
  let running: Promise<void> | undefined;
  let again = false;
  /** Cars that came back, whose commands go out again. */
  const returningCars = new Set<string>();
  /** Every car's commands go out again (the bridge connected). */
  let resendEveryCar = false;
  let stopping: () => void = () => {};
  const stoppedSignal = new Promise<'stopped'>((resolve) => {
    stopping = () => resolve('stopped');
  });

  /** Publishes one command; true once the broker took it. A late PUBACK still counts. */
  async function publishOne(row: CommandRow): Promise<boolean> {
    const target = publisher;
    if (!target?.connected || stopped) return false;
    // Checked when made; a row that fails now was changed behind the service's back, and is
    // never sent: it fails, so that it does not wait at the head of the queue for ever.
    const checked = isCommandName(row.name)
      ? checkCommandPayload(row.name, commandPayload(row, validateDeviceId(row.device_id).brand))
      : { ok: false as const, errors: [{ path: '/name', message: 'not a command of the contract' }] };
    if (!checked.ok) {
      logger.error('commands: a stored command does not fit the contract; it fails unsent', {
        device: redactDeviceId(row.device_id),
        command_id: row.command_id,
        errors: checked.errors,
      });
      const failed = await failCommand(
        db,
        row.command_id,
        'The service could not send this command.',
        clock(),
      );
      if (failed) metrics.moved(failed, 'failed');
      return true;
    }
    const acknowledged = target
      .publish(commandTopic(row.device_id), JSON.stringify(checked.command))
      .then(async () => {
        if (row.state === 'queued' && (await markSent(db, row.command_id, clock()))) {
          metrics.moved(row.name, 'sent');
        }
        return true;
      });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), publishTimeoutMs);
    });
    try {
      const outcome = await Promise.race([acknowledged, timedOut, stoppedSignal]);
      return outcome === true;
    } catch (error) {
      logger.warn('commands: a command was not published; it is tried again', {
        device: redactDeviceId(row.device_id),
        command_id: row.command_id,
        error: error instanceof Error ? error.message : String(error),
      });
      return false;
    } finally {
      clearTimeout(timer);
      // A PUBACK or failure after the race ended is nobody's to wait for.
      acknowledged.catch(() => {});
    }
  }

  /** Publishes `rows`, `maxInFlight` at a time; false when any was not taken (stop for now). */
  async function publishAll(rows: CommandRow[]): Promise<boolean> {
    let next = 0;
    let allTaken = true;
    const lane = async () => {
      while (allTaken && next < rows.length) {
        const row = rows[next++] as CommandRow;
        if (!(await publishOne(row))) allTaken = false;
      }
    };
    await Promise.all(Array.from({ length: Math.min(maxInFlight, rows.length) }, lane));
    return allTaken;
  }

  /** Sends again the pending commands of the cars named, or of every car; false when cut short. */
  async function resend(deviceIds: readonly string[] | undefined): Promise<boolean> {
    let after: CommandPosition | undefined;
    for (;;) {
      const rows = await pendingCommands(db, { now: clock(), limit: batchSize, deviceIds, after });
      if (rows.length === 0) return true;
      if (!(await publishAll(rows))) return false;
      if (rows.length < batchSize) return true;
      const last = rows.at(-1) as CommandRow;
      after = { createdAt: last.created_at, commandId: last.command_id };
    }
  }

  /** Publishes what is queued, oldest first; false when cut short. */
  async function publishQueued(): Promise<boolean> {
    for (;;) {
      const rows = await queuedCommands(db, clock(), batchSize);
      if (rows.length === 0) return true;
      if (!(await publishAll(rows))) return false;
      if (rows.length < batchSize) return true;
    }
  }

  async function work(): Promise<void> {
    do {
      again = false;
      if (stopped || !publisher?.connected) return;
      if (resendEveryCar) {
        resendEveryCar = false;
        returningCars.clear();
        if (!(await resend(undefined))) {
          resendEveryCar = true;
          return;
        }
      }
      while (returningCars.size > 0) {
        const cars = [...returningCars].slice(0, batchSize);
        for (const car of cars) returningCars.delete(car);
        if (!(await resend(cars))) {
          for (const car of cars) returningCars.add(car);
          return;
        }
      }
      if (!(await publishQueued())) return;
    } while (again && !stopped);
  }

  function wake(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = work()
      .catch((error: unknown) => {
        // The store failing: what is left waits for the next wake-up or sweep.
        logger.warn('commands: the outbox could not publish; it tries again at the next sweep', {
          error: error instanceof Error ? error.message : String(error),
        });
      })
      .finally(() => {
        running = undefined;
        if (again && !stopped) wake();
      });
  }

  async function sweep(): Promise<void> {
    const expired = await expireCommands(db, clock());
    for (const name of expired) metrics.moved(name, 'expired');
    wake();
  }

  return {
    /** The bridge's connection; commands wait in SQL until there is one. */
    attach(connection: CommandPublisher): void {
      publisher = connection;
    },

    /** A command was written: publish it now. */
    wake,

    /** The car said `online`: what it has not finished goes out again. */
    carOnline(deviceId: string): void {
      returningCars.add(deviceId);
      wake();
    },

    /** The bridge (re)connected: the broker may have lost what was in flight, to any car. */
    brokerConnected(): void {
      resendEveryCar = true;
      wake();
    },

    /** Expires overdue commands and publishes what waits; also runs every `sweepMs`. */
    sweep,

    start(): void {
      sweeper = setInterval(() => {
        sweeping = sweep().catch((error: unknown) =>
          logger.warn('commands: the expiry sweep failed; it runs again', {
            error: error instanceof Error ? error.message : String(error),
          }),
        );
      }, options.sweepMs).unref();
    },

    /** Stops publishing; a publication in flight is not waited for (the command stays as it was). */
    async stop(): Promise<void> {
      stopped = true;
      stopping();
      clearInterval(sweeper);
      await Promise.all([running, sweeping]);
    },
  };
}

export type CommandOutbox = ReturnType<typeof createCommandOutbox>;
