/** Pairing a car with the caller, with the code the car shows. */

import { parseDeviceId } from '../../device-id.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function carPairingHandlers({ pairing }: Services) {
  return {
    pairCar: async ({ params, body }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id, body?.brand);
      const result = await pairing.pair(principal, deviceId, body?.code);
      return result.kind === 'paired'
        ? { status: 200, body: result.car }
        : { status: 202, body: result.sent };
    },
  } satisfies Partial<Handlers>;
}
