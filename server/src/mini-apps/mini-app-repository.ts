/** SQL for mini-apps and their versions. */
import type { components } from '../../../generated/openapi.ts';
import type { Db } from '../store/db.ts';
import type { ReviewState } from './review.ts';

type Manifest = components['schemas']['Manifest'];

export interface MiniAppRow {
  id: string;
  owner_id: string;
  name: string;
  created_at: Date;
  updated_at: Date;
}

export interface VersionRow {
  id: string;
  app_id: string;
  version: string;
  review_state: ReviewState;
  reason: string | null;
  manifest: Manifest;
  package_size: number;
  package_sha256: string;
  upload_id: string;
  submitted_at: Date;
  updated_at: Date;
}

// pg returns bigint columns as strings; PGlite may return jsonb as text.
function versionFromDb(row: VersionRow): VersionRow {
  const manifest = typeof row.manifest === 'string' ? (JSON.parse(row.manifest) as Manifest) : row.manifest;
  return { ...row, package_size: Number(row.package_size), manifest };
}

/** The app, locked until the transaction ends, so two submissions of one app take turns. */
export async function lockApp(db: Db, id: string): Promise<MiniAppRow | undefined> {
  return db<MiniAppRow>('mini_apps').where({ id }).forUpdate().first();
}

export async function insertApp(db: Db, row: MiniAppRow): Promise<MiniAppRow | undefined> {
  const [inserted] = await db<MiniAppRow>('mini_apps').insert(row).onConflict('id').ignore().returning('*');
  return inserted;
}

export async function touchApp(
  db: Db,
  id: string,
  changes: { name?: string; updated_at: Date },
): Promise<void> {
  await db('mini_apps').where({ id }).update(changes);
}

export async function listVersionNumbers(db: Db, appId: string): Promise<string[]> {
  return db('mini_app_versions').where({ app_id: appId }).pluck('version');
}

export async function insertVersion(db: Db, row: VersionRow): Promise<VersionRow> {
  const [inserted] = await db<VersionRow>('mini_app_versions')
    .insert({ ...row, manifest: JSON.stringify(row.manifest) as unknown as Manifest })
    .returning('*');
  return versionFromDb(inserted as VersionRow);
}

export async function findVersion(
  db: Db,
  id: string,
  options: { lock?: boolean } = {},
): Promise<VersionRow | undefined> {
  const query = db<VersionRow>('mini_app_versions').where({ id });
  const row = await (options.lock ? query.forUpdate() : query).first();
  return row && versionFromDb(row);
}

/** One version of an app by its number, or undefined when the app has no such version. */
export async function findVersionOf(db: Db, appId: string, version: string): Promise<VersionRow | undefined> {
  const row = await db<VersionRow>('mini_app_versions').where({ app_id: appId, version }).first();
  return row && versionFromDb(row);
}

export async function findApp(db: Db, id: string): Promise<MiniAppRow | undefined> {
  return db<MiniAppRow>('mini_apps').where({ id }).first();
}

export async function updateVersionState(
  db: Db,
  id: string,
  changes: { review_state: ReviewState; reason: string | null; updated_at: Date },
): Promise<VersionRow> {
  const [row] = await db<VersionRow>('mini_app_versions').where({ id }).update(changes).returning('*');
  return versionFromDb(row as VersionRow);
}

/** The published versions of an app other than `exceptId`. */
export async function findPublished(db: Db, appId: string, exceptId: string): Promise<VersionRow[]> {
  const rows = await db<VersionRow>('mini_app_versions')
    .where({ app_id: appId, review_state: 'published' })
    .whereNot({ id: exceptId });
  return rows.map(versionFromDb);
}

/** The app's version live on cars (`published`: one an app at most), or undefined when none is. */
export async function findLiveVersion(db: Db, appId: string): Promise<VersionRow | undefined> {
  const row = await db<VersionRow>('mini_app_versions')
    .where({ app_id: appId, review_state: 'published' })
    .orderBy([{ column: 'submitted_at', order: 'desc' }, { column: 'id' }])
    .first();
  return row && versionFromDb(row);
}

export async function listAppsOf(db: Db, ownerId: string): Promise<MiniAppRow[]> {
  return db<MiniAppRow>('mini_apps')
    .where({ owner_id: ownerId })
    .orderBy([{ column: 'updated_at', order: 'desc' }, { column: 'id' }]);
}

export async function listVersionsOfApps(db: Db, appIds: string[]): Promise<VersionRow[]> {
  if (appIds.length === 0) return [];
  const rows = await db<VersionRow>('mini_app_versions')
    .whereIn('app_id', appIds)
    .orderBy([{ column: 'submitted_at', order: 'desc' }, { column: 'id' }]);
  return rows.map(versionFromDb);
}

export async function listVersionsInStates(db: Db, states: ReviewState[]): Promise<VersionRow[]> {
  const rows = await db<VersionRow>('mini_app_versions')
    .whereIn('review_state', states)
    .orderBy([{ column: 'submitted_at' }, { column: 'id' }]);
  return rows.map(versionFromDb);
}

/** The apps with a version that reaches cars (published, or rolling out). */
export async function listReleasedAppIds(db: Db): Promise<string[]> {
  const rows = await db('mini_app_versions')
    .distinct('app_id')
    .whereIn('review_state', ['published', 'rolling_out'] satisfies ReviewState[]);
  return rows.map((row: { app_id: string }) => row.app_id);
}
