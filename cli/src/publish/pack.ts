/**
 * What goes into a mini-app package and how it is packed: the folder's files, less `.git`,
 * `node_modules` and what `.svcignore` lists, as a deterministic `.tar.gz` streamed to a temp file.
 *
 * `.svcignore` (read from the package folder's root only) takes this subset of gitignore:
 * - one pattern per line; blank lines and lines starting with `#` are skipped; trailing spaces
 *   are dropped; `\` makes the next character literal (`\#`, `\!`, `\ `, `\*`);
 * - `*` matches any run of characters but `/`, `?` one character but `/`, `[abc]`, `[a-z]`,
 *   `[!a-z]` one character of a set;
 * - `**\/` at the start matches in every folder, `/**` at the end everything inside, `/**\/` in the
 *   middle zero or more folders;
 * - a pattern with no `/` but a trailing one matches a name at any depth; one with a `/` at the
 *   start or in the middle is relative to the package root; a trailing `/` matches folders only;
 * - `!` re-includes what an earlier pattern left out; the last matching line wins. As in git, a
 *   file inside a left-out folder cannot be re-included: the folder is not even read.
 * `.git` and `node_modules` are always left out, at any depth, whatever `.svcignore` says.
 * `.svcignore` itself is packed like any file (list it to leave it out), and `manifest.json`
 * must be packed. Packages hold regular files only: empty folders are dropped, and a symbolic
 * link, socket or device is refused unless `.svcignore` leaves it out.
 */
import { createHash } from 'node:crypto';
import { constants as fsConstants, lstatSync, readFileSync } from 'node:fs';
import { lstat, mkdtemp, open, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip, constants as zlibConstants } from 'node:zlib';
import { CliError } from '../errors.ts';

export interface PackageFile {
  /** POSIX path relative to the package folder, as stored in the archive. */
  path: string;
  /** Bytes. */
  size: number;
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

/** The rules that leave files out of a package: `.svcignore` plus the names never packed. */
export interface PackageIgnore {
  readonly rules: readonly IgnoreRule[];
}

export interface IgnoreRule {
  /** The line as written in `.svcignore`, for messages. */
  readonly source: string;
  readonly line: number;
  readonly negated: boolean;
  readonly directoryOnly: boolean;
  readonly regex: RegExp;
}

export const ignoreFileName = '.svcignore';
export const manifestFileName = 'manifest.json';

/** Version control data and installed dependencies are never part of an app. */
const neverPacked: ReadonlySet<string> = new Set(['.git', 'node_modules']);

const blockSize = 512;
/** ustar's limits: a 100-byte name, a 155-byte prefix, and a size of 11 octal digits. */
const maxNameBytes = 100;
const maxPrefixBytes = 155;
const maxPathBytes = maxPrefixBytes + 1 + maxNameBytes;
const maxFileSize = 0o77777777777;

/**
 * Fixed, since zlib's output depends on them: the same files then give the same bytes with the
 * same zlib (Node's bundled one; the tar inside is the same everywhere). zlib writes the gzip
 * header's OS byte from the platform it was built for, so it is overwritten with Unix's, 3; the
 * header's mtime is already 0, as Node never sets one, and is zeroed all the same.
 */
const gzipOptions = {
  level: 6,
  memLevel: 8,
  windowBits: 15,
  strategy: zlibConstants.Z_DEFAULT_STRATEGY,
} as const;
export const gzipOsByte = 3;

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
    if (isNotFound(error)) return { rules: [] };
    if (error instanceof CliError) throw error;
    throw new CliError(`cannot read ${file}: ${errorMessage(error)}`);
  }
  return parsePackageIgnore(text);
}

export function parsePackageIgnore(text: string): PackageIgnore {
  const rules: IgnoreRule[] = [];
  text.split(/\r?\n/).forEach((raw, index) => {
    const rule = parseIgnoreLine(raw, index + 1);
    if (rule) rules.push(rule);
  });
  return { rules };
}

/**
 * Why `path` (POSIX, relative to the package root) is left out of the package, or undefined when
 * it is packed. Only the path itself is judged: the caller asks for each folder on the way down.
 */
export function leftOutBy(ignore: PackageIgnore, path: string, isDirectory: boolean): string | undefined {
  const name = path.slice(path.lastIndexOf('/') + 1);
  if (neverPacked.has(name)) return `"${name}" is never packed`;
  let deciding: IgnoreRule | undefined;
  for (const rule of ignore.rules) {
    if (rule.directoryOnly && !isDirectory) continue;
    if (rule.regex.test(path)) deciding = rule;
  }
  if (deciding === undefined || deciding.negated) return undefined;
  return `${ignoreFileName} line ${deciding.line} ("${deciding.source}") leaves it out`;
}

/**
 * The files a package of `dir` holds, sorted by the bytes of their paths so the archive does not
 * depend on the order the file system lists them in. Refuses what a package cannot hold: symbolic
 * links and other special files, names that are not UTF-8 or too long for the archive.
 */
export async function listPackageFiles(dir: string): Promise<PackageFile[]> {
  const root = await lstat(dir).catch((error: unknown) => {
    throw new CliError(
      isNotFound(error) ? `no folder at ${dir}` : `cannot read ${dir}: ${errorMessage(error)}`,
    );
  });
  if (!root.isDirectory()) throw new CliError(`${dir} is not a folder: give the folder of the mini-app`);
  const ignore = readPackageIgnore(dir);
  const files: PackageFile[] = [];
  await collectFiles(dir, '', ignore, files);
  files.sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  if (!files.some((file) => file.path === manifestFileName)) {
    const reason = leftOutBy(ignore, manifestFileName, false);
    throw new CliError(
      reason === undefined
        ? `no ${manifestFileName} in ${dir}: every package needs one at its root`
        : `${manifestFileName} must be packed, but ${reason}`,
    );
  }
  return files;
}

/**
 * Writes `files` of `dir` as a gzip'd ustar archive to a new temp file, hashing it on the way.
 * File contents are streamed, never held whole. Each entry has mode 0644 (0755 when its owner
 * may execute it), uid and gid 0, no user or group name and mtime 0; there are no folder
 * entries (tar makes the folders on extraction). A file that changed size since it was listed
 * fails the packing rather than produce an archive that does not match the listing.
 */
export async function packPackage(dir: string, files: readonly PackageFile[]): Promise<PackedPackage> {
  const tempDir = await mkdtemp(join(tmpdir(), 'svc-package-'));
  const remove = () => rm(tempDir, { recursive: true, force: true });
  const path = join(tempDir, 'package.tar.gz');
  const hash = createHash('sha256');
  let size = 0;
  try {
    const file = await open(path, 'wx', 0o600);
    await pipeline(
      tarEntries(dir, files),
      createGzip(gzipOptions),
      async function* hashAndFixHeader(source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          fixGzipHeader(chunk, size);
          hash.update(chunk);
          size += chunk.length;
          yield chunk;
        }
      },
      file.createWriteStream(),
    );
  } catch (error) {
    await remove();
    throw error;
  }
  return { path, size, sha256: hash.digest('hex'), remove };
}

/** The archive's path fields for `path`, or why it does not fit: ustar splits long paths at a `/`. */
function ustarPathFields(path: string): { name: Buffer; prefix: Buffer } | string {
  if (path.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) {
    return 'it is not a plain relative path inside the package';
  }
  const bytes = Buffer.from(path, 'utf8');
  if (bytes.length <= maxNameBytes) return { name: bytes, prefix: Buffer.alloc(0) };
  if (bytes.length > maxPathBytes) {
    return `its path is ${bytes.length} bytes long, and a package holds paths of at most ${maxPathBytes} bytes`;
  }
  for (let slash = Math.min(maxPrefixBytes, bytes.length - 2); slash > 0; slash--) {
    if (bytes[slash] === 0x2f && bytes.length - slash - 1 <= maxNameBytes) {
      return { name: bytes.subarray(slash + 1), prefix: bytes.subarray(0, slash) };
    }
  }
  return (
    `its path cannot be stored: a package needs a "/" within its first ${maxPrefixBytes} bytes ` +
    `with at most ${maxNameBytes} bytes after it`
  );
}

async function collectFiles(root: string, relDir: string, ignore: PackageIgnore, out: PackageFile[]) {
  // Names come as bytes so that one that is not UTF-8 is refused, not silently mangled.
  const names = await readdir(relDir === '' ? root : join(root, relDir), { encoding: 'buffer' });
  for (const rawName of names) {
    const name = decodeName(rawName);
    if (name === undefined) {
      const shown = `${relDir === '' ? '' : `${relDir}/`}${rawName.toString('utf8')}`;
      throw new CliError(`"${shown}" has a name that is not valid UTF-8: rename it or remove it`);
    }
    const path = relDir === '' ? name : `${relDir}/${name}`;
    if (neverPacked.has(name)) continue;
    const stats = await lstat(join(root, path));
    if (stats.isDirectory()) {
      if (leftOutBy(ignore, path, true) === undefined) await collectFiles(root, path, ignore, out);
      continue;
    }
    if (leftOutBy(ignore, path, false) !== undefined) continue;
    if (stats.isSymbolicLink()) {
      throw new CliError(
        `${path} is a symbolic link, and a package holds regular files only: ` +
          `replace it by a copy of what it points to, or list it in ${ignoreFileName}`,
      );
    }
    if (!stats.isFile()) {
      throw new CliError(
        `${path} is not a regular file (it is a ${specialKind(stats)}): ` +
          `remove it or list it in ${ignoreFileName}`,
      );
    }
    const fields = ustarPathFields(path);
    if (typeof fields === 'string') throw new CliError(`${path} cannot be packed: ${fields}`);
    if (stats.size > maxFileSize) {
      throw new CliError(`${path} is ${stats.size} bytes, and a package holds files of at most 8 GiB`);
    }
    out.push({ path, size: stats.size });
  }
}

async function* tarEntries(dir: string, files: readonly PackageFile[]): AsyncGenerator<Buffer> {
  for (const file of files) {
    // O_NOFOLLOW: a file swapped for a symbolic link after listing must not be followed.
    const handle = await open(
      join(dir, file.path),
      fsConstants.O_RDONLY | (fsConstants.O_NOFOLLOW ?? 0),
    ).catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException | undefined)?.code;
      throw code === 'ENOENT' || code === 'ELOOP' ? changedWhilePacking(file) : error;
    });
    try {
      const stats = await handle.stat();
      if (!stats.isFile() || stats.size !== file.size) throw changedWhilePacking(file);
      yield ustarHeader(file.path, stats.size, (stats.mode & 0o100) !== 0);
      let read = 0;
      if (stats.size > 0) {
        const content = handle.createReadStream({ start: 0, end: stats.size - 1, autoClose: false });
        for await (const chunk of content as AsyncIterable<Buffer>) {
          read += chunk.length;
          yield chunk;
        }
      }
      if (read !== stats.size) throw changedWhilePacking(file);
      const padding = (blockSize - (stats.size % blockSize)) % blockSize;
      if (padding > 0) yield Buffer.alloc(padding);
    } finally {
      await handle.close();
    }
  }
  // The end of a tar archive: two zero blocks.
  yield Buffer.alloc(2 * blockSize);
}

function ustarHeader(path: string, size: number, executable: boolean): Buffer {
  const fields = ustarPathFields(path);
  if (typeof fields === 'string') throw new CliError(`${path} cannot be packed: ${fields}`);
  const header = Buffer.alloc(blockSize);
  fields.name.copy(header, 0);
  writeOctal(header, 100, 8, executable ? 0o755 : 0o644);
  writeOctal(header, 108, 8, 0); // uid
  writeOctal(header, 116, 8, 0); // gid
  writeOctal(header, 124, 12, size);
  writeOctal(header, 136, 12, 0); // mtime
  header.write('        ', 148, 'latin1'); // the checksum counts its own field as spaces
  header.write('0', 156, 'latin1'); // a regular file
  header.write('ustar\x0000', 257, 'latin1');
  writeOctal(header, 329, 8, 0); // devmajor
  writeOctal(header, 337, 8, 0); // devminor
  fields.prefix.copy(header, 345);
  let checksum = 0;
  for (const byte of header) checksum += byte;
  header.write(`${checksum.toString(8).padStart(6, '0')}\x00 `, 148, 'latin1');
  return header;
}

/** An octal number filling `length - 1` digits and a NUL, as ustar readers expect. */
function writeOctal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(`${value.toString(8).padStart(length - 1, '0')}\x00`, offset, 'latin1');
}

/** Zeroes the gzip header's mtime (bytes 4 to 7) and sets its OS byte (9), whichever chunk holds them. */
function fixGzipHeader(chunk: Buffer, chunkOffset: number): void {
  for (let at = Math.max(4, chunkOffset); at <= 9 && at < chunkOffset + chunk.length; at++) {
    if (at <= 7) chunk[at - chunkOffset] = 0;
    else if (at === 9) chunk[at - chunkOffset] = gzipOsByte;
  }
}

function parseIgnoreLine(raw: string, line: number): IgnoreRule | undefined {
  let text = raw.replace(/(?<!\\)[ \t]+$/, '');
  if (text === '' || text.startsWith('#')) return undefined;
  const source = text;
  const negated = text.startsWith('!');
  if (negated) text = text.slice(1);
  const directoryOnly = text.endsWith('/') && !text.endsWith('\\/');
  if (directoryOnly) text = text.replace(/\/+$/, '');
  if (text === '') return undefined;
  // A `/` at the start or in the middle ties the pattern to the package root.
  const anchored = text.includes('/');
  if (text.startsWith('/')) text = text.slice(1);
  const body = globToRegex(text);
  const regex = new RegExp(anchored ? `^${body}$` : `^(?:.*/)?${body}$`, 'su');
  return { source, line, negated, directoryOnly, regex };
}

function globToRegex(glob: string): string {
  let out = '';
  let at = 0;
  while (at < glob.length) {
    const char = glob[at] ?? '';
    if (char === '*' && glob[at + 1] === '*') {
      const startsSegment = at === 0 || glob[at - 1] === '/';
      const afterStars = glob[at + 2];
      if (startsSegment && afterStars === '/') {
        out += '(?:.*/)?';
        at += 3;
        continue;
      }
      if (startsSegment && afterStars === undefined) {
        out += '.*';
        at += 2;
        continue;
      }
      // `**` inside a name is just `*`.
      out += '[^/]*';
      at += 2;
      continue;
    }
    if (char === '*') {
      out += '[^/]*';
    } else if (char === '?') {
      out += '[^/]';
    } else if (char === '[') {
      const set = bracketSet(glob, at);
      if (set) {
        out += set.regex;
        at = set.end;
        continue;
      }
      out += '\\[';
    } else if (char === '\\' && at + 1 < glob.length) {
      at++;
      out += escapeRegex(glob[at] ?? '');
    } else {
      out += escapeRegex(char);
    }
    at++;
  }
  return out;
}

/** `[abc]`, `[a-z]`, `[!a-z]` or `[^a-z]` starting at `start`, or undefined when it is not closed. */
function bracketSet(glob: string, start: number): { regex: string; end: number } | undefined {
  let at = start + 1;
  let negated = false;
  if (glob[at] === '!' || glob[at] === '^') {
    negated = true;
    at++;
  }
  let members = '';
  let first = true;
  while (at < glob.length) {
    const char = glob[at] ?? '';
    if (char === ']' && !first) {
      return { regex: negated ? `(?![/])[^${members}]` : `(?![/])[${members}]`, end: at + 1 };
    }
    if (char === '\\' && at + 1 < glob.length) {
      at++;
      members += escapeSetMember(glob[at] ?? '');
    } else if (char === '-' && !first && glob[at + 1] !== ']') {
      members += '-';
    } else {
      members += escapeSetMember(char);
    }
    first = false;
    at++;
  }
  return undefined;
}

function escapeRegex(char: string): string {
  return /[\\^$.*+?()[\]{}|/]/.test(char) ? `\\${char}` : char;
}

function escapeSetMember(char: string): string {
  return /[\\\]^[-]/.test(char) ? `\\${char}` : char;
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
