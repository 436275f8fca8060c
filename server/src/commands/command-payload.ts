/**
 * A command as the car gets it: the `cmd` payload of the AsyncAPI contract, on the car's `cmd`
 * topic. Checked against the contract's own variant for the command's name, both when a caller
 * asks for a command (so bad arguments are 422 before anything is written) and again before
 * every publication (so nothing the contract refuses ever reaches a car).
 */
import { type Brand, validateDeviceId } from '@svc/sdk';
import type { ErrorObject } from 'ajv';
import { type CarCommand, carTopic } from '../../../generated/mqtt.ts';
import { commandValidators } from '../../../generated/mqtt-payload-validators.cjs';
import type { FieldError } from '../errors.ts';

export type CommandName = CarCommand['name'];

/** Every command of the contract, pairing.show_code included. */
export const commandNames = Object.keys(commandValidators) as CommandName[];

export function isCommandName(name: string): name is CommandName {
  return Object.hasOwn(commandValidators, name);
}

export interface CommandFields {
  command_id: string;
  device_id: string;
  name: string;
  args: Record<string, unknown>;
  created_at: Date;
  expires_at: Date;
}

/** The payload, not yet checked; `brand` is that of the command's car. */
export function commandPayload(command: CommandFields, brand: Brand): Record<string, unknown> {
  return {
    command_id: command.command_id,
    device_id: command.device_id,
    brand,
    name: command.name,
    args: command.args,
    issued_at: command.created_at.toISOString(),
    expires_at: command.expires_at.toISOString(),
  };
}

export function commandTopic(deviceId: string): string {
  const { brand, nativeId } = validateDeviceId(deviceId);
  return carTopic(brand, nativeId, 'cmd');
}

/** What people are told about the field an error is about: the format, never the regex. */
const fieldFormats: Record<string, string> = {
  app_id: 'a mini-app id in reverse-DNS form, such as com.example.parking',
  version: 'a semantic version, such as 1.4.2',
  code: '8 digits',
};

function describe(name: string, error: ErrorObject): FieldError | undefined {
  const field = error.instancePath.replace(/^\/args\/?/, '').replaceAll('/', '.');
  const where = field ? `args.${field}` : 'args';
  const path = `/body${error.instancePath}`;
  switch (error.keyword) {
    case 'required': {
      const missing = String(error.params.missingProperty);
      return { path: `${path}/${missing}`, message: `${name} needs args.${missing}` };
    }
    case 'additionalProperties': {
      const extra = String(error.params.additionalProperty);
      return { path: `${path}/${extra}`, message: `${name} takes no argument ${extra}` };
    }
    // Said better by additionalProperties, which names the argument.
    case 'maxProperties':
      return undefined;
    case 'pattern':
    case 'format':
    case 'maxLength':
    case 'minLength':
      return {
        path,
        message: `${where} must be ${fieldFormats[field] ?? `as the contract says (${error.message})`}`,
      };
    default:
      return { path, message: `${where} ${error.message ?? `breaks the rule ${error.keyword}`}` };
  }
}

/** Whether `payload` is the command `name` as the contract has it; else what is wrong, by field. */
export function checkCommandPayload(
  name: CommandName,
  payload: unknown,
): { ok: true; command: CarCommand } | { ok: false; errors: FieldError[] } {
  const validate = commandValidators[name];
  if (validate(payload)) return { ok: true, command: payload };
  const errors = (validate.errors ?? [])
    .map((error) => describe(name, error))
    .filter((error): error is FieldError => error !== undefined);
  return { ok: false, errors };
}
