/**
 * What a mini-app package leaves out of its folder: `.git` and `node_modules` always, and what the
 * folder's `.svcignore` lists, read with gitignore's own rules (the `ignore` package): `#` comments,
 * `!` negation, `/` anchoring, `*`, `?`, `[a-z]`, `**`, a trailing `/` for folders only, the last
 * matching line wins, and nothing inside a left-out folder comes back.
 */
import ignore, { type Ignore } from 'ignore';

export const ignoreFileName = '.svcignore';
export const manifestFileName = 'manifest.json';

/** Version control data and installed dependencies are never part of an app. */
const neverPacked: ReadonlySet<string> = new Set(['.git', 'node_modules']);

/** The rules of one `.svcignore`, and its lines, for messages that name the line that decided. */
export interface PackageIgnore {
  readonly rules: Ignore;
  readonly lines: readonly string[];
}

export function parsePackageIgnore(text: string): PackageIgnore {
  const lines = text.split(/\r?\n/);
  const rules = ignore().add(lines.map((pattern, index) => ({ pattern, mark: String(index + 1) })));
  return { rules, lines };
}

export const noPackageIgnore: PackageIgnore = parsePackageIgnore('');

/**
 * Why `path` (POSIX, relative to the package root) is left out of the package, or undefined when
 * it is packed. Only the path itself is judged: the caller asks for each folder on the way down.
 */
export function leftOutBy(ignore: PackageIgnore, path: string, isDirectory: boolean): string | undefined {
  const name = path.slice(path.lastIndexOf('/') + 1);
  if (neverPacked.has(name)) return `"${name}" is never packed`;
  const { ignored, rule } = ignore.rules.test(isDirectory ? `${path}/` : path);
  if (!ignored || rule === undefined) return undefined;
  const line = Number(rule.mark);
  // As written, less the trailing spaces gitignore does not count.
  const source = (ignore.lines[line - 1] ?? rule.pattern).replace(/(?<!\\)[ \t]+$/, '');
  return `${ignoreFileName} line ${line} ("${source}") leaves it out`;
}
