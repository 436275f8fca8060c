/** Ending and moving a car's ownership: unpair and transfer. */

import { parseDeviceId } from '../../device-id.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function carOwnerHandlers({ ownership }: Services) {
  return {
    unpairCar: async ({ params, body }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id, body?.brand);
      return { status: 200, body: await ownership.unpair(principal, deviceId) };
    },

    transferCar: async ({ params, body }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id, body.brand);
      return { status: 200, body: await ownership.transfer(principal, deviceId, body.to_user) };
    },
  } satisfies Partial<Handlers>;
}
