/**
 * The outbox publisher (DESIGN §9): commands are written to SQL first and published from there, so
 * that neither a car that is offline nor a broker that restarts loses one.
 *
 * - A command is published while it is due (`due_at`): from when it is made, and again from when
 *   its car says `online` (cars connect with a clean session, so what was published while a car
 *   was away is gone from the broker; a car subscribes to its `cmd` before it says so, the contract
 *   says) and from when the bridge (re)connects (a broker that restarted kept nothing, for any car).
 *   The broker's PUBACK moves it `queued → sent` (command-lifecycle.ts) and ends its being due,
 *   unless it was asked for again meanwhile. A car runs a command at most once per `command_id`
 *   and answers a copy with its last acknowledgement, which also brings back one lost on the way.
 * - Any replica may publish: each claims the rows it publishes (command-repository.ts,
 *   `FOR UPDATE SKIP LOCKED`, and a claim that lapses after `claimMs` should the replica die), so
 *   two replicas never send one command at once.
 * - It works when woken: by a command made in this process, by a `NOTIFY` of another replica's
 *   (Postgres), by a car coming back, by the broker connection coming up, and by the sweep
 *   (`sweep`, on the service's scheduler), which expires what is not final by `expires_at` and
 *   publishes whatever a wake-up missed.
 *
 * Everything goes through one loop per process with a bound on publications in flight (Mosquitto
 * refuses a client that exceeds its receive maximum).
 */
import { randomUUID } from 'node:crypto';
import { redactDeviceId, validateDeviceId } from '@svc/sdk';
import type { Clock } from '../clock.ts';
import type { Logger } from '../logger.ts';
import type { Db } from '../store/db.ts';
import { hasNotifications, type Listening, listen } from '../store/notifications.ts';
import { type CommandLifecycle, commandsChannel } from './command-lifecycle.ts';
import { checkCommandPayload, commandPayload, commandTopic, isCommandName } from './command-payload.ts';
import { type CommandRow, claimDueCommands, markDue, releaseClaims } from './command-repository.ts';

/** Where commands go: the bridge's connection to the broker. */
export interface CommandPublisher {
  /** Whether a publication now can reach the broker. */
  readonly connected: boolean;
  /** Resolves once the broker took the message (QoS 1: its PUBACK); rejects if it did not. */
  publish(topic: string, payload: string): Promise<void>;
}

export interface CommandOutboxOptions {
  /** How long a publication may wait for the broker's PUBACK before the loop gives up for now. */
  publishTimeoutMs?: number;
  /** Publications in flight at most. */
  maxInFlight?: number;
}

/** Rows claimed at a time. */
const batchSize = 100;

export function createCommandOutbox(deps: {
  db: Db;
  clock: Clock;
  logger: Logger;
  lifecycle: CommandLifecycle;
  /** Told when a car says `online`, after its unfinished commands are due again (app updates). */
  carOnline?: (deviceId: string) => void;
  options?: CommandOutboxOptions;
}) {
  const { db, clock, logger, lifecycle } = deps;
  const publishTimeoutMs = deps.options?.publishTimeoutMs ?? 10_000;
  const maxInFlight = deps.options?.maxInFlight ?? 10;
  /** A claim outlives every publication's wait, and lapses soon after a replica that died. */
  const claimMs = publishTimeoutMs * 3;
  /** This process's name on its claims. */
  const claimant = randomUUID();

  let publisher: CommandPublisher | undefined;
  let stopped = false;
  let listening: Listening | undefined;
  let stopListeningHere: (() => void) | undefined;
  /** The loop, while it runs; a wake-up meanwhile makes it go round once more. */
  let running: Promise<void> | undefined;
  let again = false;
  /** Cars that came back, whose commands are due again. */
  const returningCars = new Set<string>();
  /** Every car's commands are due again (the bridge connected). */
  let resendEveryCar = false;
  let stopping: () => void = () => {};
  const stoppedSignal = new Promise<'stopped'>((resolve) => {
    stopping = () => resolve('stopped');
  });

  /** Publishes one claimed command; true once the broker took it. A late PUBACK still counts. */
  async function publishOne(row: CommandRow, claimedAt: Date): Promise<boolean> {
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
      await lifecycle.failUnsent(row, 'The service could not send this command.');
      return true;
    }
    const acknowledged = target
      .publish(commandTopic(row.device_id), JSON.stringify(checked.command))
      .then(async () => {
        await lifecycle.published(row, { claimant, claimedAt });
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

  /** Publishes claimed `rows`, `maxInFlight` at a time; false when any was not taken (stop for now). */
  async function publishAll(rows: CommandRow[], claimedAt: Date): Promise<boolean> {
    let next = 0;
    let allTaken = true;
    const lane = async () => {
      while (allTaken && next < rows.length) {
        const row = rows[next++] as CommandRow;
        if (!(await publishOne(row, claimedAt))) allTaken = false;
      }
    };
    await Promise.all(Array.from({ length: Math.min(maxInFlight, rows.length) }, lane));
    return allTaken;
  }

  /** Claims and publishes what is due, oldest first; false when cut short (its claims let go). */
  async function publishDue(): Promise<boolean> {
    for (;;) {
      const claimedAt = clock();
      const rows = await claimDueCommands(db, {
        claimant,
        now: claimedAt,
        until: new Date(claimedAt.getTime() + claimMs),
        limit: batchSize,
      });
      if (rows.length === 0) return true;
      if (!(await publishAll(rows, claimedAt))) {
        // What was not taken is due at once for whichever publisher can reach the broker.
        await releaseClaims(db, claimant);
        return false;
      }
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
        try {
          await markDue(db, clock());
        } catch (error) {
          resendEveryCar = true;
          throw error;
        }
      }
      if (returningCars.size > 0) {
        const cars = [...returningCars];
        returningCars.clear();
        try {
          await markDue(db, clock(), cars);
        } catch (error) {
          for (const car of cars) returningCars.add(car);
          throw error;
        }
      }
      if (!(await publishDue())) return;
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

  return {
    /** The bridge's connection; commands wait in SQL until there is one. */
    attach(connection: CommandPublisher): void {
      publisher = connection;
    },

    /** Something may be due: publish it now. */
    wake,

    /** The car said `online`: what it has not finished goes out again. Never waits for the store. */
    carOnline(deviceId: string): void {
      returningCars.add(deviceId);
      wake();
      deps.carOnline?.(deviceId);
    },

    /** The bridge (re)connected: the broker may have lost what was in flight, to any car. */
    brokerConnected(): void {
      resendEveryCar = true;
      wake();
    },

    /** Expires overdue commands and publishes what is due; the service's scheduler runs it. */
    async sweep(): Promise<void> {
      await lifecycle.expireOverdue();
      wake();
    },

    /** Wakes on commands made here and, on Postgres, on those other replicas made. */
    start(): void {
      stopListeningHere = lifecycle.onCommandMade(wake);
      if (hasNotifications(db)) {
        listening = listen(
          db,
          commandsChannel,
          (sender) => {
            if (sender !== lifecycle.instance) wake();
          },
          logger,
        );
      }
    },

    /**
     * Stops publishing; a publication in flight is not waited for (the command stays as it was),
     * and this process's claims are let go, so that another replica may publish them at once.
     */
    async stop(): Promise<void> {
      stopped = true;
      stopping();
      stopListeningHere?.();
      await Promise.all([running, listening?.close()]);
      await releaseClaims(db, claimant).catch(() => {});
    },
  };
}

export type CommandOutbox = ReturnType<typeof createCommandOutbox>;
