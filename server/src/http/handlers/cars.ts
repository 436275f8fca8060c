/** Provisioning, for admins: cars and their broker credentials, and brand connectors. */

import { parseDeviceId } from '../../device-id.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function carHandlers({ cars }: Services) {
  return {
    provisionCar: async ({ body }) => {
      const deviceId = parseDeviceId(body.device_id, body.brand);
      return { status: 201, body: await cars.provision(deviceId) };
    },

    listCars: async ({ query }, { principal }) => {
      if (query.device_id !== undefined) parseDeviceId(query.device_id);
      return { status: 200, body: await cars.list(principal, query) };
    },

    rotateCarCredential: async ({ params }) => {
      const deviceId = parseDeviceId(params.device_id);
      return { status: 201, body: await cars.rotate(deviceId) };
    },

    decommissionCar: async ({ params }) => {
      const deviceId = parseDeviceId(params.device_id);
      await cars.decommission(deviceId);
      return { status: 204 };
    },

    createConnector: async ({ body }) => ({ status: 201, body: await cars.createConnector(body) }),

    listConnectors: async () => ({ status: 200, body: { connectors: await cars.listConnectors() } }),

    rotateConnectorCredential: async ({ params }) => ({
      status: 201,
      body: await cars.rotateConnector(params.brand, params.name),
    }),

    removeConnector: async ({ params }) => {
      await cars.removeConnector(params.brand, params.name);
      return { status: 204 };
    },
  } satisfies Partial<Handlers>;
}
