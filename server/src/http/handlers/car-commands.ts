/** Commands for a car, for its owner and admins: send one, follow it, list the car's recent ones. */

import { parseDeviceId } from '../../device-id.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function carCommandHandlers({ commands }: Services) {
  return {
    createCarCommand: async ({ params, body }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id, body.brand);
      return { status: 202, body: await commands.create(principal, deviceId, body) };
    },

    listCarCommands: async ({ params, query }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id);
      return { status: 200, body: await commands.list(principal, deviceId, query) };
    },

    getCarCommand: async ({ params }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id);
      return { status: 200, body: await commands.get(principal, deviceId, params.command_id) };
    },
  } satisfies Partial<Handlers>;
}
