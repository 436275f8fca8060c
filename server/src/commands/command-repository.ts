/**
 * SQL for commands. Every move of a state is one conditional UPDATE that names the states it may
 * move from, so replicas racing on one command (two publishers, an acknowledgement and the expiry
 * sweep) leave it where the first move put it, and only the replica whose UPDATE changed the row
 * counts the move.
 */

import type { Knex } from 'knex';
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
/** A command a move changed: which, whose car, and its name (for the metrics). */
export interface MovedCommand {
  command_id: string;
  device_id: string;
  name: string;
}

function commandFromDb(row: CommandRow): CommandRow {
  return typeof row.args === 'string' ? { ...row, args: JSON.parse(row.args) } : row;
}

/** As a query binding (a Postgres text[]). */
const pending: string[] = [...pendingStates];

/**
 * A pairing code travels in its command's arguments while the car may still need it; once the
 * command is final it is forgotten, so the store keeps no live code in the clear past its use.
 */
const forgetPairingCode = `case when name = '${pairingCommand}' then '{}'::jsonb else args end`;

/** What every move into a final state also does: the pairing code forgotten, nothing left to publish. */
const finalMoveColumns = {
  args: forgetPairingCode,
  due_at: 'null',
  claimed_by: 'null',
  claimed_until: 'null',
};
const finalMove = Object.entries(finalMoveColumns)
  .map(([column, value]) => `${column} = ${value}`)
  .join(', ');
/** `finalMove` for the rows of a statement where `final` (SQL) holds; the others keep theirs. */
const finalMoveWhere = (final: string) =>
  Object.entries(finalMoveColumns)
    .map(([column, value]) => `${column} = case when ${final} then ${value} else ${column} end`)
    .join(', ');

/** Writes commands in one statement (a fleet's app update is hundreds at once). */
export async function insertCommands(db: Db, rows: readonly CommandRow[]): Promise<CommandRow[]> {
  if (rows.length === 0) return [];
  const inserted = await db<CommandRow>('car_commands')
    // Due at once: the publisher's clock, not the database's, says when (command-outbox.ts).
    .insert(
      rows.map(
        (row) =>
          ({
            ...row,
            args: JSON.stringify(row.args) as unknown as Record<string, unknown>,
            due_at: row.created_at,
          }) as CommandRow,
      ),
    )
    .returning('*');
  return (inserted as CommandRow[]).map(commandFromDb);
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

/**
 * Claims up to `limit` commands due for publication that no other publisher holds, oldest due
 * first, until `until`: the rows are picked with `FOR UPDATE SKIP LOCKED`, so publishers on
 * several replicas claiming at once each get other rows, and the claim outlives the statement,
 * so that no one else sends the command while its publisher waits for the broker.
 */
export async function claimDueCommands(
  db: Db,
  claim: { claimant: string; now: Date; until: Date; limit: number },
): Promise<CommandRow[]> {
  const { rows } = await db.raw(
    `update car_commands c set claimed_by = ?, claimed_until = ?
     from (
       select command_id from car_commands
       where due_at <= ? and state = any(?::text[]) and expires_at > ?
         and (claimed_until is null or claimed_until <= ?)
       order by due_at, created_at, command_id
       limit ?
       for update skip locked
     ) due
     where c.command_id = due.command_id
     returning c.*`,
    [claim.claimant, claim.until, claim.now, pending, claim.now, claim.now, claim.limit],
  );
  return (rows as CommandRow[])
    .map(commandFromDb)
    .sort(
      (a, b) => a.created_at.getTime() - b.created_at.getTime() || a.command_id.localeCompare(b.command_id),
    );
}

/**
 * The commands not final of the cars named (or of every car) are to be published again: their
 * cars came back, or the broker did, and a car's clean session kept nothing sent meanwhile.
 */
export async function markDue(db: Db, at: Date, deviceIds?: readonly string[]): Promise<void> {
  const query = db('car_commands')
    .whereIn('state', pending)
    .andWhere('expires_at', '>', at)
    .update({ due_at: at });
  if (deviceIds) query.whereIn('device_id', deviceIds);
  await query;
}

/**
 * The broker took the command: `queued → sent` (the command when it moved), and it is no
 * longer due unless it was asked for again since `claimedAt`. The claim is let go.
 */
export async function settlePublished(
  db: Db,
  published: { commandId: string; claimant: string; claimedAt: Date; at: Date },
): Promise<MovedCommand | undefined> {
  const { rows } = await db.raw(
    `with previous as (select command_id, state from car_commands where command_id = ? for update)
     update car_commands c
     set state = case when c.state = 'queued' then 'sent' else c.state end,
         sent_at = case when c.state = 'queued' then ?::timestamptz else c.sent_at end,
         updated_at = case when c.state = 'queued' then ?::timestamptz else c.updated_at end,
         due_at = case when c.due_at <= ?::timestamptz then null else c.due_at end,
         claimed_by = case when c.claimed_by = ? then null else c.claimed_by end,
         claimed_until = case when c.claimed_by = ? then null else c.claimed_until end
     from previous
     where c.command_id = previous.command_id
     returning c.command_id, c.device_id, c.name, previous.state as previous_state`,
    [
      published.commandId,
      published.at,
      published.at,
      published.claimedAt,
      published.claimant,
      published.claimant,
    ],
  );
  const [row] = rows as (MovedCommand & { previous_state: CommandState })[];
  return row?.previous_state === 'queued' ? movedOf(row) : undefined;
}

function movedOf(row: MovedCommand): MovedCommand {
  return { command_id: row.command_id, device_id: row.device_id, name: row.name };
}

/** Lets go of claims of `claimant` (of one command, or all): what was due is due again at once. */
export async function releaseClaims(db: Db, claimant: string, commandId?: string): Promise<void> {
  const query = db('car_commands').where({ claimed_by: claimant }).update({
    claimed_by: null,
    claimed_until: null,
  });
  if (commandId) query.andWhere({ command_id: commandId });
  await query;
}

/** What an acknowledgement did: moved the command, changed nothing, or named no command of this car. */
export type AckResult =
  | { kind: 'moved'; name: string; commandId: string }
  | { kind: 'unchanged' }
  | { kind: 'unknown_command' }
  | { kind: 'command_of_another_car' };

/** A car's acknowledgement of one of its commands, as the bridge read it. */
export interface Ack {
  commandId: string;
  deviceId: string;
  outcome: AckOutcome;
  /** The car's reason, kept for `rejected` and `failed`; null keeps the one before. */
  detail: string | null;
  /** When the service handled it: the command's `updated_at` if it moves. */
  at: Date;
}

/**
 * Moves each car's command as its acknowledgement says, when its state allows; the car's detail
 * is kept (an acknowledgement without one keeps the one before). One statement for the group, each
 * command in it once (a statement may change a row once): the bridge takes the cars'
 * acknowledgements a few connections at a time, and one round trip each paced a fleet's commands
 * (bench:fleet, docs/adr/0054).
 */
export async function acknowledgeCommands(db: Db, acks: readonly Ack[]): Promise<AckResult[]> {
  const batch = acks.map((ack, seq) => ({
    seq,
    command_id: ack.commandId,
    device_id: ack.deviceId,
    outcome: ack.outcome,
    detail: ack.detail,
    at: ack.at,
    moves_from: ackMovesFrom(ack.outcome),
  }));
  const { rows } = await db.raw(
    `with batch as (
       select * from jsonb_to_recordset(?::jsonb) as b(
         seq int, command_id uuid, device_id text, outcome text, detail text, at timestamptz,
         moves_from text[])
     ),
     moved as (
       update car_commands c
       set state = b.outcome, detail = coalesce(b.detail, c.detail), updated_at = b.at,
           ${finalMoveWhere("b.outcome <> 'accepted'")}
       from batch b
       where c.command_id = b.command_id and c.device_id = b.device_id and c.state = any(b.moves_from)
       returning b.seq, c.name
     )
     select batch.seq, moved.name as moved, c.device_id as command_of
     from batch
     left join moved using (seq)
     left join car_commands c using (command_id)`,
    [JSON.stringify(batch)],
  );
  const results: AckResult[] = acks.map(() => ({ kind: 'unknown_command' }));
  for (const row of rows as { seq: number; moved: string | null; command_of: string | null }[]) {
    const ack = acks[row.seq] as Ack;
    if (row.moved) results[row.seq] = { kind: 'moved', name: row.moved, commandId: ack.commandId };
    else if (row.command_of) {
      results[row.seq] = { kind: row.command_of === ack.deviceId ? 'unchanged' : 'command_of_another_car' };
    }
  }
  return results;
}

/**
 * Every command not final by its `expires_at` is `expired`; those moved, one per
 * command. Replicas sweeping at once take their rows as publishers do (`SKIP LOCKED`), so none
 * waits behind another's sweep.
 */
export async function expireCommands(db: Db, now: Date): Promise<MovedCommand[]> {
  const { rows } = await db.raw(
    `update car_commands c
     set state = 'expired', updated_at = ?, ${finalMove},
         detail = case c.state
           when 'queued' then 'The broker could not be reached before the command expired.'
           when 'sent' then 'The car did not acknowledge the command before it expired: it may have been offline.'
           else 'The car accepted the command but did not say it finished before it expired.'
         end
     from (
       select command_id from car_commands
       where state = any(?::text[]) and expires_at <= ?
       for update skip locked
     ) overdue
     where c.command_id = overdue.command_id
     returning c.command_id, c.device_id, c.name`,
    [now, pending, now],
  );
  return (rows as MovedCommand[]).map(movedOf);
}

/**
 * Ends a command the service no longer wants delivered (a pairing code replaced or spent): `expired`
 * with `detail` when it was not final, and its pairing code forgotten either way. The command
 * when it moved.
 */
export async function withdrawCommand(
  db: Db,
  commandId: string,
  detail: string,
  at: Date,
): Promise<MovedCommand | undefined> {
  const { rows } = await db.raw(
    `with previous as (select command_id, state from car_commands where command_id = ? for update)
     update car_commands c
     set ${finalMove},
         state = case when c.state = any(?::text[]) then 'expired' else c.state end,
         detail = case when c.state = any(?::text[]) then ? else c.detail end,
         updated_at = case when c.state = any(?::text[]) then ?::timestamptz else c.updated_at end
     from previous
     where c.command_id = previous.command_id
     returning c.command_id, c.device_id, c.name, previous.state as previous_state`,
    [commandId, pending, pending, detail, pending, at],
  );
  const [row] = rows as (MovedCommand & { previous_state: CommandState })[];
  return row && (pendingStates as readonly string[]).includes(row.previous_state) ? movedOf(row) : undefined;
}

/** A command the service cannot send after all (it no longer fits the contract): `failed`, with why. */
export async function failCommand(
  db: Db,
  commandId: string,
  detail: string,
  at: Date,
): Promise<MovedCommand | undefined> {
  const { rows } = await db.raw(
    `update car_commands set state = 'failed', detail = ?, updated_at = ?, ${finalMove}
     where command_id = ? and state = any(?::text[])
     returning command_id, device_id, name`,
    [detail, at, commandId, pending],
  );
  const [row] = rows as MovedCommand[];
  return row && movedOf(row);
}

/**
 * Ends what `owner` asked of the car and is not final yet, when the car stops being theirs
 * (unpair, transfer): a new owner must not find the last one's `doors.unlock` arriving. `expired`
 * with `detail`; those moved. Commands an admin made go on.
 */
export async function withdrawCommandsOf(
  db: Db,
  deviceId: string,
  owner: string,
  detail: string,
  at: Date,
): Promise<MovedCommand[]> {
  const { rows } = await db.raw(
    `update car_commands set state = 'expired', detail = ?, updated_at = ?, ${finalMove}
     where device_id = ? and created_by = ? and state = any(?::text[])
     returning command_id, device_id, name`,
    [detail, at, deviceId, owner, pending],
  );
  return (rows as MovedCommand[]).map(movedOf);
}
