/**
 * The mini-app folder as `svc publish` sees it, read again on every change: the same walk (what
 * `.svcignore`, `.git` and `node_modules` leave out is not served, so what works in development
 * is what ships) and the same manifest check, every problem kept for the terminal and the panel.
 */
import { join } from 'node:path';
import { CliError } from '../errors.ts';
import { checkManifest, formatManifestProblem, type Manifest } from '../publish/manifest.ts';
import { type PackageFolder, walkPackageFolder } from '../publish/pack.ts';

export interface AppFolderState {
  /** The manifest when it has no problems. */
  manifest: Manifest | undefined;
  /** Every problem of the manifest and the folder, each as the terminal prints it. */
  problems: string[];
  /** What the package would hold, by POSIX path; only these are served. */
  files: ReadonlySet<string>;
  /** Why a file the folder has is not served (left out of the package), by POSIX path. */
  leftOut: ReadonlyMap<string, string>;
  /** The folders the walk read ('' is the app's own): what to watch for changes. */
  folders: readonly string[];
}

export function readAppFolder(dir: string): AppFolderState {
  let folder: PackageFolder;
  try {
    folder = walkPackageFolder(dir);
  } catch (error) {
    // The folder or its .svcignore cannot be read: nothing to serve until it can.
    if (!(error instanceof CliError)) throw error;
    return {
      manifest: undefined,
      problems: [error.message],
      files: new Set(),
      leftOut: new Map(),
      folders: [''],
    };
  }
  const check = checkManifest(dir, folder);
  const problems = [...check.problems.map(formatManifestProblem), ...folder.refusals];
  const leftOut = new Map<string, string>();
  const folders = [''];
  for (const [path, entry] of folder.entries) {
    if (entry.leftOut !== undefined) leftOut.set(path, entry.leftOut);
    else if (entry.kind === 'folder') folders.push(path);
  }
  return {
    manifest: check.manifest,
    problems,
    files: new Set(folder.files.map((file) => file.path)),
    leftOut,
    folders,
  };
}

/** Where a served path is on disk; the caller checked it is one of `files`. */
export function appFilePath(dir: string, path: string): string {
  return join(dir, ...path.split('/'));
}
