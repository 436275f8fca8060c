/** `manifest.json` of a mini-app folder: checked against the contract's Manifest schema and the folder, field by field. */
import { lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  checkManifestSchema,
  describeManifestErrors,
  type Manifest,
  manifestFileName,
  manifestProblemAt,
  sayManifestProblem,
  showValue as show,
} from '@svc/manifest';
import { describeUnstorableText, findUnstorableText } from '@svc/sdk';
import { type ParseError, parse as parseJsonc, printParseErrorCode } from 'jsonc-parser';
import { CliError } from '../errors.ts';
import { type PackageFolder, walkPackageFolder } from './pack.ts';

export type { Manifest };

/**
 * One thing wrong with the manifest; `field` is unset when the file as a whole is wrong. Its
 * words are `@svc/manifest`'s, the service's too.
 */
export interface ManifestProblem {
  /** As written in messages: `id`, `network[1]`, `brands[0]`. */
  field?: string;
  message: string;
}

/** The manifest when it has no problems, else every problem found. */
export type ManifestCheck =
  | { manifest: Manifest; problems: readonly [] }
  | { manifest: undefined; problems: readonly ManifestProblem[] };

/** A manifest with problems; the message lists each, one per line. */
export class ManifestError extends CliError {
  readonly problems: readonly ManifestProblem[];

  constructor(dir: string, problems: readonly ManifestProblem[]) {
    const count = problems.length === 1 ? 'a problem' : `${problems.length} problems`;
    super(
      `${join(dir, manifestFileName)} has ${count}:\n${problems.map((p) => `  ${formatManifestProblem(p)}`).join('\n')}`,
    );
    this.problems = problems;
  }
}

/** Far beyond what the schema's limits allow, and small enough to read at once. */
const maxManifestBytes = 1024 * 1024;

/**
 * Reads and checks `manifest.json` in `dir`: the contract's Manifest schema, then what the schema
 * cannot say (each `network` origin is exactly `https://host[:port]` as a browser writes it, with
 * no duplicates; `entry` is a packed file inside the folder). Problems come in field order.
 * `folder` is the walk of `dir` the packing goes by; without one, `dir` is walked when `entry`
 * needs looking up.
 */
export function checkManifest(dir: string, folder?: PackageFolder): ManifestCheck {
  const read = readManifestJson(dir);
  if ('problem' in read) return { manifest: undefined, problems: [read.problem] };
  const value = read.value;
  const unstorable = findUnstorableText(value);
  if (unstorable) {
    // The service refuses such a manifest whatever the field; say so before any other check.
    return {
      manifest: undefined,
      problems: [manifestProblemAt(unstorable.pointer, describeUnstorableText(unstorable))],
    };
  }
  const problems = describeManifestErrors(checkManifestSchema(value).errors, value, (entry) =>
    checkEntry(folder ?? walkPackageFolder(dir), entry),
  );
  if (problems.length === 0) return { manifest: value as Manifest, problems: [] };
  return { manifest: undefined, problems };
}

/** The manifest of `dir`, or a ManifestError listing every problem. */
export function readManifest(dir: string, folder?: PackageFolder): Manifest {
  const check = checkManifest(dir, folder);
  if (check.manifest === undefined) throw new ManifestError(dir, check.problems);
  return check.manifest;
}

/** `manifest.json: network[1]: "http://api.example.com" must be an https:// origin …` */
export function formatManifestProblem(problem: ManifestProblem): string {
  return `${manifestFileName}: ${sayManifestProblem(problem)}`;
}

function readManifestJson(dir: string): { value: unknown } | { problem: ManifestProblem } {
  const path = join(dir, manifestFileName);
  let bytes: Buffer;
  try {
    const stats = lstatSync(path);
    if (stats.isSymbolicLink()) {
      return fileProblem('is a symbolic link: the manifest must be a regular file');
    }
    if (!stats.isFile()) return fileProblem(`in ${dir} is not a regular file`);
    if (stats.size > maxManifestBytes) {
      return fileProblem(`is ${stats.size} bytes: a manifest is at most ${maxManifestBytes} bytes`);
    }
    bytes = readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      return fileProblem(`not found in ${dir}: every package needs a ${manifestFileName} at its root`);
    }
    if (code === 'ENOTDIR') return fileProblem(`${dir} is not a folder`);
    return fileProblem(`cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    return fileProblem('starts with a byte order mark: save it as UTF-8 without one');
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return fileProblem('is not UTF-8 text: save it as UTF-8');
  }
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    // Node 20 does not always say where the JSON goes wrong; jsonc-parser does.
    const found = findJsonSyntaxError(text);
    if (found === undefined) return fileProblem(`is not valid JSON: ${(error as Error).message}`);
    const { line, column } = lineAndColumn(text, found.offset);
    return fileProblem(`is not valid JSON: at line ${line}, column ${column}: ${found.reason}`);
  }
}

function fileProblem(message: string): { problem: ManifestProblem } {
  return { problem: { message } };
}

/**
 * Why `entry` does not name a packed file of the walked folder, or undefined. Its case must match
 * the folder's: the host looks it up in the package, where names are case-sensitive.
 */
function checkEntry(folder: PackageFolder, entry: string): string | undefined {
  const shown = show(entry);
  const { dir, entries } = folder;
  const segments = entry.split('/');
  for (const [index, segment] of segments.entries()) {
    const isLast = index === segments.length - 1;
    const parent = segments.slice(0, index).join('/');
    const soFar = segments.slice(0, index + 1).join('/');
    const found = entries.get(soFar);
    if (found === undefined) {
      const otherCase = namesIn(entries, parent).find((name) => name.toLowerCase() === segment.toLowerCase());
      if (otherCase !== undefined) {
        return `${shown} is not a file in ${dir}: the folder has "${otherCase}", and names in a package are case-sensitive`;
      }
      return `${shown} is not a file in ${dir}`;
    }
    if (found.kind === 'symbolic link') {
      return `${shown} goes through the symbolic link "${soFar}", which a package cannot hold`;
    }
    if (found.leftOut !== undefined) return `${shown} is left out of the package: ${found.leftOut}`;
    if (isLast && found.kind === 'folder') {
      return `${shown} is a folder: name the file in it the host opens first`;
    }
    if (isLast && found.kind !== 'file') return `${shown} is not a regular file`;
    if (!isLast && found.kind !== 'folder') {
      return `${shown} is not a file in ${dir}: "${soFar}" is not a folder`;
    }
  }
  return undefined;
}

/** The names the walk saw in the folder `parent` ('' for the package root). */
function namesIn(entries: PackageFolder['entries'], parent: string): string[] {
  const prefix = parent === '' ? '' : `${parent}/`;
  return [...entries.keys()]
    .filter((path) => path.startsWith(prefix) && !path.slice(prefix.length).includes('/'))
    .map((path) => path.slice(prefix.length));
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  // jsonc-parser counts UTF-16 units; an editor's column counts characters (an emoji is one).
  const column = [...before.slice(before.lastIndexOf('\n') + 1)].length + 1;
  return { line, column };
}

/**
 * Where and why `text` is not JSON (RFC 8259), as jsonc-parser finds it with JSON's own rules (no
 * comments, no trailing commas); undefined when it finds nothing (then JSON.parse's own message is
 * all there is).
 */
function findJsonSyntaxError(text: string): { offset: number; reason: string } | undefined {
  const errors: ParseError[] = [];
  parseJsonc(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const [first] = errors;
  if (first === undefined) return undefined;
  return { offset: first.offset, reason: syntaxErrorReason(text, first) };
}

function syntaxErrorReason(text: string, { error, offset }: ParseError): string {
  const char = text[offset];
  const found = char === undefined ? 'the file ends too early' : `unexpected ${JSON.stringify(char)}`;
  const afterComma = /,\s*$/.test(text.slice(0, offset));
  if (char === "'") return 'unexpected "\'": JSON strings take double quotes';
  switch (printParseErrorCode(error)) {
    case 'InvalidCommentToken':
    case 'UnexpectedEndOfComment':
      return 'a comment: JSON allows none';
    case 'UnexpectedEndOfString':
      return 'a string that is not closed before the end of its line';
    case 'InvalidEscapeCharacter':
    case 'InvalidUnicode':
      return 'invalid escape in a string';
    case 'InvalidCharacter':
      return 'a control character (such as a tab) inside a string';
    case 'InvalidNumberFormat':
    case 'UnexpectedEndOfNumber':
      return `${found}: not a JSON number`;
    case 'PropertyNameExpected':
      if (char === '}' && afterComma) return 'unexpected "}": JSON allows no comma before it';
      return `${found}: expected a property name in double quotes`;
    case 'ValueExpected':
      if (char === ']' && afterComma) return 'unexpected "]": JSON allows no comma before it';
      return `${found}: expected a value`;
    case 'ColonExpected':
      return `${found}: expected ":" after the property name`;
    case 'CommaExpected':
      return `${found}: expected ","`;
    case 'CloseBraceExpected':
      return `${found}: expected "," or "}"`;
    case 'CloseBracketExpected':
      return `${found}: expected "," or "]"`;
    case 'EndOfFileExpected':
      return `${found} after the end of the JSON value`;
    default:
      return found;
  }
}
