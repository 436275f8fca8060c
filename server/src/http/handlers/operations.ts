/** Liveness and readiness. */
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function operationHandlers(services: Services) {
  return {
    getHealth: () => ({ status: 200, body: { status: 'ok' } }),

    getReadiness: async () =>
      (await services.storeReadiness.check())
        ? { status: 200, body: { status: 'ready', checks: { store: 'ok' } } }
        : { status: 503, body: { status: 'not_ready', checks: { store: 'failing' } } },
  } satisfies Partial<Handlers>;
}
