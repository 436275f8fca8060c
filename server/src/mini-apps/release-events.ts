/**
 * What a release tells the app's developer by webhook, inside the transaction of the move: a
 * version's review move (`mini_app.review_state_changed`, every move, the service's own too) and
 * a rollout's moves (`mini_app.rollout_moved`, `mini_app.rollout_completed`), with the rollout
 * and its progress as `GET …/rollout` shows them right after the move.
 */
import type { components } from '../../../generated/openapi.ts';
import type { Db } from '../store/db.ts';
import type { WebhookEvents } from '../webhooks/webhook-events.ts';
import { findVersion, updateVersionState, type VersionRow } from './mini-app-repository.ts';
import type { ReviewState } from './review.ts';
import type { RolloutRow } from './rollout-repository.ts';

export type Rollout = components['schemas']['Rollout'];
export type RolloutProgress = components['schemas']['RolloutProgress'];

/** A rollout with the versions it is about. */
export interface RolloutView {
  row: RolloutRow;
  /** The version rolling out (its row goes with the rollout's: deleted together). */
  version: VersionRow;
  previousVersion: string | null;
}

export function toApiRollout(view: RolloutView, progress: RolloutProgress): Rollout {
  const { row } = view;
  return {
    app_id: row.app_id,
    version: view.version.version,
    previous_version: view.previousVersion,
    percent: row.percent,
    brands: row.brands,
    state: row.state,
    progress,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export async function viewOf(db: Db, row: RolloutRow): Promise<RolloutView> {
  const version = (await findVersion(db, row.version_id)) as VersionRow;
  const previous = row.previous_version_id ? await findVersion(db, row.previous_version_id) : undefined;
  return { row, version, previousVersion: previous?.version ?? null };
}

/** How a rollout's progress is counted (app-updates/rollout-progress.ts, which reads the cars). */
export type ProgressOf = (db: Db, view: RolloutView) => Promise<RolloutProgress>;

export interface ReleaseEvents {
  webhookEvents?: WebhookEvents;
  progressOf?: ProgressOf;
}

/** Tells the app's developer that `version` moved in review from `from` (null: just submitted). */
export async function reviewStateChanged(
  trx: Db,
  events: ReleaseEvents,
  version: VersionRow,
  from: ReviewState | null,
): Promise<void> {
  await events.webhookEvents?.record(trx, [
    {
      type: 'mini_app.review_state_changed',
      audience: { developerOfApp: version.app_id },
      at: version.updated_at,
      data: () => ({
        app_id: version.app_id,
        version_id: version.id,
        version: version.version,
        from,
        to: version.review_state,
        reason: version.reason,
      }),
    },
  ]);
}

/** Moves the version in review (the move already checked) and tells its developer. */
export async function moveVersion(
  trx: Db,
  events: ReleaseEvents,
  version: VersionRow,
  changes: { review_state: ReviewState; reason: string | null; updated_at: Date },
): Promise<VersionRow> {
  const moved = await updateVersionState(trx, version.id, changes);
  await reviewStateChanged(trx, events, moved, version.review_state);
  return moved;
}

export type RolloutMove = 'started' | 'percent_raised' | 'paused' | 'resumed' | 'rolled_back' | 'completed';

/** Tells the app's developer that its rollout moved, with the rollout as it is now. */
export async function rolloutMoved(
  trx: Db,
  events: ReleaseEvents,
  row: RolloutRow,
  move: RolloutMove,
): Promise<void> {
  const { webhookEvents, progressOf } = events;
  if (!webhookEvents || !progressOf) return;
  const rollout = async () => {
    const view = await viewOf(trx, row);
    return toApiRollout(view, await progressOf(trx, view));
  };
  await webhookEvents.record(trx, [
    move === 'completed'
      ? {
          type: 'mini_app.rollout_completed',
          audience: { developerOfApp: row.app_id },
          at: row.updated_at,
          data: async () => ({ rollout: await rollout() }),
        }
      : {
          type: 'mini_app.rollout_moved',
          audience: { developerOfApp: row.app_id },
          at: row.updated_at,
          data: async () => ({ move, rollout: await rollout() }),
        },
  ]);
}
