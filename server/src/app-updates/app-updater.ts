/**
 * Moves the cars that run an app to the version each should run (mini-apps/published-apps.ts:
 * the rollout's for a car in it, else the live one), by `app.install` through the command
 * lifecycle: on publication, on every rollout move, when a car comes online or finishes an
 * install, and on a periodic sweep that catches what a wake-up missed (another replica's move, a
 * car whose status arrived late).
 *
 * The rules, per car that reports the app:
 * - a car on an older version than it should run is sent the install; a car on a rolled-back
 *   version is sent the one it should run even though it is older; no other car is downgraded;
 * - only online cars are sent one (an offline car is moved when it says `online`), and never
 *   while another install of the app is on its way to it; an install that expired (the car went
 *   away) is sent again, and so is one the car completed but has since reported not running; one
 *   the car refused or failed is not;
 * - a queued install of a version the car should no longer get (a rollback) is withdrawn;
 * - at most `ratePerSecond` installs are made a second by this replica, so that publishing to a
 *   fleet never floods the broker (docs/operating.md);
 * - nothing is sent for an app whose rollout is paused.
 * Two replicas deciding for one app take turns on a transaction-scoped advisory lock, and each
 * reads the commands inside it, so a car is never sent the same install twice at once.
 */
import { compareVersions, parseVersion } from '@svc/sdk';
import type { Clock } from '../clock.ts';
import type { CommandLifecycle, NewCommand } from '../commands/command-lifecycle.ts';
import { parseDeviceId } from '../device-id.ts';
import type { Logger } from '../logger.ts';
import { listReleasedAppIds } from '../mini-apps/mini-app-repository.ts';
import { type Release, releaseOf, versionForCar } from '../mini-apps/published-apps.ts';
import type { Db } from '../store/db.ts';
import { appsOfCars, type CarRunningApp, carsRunningApp } from './cars-running-app.ts';

/** How long a car may take to get an update before the install expires (and is sent again). */
const installTtlMs = 60 * 60 * 1000;

/** Installs made in one transaction at most: the store is not held for a whole second's worth. */
const installsPerTransaction = 200;

/**
 * Cars come online in crowds (a broker restart, a fleet's morning): past this many waiting, their
 * apps' whole fleets are looked at once rather than car by car.
 */
const carsLookedAtOneByOne = 20;

type Decision = { install?: string; withdraw?: string };

function olderThan(installed: string, wanted: string): boolean {
  return parseVersion(installed) !== undefined && compareVersions(installed, wanted) < 0;
}

/** What to do for one car (see the rules above). */
export function decide(release: Release, car: CarRunningApp): Decision {
  const parsed = parseDeviceId(car.device_id);
  const wanted = versionForCar(release, parsed)?.version;
  const decision: Decision = {};
  const pending =
    car.command_state === 'queued' || car.command_state === 'sent' || car.command_state === 'accepted';
  // A queued install of another version than the one wanted is withdrawn (a rollback).
  if (car.command_state === 'queued' && car.command_id && car.command_version !== wanted) {
    decision.withdraw = car.command_id;
  }
  if (!wanted || car.installed_version === wanted) return decision;
  const moves = olderThan(car.installed_version, wanted) || release.rolledBack.has(car.installed_version);
  if (!moves || !car.online) return decision;
  if (car.command_version === wanted) {
    // On its way, or refused: only an install that expired while the car was away goes again, and
    // one the car completed but has since reported running another version (a car restored, a
    // simulator restarted): it lost the version.
    const lostSince =
      car.command_state === 'completed' &&
      car.command_updated_at !== null &&
      car.reported_at > car.command_updated_at;
    if (car.command_state !== 'expired' && !lostSince) return decision;
  } else if (pending && !decision.withdraw) {
    // Another version's install on its way: the car reports, and the next look moves it on.
    return decision;
  }
  decision.install = wanted;
  return decision;
}

export function createAppUpdater(deps: {
  db: Db;
  clock: Clock;
  logger: Logger;
  lifecycle: CommandLifecycle;
  ratePerSecond: number;
}) {
  const { db, clock, logger, lifecycle, ratePerSecond } = deps;
  // A car that finished an install (or failed it) may have more to do: a rollback while it was
  // installing, a newer version meanwhile.
  const stopListening = lifecycle.onCommandSettled((deviceId, name) => {
    if (name === 'app.install') {
      carsToLook.add(deviceId);
      kick();
    }
  });
  const appsToLook = new Set<string>();
  const carsToLook = new Set<string>();
  let running: Promise<void> | undefined;
  let stopped = false;
  let pause: { timer: NodeJS.Timeout; done: () => void } | undefined;
  // A token bucket: `ratePerSecond` installs a second, a second's worth at most at once.
  let tokens = ratePerSecond;
  let refilledAt = Date.now();

  function refill(): void {
    const now = Date.now();
    tokens = Math.min(ratePerSecond, tokens + ((now - refilledAt) * ratePerSecond) / 1000);
    refilledAt = now;
  }

  /** Waits until there is room for at least one install (a second at most). */
  function untilTokens(): Promise<void> {
    refill();
    if (tokens >= 1) return Promise.resolve();
    const waitMs = Math.min(1000, Math.ceil(((1 - tokens) * 1000) / ratePerSecond));
    return new Promise((resolve) => {
      pause = { timer: setTimeout(resolve, waitMs), done: resolve };
    });
  }

  /** Decides for the app's cars (one car's when `deviceId`); true when some were left for lack of room. */
  async function lookAt(appId: string, deviceId?: string): Promise<boolean> {
    const release = await releaseOf(db, appId);
    if (release.rollout?.row.state === 'paused') return false;
    return db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`svc-app-updates:${appId}`]);
      refill();
      const room = Math.min(Math.floor(tokens), installsPerTransaction);
      let left = false;
      const installs: NewCommand[] = [];
      const expiresAt = new Date(clock().getTime() + installTtlMs);
      for (const car of await carsRunningApp(trx, appId, { deviceId })) {
        const decision = decide(release, car);
        if (decision.withdraw) {
          await lifecycle.withdraw(
            trx,
            decision.withdraw,
            'The car is to run another version of the app now.',
          );
        }
        if (!decision.install) continue;
        if (installs.length >= room) {
          left = true;
          break;
        }
        installs.push({
          car: parseDeviceId(car.device_id),
          name: 'app.install',
          args: { app_id: appId, version: decision.install },
          createdBy: null,
          expiresAt,
        });
      }
      // One statement and one notification for the lot.
      await lifecycle.enqueueMany(trx, installs);
      tokens -= installs.length;
      return left;
    });
  }

  async function run(): Promise<void> {
    while (!stopped && (carsToLook.size > 0 || appsToLook.size > 0)) {
      if (carsToLook.size > carsLookedAtOneByOne) {
        const cars = [...carsToLook];
        carsToLook.clear();
        for (const appId of await appsOfCars(db, cars)) appsToLook.add(appId);
        continue;
      }
      const [deviceId] = carsToLook;
      if (deviceId !== undefined) {
        carsToLook.delete(deviceId);
        for (const appId of await appsOfCars(db, [deviceId])) await lookAt(appId, deviceId);
        continue;
      }
      const [appId] = appsToLook;
      if (appId === undefined) break;
      appsToLook.delete(appId);
      if (await lookAt(appId)) {
        appsToLook.add(appId);
        await untilTokens();
      }
    }
  }

  function kick(): void {
    if (running || stopped) return;
    running = run()
      .catch((error: unknown) => {
        // The sweep comes back to what was left; the store's outage is reported by /readyz.
        logger.warn('app updates: a look at the cars failed; the next sweep tries again', { error });
      })
      .finally(() => {
        running = undefined;
        // Asked for while the last look was ending.
        if (carsToLook.size > 0 || appsToLook.size > 0) kick();
      });
  }

  return {
    /** What reaches cars of `appId` changed: its cars are looked at. */
    wake(appId: string): void {
      appsToLook.add(appId);
      kick();
    },

    /** The car said `online`: whatever it should run and does not is sent now. */
    carOnline(deviceId: string): void {
      carsToLook.add(deviceId);
      kick();
    },

    /** Looks at every released app's cars (the scheduler runs it), and waits for the look. */
    async sweep(): Promise<void> {
      for (const appId of await listReleasedAppIds(db)) appsToLook.add(appId);
      kick();
      await running;
    },

    /** Stops looking; waits for the look under way. */
    async stop(): Promise<void> {
      stopped = true;
      stopListening();
      if (pause) {
        clearTimeout(pause.timer);
        pause.done();
      }
      await running;
    },
  };
}

export type AppUpdater = ReturnType<typeof createAppUpdater>;
