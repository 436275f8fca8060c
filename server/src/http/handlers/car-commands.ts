/** Commands for a car, for its owner and admins: send one, follow it, list the car's recent ones. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { parseDeviceId } from '../device-id-param.ts';

export function carCommandHandlers({ commands }: Services) {
  return {
    createCarCommand: async ({ params, body }, { principal }) => {
      parseDeviceId(params.device_id, body.brand);
      return { status: 202, body: await commands.create(principal, params.device_id, body) };
    },

    listCarCommands: async ({ params, query }, { principal }) => {
      parseDeviceId(params.device_id);
      return { status: 200, body: await commands.list(principal, params.device_id, query) };
    },

    getCarCommand: async ({ params }, { principal }) => {
      parseDeviceId(params.device_id);
      return { status: 200, body: await commands.get(principal, params.device_id, params.command_id) };
    },
  } satisfies Partial<Handlers>;
}
