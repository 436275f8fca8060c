/**
 * What goes into a mini-app package and how it is packed: the folder's files, less `.git`,
 * `node_modules` and what `.svcignore` lists, as a deterministic `.tar.gz` streamed to a temp file.
 *
 * The folder is walked once per publish (`walkPackageFolder`): the manifest check and the packing
 * both read that one walk, so they cannot disagree on what the package holds.
 *
 * `.svcignore` (read from the package folder's root only) has gitignore's full semantics, read by
 * the same library that reads `.gitignore` for many Node tools (`ignore`): blank lines and `#`
 * comments are skipped, `\` makes the next character literal, `*`, `?` and `[a-z]` match within a
 * name, `**` across folders, a leading or middle `/` ties a pattern to the package root, a
 * trailing `/` matches folders only, `!` re-includes what an earlier line left out, and the last
 * matching line wins. As in git, a file inside a left-out folder cannot be re-included: the folder
 * is not even read. `.git` and `node_modules` are always left out, at any depth, whatever
 * `.svcignore` says. `.svcignore` itself is packed like any file (list it to leave it out), and
 * `manifest.json` must be packed. Packages hold regular files only: empty folders are dropped, and
 * a symbolic link, socket or device is refused unless `.svcignore` leaves it out.
 */
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, Stats } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { constants as zlibConstants } from 'node:zlib';
import {
  ignoreFileName,
  leftOutBy,
  manifestFileName,
  noPackageIgnore,
  type PackageIgnore,
  parsePackageIgnore,
} from '@svc/manifest';
import { Pack } from 'tar';
import { CliError } from '../errors.ts';

export interface PackageFile {
  /** POSIX path relative to the package folder, as stored in the archive. */
  path: string;
  /** Bytes. */
  size: number;
}

/** One name the walk looked at, packed or left out. */
export interface FolderEntry {
  kind: 'file' | 'folder' | 'symbolic link' | 'other';
  /** Why it is left out of the package; unset when it is packed (or, for a folder, read). */
  leftOut?: string;
}

/** A package folder as one walk saw it: what the manifest check and the packing both go by. */
export interface PackageFolder {
  dir: string;
  ignore: PackageIgnore;
  /** Every name the walk looked at, by POSIX path; nothing inside a left-out folder. */
  entries: ReadonlyMap<string, FolderEntry>;
  /** The files the package holds, sorted by the bytes of their paths. */
  files: readonly PackageFile[];
  /** Why the folder cannot be packed as it is (a symbolic link, a name that is not UTF-8, …). */
  refusals: readonly string[];
}

export interface PackedPackage {
  /** The `.tar.gz`, in a temp folder of its own; `remove()` deletes both. */
  path: string;
  /** Bytes of the `.tar.gz`. */
  size: number;
  /** Lowercase hex SHA-256 of the `.tar.gz`. */
  sha256: string;
  remove(): Promise<void>;
}

/** ustar splits a long path at a `/` into a 155-byte prefix and a 100-byte name. */
const maxPathBytes = 155 + 1 + 100;
/** The largest size a ustar header holds (11 octal digits): 8 GiB less one byte. */
const maxFileSize = 0o77777777777;

/**
 * Fixed, since zlib's output depends on them: the same files then give the same bytes with the
 * same zlib (Node's bundled one; the tar inside is the same everywhere). In portable mode tar
 * writes 255 ("unknown") as the gzip header's OS byte, not the platform's, and the header's mtime
 * is 0.
 */
const gzipOptions = {
  level: 6,
  memLevel: 8,
  windowBits: 15,
  strategy: zlibConstants.Z_DEFAULT_STRATEGY,
} as const;
export const gzipOsByte = 255;

/** Bytes read from a file at a time while packing: streaming, whatever the file's size. */
const readChunkBytes = 256 * 1024;

/** Reads `.svcignore` at the root of `dir`; none means nothing beyond `.git` and `node_modules`. */
export function readPackageIgnore(dir: string): PackageIgnore {
  const file = join(dir, ignoreFileName);
  let text: string;
  try {
    if (!lstatSync(file).isFile()) {
      throw new CliError(`${file} must be a regular file listing what to leave out of the package`);
    }
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (isNotFound(error)) return noPackageIgnore;
    if (error instanceof CliError) throw error;
    throw new CliError(`cannot read ${file}: ${errorMessage(error)}`);
  }
  return parsePackageIgnore(text);
}

/**
 * Reads `dir` and its `.svcignore` once: every name, what is left out and why, the files a package
 * holds, and what it cannot hold. Throws only when `dir` or `.svcignore` cannot be read; what the
 * package cannot hold is kept in `refusals`, so that the manifest's problems can be told first.
 */
export function walkPackageFolder(dir: string): PackageFolder {
  let root: Stats;
  try {
    root = lstatSync(dir);
  } catch (error) {
    throw new CliError(
      isNotFound(error) ? `no folder at ${dir}` : `cannot read ${dir}: ${errorMessage(error)}`,
    );
  }
  if (!root.isDirectory()) throw new CliError(`${dir} is not a folder: give the folder of the mini-app`);
  const ignore = readPackageIgnore(dir);
  const entries = new Map<string, FolderEntry>();
  const files: PackageFile[] = [];
  const refusals: string[] = [];
  const walk = (relDir: string): void => {
    // Names come as bytes so that one that is not UTF-8 is refused, not silently mangled.
    const names = readdirSync(relDir === '' ? dir : join(dir, relDir), { encoding: 'buffer' });
    for (const rawName of names) {
      const name = decodeName(rawName);
      if (name === undefined) {
        const shown = `${relDir === '' ? '' : `${relDir}/`}${rawName.toString('utf8')}`;
        refusals.push(`"${shown}" has a name that is not valid UTF-8: rename it or remove it`);
        continue;
      }
      const path = relDir === '' ? name : `${relDir}/${name}`;
      const stats = lstatSync(join(dir, path));
      const kind = entryKind(stats);
      const leftOut = leftOutBy(ignore, path, kind === 'folder');
      entries.set(path, leftOut === undefined ? { kind } : { kind, leftOut });
      if (leftOut !== undefined) continue;
      if (kind === 'folder') {
        walk(path);
        continue;
      }
      const refusal = refusalOf(path, stats);
      if (refusal === undefined) files.push({ path, size: stats.size });
      else refusals.push(refusal);
    }
  };
  walk('');
  files.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  return { dir, ignore, entries, files, refusals };
}

/** The files of a walked folder, or the first reason it cannot be packed. */
export function packageFiles(folder: PackageFolder): PackageFile[] {
  const [refusal] = folder.refusals;
  if (refusal !== undefined) throw new CliError(refusal);
  if (!folder.files.some((file) => file.path === manifestFileName)) {
    const reason = folder.entries.get(manifestFileName)?.leftOut;
    throw new CliError(
      reason === undefined
        ? `no ${manifestFileName} in ${folder.dir}: every package needs one at its root`
        : `${manifestFileName} must be packed, but ${reason}`,
    );
  }
  return [...folder.files];
}

/**
 * The files a package of `dir` holds, sorted by the bytes of their paths so the archive does not
 * depend on the order the file system lists them in. Refuses what a package cannot hold: symbolic
 * links and other special files, names that are not UTF-8 or too long for the archive.
 */
export async function listPackageFiles(dir: string): Promise<PackageFile[]> {
  return packageFiles(walkPackageFolder(dir));
}

/**
 * Writes `files` of `dir` as a gzip'd tar archive to a new temp file, hashing it on the way, with
 * tar in portable mode: no owner, group or times beyond a fixed mtime of 0. File contents are
 * streamed, never held whole. Each entry has mode 0644 (0755 when its owner may execute it) and
 * is stored as its own content, never as a hard link to another entry (the service refuses
 * links); there are no folder entries (tar makes the folders on extraction). A file that is no
 * longer the regular file of the size listed fails the packing rather than produce an archive
 * that does not match the listing.
 */
export async function packPackage(dir: string, files: readonly PackageFile[]): Promise<PackedPackage> {
  const tempDir = await mkdtemp(join(tmpdir(), 'svc-package-'));
  const remove = () => rm(tempDir, { recursive: true, force: true });
  const path = join(tempDir, 'package.tar.gz');
  const hash = createHash('sha256');
  const listed = new Map(files.map((file) => [file.path, file.size]));
  let changed: PackageFile | undefined;
  let size = 0;
  const pack = new Pack({
    cwd: dir,
    portable: true,
    mtime: new Date(0),
    gzip: { ...gzipOptions },
    strict: true,
    maxReadSize: readChunkBytes,
    // Runs on tar's own lstat of each path, before its header is written: the place to hold tar
    // to the listing and to make the header depend on nothing but the path, size and owner's x bit.
    filter: (entryPath, stats) => {
      if (!(stats instanceof Stats)) return true;
      const size = listed.get(entryPath);
      if (!stats.isFile() || stats.size !== size) {
        changed ??= { path: entryPath, size: size ?? 0 };
        return false;
      }
      // The permission bits only: the bits above them tell tar (and isFile()) what kind of entry it is.
      stats.mode = (stats.mode & ~0o7777) | ((stats.mode & 0o100) !== 0 ? 0o755 : 0o644);
      stats.nlink = 1;
      return true;
    },
  });
  try {
    const file = await open(path, 'wx', 0o600);
    const written = pipeline(
      pack,
      async function* hashAndCount(source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          hash.update(chunk);
          size += chunk.length;
          yield chunk;
        }
      },
      file.createWriteStream(),
    );
    // Added one by one, not through tar.create, which would read a name starting with `@` as an
    // archive to copy from.
    for (const { path: filePath } of files) pack.add(filePath);
    pack.end();
    await written.catch((error: unknown) => {
      // tar reads exactly the listed size; a file that shrank or grew meanwhile ends early or late.
      const eof = error as { code?: string; path?: string };
      if (eof.code !== 'EOF') throw error;
      const found = files.find((listedFile) => join(dir, listedFile.path) === eof.path);
      throw found ? changedWhilePacking(found) : error;
    });
    if (changed) throw changedWhilePacking(changed);
  } catch (error) {
    await remove();
    throw error;
  }
  return { path, size, sha256: hash.digest('hex'), remove };
}

function entryKind(stats: Stats): FolderEntry['kind'] {
  if (stats.isDirectory()) return 'folder';
  if (stats.isFile()) return 'file';
  if (stats.isSymbolicLink()) return 'symbolic link';
  return 'other';
}

/** Why the packed path `path` cannot be in a package, or undefined when it can. */
function refusalOf(path: string, stats: Stats): string | undefined {
  if (stats.isSymbolicLink()) {
    return (
      `${path} is a symbolic link, and a package holds regular files only: ` +
      `replace it by a copy of what it points to, or list it in ${ignoreFileName}`
    );
  }
  if (!stats.isFile()) {
    return `${path} is not a regular file (it is a ${specialKind(stats)}): remove it or list it in ${ignoreFileName}`;
  }
  const pathBytes = Buffer.byteLength(path);
  if (pathBytes > maxPathBytes) {
    return `${path} cannot be packed: its path is ${pathBytes} bytes long, and a package holds paths of at most ${maxPathBytes} bytes`;
  }
  if (stats.size > maxFileSize) {
    return `${path} is ${stats.size} bytes, and a package holds files of at most 8 GiB`;
  }
  return undefined;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

function decodeName(raw: Buffer): string | undefined {
  try {
    return strictUtf8.decode(raw);
  } catch {
    return undefined;
  }
}

function changedWhilePacking(file: PackageFile): CliError {
  return new CliError(`${file.path} changed while it was being packed: run the command again`);
}

function specialKind(stats: { isFIFO(): boolean; isSocket(): boolean }): string {
  if (stats.isFIFO()) return 'named pipe';
  if (stats.isSocket()) return 'socket';
  return 'device';
}

function isNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
