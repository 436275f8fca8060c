/** The server's check of a submitted package (`.tar.gz`), read as a stream before anything unpacks it. */
import { type FileHandle, open } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import {
  checkManifestSchema,
  describeManifestErrors,
  type Manifest,
  type ManifestProblem,
  manifestProblemAt,
  sayManifestProblem,
} from '@svc/manifest';
import { describeUnstorableText, findUnstorableText } from '@svc/sdk';
import { Parser, type ReadEntry } from 'tar';
import contract from '../../../generated/openapi.json' with { type: 'json' };
import type { components } from '../../../generated/openapi.ts';
import { type FieldError, InvalidError } from '../errors.ts';

export type { Manifest };

export interface PackageLimits {
  /** Tar entries (files, folders, and the refused kinds), not counting pax or long-name headers. */
  maxEntries: number;
  /** Sum of the sizes of the files, as unpacking would write them. */
  maxUnpackedBytes: number;
  /** Largest allowed unpacked size as a multiple of the package's size. */
  maxRatio: number;
}

const limitDefaults = contract.components.schemas.PackageLimits.properties;

/** The contract's defaults (PackageLimits), which `svc publish` checks against too. */
export const defaultPackageLimits: Readonly<PackageLimits> = {
  maxEntries: limitDefaults.max_entries.default,
  maxUnpackedBytes: limitDefaults.max_unpacked_bytes.default,
  maxRatio: limitDefaults.max_unpacked_ratio.default,
};

export type ApiPackageLimits = components['schemas']['PackageLimits'];

/** What GET /mini-apps/limits says: the package size is the operator's setting. */
export function toApiPackageLimits(maxPackageBytes: number): ApiPackageLimits {
  return {
    max_package_bytes: maxPackageBytes,
    max_entries: defaultPackageLimits.maxEntries,
    max_unpacked_bytes: defaultPackageLimits.maxUnpackedBytes,
    max_unpacked_ratio: defaultPackageLimits.maxRatio,
  };
}

export interface CheckedPackage {
  manifest: Manifest;
  entries: number;
  unpackedBytes: number;
}

/** Lets a caller (the tests) see how far a check read before it stopped. */
export interface PackageCheckProbe {
  /** Bytes read from the package file, chunk by chunk. */
  onRead?(bytes: number): void;
  /** Bytes of tar stream inflated out of the gzip, chunk by chunk. */
  onInflate?(bytes: number): void;
}

const manifestName = 'manifest.json';
const maxManifestBytes = 64 * 1024;
// Pax records and GNU long names: real ones hold a path of a few KiB at most.
const maxMetaEntryBytes = 64 * 1024;
// Tar data that is not file content (headers, pax records, padding, the end blocks) is allowed on top
// of the content limit, so that a small package of many small files passes the ratio; it is bounded
// too, so that a stream of empty entries or of zeros after the end is no bomb either.
const tarOverheadPerEntry = 2048;
const tarOverheadFixed = 1024 * 1024;
const gzipMagic = [0x1f, 0x8b, 0x08];

/**
 * Checks the package stored at `path` (`packageBytes` long): gzip, then tar, `manifest.json` at the
 * root and valid against the contract, its `entry` present, only plain files and folders at safe
 * paths, and within the limits. Stops reading at the first refusal, which it throws as an
 * `InvalidError`; other errors (an unreadable file) are the server's and pass through as they are.
 */
export async function checkPackage(
  path: string,
  packageBytes: number,
  limits: Partial<PackageLimits> = {},
  probe: PackageCheckProbe = {},
): Promise<CheckedPackage> {
  // One handle for the size, the magic number and the stream, so all three are of the same file.
  const file = await open(path);
  try {
    const { size } = await file.stat();
    if (size !== packageBytes) {
      throw new Error(`The package file holds ${size} bytes, not the ${packageBytes} it was said to.`);
    }
    await requireGzip(file);
    return await readPackage(file, packageBytes, { ...defaultPackageLimits, ...limits }, probe);
  } finally {
    await file.close();
  }
}

/** Streams the package through gunzip and the tar parser, stopping at the first refusal. */
async function readPackage(
  file: FileHandle,
  packageBytes: number,
  limits: PackageLimits,
  probe: PackageCheckProbe,
): Promise<CheckedPackage> {
  const { maxEntries, maxUnpackedBytes, maxRatio } = limits;
  const contents = new PackageContents(limits, packageBytes);
  const inflatedLimit =
    Math.min(maxUnpackedBytes, maxRatio * packageBytes) + maxEntries * tarOverheadPerEntry + tarOverheadFixed;
  let inflated = 0;
  let refusal: Error | undefined;
  let archiveEnded = false;
  let loneZeroBlock = false;
  // The first bytes are held back until they show that no second compression layer starts there,
  // which the tar parser would otherwise inflate on its own, unmetered.
  let head: Buffer | undefined = Buffer.alloc(0);

  // strict turns every tar warning (bad checksum, truncated input, …) into an error; zstd and
  // brotli off, since the package is gzip and nothing else.
  const parser = new Parser({
    strict: true,
    zstd: false,
    brotli: false,
    maxMetaEntrySize: maxMetaEntryBytes,
  });
  const stopped = new Error('package check stopped');
  const refuse = (error: unknown): void => {
    if (refusal) return;
    refusal = error instanceof Error ? error : new Error(String(error));
    // Stops the parser within the chunk it is reading, so no further entry is looked at.
    parser.abort(stopped);
  };
  parser.on('error', (error: Error) => refuse(packageProblem('not_tar', notTarDetail(error.message))));
  parser.on('nullBlock', () => {
    loneZeroBlock = true;
  });
  parser.on('eof', () => {
    archiveEnded = true;
  });
  // Readers differ after a single zero block: some stop, node-tar reads on. Entries that only some
  // readers see are refused rather than checked by one reading.
  const afterZeroBlock = () => {
    if (loneZeroBlock) {
      refuse(
        packageProblem('not_tar', 'The archive has entries after a zero block, where some readers stop.'),
      );
    }
  };
  parser.on('meta', (body: string) => {
    afterZeroBlock();
    try {
      checkMetaBody(body);
    } catch (error) {
      refuse(error);
    }
  });
  parser.on('ignoredEntry', (entry: ReadEntry) => {
    afterZeroBlock();
    refuse(
      entry.meta
        ? packageProblem(
            'unsupported_entry',
            `The package has a pax or long-name header over ${maxMetaEntryBytes} bytes.`,
          )
        : unsupportedEntry(entry.path, entry.type),
    );
  });
  parser.on('entry', (entry: ReadEntry) => {
    afterZeroBlock();
    if (refusal) {
      entry.resume();
      return;
    }
    try {
      const keep = contents.admit(entry);
      if (keep) {
        const chunks: Buffer[] = [];
        entry.on('data', (chunk: Buffer) => chunks.push(chunk));
        entry.on('end', () => keep(Buffer.concat(chunks)));
      } else {
        // Bodies other than the manifest's are read only to reach the next header.
        entry.resume();
      }
    } catch (error) {
      entry.resume();
      refuse(error);
    }
  });

  const tarSink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      try {
        inflated += chunk.length;
        probe.onInflate?.(chunk.length);
        if (inflated > inflatedLimit) {
          refuse(tooLarge(`more than ${formatBytes(inflatedLimit)} of tar data`));
        } else if (!archiveEnded) {
          // Past the end-of-archive blocks, readers stop; the rest is only counted, never buffered.
          feed(chunk);
        }
        done(refusal);
      } catch (error) {
        done(error instanceof Error ? error : new Error(String(error)));
      }
    },
    final(done) {
      if (head) feed(undefined);
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        done(refusal);
      };
      if (refusal) return finish();
      // Ending the input is when the parser finds a truncated last entry or an empty archive; it
      // then either aborts (strict) or ends.
      parser.once('abort', finish);
      parser.once('end', finish);
      parser.end();
    },
  });
  const feed = (chunk: Buffer | undefined) => {
    if (head) {
      head = chunk ? Buffer.concat([head, chunk]) : head;
      if (chunk && head.length < 2) return;
      if (head[0] === 0x1f && head[1] === 0x8b) {
        refuse(packageProblem('not_tar', 'The package is gzip inside gzip: compress the tar archive once.'));
        return;
      }
      chunk = head;
      head = undefined;
    }
    if (chunk && chunk.length > 0) parser.write(chunk);
  };

  const packageStream = file.createReadStream({ start: 0, autoClose: false });
  if (probe.onRead) packageStream.on('data', (chunk) => probe.onRead?.(chunk.length));
  try {
    await pipeline(packageStream, createGunzip(), tarSink);
  } catch (error) {
    if (refusal) throw refusal;
    if (isZlibError(error)) {
      throw packageProblem(
        'corrupt_gzip',
        `The package is a damaged gzip file (${error.message}): pack and upload it again.`,
      );
    }
    throw error;
  }
  if (refusal) throw refusal;
  return contents.conclude();
}

/** What the entries seen so far add up to, and the checks that need all of them. */
class PackageContents {
  readonly #limits: PackageLimits;
  readonly #packageBytes: number;
  #entries = 0;
  #unpackedBytes = 0;
  readonly #files = new Set<string>();
  readonly #folders = new Set<string>();
  // Every folder some entry lies in, so that a file at one of those paths is caught either way round.
  readonly #ancestors = new Set<string>();
  #manifest: Buffer | undefined;
  #nestedManifest: string | undefined;

  constructor(limits: PackageLimits, packageBytes: number) {
    this.#limits = limits;
    this.#packageBytes = packageBytes;
  }

  /**
   * Checks one entry from its header, before its body is read; throws the refusal. Returns the
   * function that takes the body when the body is needed (the manifest's).
   */
  admit(entry: ReadEntry): ((body: Buffer) => void) | undefined {
    this.#entries += 1;
    if (this.#entries > this.#limits.maxEntries) {
      throw packageProblem(
        'too_many_entries',
        `The package has more than ${this.#limits.maxEntries} entries.`,
      );
    }
    checkEntryNames(entry);
    const path = packagePath(entry.path);
    const type = entry.type;
    if (type === 'SymbolicLink' || type === 'Link') {
      // Every link is refused, even one that stays inside: what it reaches depends on the
      // extraction order and the unpacking host, and a mini-app has no need of one.
      const kind = type === 'Link' ? 'a hard link' : 'a symbolic link';
      throw packageProblem(
        'unsafe_link',
        `${shown(entry.path)} is ${kind} (to ${shown(entry.linkpath ?? '')}): packages may hold only files and folders.`,
      );
    }
    const isFile = type === 'File' || type === 'OldFile' || type === 'ContiguousFile';
    if (!isFile && type !== 'Directory') throw unsupportedEntry(entry.path, type);
    if (path === '') {
      if (isFile) throw packageProblem('unsafe_path', 'A file entry names the package root.');
      return undefined;
    }

    if (this.#files.has(path) || this.#folders.has(path)) {
      // Which of the two would end up on disk depends on the extraction order.
      throw packageProblem('unsafe_path', `${shown(path)} appears twice in the package.`);
    }
    const segments = path.split('/');
    for (let depth = 1; depth < segments.length; depth += 1) {
      const ancestor = segments.slice(0, depth).join('/');
      if (this.#files.has(ancestor)) {
        throw packageProblem('unsafe_path', `${shown(path)} is inside ${shown(ancestor)}, which is a file.`);
      }
      this.#ancestors.add(ancestor);
    }
    if (!isFile) {
      this.#folders.add(path);
      if (path === manifestName) {
        throw packageProblem('manifest_invalid', `${manifestName} is a folder, not a file.`);
      }
      return undefined;
    }
    if (this.#ancestors.has(path)) {
      throw packageProblem('unsafe_path', `${shown(path)} is a file, but other entries lie inside it.`);
    }
    this.#files.add(path);

    const isManifest = path === manifestName;
    if (isManifest && entry.size > maxManifestBytes) {
      throw packageProblem(
        'manifest_invalid',
        `${manifestName} is larger than ${formatBytes(maxManifestBytes)}.`,
      );
    }
    // A folder's manifest one level down is what packing the folder instead of its contents gives.
    if (segments.length === 2 && segments[1] === manifestName) this.#nestedManifest ??= path;

    this.#unpackedBytes += entry.size;
    if (this.#unpackedBytes > this.#limits.maxUnpackedBytes) {
      throw tooLarge(`more than ${formatBytes(this.#limits.maxUnpackedBytes)}`);
    }
    if (this.#unpackedBytes > this.#limits.maxRatio * this.#packageBytes) {
      throw tooLarge(
        `more than ${this.#limits.maxRatio} times its own size (${formatBytes(this.#packageBytes)})`,
      );
    }
    if (!isManifest) return undefined;
    return (body) => {
      this.#manifest = body;
    };
  }

  conclude(): CheckedPackage {
    if (!this.#manifest) {
      const hint = this.#nestedManifest
        ? ` There is one at ${shown(this.#nestedManifest)}: pack the contents of the app folder, not the folder.`
        : '';
      throw packageProblem('manifest_missing', `The package has no ${manifestName} at its root.${hint}`);
    }
    const manifest = parseManifest(this.#manifest);
    const entryPath = manifest.entry;
    if (!this.#files.has(entryPath)) {
      const what = this.#folders.has(entryPath) ? 'is a folder, not a file' : 'is not in the package';
      throw packageProblem('entry_missing', `The manifest's entry ${shown(manifest.entry)} ${what}.`);
    }
    return { manifest, entries: this.#entries, unpackedBytes: this.#unpackedBytes };
  }
}

/**
 * Tar readers disagree on the headers that rename an entry: node-tar ignores a global pax `path`
 * that GNU tar and Python's tarfile apply to every entry after it, skips a pax record with a line
 * break in its value that others keep, and cuts a name at a NUL that others may not. So every name
 * any reader could use is checked, and headers whose reading differs are refused.
 */
function checkEntryNames(entry: ReadEntry): void {
  if (entry.linkpath !== undefined && entry.type !== 'SymbolicLink' && entry.type !== 'Link') {
    throw packageProblem('unsafe_path', `${shown(entry.path)} carries a link target, but is not a link.`);
  }
  const global = entry.globalExtended;
  if (global) {
    // `git archive` writes one holding only `comment` (the commit id), which names nothing.
    const settings = globalPaxSettings.filter((key) => global[key] !== undefined);
    if (settings.length > 0) {
      throw packageProblem(
        'unsafe_entry',
        `The package has a global pax header setting ${settings.join(', ')} for every entry after it, ` +
          'which tar readers apply differently: pack the app with `svc publish` or plain `tar`.',
      );
    }
  }
}

// What a global pax header may set besides `comment`, each refused.
const globalPaxSettings = [
  'path',
  'linkpath',
  'size',
  'mtime',
  'atime',
  'ctime',
  'uid',
  'gid',
  'uname',
  'gname',
  'charset',
  'dev',
  'ino',
  'nlink',
  'mode',
] as const;

/**
 * The body of a pax header (`<length> <key>=<value>\n` records) or of a GNU long name or link
 * name, before the entry it applies to. Unknown pax keys that can rename or reshape an entry
 * (`GNU.sparse.*`, `hdrcharset`, …) are refused; only the keys below pass.
 */
function checkMetaBody(body: string): void {
  const text = body.replace(/\0+$/, '');
  if (text.includes('\0')) {
    throw packageProblem(
      'unsafe_path',
      'A pax or long-name header holds a NUL, where tar readers cut names differently.',
    );
  }
  // A long name has no line break (it would be refused as a name); every pax record ends with one.
  if (!text.includes('\n')) {
    packagePath(text);
    return;
  }
  for (const [key, value] of paxRecordsOf(text)) {
    if (key === 'path') packagePath(value);
    else if (key === 'linkpath') {
      throw packageProblem(
        'unsafe_link',
        `A pax header names a link target (${shown(value)}): packages may hold only files and folders.`,
      );
    } else if (!allowedPaxKey(key)) {
      throw packageProblem(
        'unsafe_entry',
        `A pax header holds the record ${shown(key)}, which packages may not use.`,
      );
    }
  }
}

function allowedPaxKey(key: string): boolean {
  return (
    ['size', 'mtime', 'atime', 'ctime', 'uid', 'gid', 'uname', 'gname', 'comment', 'charset'].includes(key) ||
    /^(SCHILY|LIBARCHIVE)\.xattr\./.test(key) ||
    /^SCHILY\.(dev|ino|nlink|fflags)$/.test(key) ||
    key === 'LIBARCHIVE.creationtime'
  );
}

/** The records of a pax header, read as POSIX writes them: any other shape is refused. */
function paxRecordsOf(text: string): [string, string][] {
  const bytes = Buffer.from(text);
  const records: [string, string][] = [];
  const malformed = () =>
    packageProblem('unsafe_entry', 'A pax header is malformed, and tar readers read it differently.');
  let at = 0;
  while (at < bytes.length) {
    const space = bytes.indexOf(0x20, at);
    const digits = space < 0 ? '' : bytes.subarray(at, space).toString('latin1');
    if (!/^[1-9]\d{0,7}$/.test(digits)) throw malformed();
    const end = at + Number(digits);
    if (end > bytes.length || bytes[end - 1] !== 0x0a) throw malformed();
    const record = bytes.subarray(space + 1, end - 1).toString('utf8');
    const equals = record.indexOf('=');
    if (equals <= 0) throw malformed();
    records.push([record.slice(0, equals), record.slice(equals + 1)]);
    at = end;
  }
  return records;
}

/** The path an entry unpacks to, relative to the package root with `.` and empty segments dropped. */
function packagePath(raw: string): string {
  const unsafe = (why: string) => packageProblem('unsafe_path', `${shown(raw)} ${why}.`);
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) throw unsafe('is an absolute path');
  // A backslash is a folder separator to Windows tools, which would then see other paths.
  if (raw.includes('\\')) throw unsafe('contains a backslash');
  for (const character of raw) {
    const code = character.codePointAt(0) ?? 0;
    if (code < 0x20 || code === 0x7f) throw unsafe('contains a control character');
  }
  // Decoding replaced bytes that are not UTF-8: the name on disk would differ from the one checked.
  if (raw.includes('\uFFFD')) throw unsafe('is not valid UTF-8');
  const segments = raw.split('/').filter((segment) => segment !== '' && segment !== '.');
  if (segments.includes('..')) throw unsafe('leads out of its folder with `..`');
  return segments.join('/');
}

function parseManifest(body: Buffer): Manifest {
  let text: string;
  try {
    // Fatal on bytes that are not UTF-8; a leading byte-order mark is dropped.
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    throw packageProblem('manifest_invalid', `${manifestName} is not UTF-8 text.`, [
      { path: '/manifest', message: 'must be UTF-8 text' },
    ]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw packageProblem('manifest_invalid', `${manifestName} is not valid JSON: ${message}.`, [
      { path: '/manifest', message: `is not valid JSON: ${message}` },
    ]);
  }
  const unstorable = findUnstorableText(value);
  if (unstorable) {
    throw manifestInvalid([manifestProblemAt(unstorable.pointer, describeUnstorableText(unstorable))]);
  }
  const schema = checkManifestSchema(value);
  // Whether `entry` is in the package is looked up in the archive, under `entry_missing`.
  const problems = describeManifestErrors(schema.errors, value);
  if (schema.manifest === undefined || problems.length > 0) throw manifestInvalid(problems);
  return schema.manifest;
}

/** The manifest's problems in svc's words: `errors` by JSON pointer, the detail naming each field. */
function manifestInvalid(problems: readonly ManifestProblem[]): InvalidError {
  const count = problems.length === 1 ? 'a problem' : `${problems.length} problems`;
  return packageProblem(
    'manifest_invalid',
    `${manifestName} has ${count}: ${problems.map(sayManifestProblem).join('; ')}.`,
    problems.map(({ pointer, message }) => ({ path: pointer, message })),
  );
}

async function requireGzip(file: FileHandle): Promise<void> {
  const start = Buffer.alloc(262);
  const { bytesRead: length } = await file.read(start, 0, start.length, 0);
  if (length >= gzipMagic.length && gzipMagic.every((byte, index) => start[index] === byte)) return;
  const looksLike =
    start.subarray(0, 4).toString('latin1') === 'PK\x03\x04'
      ? ' (it is a zip archive)'
      : start.subarray(257, 262).toString('latin1') === 'ustar'
        ? ' (it is a tar archive without compression)'
        : '';
  throw packageProblem(
    'not_gzip',
    `The package is not gzip-compressed${looksLike}: upload the app folder as a .tar.gz.`,
  );
}

function packageProblem(code: string, detail: string, errors?: FieldError[]): InvalidError {
  return new InvalidError(code, detail, { title: 'Invalid package', errors });
}

function tooLarge(what: string): InvalidError {
  return packageProblem(
    'too_large_unpacked',
    `The package unpacks to ${what}: leave out what the app does not need.`,
  );
}

function unsupportedEntry(path: string, type: string): InvalidError {
  const kinds: Record<string, string> = {
    CharacterDevice: 'a character device',
    BlockDevice: 'a block device',
    FIFO: 'a named pipe (FIFO)',
  };
  const kind =
    kinds[type] ??
    (type === 'Unsupported' ? 'an entry of an unknown tar type' : `a tar entry of type ${type}`);
  return packageProblem(
    'unsupported_entry',
    `${shown(path)} is ${kind}: packages may hold only files and folders.`,
  );
}

function notTarDetail(message: string): string {
  return `The package is gzip-compressed but not a readable tar archive (${message}).`;
}

function isZlibError(error: unknown): error is Error & { code: string } {
  return (
    error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('Z_')
  );
}

/** A path quoted for a problem's detail, cut short so that a hostile one cannot flood it. */
function shown(path: string): string {
  return JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path);
}

function formatBytes(bytes: number): string {
  const mebibyte = 1024 * 1024;
  if (bytes >= mebibyte && bytes % mebibyte === 0) return `${bytes / mebibyte} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}
