/**
 * What reaches cars: a mini-app version in review state `published`, or `rolling_out` on a car in
 * its rollout, on a car of a brand its manifest lists (all brands when it lists none). The one
 * place that asks, for `app.install` (the version named, or the one the car should run), for the
 * app updater (which version each car should run) and for identity tokens (the live version's
 * manifest).
 */
import { supportedBrands, supportsBrand } from '@svc/manifest';
import type { ParsedDeviceId } from '../device-id.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { inCohort } from './cohort.ts';
import {
  findApp,
  findLiveVersion,
  findVersionOf,
  listVersionsOfApps,
  type VersionRow,
} from './mini-app-repository.ts';
import { findRolloutUnderWay, type RolloutRow } from './rollout-repository.ts';

/** A car as a release asks of it: its id and brand. */
export type ReleaseCar = Pick<ParsedDeviceId, 'deviceId' | 'brand'>;

/** What of an app reaches cars now: its live version, and the rollout under way, if any. */
export interface Release {
  appId: string;
  live: VersionRow | undefined;
  rollout: { row: RolloutRow; version: VersionRow } | undefined;
  /** The versions rolled back: cars are moved off them, and nothing installs them again. */
  rolledBack: ReadonlySet<string>;
}

export async function releaseOf(db: Db, appId: string): Promise<Release> {
  const versions = await listVersionsOfApps(db, [appId]);
  const live = versions.find((version) => version.review_state === 'published');
  const rolloutRow = await findRolloutUnderWay(db, appId);
  const rolloutVersion = rolloutRow && versions.find((version) => version.id === rolloutRow.version_id);
  return {
    appId,
    live,
    rollout: rolloutRow && rolloutVersion ? { row: rolloutRow, version: rolloutVersion } : undefined,
    rolledBack: new Set(versions.filter((v) => v.review_state === 'rolled_back').map((v) => v.version)),
  };
}

/** The rollout reaches the car: a brand it covers and the manifest lists, in its share. */
export function rolloutReaches(rollout: { row: RolloutRow; version: VersionRow }, car: ReleaseCar): boolean {
  const { manifest } = rollout.version;
  const brands = rollout.row.brands ?? supportedBrands(manifest);
  return (
    brands.includes(car.brand) &&
    supportsBrand(manifest, car.brand) &&
    inCohort(rollout.row.app_id, car.deviceId, rollout.row.percent)
  );
}

/** The car is in the rollout under way. */
export function inRollout(release: Release, car: ReleaseCar): boolean {
  return release.rollout !== undefined && rolloutReaches(release.rollout, car);
}

/**
 * The version `car` should run: the rollout's when the car is in it, else the live one; undefined
 * when neither reaches its brand.
 */
export function versionForCar(release: Release, car: ReleaseCar): VersionRow | undefined {
  if (release.rollout && inRollout(release, car)) return release.rollout.version;
  const { live } = release;
  return live && supportsBrand(live.manifest, car.brand) ? live : undefined;
}

async function existingApp(db: Db, appId: string): Promise<void> {
  if (!(await findApp(db, appId))) {
    throw new NotFoundError('app_not_found', `No mini-app ${appId} exists.`);
  }
}

/** The version's manifest lists `brand` (or lists none); else 409 `brand_not_supported`. */
function requireBrand(row: VersionRow, brand: string, refused: string): void {
  if (supportsBrand(row.manifest, brand)) return;
  throw new ConflictError(
    'brand_not_supported',
    `${row.app_id} ${row.version} runs on ${supportedBrands(row.manifest).join(', ')} only (the brands of its manifest), not on a ${brand} car: ${refused}.`,
    { title: 'Brand not supported' },
  );
}

/**
 * Version `version` of the app reaches `car` (published, or rolling out with the car in its
 * rollout) and lists its brand; else 404 `app_not_found` / `version_not_found`, 409
 * `version_not_published` / `version_not_released_to_car` / `brand_not_supported`.
 */
export async function requireInstallableVersion(
  db: Db,
  appId: string,
  version: string,
  car: ReleaseCar,
): Promise<void> {
  await existingApp(db, appId);
  const row = await findVersionOf(db, appId, version);
  if (!row) throw new NotFoundError('version_not_found', `The mini-app ${appId} has no version ${version}.`);
  if (row.review_state === 'rolling_out') {
    requireBrand(row, car.brand, 'it cannot be installed there');
    if (!inRollout(await releaseOf(db, appId), car)) {
      throw new ConflictError(
        'version_not_released_to_car',
        `Version ${version} of ${appId} is rolling out to some cars, and this car is not one of them yet: install the live version, or leave out the version to get the one this car should run.`,
      );
    }
    return;
  }
  if (row.review_state !== 'published') {
    const why = row.review_state === 'rolled_back' ? 'was rolled back' : `is ${row.review_state}`;
    throw new ConflictError(
      'version_not_published',
      `Version ${version} of ${appId} ${why}, not published: only a published version can be installed.`,
    );
  }
  requireBrand(row, car.brand, 'it cannot be installed there');
}

/**
 * The version `car` should run of the app (`app.install` without a version): its rollout's when
 * it is in one, else the live one; else 404 `app_not_found`, 409 `app_not_published` /
 * `brand_not_supported`.
 */
export async function installableVersionFor(db: Db, appId: string, car: ReleaseCar): Promise<string> {
  await existingApp(db, appId);
  const release = await releaseOf(db, appId);
  const version = versionForCar(release, car);
  if (version) return version.version;
  const live = release.live ?? release.rollout?.version;
  if (!live) {
    throw new ConflictError(
      'app_not_published',
      `The mini-app ${appId} has no published version to install yet.`,
    );
  }
  requireBrand(live, car.brand, 'it cannot be installed there');
  // Rolling out to other cars only, with nothing live: nothing for this one yet.
  throw new ConflictError(
    'version_not_released_to_car',
    `The mini-app ${appId} is rolling out to some cars, and this car is not one of them yet.`,
  );
}

/**
 * Some version of the app is published, and that live version lists `brand`; else 404
 * `app_not_found`, 409 `app_not_published` / `brand_not_supported`.
 */
export async function requireLiveAppFor(db: Db, appId: string, brand: string): Promise<void> {
  await existingApp(db, appId);
  const live = await findLiveVersion(db, appId);
  if (!live) {
    throw new ConflictError(
      'app_not_published',
      `The mini-app ${appId} has no published version: a car runs only published apps, so none can ask for a token yet.`,
    );
  }
  requireBrand(live, brand, 'no identity token is signed for it there');
}
