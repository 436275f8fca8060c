/** Liveness and readiness. */
import { release } from '../../release.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function operationHandlers(services: Services) {
  return {
    getHealth: () => ({ status: 200, body: { status: 'ok', version: release } }),

    // What requests need decides whether to send them here: the store and the key-value store
    // (sign-in, cars, provisioning). The bridge only says whether all is well: commands wait in the
    // outbox while it is away (see the contract's description of /readyz).
    getReadiness: async () => {
      const [store, keyValues] = await Promise.all([
        services.storeReadiness.check(),
        services.keyValueReadiness
          ? services.keyValueReadiness()
          : services.storeReadiness.check('select 1 from key_values limit 1'),
      ]);
      const checks = {
        store: store ? 'ok' : 'failing',
        key_value_store: keyValues ? 'ok' : 'failing',
        mqtt_bridge: services.bridgeHealth.ok ? 'ok' : 'failing',
      } as const;
      if (!store || !keyValues) return { status: 503, body: { status: 'not_ready', checks } };
      return { status: 200, body: { status: checks.mqtt_bridge === 'ok' ? 'ready' : 'degraded', checks } };
    },
  } satisfies Partial<Handlers>;
}
