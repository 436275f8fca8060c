/** What a car reported, for its owner and admins: my cars, status, location, install. */

import { parseDeviceId } from '../../device-id.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function carReadHandlers({ cars, carReports }: Services) {
  return {
    /** The caller's own cars (every car, for an admin), as the admins' list gives them. */
    listMyCars: async ({ query }, { principal }) => {
      if (query.device_id !== undefined) parseDeviceId(query.device_id);
      return { status: 200, body: await cars.list(principal, query) };
    },

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
