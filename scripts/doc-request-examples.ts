/**
 * The JSON request bodies that README.md and docs/ show, read from the pages themselves so that
 * a test can hold them to the contract (scripts/test/client-types.test.ts): each `curl` with a
 * `-d` body in a shell block, and each inline `` `POST /api/v1/… {…}` ``. Each is matched to the
 * operation of the contract its method and path name. A value the shell fills in (`"$to"`,
 * `"$(cat key.pub)"`) is marked, since the page does not say it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

type Node = Record<string, unknown>;

/** Stands for a value the shell fills in when the command runs. */
export const shellValue = Symbol('shell value');

export interface DocRequestExample {
  /** Where the page shows it: `docs/getting-started.md:211`. */
  source: string;
  method: string;
  /** The contract's path template, e.g. `/api/v1/cars/{device_id}/commands`. */
  path: string;
  operationId: string;
  /** The JSON body, with `shellValue` where the shell fills a value in. */
  body: unknown;
}

/** The pages read: the README and every page under docs/ (the decision records included). */
export function docPages(root: string): string[] {
  const pages = ['README.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) pages.push(path);
    }
  };
  walk('docs');
  return pages.sort();
}

// A private-use character cannot appear in the pages' JSON; it marks where the shell substitutes.
const substituted = '\u{F0000}';

/**
 * The words of a shell command as the shell would pass them to `curl`, from `curl` to the end of
 * the command (a pipe, `;`, `&&`, the `)` closing `$(curl …)`, or a comment). Quotes are removed;
 * every `$VAR`, `${VAR}` and `$(…)` outside single quotes becomes the marker.
 */
function curlWords(command: string): string[] {
  const start = command.search(/(^|[\s(])curl\s/);
  if (start < 0) return [];
  const text = command.slice(command.indexOf('curl', start));
  const words: string[] = [];
  let word: string | undefined;
  let i = 0;
  const substitution = (): void => {
    // At a `$`: skip the variable or the command substitution, leave the marker.
    if (text[i + 1] === '(') {
      let depth = 0;
      for (i += 1; i < text.length; i++) {
        if (text[i] === '(') depth++;
        else if (text[i] === ')' && --depth === 0) break;
      }
      i++;
    } else if (text[i + 1] === '{') {
      const end = text.indexOf('}', i);
      i = end < 0 ? text.length : end + 1;
    } else {
      i++;
      while (i < text.length && /[A-Za-z0-9_]/.test(text[i] as string)) i++;
    }
    word = (word ?? '') + substituted;
  };
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
      i++;
    } else if (c === "'") {
      // An unclosed quote runs to the end, as far as this reading goes (the shell would ask for more).
      const found = text.indexOf("'", i + 1);
      const end = found < 0 ? text.length : found;
      word = (word ?? '') + text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      word ??= '';
      for (i += 1; i < text.length && text[i] !== '"'; ) {
        if (text[i] === '\\' && /["\\$`]/.test(text[i + 1] ?? '')) {
          word += text[i + 1];
          i += 2;
        } else if (text[i] === '$') {
          substitution();
        } else {
          word += text[i];
          i++;
        }
      }
      i++;
    } else if (c === '$') {
      substitution();
    } else if (c === '|' || c === ';' || c === '&' || c === ')' || (c === '#' && word === undefined)) {
      break;
    } else {
      word = (word ?? '') + c;
      i++;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** Method, target and body of one `curl` command; undefined without a JSON body. */
function curlRequest(command: string): { method: string; target: string; body: string } | undefined {
  const words = curlWords(command);
  let method: string | undefined;
  let body: string | undefined;
  let target: string | undefined;
  for (let i = 1; i < words.length; i++) {
    const word = words[i] as string;
    if (word.startsWith('-X')) method = word.length > 2 ? word.slice(2) : words[++i];
    else if (['-d', '--data', '--data-raw', '--json'].includes(word)) body = words[++i];
    else if (['-H', '--header', '-o', '-u', '-w'].includes(word)) i++;
    else if (!word.startsWith('-') && target === undefined) target = word;
  }
  if (body === undefined || target === undefined || body.startsWith('@')) return undefined;
  return { method: (method ?? 'POST').toLowerCase(), target, body };
}

/** Shell commands of a page's shell blocks, with the line each starts on; continued lines joined. */
function shellCommands(text: string): { line: number; command: string }[] {
  const commands: { line: number; command: string }[] = [];
  let inShell = false;
  let fence: string | undefined;
  let pending: { line: number; command: string } | undefined;
  text.split('\n').forEach((raw, index) => {
    const opening = /^\s*(```+)\s*([a-z]*)\s*$/.exec(raw);
    if (fence === undefined && opening) {
      fence = opening[1];
      inShell = ['sh', 'bash', 'shell', 'console', ''].includes(opening[2] ?? '');
      return;
    }
    if (fence !== undefined && raw.trim() === fence) {
      fence = undefined;
      inShell = false;
      pending = undefined;
      return;
    }
    if (!inShell) return;
    const continued = raw.endsWith('\\');
    const part = continued ? raw.slice(0, -1) : raw;
    pending = pending
      ? { line: pending.line, command: `${pending.command} ${part}` }
      : { line: index + 1, command: part };
    if (!continued) {
      commands.push(pending);
      pending = undefined;
    }
  });
  return commands;
}

/** Inline `` `METHOD /path {json}` `` spans outside code blocks, with their line. */
function inlineRequests(text: string): { line: number; method: string; target: string; body: string }[] {
  const found: { line: number; method: string; target: string; body: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((raw, index) => {
    const opening = /^\s*(```+)/.exec(raw);
    if (opening) {
      fence = fence === undefined ? opening[1] : raw.trim() === fence ? undefined : fence;
      return;
    }
    if (fence !== undefined) return;
    for (const match of raw.matchAll(/`(GET|POST|PUT|PATCH|DELETE) (\S+) (\{[^`]*\})`/g)) {
      found.push({
        line: index + 1,
        method: (match[1] as string).toLowerCase(),
        target: match[2] as string,
        body: match[3] as string,
      });
    }
  });
  return found;
}

/**
 * The contract's operation a method and target name: `$SVC_API_URL/api/v1/cars/$CAR/pair`, or
 * `…/transfer` for the one operation whose path ends so. A literal segment must be the path's; a
 * path parameter takes any segment. The most literal match wins; a tie is an error.
 */
function operationOf(
  contract: Node,
  method: string,
  target: string,
  at: string,
): { path: string; operationId: string } {
  const withoutQuery = target.split('?')[0] as string;
  const suffixOnly = withoutQuery.startsWith('…/');
  const apiStart = withoutQuery.indexOf('/api/');
  const wanted = (
    suffixOnly ? withoutQuery.slice(1) : apiStart >= 0 ? withoutQuery.slice(apiStart) : withoutQuery
  )
    .split('/')
    .filter(Boolean);
  const candidates: { path: string; operationId: string; literal: number }[] = [];
  for (const [path, item] of Object.entries(contract.paths as Record<string, Node>)) {
    const operation = item[method] as Node | undefined;
    if (!operation) continue;
    const segments = path.split('/').filter(Boolean);
    const compared = suffixOnly ? segments.slice(-wanted.length) : segments;
    if (compared.length !== wanted.length) continue;
    let literal = 0;
    const fits = compared.every((segment, i) => {
      const doc = wanted[i] as string;
      if (/^\{[^}]+\}$/.test(segment)) return doc.length > 0;
      literal++;
      return segment === doc;
    });
    if (fits) candidates.push({ path, operationId: String(operation.operationId), literal });
  }
  const best = Math.max(...candidates.map((c) => c.literal));
  const winners = candidates.filter((c) => c.literal === best);
  const [winner] = winners;
  if (!winner || winners.length > 1) {
    throw new Error(
      `${at}: ${method.toUpperCase()} ${target} names ${winners.length === 0 ? 'no operation' : `${winners.length} operations`} of the contract`,
    );
  }
  return { path: winner.path, operationId: winner.operationId };
}

/** The body, parsed, with the shell's values marked. */
function parseBody(body: string, at: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (error) {
    throw new Error(`${at}: the request body is not JSON: ${body} (${(error as Error).message})`);
  }
  const mark = (value: unknown): unknown => {
    if (typeof value === 'string') return value.includes(substituted) ? shellValue : value;
    if (Array.isArray(value)) return value.map(mark);
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, mark(member)]));
    }
    return value;
  };
  return mark(parsed);
}

/** Every JSON request body the pages under `root` show, matched to its operation of `contract`. */
export function docRequestExamples(root: string, contract: Node): DocRequestExample[] {
  const examples: DocRequestExample[] = [];
  for (const page of docPages(root)) {
    const text = readFileSync(join(root, page), 'utf8');
    const name = relative(root, join(root, page));
    const requests = [
      ...shellCommands(text).flatMap(({ line, command }) => {
        const request = curlRequest(command);
        return request ? [{ line, ...request }] : [];
      }),
      ...inlineRequests(text),
    ];
    for (const { line, method, target, body } of requests) {
      const at = `${name}:${line}`;
      examples.push({
        source: at,
        method,
        ...operationOf(contract, method, target, at),
        body: parseBody(body, at),
      });
    }
  }
  return examples.sort((a, b) => a.source.localeCompare(b.source, 'en', { numeric: true }));
}
