/**
 * A rollout's progress: the cars in it counted by where its version stands on each (RolloutProgress
 * in the contract), read from the cars' status reports and their latest install of the app. No
 * device id leaves here: a developer sees how many, not which (docs/adr/0049).
 */
import { parseDeviceId } from '../device-id.ts';
import { rolloutReaches } from '../mini-apps/published-apps.ts';
import type { RolloutProgress, RolloutView } from '../mini-apps/rollout-service.ts';
import type { Db } from '../store/db.ts';
import { type CarRunningApp, carsRunningApp } from './cars-running-app.ts';

type Standing = Exclude<keyof RolloutProgress, 'eligible'>;

/** Where `target` stands on the car: what it reports, else its latest install of it. */
function standingOf(car: CarRunningApp, target: string): Standing {
  if (car.installed_version === target) return 'installed';
  if (car.command_version !== target) return 'waiting';
  switch (car.command_state) {
    case 'queued':
      return 'queued';
    // Completed but not reported yet: still on its way, as far as anyone can tell.
    case 'sent':
    case 'accepted':
    case 'completed':
      return 'sent';
    case 'failed':
    case 'rejected':
      return 'failed';
    case 'expired':
      return 'expired';
    default:
      return 'waiting';
  }
}

export async function rolloutProgress(db: Db, view: RolloutView): Promise<RolloutProgress> {
  const progress: RolloutProgress = {
    eligible: 0,
    waiting: 0,
    queued: 0,
    sent: 0,
    installed: 0,
    failed: 0,
    expired: 0,
  };
  const { version } = view;
  const rollout = { row: view.row, version };
  // After a rollback, the counts follow the cars back to the version live before.
  const target = view.row.state === 'rolled_back' ? view.previousVersion : version.version;
  for (const car of await carsRunningApp(db, view.row.app_id)) {
    if (!rolloutReaches(rollout, parseDeviceId(car.device_id))) continue;
    progress.eligible += 1;
    progress[target === null ? 'waiting' : standingOf(car, target)] += 1;
  }
  return progress;
}
