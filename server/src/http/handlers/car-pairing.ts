/** Pairing a car with the caller, with the code the car shows. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { parseDeviceId } from '../device-id-param.ts';

export function carPairingHandlers({ pairing }: Services) {
  return {
    pairCar: async ({ params, body }, { principal }) => {
      parseDeviceId(params.device_id, body?.brand);
      const result = await pairing.pair(principal, params.device_id, body?.code);
      return result.kind === 'paired'
        ? { status: 200, body: result.car }
        : { status: 202, body: result.sent };
    },
  } satisfies Partial<Handlers>;
}
