/**
 * An app's staged rollout, read and moved (RolloutState in the contract: who may make which move,
 * and the 409s). The rollout is started by the review move `approved → rolling_out`
 * (mini-app-service.ts); here it grows, pauses, resumes, completes or is rolled back. What each
 * move means for the cars is the app updater's (app-updates/), woken once the move is committed.
 */
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, ForbiddenError, InvalidError, NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { findApp, findPublished, findVersion, lockApp } from './mini-app-repository.ts';
import { supersede } from './mini-app-service.ts';
import {
  moveVersion,
  type ReleaseEvents,
  type RolloutMove,
  type RolloutView,
  rolloutMoved,
  viewOf,
} from './release-events.ts';
import { checkMove } from './review.ts';
import {
  findLatestRollout,
  findRolloutUnderWay,
  type RolloutRow,
  updateRollout,
} from './rollout-repository.ts';

type RolloutMoveRequest = components['schemas']['RolloutMoveRequest'];

/** The moves an admin may make on someone else's rollout: those that stop it. */
const adminMoves: readonly RolloutMoveRequest['move'][] = ['pause', 'rollback'];

/** What each move of the API is called in the `mini_app.rollout_moved` event. */
const rolloutMoves: Record<RolloutMoveRequest['move'], RolloutMove> = {
  set_percent: 'percent_raised',
  pause: 'paused',
  resume: 'resumed',
  complete: 'completed',
  rollback: 'rolled_back',
};

export { type Rollout, type RolloutProgress, type RolloutView, toApiRollout } from './release-events.ts';

function percentOf(request: RolloutMoveRequest): number | undefined {
  if (request.move === 'set_percent' && request.percent === undefined) {
    throw new InvalidError('percent_required', 'set_percent needs the new percentage: give `percent`.');
  }
  if (request.move !== 'set_percent' && request.percent !== undefined) {
    throw new InvalidError(
      'percent_not_expected',
      `A percentage goes only with set_percent, not with ${request.move}.`,
    );
  }
  return request.percent;
}

export function createRolloutService(
  deps: ReleaseEvents & {
    db: Db;
    clock: Clock;
    /** What reaches cars of the app changed (committed): the app updater moves the cars. */
    onReleaseChanged?: (appId: string) => void;
  },
) {
  const { db, clock } = deps;

  /** The app, when `principal` may see its rollouts (its developer, an admin); else 404. */
  async function visibleApp(trx: Db, principal: Principal, appId: string) {
    const app = await findApp(trx, appId);
    if (!app || (app.owner_id !== principal.accountId && !principal.isAdmin)) {
      const whose = principal.isAdmin ? '' : ' of yours';
      throw new NotFoundError('app_not_found', `No mini-app ${appId}${whose} exists.`);
    }
    return app;
  }

  async function underWayOrRefuse(trx: Db, appId: string): Promise<RolloutRow> {
    const rollout = await findRolloutUnderWay(trx, appId, { lock: true });
    if (rollout) return rollout;
    const last = await findLatestRollout(trx, appId);
    if (last) {
      const ended = last.state === 'completed' ? 'completed' : 'was rolled back';
      throw new ConflictError(
        'rollout_ended',
        `The last rollout of ${appId} ${ended}; a new one starts with a new version (svc release ${appId} <version> --rollout <percent>).`,
      );
    }
    throw new NotFoundError(
      'no_rollout',
      `${appId} has no rollout under way: start one with svc release ${appId} <version> --rollout <percent>.`,
    );
  }

  /** The move's changes to the rollout, or the 409 of a move its state does not allow. */
  function changesFor(rollout: RolloutRow, move: RolloutMoveRequest['move'], percent: number | undefined) {
    const paused = rollout.state === 'paused';
    switch (move) {
      case 'set_percent':
        if (paused) throw new ConflictError('rollout_paused', 'The rollout is paused: resume it first.');
        if (percent === undefined || percent <= rollout.percent) {
          throw new ConflictError(
            'percent_only_grows',
            rollout.percent === 100
              ? 'The rollout is at 100 % already: complete it to publish the version, or roll it back.'
              : `The rollout is at ${rollout.percent} %: a percentage only grows (the cars that got the version keep it); roll back to take it back.`,
          );
        }
        return { percent };
      case 'pause':
        if (paused) throw new ConflictError('rollout_paused', 'The rollout is paused already.');
        return { state: 'paused' as const };
      case 'resume':
        if (!paused) throw new ConflictError('rollout_not_paused', 'The rollout is not paused.');
        return { state: 'active' as const };
      case 'complete':
        return { state: 'completed' as const, percent: 100 };
      case 'rollback':
        return { state: 'rolled_back' as const };
    }
  }

  return {
    /** The app's rollout under way, else its last one; 404 `no_rollout` when it never had one. */
    async get(principal: Principal, appId: string): Promise<RolloutView> {
      await visibleApp(db, principal, appId);
      const rollout = (await findRolloutUnderWay(db, appId)) ?? (await findLatestRollout(db, appId));
      if (!rollout) throw new NotFoundError('no_rollout', `${appId} never had a rollout.`);
      return viewOf(db, rollout);
    },

    async move(principal: Principal, appId: string, request: RolloutMoveRequest): Promise<RolloutView> {
      const percent = percentOf(request);
      const view = await db.transaction(async (trx) => {
        const app = await visibleApp(trx, principal, appId);
        // An admin may stop a harmful rollout (pause, roll back); spreading it is the developer's.
        if (app.owner_id !== principal.accountId && !adminMoves.includes(request.move)) {
          throw new ForbiddenError(
            'not_your_move',
            "Only the app's developer raises, resumes or completes its rollout; an admin may pause it or roll it back.",
          );
        }
        await lockApp(trx, appId);
        const rollout = await underWayOrRefuse(trx, appId);
        const now = clock();
        const changes = changesFor(rollout, request.move, percent);
        const version = await findVersion(trx, rollout.version_id);
        if (version && request.move === 'complete') {
          // Every car gets the version now: it is the live one, and the one live before retires.
          checkMove(version.review_state, 'published', new Set(['system']), undefined);
          await supersede(trx, deps, await findPublished(trx, appId, version.id), now);
          await moveVersion(trx, deps, version, { review_state: 'published', reason: null, updated_at: now });
        }
        if (version && request.move === 'rollback') {
          checkMove(version.review_state, 'rolled_back', new Set(['system']), undefined);
          await moveVersion(trx, deps, version, {
            review_state: 'rolled_back',
            reason: null,
            updated_at: now,
          });
        }
        const moved = await updateRollout(trx, rollout.id, { ...changes, updated_at: now });
        await rolloutMoved(trx, deps, moved, rolloutMoves[request.move]);
        return viewOf(trx, moved);
      });
      deps.onReleaseChanged?.(appId);
      return view;
    },
  };
}

export type RolloutService = ReturnType<typeof createRolloutService>;
