/**
 * Commands for cars, for their owners and admins: made after every check (the caller may see the
 * car, the name, the arguments against the contract, for `app.install` a published version that
 * lists the car's brand), written to the outbox through the lifecycle (command-lifecycle.ts), and
 * followed by their `command_id`.
 */
import { type Brand, isUuid } from '@svc/sdk';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { InvalidError, NotFoundError } from '../errors.ts';
import { installableVersionFor, requireInstallableVersion } from '../mini-apps/published-apps.ts';
import { decodePageCursor, encodePageCursor } from '../page-cursor.ts';
import type { Db } from '../store/db.ts';
import type { CommandLifecycle } from './command-lifecycle.ts';
import { commandNames, isCommandName } from './command-payload.ts';
import { type CommandPosition, type CommandRow, findCommand, listCommands } from './command-repository.ts';
import { type Command, toApiCommand } from './command-resource.ts';
import { pairingCommand } from './command-states.ts';

export type { Command } from './command-resource.ts';
export type CommandList = components['schemas']['CommandList'];

/**
 * A command as a caller asked for it, not yet checked: the contract's `CommandRequest` is a union
 * discriminated by `name`, and the validator lets through only its envelope (http/validation.ts),
 * so that the name and the arguments are checked here, with the service's own problems.
 */
export interface CommandRequest {
  name: string;
  args?: Record<string, unknown>;
  ttl_seconds?: number;
  brand?: Brand;
}

/** How long a command may wait for its car when the caller says nothing (as `CommandTtlSeconds` says). */
export const defaultTtlSeconds = 300;

/** The most of an unknown name a problem repeats: the name is the caller's, of any length. */
const quotedNameLength = 100;

function quoteName(name: string): string {
  return JSON.stringify(name.length > quotedNameLength ? `${name.slice(0, quotedNameLength)}…` : name);
}

/** The names a caller may send: every command of the contract but the one only the service sends. */
const callerCommands = commandNames.filter((name) => name !== pairingCommand);

/** Where the next page starts: after the last command of this one. */
const cursorOf = (row: CommandRow) => encodePageCursor(row.created_at, row.command_id);

function positionOf(cursor: string): CommandPosition {
  const { at, id } = decodePageCursor(cursor, isUuid);
  return { createdAt: at, commandId: id };
}

/**
 * The car as the commands need it, when the caller may see it; otherwise the 404 of a car that
 * does not exist (cars/car-service.ts answers).
 */
export type VisibleCar = (
  principal: Principal,
  deviceId: string,
) => Promise<{ brand: string; paired_at: Date | null }>;

export function createCommandService(deps: {
  db: Db;
  clock: Clock;
  lifecycle: CommandLifecycle;
  visibleCar: VisibleCar;
}) {
  const { db, clock, lifecycle, visibleCar } = deps;

  /**
   * `app.install` installs only what reached the cars (a version in review state `published`, or
   * rolling out to this car), and only on a car of a brand that version's manifest lists.
   */
  async function checkInstallable(trx: Db, args: Record<string, unknown>, car: ParsedDeviceId) {
    await requireInstallableVersion(trx, String(args.app_id), String(args.version), car);
  }

  /** `app.install` without a version: the version the car should run (published-apps.ts). */
  async function withVersionFor(trx: Db, args: Record<string, unknown>, car: ParsedDeviceId) {
    if (args.version !== undefined || typeof args.app_id !== 'string') return args;
    return { ...args, version: await installableVersionFor(trx, args.app_id, car) };
  }

  /**
   * Since when the caller may see the car's commands: an owner, those made since they paired it
   * (an earlier owner's are theirs alone); an admin, all.
   */
  async function commandsVisibleSince(principal: Principal, deviceId: string): Promise<Date | undefined> {
    const car = await visibleCar(principal, deviceId);
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
      // The caller's car, else the 404 of a car that does not exist.
      await visibleCar(principal, deviceId);
      const { name } = request;
      if (!isCommandName(name) || name === pairingCommand) {
        throw new InvalidError(
          'unknown_command',
          `There is no command ${quoteName(name)}; the commands are ${callerCommands.join(', ')}.`,
          { title: 'Unknown command' },
        );
      }
      const ttlSeconds = request.ttl_seconds ?? defaultTtlSeconds;
      const made = await db.transaction(async (trx) => {
        const asked = request.args ?? {};
        const args = name === 'app.install' ? await withVersionFor(trx, asked, parsed) : asked;
        const row = await lifecycle.enqueue(trx, {
          car: parsed,
          name,
          args,
          createdBy: principal.accountId,
          expiresAt: new Date(clock().getTime() + ttlSeconds * 1000),
        });
        // After the arguments' own check (in `enqueue`), so that a malformed one says so first.
        if (name === 'app.install') await checkInstallable(trx, args, parsed);
        return row;
      });
      return toApiCommand(made, brand);
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
      const after = query.cursor ? positionOf(query.cursor) : undefined;
      const since = await commandsVisibleSince(principal, deviceId);
      const limit = query.limit ?? 50;
      const rows = await listCommands(db, deviceId, limit, { after, since });
      const page = rows.slice(0, limit);
      const last = page.at(-1);
      return {
        commands: page.map((row) => toApiCommand(row, brand)),
        next_cursor: rows.length > limit && last ? cursorOf(last) : null,
      };
    },
  };
}

export type CommandService = ReturnType<typeof createCommandService>;
