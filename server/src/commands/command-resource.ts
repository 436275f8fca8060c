/** A command as the API and the `command.state_changed` webhook show it. */
import type { Brand } from '@svc/sdk';
import type { components } from '../../../generated/openapi.ts';
import type { CommandRow } from './command-repository.ts';
import { pairingCommand } from './command-states.ts';

export type Command = components['schemas']['Command'];

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
