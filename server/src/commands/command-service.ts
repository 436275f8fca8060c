/**
 * Commands for cars, for their owners and admins (car-visibility.ts): made after every check (the
 * name, the arguments against the contract, for `app.install` a published version that lists the
 * car's brand), written to the outbox, and followed by their `command_id`. The outbox
 * (command-outbox.ts) publishes them; the cars' acknowledgements, read by the bridge, move them on
 * (`acknowledge`).
 */
import { randomUUID } from 'node:crypto';
import type { Brand } from '@svc/sdk';
import type { CarCommandAck } from '../../../generated/mqtt.ts';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import { findCar } from '../cars/car-repository.ts';
import { visibleCar } from '../cars/car-visibility.ts';
import type { Clock } from '../clock.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { InputError, InvalidError, NotFoundError } from '../errors.ts';
import { requireInstallableVersion } from '../mini-apps/published-apps.ts';
import type { Db } from '../store/db.ts';
import type { CommandMetrics } from './command-metrics.ts';
import {
  type CommandName,
  checkCommandPayload,
  commandNames,
  commandPayload,
  isCommandName,
} from './command-payload.ts';
import {
  type AckResult,
  acknowledgeCommand,
  type CommandPosition,
  type CommandRow,
  findCommand,
  insertCommand,
  listCommands,
} from './command-repository.ts';
import { pairingCommand } from './command-states.ts';

export type Command = components['schemas']['Command'];
export type CommandList = components['schemas']['CommandList'];
export type CommandRequest = components['schemas']['CommandRequest'];

/** How long a command may wait for its car when the caller says nothing (the contract's default). */
export const defaultTtlSeconds = 300;

/** The names a caller may send: every command of the contract but the one only the service sends. */
const callerCommands = commandNames.filter((name) => name !== pairingCommand);

/** `brand` is the brand of the car the row is a command of. */
export function toApiCommand(row: CommandRow, brand: Brand): Command {
  return {
    command_id: row.command_id,
    device_id: row.device_id,
    brand,
    name: row.name,
    // A pairing code is for the people in the car, not for whoever reads the car's commands later.
    args: row.name === pairingCommand ? {} : row.args,
    state: row.state,
    detail: row.detail,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
  };
}

/** A page cursor: the last command of the page before, as base64url JSON. */
function encodeCursor(row: CommandRow): string {
  return Buffer.from(JSON.stringify([row.created_at.toISOString(), row.command_id])).toString('base64url');
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function decodeCursor(cursor: string): CommandPosition {
  try {
    const [at, commandId] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    // Exactly what encodeCursor writes: a forged time or id never reaches the store.
    const createdAt = new Date(String(at));
    if (
      typeof at === 'string' &&
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(at) &&
      !Number.isNaN(createdAt.getTime()) &&
      createdAt.toISOString() === at &&
      typeof commandId === 'string' &&
      uuidPattern.test(commandId)
    ) {
      return { createdAt, commandId };
    }
  } catch {}
  throw new InputError(
    'invalid_cursor',
    'The cursor is not one this service gave: start from the first page.',
    {
      errors: [{ path: '/query/cursor', message: 'must be the next_cursor of a page' }],
    },
  );
}

/**
 * A new command row, checked against the contract as the car will get it: the arguments of
 * `name`, or 422 `invalid_command_args` saying which field is wrong.
 */
export function newCommand(input: {
  car: ParsedDeviceId;
  name: CommandName;
  args: Record<string, unknown>;
  createdBy: string | null;
  now: Date;
  expiresAt: Date;
}): CommandRow {
  const row: CommandRow = {
    command_id: randomUUID(),
    device_id: input.car.deviceId,
    name: input.name,
    args: input.args,
    state: 'queued',
    detail: null,
    created_by: input.createdBy,
    created_at: input.now,
    updated_at: input.now,
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
}

/**
 * A car's words as the store can keep them: no store holds a NUL, and an unpaired surrogate is no
 * text; each becomes U+FFFD rather than costing the car its acknowledgement.
 */
function storable(text: string): string {
  return text
    .replaceAll('\u0000', '\uFFFD')
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** What the bridge makes of an acknowledgement: for its metrics and its log. */
export type AckHandled = 'stored' | 'ignored' | 'unknown_command' | 'command_of_another_car' | 'unknown_car';

export function createCommandService(deps: {
  db: Db;
  clock: Clock;
  metrics: CommandMetrics;
  /** Told of each command written, so that it is published at once. */
  outbox: { wake(): void };
}) {
  const { db, clock, metrics, outbox } = deps;

  /**
   * `app.install` installs only what reached the cars' store (a version in review state
   * `published`), and only on a car of a brand that version's manifest lists.
   */
  async function checkInstallable(args: Record<string, unknown>, brand: string): Promise<void> {
    await requireInstallableVersion(db, String(args.app_id), String(args.version), brand);
  }

  /**
   * Since when the caller may see the car's commands: an owner, those made since they paired it
   * (an earlier owner's are theirs alone); an admin, all.
   */
  async function commandsVisibleSince(principal: Principal, deviceId: string): Promise<Date | undefined> {
    const car = visibleCar(principal, deviceId, await findCar(db, deviceId));
    return principal.isAdmin ? undefined : (car.paired_at ?? undefined);
  }

  async function visibleCommand(principal: Principal, deviceId: string, commandId: string) {
    const since = await commandsVisibleSince(principal, deviceId);
    const row = await findCommand(db, commandId);
    // Another car's command is no command of this one.
    if (!row || row.device_id !== deviceId || (since && row.created_at < since)) {
      throw new NotFoundError('command_not_found', `The car ${deviceId} has no command ${commandId}.`);
    }
    return row;
  }

  return {
    async create(principal: Principal, parsed: ParsedDeviceId, request: CommandRequest): Promise<Command> {
      const { deviceId, brand } = parsed;
      const car = visibleCar(principal, deviceId, await findCar(db, deviceId));
      const { name } = request;
      if (!isCommandName(name) || name === pairingCommand) {
        throw new InvalidError(
          'unknown_command',
          `There is no command "${name}"; the commands are ${callerCommands.join(', ')}.`,
          { title: 'Unknown command' },
        );
      }
      const now = clock();
      const ttlSeconds = request.ttl_seconds ?? defaultTtlSeconds;
      const row = newCommand({
        car: parsed,
        name,
        args: request.args ?? {},
        createdBy: principal.accountId,
        now,
        expiresAt: new Date(now.getTime() + ttlSeconds * 1000),
      });
      if (name === 'app.install') await checkInstallable(row.args, car.brand);
      const inserted = await insertCommand(db, row);
      metrics.moved(inserted.name, 'queued');
      outbox.wake();
      return toApiCommand(inserted, brand);
    },

    async get(
      principal: Principal,
      { deviceId, brand }: ParsedDeviceId,
      commandId: string,
    ): Promise<Command> {
      return toApiCommand(await visibleCommand(principal, deviceId, commandId), brand);
    },

    async list(
      principal: Principal,
      { deviceId, brand }: ParsedDeviceId,
      query: { limit?: number; cursor?: string },
    ): Promise<CommandList> {
      const after = query.cursor ? decodeCursor(query.cursor) : undefined;
      const since = await commandsVisibleSince(principal, deviceId);
      const limit = query.limit ?? 50;
      const rows = await listCommands(db, deviceId, limit, { after, since });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        commands: page.map((row) => toApiCommand(row, brand)),
        next_cursor: rows.length > limit && last ? encodeCursor(last) : null,
      };
    },

    /**
     * What the car said of one of its commands (a valid `cmd/ack` of this car), seen at `seenAt`
     * (a live message; undefined for a retained one); written on `writer`, the bridge's own
     * connection, when it has one.
     */
    async acknowledge(
      deviceId: string,
      ack: CarCommandAck,
      seenAt: Date | undefined,
      writer: Db = db,
    ): Promise<AckHandled> {
      const result: AckResult = await acknowledgeCommand(writer, {
        commandId: ack.command_id,
        deviceId,
        outcome: ack.outcome,
        // A reason belongs to `rejected` and `failed` (the contract); any other leaves it as it was.
        detail:
          ack.detail !== undefined && (ack.outcome === 'rejected' || ack.outcome === 'failed')
            ? storable(ack.detail)
            : null,
        at: clock(),
        seenAt,
      });
      switch (result.kind) {
        case 'moved':
          metrics.moved(result.name, ack.outcome);
          return 'stored';
        case 'unchanged':
          return 'ignored';
        default:
          return result.kind;
      }
    },
  };
}

export type CommandService = ReturnType<typeof createCommandService>;
