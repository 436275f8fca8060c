/** Mini-apps: submitting an uploaded package as a new version, listing, and review moves. */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { supportedBrands } from '@svc/manifest';
import { compareVersions, parseVersion } from '@svc/sdk';
import type { components } from '../../../generated/openapi.ts';
import type { Principal } from '../auth/principal.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, DomainError, ForbiddenError, InvalidError, NotFoundError } from '../errors.ts';
import type { Db } from '../store/db.ts';
import type { UploadRow, UploadService, UploadUrl } from '../uploads/upload-service.ts';
import {
  findApp,
  findPublished,
  findVersion,
  insertApp,
  insertVersion,
  listAppsOf,
  listVersionNumbers,
  listVersionsInStates,
  listVersionsOfApps,
  lockApp,
  type MiniAppRow,
  touchApp,
  type VersionRow,
} from './mini-app-repository.ts';
import { checkPackage } from './package-check.ts';
import { moveVersion, type ReleaseEvents, reviewStateChanged, rolloutMoved } from './release-events.ts';
import { checkMove, initialReviewState, type Party, type ReviewState } from './review.ts';
import { findRolloutUnderWay, insertRollout, type RolloutRow } from './rollout-repository.ts';

export type MiniApp = components['schemas']['MiniApp'];
type RolloutRequest = components['schemas']['RolloutRequest'];
export type MiniAppVersion = components['schemas']['MiniAppVersion'];

/**
 * Versions stored before the contract took semver's grammar whole (`1.0.0-01` once passed) are not
 * versions: they take no part in ordering, so one of them can never block its app.
 */
function isVersion(version: string): boolean {
  return parseVersion(version) !== undefined;
}

export function toApiVersion(row: VersionRow): MiniAppVersion {
  return {
    id: row.id,
    app_id: row.app_id,
    version: row.version,
    review_state: row.review_state,
    reason: row.reason,
    manifest: row.manifest,
    package: { size: row.package_size, sha256: row.package_sha256 },
    submitted_at: row.submitted_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

function toApiApp(app: MiniAppRow, versions: VersionRow[]): MiniApp {
  const latest = versions[0];
  return {
    id: app.id,
    name: app.name,
    owner_id: app.owner_id,
    latest_version: latest ? toApiVersion(latest) : null,
    live_version: versions.find((v) => v.review_state === 'published')?.version ?? null,
    versions: versions.map(toApiVersion),
    created_at: app.created_at.toISOString(),
    updated_at: app.updated_at.toISOString(),
  };
}

/**
 * What makes a version one its developer may submit: the app id is theirs (or nobody's yet), and
 * the version is new and greater than every earlier one. Asked when the upload URL is, so that
 * nothing is uploaded in vain, and again at submit, where it counts.
 */
async function refuseSubmission(
  db: Db,
  accountId: string,
  app: Pick<MiniAppRow, 'id' | 'owner_id'> | undefined,
  appId: string,
  version: string,
): Promise<void> {
  if (app && app.owner_id !== accountId) {
    throw new ForbiddenError(
      'app_owned_by_another',
      `The app id ${appId} belongs to another developer: choose another id in manifest.json.`,
    );
  }
  if (!app) return;
  const earlier = await listVersionNumbers(db, app.id);
  if (earlier.includes(version)) {
    throw new ConflictError(
      'version_exists',
      `${appId} ${version} was submitted already: raise the version in manifest.json.`,
    );
  }
  const highest = earlier.filter(isVersion).sort(compareVersions).at(-1);
  if (highest && compareVersions(version, highest) <= 0) {
    throw new ConflictError(
      'version_not_greater',
      `${appId} ${version} is not greater than ${highest}, its latest version: raise the version in manifest.json.`,
    );
  }
}

export interface MiniAppService {
  /** An upload URL for a new version of `app_id`, refused at once when submit would refuse it. */
  requestUpload(
    principal: Principal,
    input: { size: number; sha256: string; app_id: string; version: string },
  ): Promise<UploadUrl>;
  submit(principal: Principal, uploadId: string): Promise<VersionRow>;
  listMine(principal: Principal): Promise<MiniApp[]>;
  transition(
    principal: Principal,
    versionId: string,
    to: ReviewState,
    reason: string | undefined,
    rollout?: RolloutRequest,
  ): Promise<VersionRow>;
  /** Versions waiting for review and versions live on cars (which an admin may remove). */
  reviewQueue(principal: Principal): Promise<{ waiting: VersionRow[]; published: VersionRow[] }>;
  /** The version's package, to read: for admins and the app's developer. */
  openPackage(principal: Principal, versionId: string): Promise<{ version: VersionRow; content: Readable }>;
}

/**
 * The version `versionId` and who `principal` is to it, locked when `lock`. Someone else's
 * version is as good as absent to a developer: 404, whether or not it exists.
 */
async function versionFor(
  db: Db,
  principal: Principal,
  versionId: string,
  options: { lock?: boolean } = {},
): Promise<{ version: VersionRow; app: MiniAppRow; parties: Set<Party> }> {
  const version = await findVersion(db, versionId, options);
  const app = version && (await findApp(db, version.app_id));
  const parties = new Set<Party>();
  if (principal.isAdmin) parties.add('admin');
  if (app?.owner_id === principal.accountId) parties.add('owner');
  if (!version || !app || parties.size === 0) {
    const whose = principal.isAdmin ? '' : ' of yours';
    throw new NotFoundError('version_not_found', `No mini-app version ${versionId}${whose} exists.`);
  }
  return { version, app, parties };
}

/** A rollout goes with `rolling_out`, and with nothing else. */
function checkRolloutAsked(to: ReviewState, rollout: RolloutRequest | undefined): void {
  if (to === 'rolling_out' && !rollout) {
    throw new InvalidError(
      'rollout_required',
      'Moving a version to rolling_out needs a rollout: give `rollout: {percent}` (svc release --rollout <percent>).',
    );
  }
  if (to !== 'rolling_out' && rollout) {
    throw new InvalidError(
      'rollout_not_expected',
      `A rollout goes only with the move to rolling_out, not with ${to}.`,
    );
  }
}

/** One rollout an app at a time: a release waits for the one under way to end. */
async function refuseWhileRollingOut(trx: Db, appId: string): Promise<void> {
  const underWay = await findRolloutUnderWay(trx, appId);
  if (!underWay) return;
  const rolling = await findVersion(trx, underWay.version_id);
  throw new ConflictError(
    'rollout_in_progress',
    `${appId} ${rolling?.version ?? ''} is rolling out (${underWay.state}, ${underWay.percent} %): complete it or roll it back first (svc rollout complete|rollback ${appId}).`,
  );
}

/** No version goes live below one that is live already. */
function refuseOlderThanLive(version: VersionRow, live: readonly VersionRow[]): void {
  const newer = live.find(
    (other) =>
      isVersion(other.version) &&
      isVersion(version.version) &&
      compareVersions(other.version, version.version) > 0,
  );
  if (newer) {
    throw new ConflictError(
      'newer_version_live',
      `${version.app_id} ${newer.version} is live, which is newer than ${version.version}: publish a newer version instead.`,
    );
  }
}

/** The versions live before are `superseded`: a newer one is published, or its rollout completed. */
export async function supersede(
  trx: Db,
  events: ReleaseEvents,
  live: readonly VersionRow[],
  now: Date,
): Promise<void> {
  for (const superseded of live) {
    checkMove(superseded.review_state, 'superseded', new Set(['system']), undefined);
    await moveVersion(trx, events, superseded, { review_state: 'superseded', reason: null, updated_at: now });
  }
}

async function startRollout(
  trx: Db,
  input: { version: VersionRow; previous: VersionRow | undefined; rollout: RolloutRequest; now: Date },
): Promise<RolloutRow> {
  const { version, rollout, now } = input;
  const listed = supportedBrands(version.manifest);
  const unlisted = (rollout.brands ?? []).filter((brand) => !listed.includes(brand));
  if (unlisted.length > 0) {
    throw new InvalidError(
      'brand_not_in_manifest',
      `${version.app_id} ${version.version} runs on ${listed.join(', ')} only (its manifest), not on ${unlisted.join(', ')}: roll it out to brands its manifest lists.`,
      { errors: [{ path: '/body/rollout/brands', message: `must be among ${listed.join(', ')}` }] },
    );
  }
  return insertRollout(trx, {
    id: randomUUID(),
    app_id: version.app_id,
    version_id: version.id,
    previous_version_id: input.previous?.id ?? null,
    percent: rollout.percent,
    brands: rollout.brands ?? null,
    state: 'active',
    created_at: now,
    updated_at: now,
  });
}

export function createMiniAppService(
  deps: ReleaseEvents & {
    db: Db;
    clock: Clock;
    uploads: UploadService;
    /** What reaches cars of the app changed (committed): the app updater moves the cars. */
    onReleaseChanged?: (appId: string) => void;
  },
): MiniAppService {
  const { db, clock, uploads } = deps;

  /** Checks and records the submission; throws the refusal, a DomainError. */
  async function submitStored(principal: Principal, upload: UploadRow): Promise<VersionRow> {
    const { manifest } = await uploads.checkStored(upload, checkPackage);
    if (upload.app_id !== null && (manifest.id !== upload.app_id || manifest.version !== upload.version)) {
      throw new InvalidError(
        'package_mismatch',
        `The package's manifest is ${manifest.id} ${manifest.version}, but its upload URL was asked for ${upload.app_id} ${upload.version}: publish again.`,
      );
    }
    return db.transaction(async (trx) => {
      const now = clock();
      await uploads.markSubmitted(trx, upload.id, now);
      // The first submission of an app id claims it for its developer.
      await insertApp(trx, {
        id: manifest.id,
        owner_id: principal.accountId,
        name: manifest.name,
        created_at: now,
        updated_at: now,
      });
      const app = await lockApp(trx, manifest.id);
      if (!app) throw new Error(`app ${manifest.id} vanished while submitting`);
      await refuseSubmission(trx, principal.accountId, app, manifest.id, manifest.version);
      await touchApp(trx, app.id, { name: manifest.name, updated_at: now });
      const submitted = await insertVersion(trx, {
        id: randomUUID(),
        app_id: app.id,
        version: manifest.version,
        review_state: initialReviewState,
        reason: null,
        manifest,
        package_size: upload.size,
        package_sha256: upload.sha256,
        upload_id: upload.id,
        submitted_at: now,
        updated_at: now,
      });
      await reviewStateChanged(trx, deps, submitted, null);
      return submitted;
    });
  }

  return {
    async requestUpload(principal, input) {
      await refuseSubmission(
        db,
        principal.accountId,
        await findApp(db, input.app_id),
        input.app_id,
        input.version,
      );
      return uploads.createUploadUrl(principal.accountId, input);
    },

    async submit(principal, uploadId) {
      const upload = await uploads.submittable(principal.accountId, uploadId);
      try {
        return await submitStored(principal, upload);
      } catch (error) {
        // A refused package is of no further use; nothing keeps it on disk.
        if (error instanceof DomainError && error.code !== 'upload_submitted')
          await uploads.refuse(upload.id);
        throw error;
      }
    },

    async listMine(principal) {
      const apps = await listAppsOf(db, principal.accountId);
      const versions = await listVersionsOfApps(
        db,
        apps.map((app) => app.id),
      );
      return apps.map((app) =>
        toApiApp(
          app,
          versions.filter((v) => v.app_id === app.id),
        ),
      );
    },

    async transition(principal, versionId, to, reason, rollout) {
      checkRolloutAsked(to, rollout);
      const moved = await db.transaction(async (trx) => {
        const { version, app, parties } = await versionFor(trx, principal, versionId, { lock: true });
        const move = checkMove(version.review_state, to, parties, reason);
        const now = clock();
        let started: RolloutRow | undefined;
        if (move.to === 'published' || move.to === 'rolling_out') {
          // The app's row is the lock releases of one app queue on, so two cannot both go live.
          await lockApp(trx, app.id);
          await refuseWhileRollingOut(trx, app.id);
          const live = await findPublished(trx, app.id, version.id);
          refuseOlderThanLive(version, live);
          if (move.to === 'published') {
            // Publishing a version supersedes the one that was live.
            await supersede(trx, deps, live, now);
          } else if (rollout) {
            // The version live stays so for the cars outside the rollout, until it completes.
            started = await startRollout(trx, { version, previous: live[0], rollout, now });
          }
        }
        await touchApp(trx, app.id, { updated_at: now });
        const movedVersion = await moveVersion(trx, deps, version, {
          review_state: move.to,
          reason: move.reasonRequired ? (reason?.trim() ?? null) : null,
          updated_at: now,
        });
        if (started) await rolloutMoved(trx, deps, started, 'started');
        return movedVersion;
      });
      if (moved.review_state === 'published' || moved.review_state === 'rolling_out') {
        deps.onReleaseChanged?.(moved.app_id);
      }
      return moved;
    },

    async reviewQueue(principal) {
      if (!principal.isAdmin) throw new ForbiddenError('admins_only', 'Only admins see the review queue.');
      return {
        waiting: await listVersionsInStates(db, ['submitted', 'in_review']),
        published: await listVersionsInStates(db, ['published']),
      };
    },

    async openPackage(principal, versionId) {
      const { version } = await versionFor(db, principal, versionId);
      const expected = { size: version.package_size, sha256: version.package_sha256 };
      return { version, content: await uploads.openPackage(version.upload_id, expected) };
    },
  };
}
