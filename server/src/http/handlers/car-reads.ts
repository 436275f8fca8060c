/** What a car reported, for its owner and admins: status, location, install. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';
import { parseDeviceId } from '../device-id-param.ts';

export function carReadHandlers({ carReports }: Services) {
  return {
    getCarStatus: async ({ params }, { principal }) => {
      parseDeviceId(params.device_id);
      return { status: 200, body: await carReports.status(principal, params.device_id) };
    },

    getCarLocation: async ({ params }, { principal }) => {
      parseDeviceId(params.device_id);
      return { status: 200, body: await carReports.location(principal, params.device_id) };
    },

    getCarInstall: async ({ params }, { principal }) => {
      parseDeviceId(params.device_id);
      return { status: 200, body: await carReports.install(principal, params.device_id) };
    },
  } satisfies Partial<Handlers>;
}
