/** Liveness and readiness. */
import { release } from '../../release.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function operationHandlers(services: Services) {
  return {
    getHealth: () => ({ status: 200, body: { status: 'ok', version: release } }),

    // The store decides whether to send requests here; the bridge only whether all is well (the
    // API serves without the broker: see the contract's description of /readyz).
    getReadiness: async () => {
      const store = (await services.storeReadiness.check()) ? 'ok' : 'failing';
      const checks = { store, mqtt_bridge: services.bridgeHealth.ok ? 'ok' : 'failing' } as const;
      if (store === 'failing') return { status: 503, body: { status: 'not_ready', checks } };
      return { status: 200, body: { status: checks.mqtt_bridge === 'ok' ? 'ready' : 'degraded', checks } };
    },
  } satisfies Partial<Handlers>;
}
