/** The steps of `svc publish`, from folder to submitted version: check the manifest, pack, get a presigned URL, upload, submit. */
import { rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { components } from '@svc/sdk';
import type { SvcContext } from '../context.ts';
import { CliError, ExitCode } from '../errors.ts';
import { expectOk, type Session } from '../session.ts';
import { checkLimits, serviceLimits } from './limits.ts';
import { readManifest } from './manifest.ts';
import { packageFiles, packPackage, walkPackageFolder } from './pack.ts';
import { createProgress } from './progress.ts';
import { uploadPackage } from './upload.ts';

type Manifest = components['schemas']['Manifest'];
type MiniAppVersion = components['schemas']['MiniAppVersion'];

export interface PackedSummary {
  manifest: Manifest;
  files: { path: string; size: number }[];
  total: number;
  size: number;
  sha256: string;
}

/**
 * What `--dry-run` shows: the manifest is checked and the package made, nothing is sent. The folder
 * is walked once, and the manifest check and the packing both go by that walk.
 */
export async function preparePackage(dir: string) {
  const stats = statSync(dir, { throwIfNoEntry: false });
  if (!stats?.isDirectory()) {
    throw new CliError(
      `${dir} is ${stats ? 'not a folder' : 'not there'}: pass the folder that holds manifest.json.`,
    );
  }
  const folder = walkPackageFolder(dir);
  const manifest = readManifest(dir, folder);
  const files = packageFiles(folder);
  const packed = await packPackage(dir, files);
  const summary: PackedSummary = {
    manifest,
    files,
    total: files.reduce((sum, file) => sum + file.size, 0),
    size: packed.size,
    sha256: packed.sha256,
  };
  return { summary, packed };
}

/**
 * While `work` runs, Ctrl-C ends svc at once (exit 130) and says what became of the publish:
 * a person who stops an upload wants to know whether anything reached the review queue.
 */
async function onInterrupt<T>(
  context: SvcContext,
  outcome: string,
  cleanUp: () => void,
  work: () => Promise<T>,
): Promise<T> {
  const interrupted = () => {
    cleanUp();
    context.stderr.write(`\nsvc: cancelled: ${outcome}\n`);
    process.exit(ExitCode.cancelled);
  };
  process.once('SIGINT', interrupted);
  try {
    return await work();
  } finally {
    process.off('SIGINT', interrupted);
  }
}

export async function publish(
  session: Session,
  dir: string,
  context: SvcContext,
): Promise<{ summary: PackedSummary; version: MiniAppVersion }> {
  const { summary, packed } = await preparePackage(dir);
  try {
    const { client } = session;
    // The service refuses an app id of another developer or a version not greater right here,
    // before any byte is uploaded.
    checkLimits(summary, await serviceLimits(session));
    const target = await expectOk(
      session,
      client.POST('/api/v1/mini-apps/upload-url', {
        body: {
          app_id: summary.manifest.id,
          version: summary.manifest.version,
          size: packed.size,
          sha256: packed.sha256,
        },
      }),
    );
    const progress = createProgress(context.stderr, packed.size);
    const removePackage = () => rmSync(dirname(packed.path), { recursive: true, force: true });
    await onInterrupt(context, 'the upload stopped, and nothing was submitted.', removePackage, () =>
      uploadPackage(target, packed, (sent) => progress.update(sent)),
    );
    progress.done();
    const version = await onInterrupt(
      context,
      'the package was uploaded, and the submission may or may not have arrived: see `svc status`.',
      removePackage,
      () =>
        expectOk(session, client.POST('/api/v1/mini-apps/submit', { body: { upload_id: target.upload_id } })),
    );
    return { summary, version };
  } finally {
    await packed.remove();
  }
}
