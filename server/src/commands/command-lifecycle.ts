/**
 * Every move of a command (DESIGN §9), in one place: made (`queued`, inside the caller's
 * transaction), taken by the broker (`sent`), acknowledged by the car (`accepted`, `completed`,
 * `failed`, `rejected`), expired, withdrawn (a pairing code replaced or spent, a car that changed
 * owner) and failed unsent. Each move is one conditional UPDATE naming the states it may move from
 * (command-states.ts), so replicas racing on one command leave it where the first move put it; the
 * move is counted once, by the replica whose UPDATE changed the row, and only once its transaction
 * commits.
 *
 * Pairing, ownership, the commands API and the outbox ask here; nothing else writes
 * `car_commands` (the outbox's claims excepted, which move no state).
 *
 * A command made wakes the outbox once its transaction commits: this process's at once, and on
 * Postgres every replica's through a `NOTIFY` sent in the same transaction (store/notifications.ts),
 * so whichever replica holds the broker publishes it within milliseconds, not at the next sweep.
 */
import { randomUUID } from 'node:crypto';
import type { Brand } from '@svc/sdk';
import type { CarCommandAck } from '../../../generated/mqtt.ts';
import type { Clock } from '../clock.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { InvalidError } from '../errors.ts';
import { afterCommit } from '../store/after-commit.ts';
import type { Db } from '../store/db.ts';
import { createGroupWrite } from '../store/group-write.ts';
import { hasNotifications, notify } from '../store/notifications.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import type { CommandMetrics } from './command-metrics.ts';
import { type CommandName, checkCommandPayload, commandPayload } from './command-payload.ts';
import {
  type Ack,
  acknowledgeCommands,
  type CommandRow,
  expireCommands,
  failCommand,
  findCommand,
  insertCommands,
  type MovedCommand,
  settlePublished,
  withdrawCommand,
  withdrawCommandsOf,
} from './command-repository.ts';
import { toApiCommand } from './command-resource.ts';

/** The channel on which a replica that made a command tells the others (store/notifications.ts). */
export const commandsChannel = 'svc_commands';

export interface NewCommand {
  car: ParsedDeviceId;
  name: CommandName;
  args: Record<string, unknown>;
  /** The account that asked; null for a command the service makes itself. */
  createdBy: string | null;
  expiresAt: Date;
}

/** What an acknowledgement did, for the bridge's metrics and log. */
export type AckHandled = 'stored' | 'ignored' | 'unknown_command' | 'command_of_another_car';

/** More than the bridge ever has in hand at once (one message per connection): a bound, not a setting. */
const maxAcknowledgements = 500;

const ownerChanged =
  'The car changed owner before the command finished; a car that had already received it may still run it.';

/**
 * A car's words as the store can keep them: no store holds a NUL, and an unpaired surrogate is no
 * text; each becomes U+FFFD rather than costing the car its acknowledgement.
 */
function storable(text: string): string {
  return text
    .replaceAll('\u0000', '\uFFFD')
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

export function createCommandLifecycle(deps: {
  db: Db;
  /**
   * Where the cars' acknowledgements are written: the bridge's own connection (services.ts), since
   * each write paces every car's stream (ADR 0035). Default `db`.
   */
  bridgeWriter?: Db;
  clock: Clock;
  metrics: CommandMetrics;
  /** Where each move becomes a `command.state_changed` event for the car's owner. */
  webhookEvents?: WebhookEvents;
}) {
  const { db, clock, metrics, webhookEvents } = deps;
  const bridgeWriter = deps.bridgeWriter ?? db;
  /** Says which notifications this process sent itself (it has woken its own outbox already). */
  const instance = randomUUID();
  const notifies = hasNotifications(db);
  const wakeListeners = new Set<() => void>();
  const settledListeners = new Set<(deviceId: string, name: string) => void>();

  /**
   * Runs a move inside a transaction when its event is wanted (the move and the event commit
   * together), and as the one statement it was when no endpoint listens (webhook-events.ts).
   */
  function moving<T>(on: Db, move: (trx: Db) => Promise<T>): Promise<T> {
    return webhookEvents?.listens('command.state_changed') ? on.transaction(move) : move(on);
  }

  /**
   * Tells of the moves made inside `trx`: a `command.state_changed` event for each (written in the
   * same transaction, as the command reads right after the move), and the metrics once it commits.
   */
  async function moved(
    trx: Db,
    commands: readonly MovedCommand[],
    state: Parameters<CommandMetrics['moved']>[1],
    at: Date,
  ): Promise<void> {
    if (commands.length === 0) return;
    await webhookEvents?.record(
      trx,
      commands.map((command) => ({
        type: 'command.state_changed',
        audience: { ownerOfCommand: command.command_id },
        at,
        data: async () => {
          const row = (await findCommand(trx, command.command_id)) as CommandRow;
          return toApiCommand(row, row.device_id.slice(0, row.device_id.indexOf(':')) as Brand);
        },
      })),
    );
    afterCommit(trx, () => {
      for (const command of commands) metrics.moved(command.name, state);
    });
  }

  /** The cars' acknowledgements, in groups, and the moves they made told (`moved`). */
  const acknowledgements = createGroupWrite(
    (acks: Ack[]) =>
      moving(bridgeWriter, async (trx) => {
        const results = await acknowledgeCommands(trx, acks);
        for (const [index, result] of results.entries()) {
          if (result.kind !== 'moved') continue;
          const ack = acks[index] as Ack;
          const command = { command_id: result.commandId, device_id: ack.deviceId, name: result.name };
          await moved(trx, [command], ack.outcome, ack.at);
        }
        return results;
      }),
    { maxItems: maxAcknowledgements, key: (ack) => ack.commandId },
  );

  /**
   * Writes commands, `queued`, inside `trx`, each checked as `enqueue` checks one, in one
   * statement and with one notification: an app update moves hundreds of cars at once.
   */
  async function enqueueMany(trx: Db, inputs: readonly NewCommand[]): Promise<CommandRow[]> {
    const now = clock();
    const rows = inputs.map((input): CommandRow => {
      const row: CommandRow = {
        command_id: randomUUID(),
        device_id: input.car.deviceId,
        name: input.name,
        args: input.args,
        state: 'queued',
        detail: null,
        created_by: input.createdBy,
        created_at: now,
        updated_at: now,
        expires_at: input.expiresAt,
        sent_at: null,
      };
      const checked = checkCommandPayload(input.name, commandPayload(row, input.car.brand));
      if (!checked.ok) {
        const said = checked.errors.map((error) => error.message).join('; ');
        throw new InvalidError('invalid_command_args', `${said}.`, {
          title: 'Invalid command arguments',
          errors: checked.errors,
        });
      }
      return row;
    });
    const inserted = await insertCommands(trx, rows);
    if (inserted.length === 0) return inserted;
    if (notifies) await notify(trx, commandsChannel, instance);
    await moved(trx, inserted, 'queued', now);
    afterCommit(trx, () => {
      for (const wake of wakeListeners) wake();
    });
    return inserted;
  }

  return {
    /** Sent with each notification of this process: its own are no news to it. */
    instance,

    /** Calls `wake` whenever this process made a command, once it is committed. */
    onCommandMade(wake: () => void): () => void {
      wakeListeners.add(wake);
      return () => wakeListeners.delete(wake);
    },

    /**
     * Calls `settled` with the car and the command's name whenever a car's acknowledgement moved
     * one of its commands to a final state (the app updater looks at the car again).
     */
    onCommandSettled(settled: (deviceId: string, name: string) => void): () => void {
      settledListeners.add(settled);
      return () => settledListeners.delete(settled);
    },

    /**
     * Writes a command, `queued`, inside the caller's transaction `trx`, checked against the
     * contract as the car will get it: 422 `invalid_command_args` saying which field is wrong.
     */
    async enqueue(trx: Db, input: NewCommand): Promise<CommandRow> {
      const [inserted] = await enqueueMany(trx, [input]);
      return inserted as CommandRow;
    },

    enqueueMany,

    /**
     * Ends a command the service no longer wants delivered (a pairing code replaced or spent):
     * `expired` with `detail` when it was not final; its pairing code is forgotten either way.
     */
    async withdraw(trx: Db, commandId: string, detail: string): Promise<void> {
      const at = clock();
      const command = await withdrawCommand(trx, commandId, detail, at);
      await moved(trx, command ? [command] : [], 'expired', at);
    },

    /**
     * Ends what `owner` asked of the car and is not final yet, when the car stops being theirs
     * (unpair, transfer): a new owner must not find the last one's `doors.unlock` arriving.
     * Commands an admin made go on.
     */
    async withdrawOwnersCommands(trx: Db, deviceId: string, owner: string): Promise<void> {
      const at = clock();
      await moved(trx, await withdrawCommandsOf(trx, deviceId, owner, ownerChanged, at), 'expired', at);
    },

    /**
     * The broker took a publication of `row`, claimed at `claimedAt` by `claimant`: a `queued`
     * command is `sent`, and it is due no more unless asked for again since the claim.
     */
    async published(row: CommandRow, claim: { claimant: string; claimedAt: Date }): Promise<void> {
      const at = clock();
      await moving(db, async (trx) => {
        const command = await settlePublished(trx, {
          commandId: row.command_id,
          claimant: claim.claimant,
          claimedAt: claim.claimedAt,
          at,
        });
        await moved(trx, command ? [command] : [], 'sent', at);
      });
    },

    /** A command the service cannot send after all (it no longer fits the contract): `failed`. */
    async failUnsent(row: CommandRow, detail: string): Promise<void> {
      const at = clock();
      await moving(db, async (trx) => {
        const command = await failCommand(trx, row.command_id, detail, at);
        await moved(trx, command ? [command] : [], 'failed', at);
      });
    },

    /** Every command not final by its `expires_at` is `expired`. */
    async expireOverdue(): Promise<void> {
      const at = clock();
      await moving(db, async (trx) => moved(trx, await expireCommands(trx, at), 'expired', at));
    },

    /**
     * What the car said of one of its commands (a valid `cmd/ack` of this car). Resolves once the
     * write that took it committed: the acknowledgements that arrive while one is on its way go
     * together in the next (store/group-write.ts).
     */
    async acknowledge(deviceId: string, ack: CarCommandAck): Promise<AckHandled> {
      const result = await acknowledgements.add({
        commandId: ack.command_id,
        deviceId,
        outcome: ack.outcome,
        // A reason belongs to `rejected` and `failed` (the contract); any other leaves it as it was.
        detail:
          ack.detail !== undefined && (ack.outcome === 'rejected' || ack.outcome === 'failed')
            ? storable(ack.detail)
            : null,
        at: clock(),
      });
      switch (result.kind) {
        case 'moved':
          if (ack.outcome !== 'accepted')
            for (const settled of settledListeners) settled(deviceId, result.name);
          return 'stored';
        case 'unchanged':
          return 'ignored';
        default:
          return result.kind;
      }
    },
  };
}

export type CommandLifecycle = ReturnType<typeof createCommandLifecycle>;
