/** An app's staged rollout: read it with its progress, and move it. */
import { rolloutProgress } from '../../app-updates/rollout-progress.ts';
import { type RolloutView, toApiRollout } from '../../mini-apps/rollout-service.ts';
import type { Services } from '../../services.ts';
import type { Handlers } from '../bind-handlers.ts';

export function rolloutHandlers({ rollouts, db }: Services) {
  const withProgress = async (view: RolloutView) => toApiRollout(view, await rolloutProgress(db, view));
  return {
    getRollout: async ({ params }, { principal }) => ({
      status: 200,
      body: await withProgress(await rollouts.get(principal, params.app_id)),
    }),

    moveRollout: async ({ params, body }, { principal }) => ({
      status: 200,
      body: await withProgress(await rollouts.move(principal, params.app_id, body)),
    }),
  } satisfies Partial<Handlers>;
}
