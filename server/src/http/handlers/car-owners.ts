/** Ending and moving a car's ownership: unpair and transfer. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { parseDeviceId } from '../device-id-param.ts';

export function carOwnerHandlers({ ownership }: Services) {
  return {
    unpairCar: async ({ params, body }, { principal }) => {
      parseDeviceId(params.device_id, body?.brand);
      return { status: 200, body: await ownership.unpair(principal, params.device_id) };
    },

    transferCar: async ({ params, body }, { principal }) => {
      parseDeviceId(params.device_id, body.brand);
      return { status: 200, body: await ownership.transfer(principal, params.device_id, body.to_user) };
    },
  } satisfies Partial<Handlers>;
}
