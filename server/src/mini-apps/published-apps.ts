/**
 * What reaches cars: a mini-app version in review state `published`, on a car of a brand its
 * manifest lists (all brands when it lists none). The one place that asks, for `app.install` (the
 * version named: its manifest decides) and for identity tokens (the live version's manifest).
 */
import { supportedBrands, supportsBrand } from '@svc/manifest';
import { ConflictError, NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { findApp, findLiveVersion, findVersionOf, type VersionRow } from './mini-app-repository.ts';

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
 * Version `version` of the app is published and lists `brand`; else 404 `app_not_found` /
 * `version_not_found`, 409 `version_not_published` / `brand_not_supported`.
 */
export async function requireInstallableVersion(
  db: Db,
  appId: string,
  version: string,
  brand: string,
): Promise<void> {
  await existingApp(db, appId);
  const row = await findVersionOf(db, appId, version);
  if (!row) throw new NotFoundError('version_not_found', `The mini-app ${appId} has no version ${version}.`);
  if (row.review_state !== 'published') {
    throw new ConflictError(
      'version_not_published',
      `Version ${version} of ${appId} is ${row.review_state}, not published: only a published version can be installed.`,
    );
  }
  requireBrand(row, brand, 'it cannot be installed there');
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
