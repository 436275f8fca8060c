/**
 * SQL for commands. Every move of a state is one conditional UPDATE that names the states it may
 * move from, so replicas racing on one command (two publishers, an acknowledgement and the expiry
 * sweep) leave it where the first move put it, and only the replica whose UPDATE changed the row
 * counts the move.
 */

import type { Knex } from 'knex';
import { upsertSeen } from '../cars/car-report-repository.ts';
import type { Db } from '../store/db.ts';
import {
  type AckOutcome,
  ackMovesFrom,
  type CommandState,
  pairingCommand,
  pendingStates,
} from './command-states.ts';

export interface CommandRow {
  command_id: string;
  device_id: string;
  name: string;
  args: Record<string, unknown>;
  state: CommandState;
  detail: string | null;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
  expires_at: Date;
  sent_at: Date | null;
}

// PGlite may return jsonb as text.
function commandFromDb(row: CommandRow): CommandRow {
  return typeof row.args === 'string' ? { ...row, args: JSON.parse(row.args) } : row;
}

/**
 * A pairing code travels in its command's arguments while the car may still need it; once the
 * command is final it is forgotten, so the store keeps no live code in the clear past its use.
 */
/** As a query binding (a Postgres text[]). */
const pending: string[] = [...pendingStates];

const forgetPairingCode = `args = case when name = '${pairingCommand}' then '{}'::jsonb else args end`;

export async function insertCommand(db: Db, row: CommandRow): Promise<CommandRow> {
  const [inserted] = await db<CommandRow>('car_commands')
    .insert({ ...row, args: JSON.stringify(row.args) as unknown as Record<string, unknown> })
    .returning('*');
  return commandFromDb(inserted as CommandRow);
}

export async function findCommand(db: Db, commandId: string): Promise<CommandRow | undefined> {
  const row = await db<CommandRow>('car_commands').where({ command_id: commandId }).first();
  return row && commandFromDb(row);
}

/** Where a page of a car's commands starts: after this one, in newest-first order. */
export interface CommandPosition {
  createdAt: Date;
  commandId: string;
}

/** The commands past `position` in (created_at, command_id) order: `<` reading newest first, `>` oldest first. */
function beyond(position: CommandPosition, direction: '<' | '>') {
  return (query: Knex.QueryBuilder) =>
    query
      .where('created_at', direction, position.createdAt)
      .orWhere((same) =>
        same
          .where('created_at', '=', position.createdAt)
          .andWhere('command_id', direction, position.commandId),
      );
}

/**
 * Newest first, from `after` on and made at `since` or later; `limit + 1` rows are read so the
 * caller knows whether another page follows.
 */
export async function listCommands(
  db: Db,
  deviceId: string,
  limit: number,
  { after, since }: { after?: CommandPosition; since?: Date } = {},
): Promise<CommandRow[]> {
  const query = db<CommandRow>('car_commands')
    .where({ device_id: deviceId })
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'command_id', order: 'desc' },
    ])
    .limit(limit + 1);
  if (since) query.where('created_at', '>=', since);
  if (after) query.where(beyond(after, '<'));
  return (await query).map(commandFromDb);
}

/** Commands waiting for their first publication, oldest first; expired ones are the sweep's. */
export async function queuedCommands(db: Db, now: Date, limit: number): Promise<CommandRow[]> {
  const rows = await db<CommandRow>('car_commands')
    .where({ state: 'queued' })
    .andWhere('expires_at', '>', now)
    .orderBy([{ column: 'created_at' }, { column: 'command_id' }])
    .limit(limit);
  return rows.map(commandFromDb);
}

/**
 * Commands not final and not expired, of the cars named (or of every car), oldest first after
 * `after`: what a car that came back, or every car after the broker came back, is sent again.
 */
export async function pendingCommands(
  db: Db,
  options: { now: Date; limit: number; deviceIds?: readonly string[]; after?: CommandPosition },
): Promise<CommandRow[]> {
  const query = db<CommandRow>('car_commands')
    .whereIn('state', pending)
    .andWhere('expires_at', '>', options.now)
    .orderBy([{ column: 'created_at' }, { column: 'command_id' }])
    .limit(options.limit);
  if (options.deviceIds) query.whereIn('device_id', options.deviceIds);
  if (options.after) query.where(beyond(options.after, '>'));
  return (await query).map(commandFromDb);
}

/** `queued → sent` once the broker took it; false when it had moved on already (acknowledged, expired). */
export async function markSent(db: Db, commandId: string, at: Date): Promise<boolean> {
  const moved = await db('car_commands')
    .where({ command_id: commandId, state: 'queued' })
    .update({ state: 'sent', sent_at: at, updated_at: at });
  return moved > 0;
}

/**
 * What an acknowledgement did: moved the command, changed nothing, named no command of this car,
 * or came from a car not provisioned.
 */
export type AckResult =
  | { kind: 'moved'; name: string }
  | { kind: 'unchanged' }
  | { kind: 'unknown_command' }
  | { kind: 'command_of_another_car' }
  | { kind: 'unknown_car' };

/**
 * Moves the car's command as its acknowledgement says, when its state allows; the car's detail is
 * kept (an acknowledgement without one keeps the one before). `seenAt` (a live message) moves the
 * car's last seen. One statement, so one round trip: the bridge takes the next message only once
 * this one is handled, so this write paces every car's acknowledgements (bench:commands).
 */
export async function acknowledgeCommand(
  db: Db,
  ack: {
    commandId: string;
    deviceId: string;
    outcome: AckOutcome;
    detail: string | null;
    at: Date;
    seenAt: Date | undefined;
  },
): Promise<AckResult> {
  const final = ack.outcome !== 'accepted';
  const { rows } = await db.raw(
    `with car as (select device_id from cars where device_id = ?),
     seen as (
       insert into car_presence (device_id, last_seen)
       select device_id, ?::timestamptz from car where ?::timestamptz is not null
       ${upsertSeen}
     ),
     moved as (
       update car_commands
       set state = ?, detail = coalesce(?, detail), updated_at = ?${final ? `, ${forgetPairingCode}` : ''}
       where command_id = ? and device_id in (select device_id from car) and state = any(?::text[])
       returning name
     )
     select exists (select 1 from car) as car_known,
            (select name from moved) as moved,
            (select device_id from car_commands where command_id = ?) as command_of`,
    [
      ack.deviceId,
      ack.seenAt ?? null,
      ack.seenAt ?? null,
      ack.outcome,
      ack.detail,
      ack.at,
      ack.commandId,
      [...ackMovesFrom(ack.outcome)],
      ack.commandId,
    ],
  );
  const [row] = rows as { car_known: boolean; moved: string | null; command_of: string | null }[];
  if (!row?.car_known) return { kind: 'unknown_car' };
  if (row.moved) return { kind: 'moved', name: row.moved };
  if (!row.command_of) return { kind: 'unknown_command' };
  return row.command_of === ack.deviceId ? { kind: 'unchanged' } : { kind: 'command_of_another_car' };
}

/** Every command not final by its `expires_at` is `expired`; the names of those moved, one per command. */
export async function expireCommands(db: Db, now: Date): Promise<string[]> {
  const { rows } = await db.raw(
    `update car_commands
     set state = 'expired', updated_at = ?, ${forgetPairingCode},
         detail = case state
           when 'queued' then 'The broker could not be reached before the command expired.'
           when 'sent' then 'The car did not acknowledge the command before it expired: it may have been offline.'
           else 'The car accepted the command but did not say it finished before it expired.'
         end
     where state = any(?::text[]) and expires_at <= ?
     returning name`,
    [now, pending, now],
  );
  return (rows as { name: string }[]).map((row) => row.name);
}

/**
 * Ends a command the service no longer wants delivered (a pairing code replaced or spent): `expired`
 * with `detail` when it was not final, and its pairing code forgotten either way. The command's
 * name when it moved, for the metrics.
 */
export async function withdrawCommand(
  db: Db,
  commandId: string,
  detail: string,
  at: Date,
): Promise<string | undefined> {
  const { rows } = await db.raw(
    `with previous as (select command_id, state from car_commands where command_id = ? for update)
     update car_commands c
     set ${forgetPairingCode},
         state = case when c.state = any(?::text[]) then 'expired' else c.state end,
         detail = case when c.state = any(?::text[]) then ? else c.detail end,
         updated_at = case when c.state = any(?::text[]) then ?::timestamptz else c.updated_at end
     from previous
     where c.command_id = previous.command_id
     returning c.name, previous.state as previous_state`,
    [commandId, pending, pending, detail, pending, at],
  );
  const [row] = rows as { name: string; previous_state: CommandState }[];
  return row && (pendingStates as readonly string[]).includes(row.previous_state) ? row.name : undefined;
}

/** A command the service cannot send after all (it no longer fits the contract): `failed`, with why. */
export async function failCommand(
  db: Db,
  commandId: string,
  detail: string,
  at: Date,
): Promise<string | undefined> {
  const { rows } = await db.raw(
    `update car_commands set state = 'failed', detail = ?, updated_at = ?, ${forgetPairingCode}
     where command_id = ? and state = any(?::text[])
     returning name`,
    [detail, at, commandId, pending],
  );
  return (rows as { name: string }[])[0]?.name;
}

/**
 * Ends what `owner` asked of the car and is not final yet, when the car stops being theirs
 * (unpair, transfer): a new owner must not find the last one's `doors.unlock` arriving. `expired`
 * with `detail`; the names of those moved, for the metrics. Commands an admin made go on.
 */
export async function withdrawCommandsOf(
  db: Db,
  deviceId: string,
  owner: string,
  detail: string,
  at: Date,
): Promise<string[]> {
  const { rows } = await db.raw(
    `update car_commands set state = 'expired', detail = ?, updated_at = ?
     where device_id = ? and created_by = ? and state = any(?::text[])
     returning name`,
    [detail, at, deviceId, owner, pending],
  );
  return (rows as { name: string }[]).map((row) => row.name);
}
