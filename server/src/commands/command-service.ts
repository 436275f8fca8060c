import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import type { ParsedDeviceId } from '../device-id.ts';
import { InputError, InvalidError, NotFoundError } from '../errors.ts';
import { installableVersionFor, requireInstallableVersion } from '../mini-apps/published-apps.ts';
import type { Db } from '../store/db.ts';
import type { CommandLifecycle } from './command-lifecycle.ts';
import { commandNames, isCommandName } from './command-payload.ts';
import { type CommandPosition, type CommandRow, findCommand, listCommands } from './command-repository.ts';
import { type Command, toApiCommand } from './command-resource.ts';
import { pairingCommand } from './command-states.ts';

export type { Command } from './command-resource.ts';
export type CommandList = components['schemas']['CommandList'];
export type CommandRequest = components['schemas']['CommandRequest'];

/** How long a command may wait for its car when the caller says nothing (the contract's default). */
export const defaultTtlSeconds = 300;

/** The names a caller may send: every command of the contract but the one only the service sends. */
const callerCommands = commandNames.filter((name) => name !== pairingCommand);

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
          `There is no command "${name}"; the commands are ${callerCommands.join(', ')}.`,
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
  };
}

export type CommandService = ReturnType<typeof createCommandService>;
