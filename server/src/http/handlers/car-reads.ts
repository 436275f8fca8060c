/** What a car reported, for its owner and admins: status, location, install. */

import { parseDeviceId } from '../../device-id.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function carReadHandlers({ carReports }: Services) {
  return {
    getCarStatus: async ({ params }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id);
      return { status: 200, body: await carReports.status(principal, deviceId) };
    },

    getCarLocation: async ({ params }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id);
      return { status: 200, body: await carReports.location(principal, deviceId) };
    },

    getCarInstall: async ({ params }, { principal }) => {
      const deviceId = parseDeviceId(params.device_id);
      return { status: 200, body: await carReports.install(principal, deviceId) };
    },
  } satisfies Partial<Handlers>;
}
