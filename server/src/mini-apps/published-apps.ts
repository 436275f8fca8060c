/**
 * What reaches cars: a mini-app version in review state `published`. The one place that asks,
 * for `app.install` (a version) and for identity tokens (the app, any version).
 */
import { ConflictError, NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import { findApp, findVersionOf, hasPublishedVersion } from './mini-app-repository.ts';

async function existingApp(db: Db, appId: string): Promise<void> {
  if (!(await findApp(db, appId))) {
    throw new NotFoundError('app_not_found', `No mini-app ${appId} exists.`);
  }
}

/** Version `version` of the app is published; else 404 `app_not_found` / `version_not_found`, 409 `version_not_published`. */
export async function requirePublishedVersion(db: Db, appId: string, version: string): Promise<void> {
  await existingApp(db, appId);
  const row = await findVersionOf(db, appId, version);
  if (!row) throw new NotFoundError('version_not_found', `The mini-app ${appId} has no version ${version}.`);
  if (row.review_state !== 'published') {
    throw new ConflictError(
      'version_not_published',
      `Version ${version} of ${appId} is ${row.review_state}, not published: only a published version can be installed.`,
    );
  }
}

/** Some version of the app is published; else 404 `app_not_found` or 409 `app_not_published`. */
export async function requirePublishedApp(db: Db, appId: string): Promise<void> {
  await existingApp(db, appId);
  if (!(await hasPublishedVersion(db, appId))) {
    throw new ConflictError(
      'app_not_published',
      `The mini-app ${appId} has no published version: a car runs only published apps, so none can ask for a token yet.`,
    );
  }
}
