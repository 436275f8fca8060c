/**
 * A manifest's problems in words, said once for svc, the dev-server and the service: each names
 * the field as svc prints it (`network[1]`) and as the service's problem+json points at it
 * (`/manifest/network/1`), and says what to do about it.
 */
import type { ErrorObject } from 'ajv';
import { entryPathFault } from './entry-path.ts';
import { closestManifestField, manifestFields } from './field-names.ts';
import { checkNetwork } from './origins.ts';
import { showValue as show } from './show-value.ts';

/** One thing wrong with a manifest. */
export interface ManifestProblem {
  /** As svc writes it: `id`, `network[1]`, `brands[0]`; unset for the manifest as a whole. */
  field?: string;
  /** The JSON pointer the service's problem lists it under: `/manifest/network/1`, `/manifest`. */
  pointer: string;
  message: string;
}

const whatIsMissing: Record<string, string> = {
  id: 'the app id in reverse-DNS form, such as "com.example.hello-car"',
  name: 'the name people see, such as "Hello Car"',
  version: 'the semantic version of this package, such as "1.0.0"',
  entry: 'the path in the package of the file the host opens first, such as "index.html"',
  network: 'the list of https:// origins the app may call with fetch(), or [] when it calls none',
};

/**
 * Every problem of the parsed `manifest.json` `value`, given `errors`, what `checkManifestSchema`
 * said of it: the schema's errors in words, then what the schema cannot say (each `network`
 * origin exactly as a browser writes it, each once; `entry` a plain path in the package), in
 * field order, each once. Empty when `value` is a Manifest both ways. `findEntry` is the caller's
 * own look-up of a well-formed `entry` (svc looks in the folder; the service looks in the
 * archive later, under a problem of its own), so that its problem takes its place in the order.
 */
export function describeManifestErrors(
  errors: readonly ErrorObject[],
  value: unknown,
  findEntry?: (entry: string) => string | undefined,
): ManifestProblem[] {
  const problems: ManifestProblem[] = [];
  const flaggedOrigins = new Set<number>();
  for (const error of errors) {
    const path = pointerSegments(error.instancePath);
    // Origins get a diagnosis of their own below, which says more than the pattern can.
    if (path[0] === 'network' && path.length === 2 && error.keyword === 'pattern') {
      flaggedOrigins.add(Number(path[1]));
      continue;
    }
    if (path[0] === 'network' && path.length === 1 && error.keyword === 'uniqueItems') continue;
    problems.push(describeSchemaError(error, path));
  }
  if (isObject(value)) {
    if (Array.isArray(value.network)) {
      for (const { index, message } of checkNetwork(value.network, flaggedOrigins)) {
        problems.push(problemAt(['network', String(index)], message));
      }
    }
    const entryHasErrors = errors.some((error) => pointerSegments(error.instancePath)[0] === 'entry');
    if (typeof value.entry === 'string' && !entryHasErrors) {
      const fault = entryPathFault(value.entry) ?? findEntry?.(value.entry);
      if (fault) problems.push(problemAt(['entry'], fault));
    }
  }
  return inFieldOrder(problems);
}

/** A problem of the value at `pointer` (`/network/1`, relative to the manifest; `''` for all of it). */
export function manifestProblemAt(pointer: string, message: string): ManifestProblem {
  return problemAt(pointerSegments(pointer), message);
}

/** `network[1]: "http://api.example.com" must be an https:// origin …`, as svc and the service say it. */
export function sayManifestProblem(problem: Pick<ManifestProblem, 'field' | 'message'>): string {
  return problem.field === undefined ? problem.message : `${problem.field}: ${problem.message}`;
}

function describeSchemaError(error: ErrorObject, path: readonly string[]): ManifestProblem {
  const params = error.params as Record<string, unknown>;
  const top = path[0];
  const at = (message: string) => problemAt(path, message);
  switch (error.keyword) {
    case 'required': {
      const missing = String(params.missingProperty);
      return problemAt([...path, missing], `is missing: give ${whatIsMissing[missing] ?? 'it'}`);
    }
    case 'additionalProperties': {
      const extra = String(params.additionalProperty);
      const suggestion = closestManifestField(extra);
      return problemAt(
        [...path, extra],
        `is not a manifest field${suggestion ? ` (did you mean "${suggestion}"?)` : ''}: ` +
          `the fields are ${manifestFields.join(', ')}`,
      );
    }
    case 'type':
      if (path.length === 0) return at(`must hold one JSON object, {…}, not ${describeType(error.data)}`);
      return at(`must be ${article(String(params.type))}, not ${describeType(error.data)}`);
    case 'pattern':
      return at(explainPattern(top, String(error.data)));
    case 'enum':
      return at(
        `${show(error.data)} is not a known brand: the brands are ${(params.allowedValues as unknown[]).join(', ')}`,
      );
    case 'minLength':
      return at('must not be empty');
    case 'maxLength':
      return at(
        `is ${[...String(error.data)].length} characters long: at most ${String(params.limit)} are allowed`,
      );
    case 'minItems':
      return at('must list at least one brand, or be left out when the app supports every brand');
    case 'maxItems':
      return at(
        `lists ${(error.data as unknown[]).length} items: at most ${String(params.limit)} are allowed`,
      );
    case 'uniqueItems': {
      const items = error.data as unknown[];
      const later = String(params.i);
      const earlier = String(params.j);
      return problemAt(
        [...path, later],
        `${show(items[Number(later)])} is listed twice (also as ${fieldName([...path, earlier])})`,
      );
    }
    default:
      return at(error.message ?? `fails the schema's ${error.keyword} rule`);
  }
}

function explainPattern(field: string | undefined, value: string): string {
  if (field === 'id') {
    const why = /[A-Z]/.test(value)
      ? ': it has capital letters'
      : value.includes('.')
        ? ''
        : ': it has a single label';
    return (
      `${show(value)} must be a reverse-DNS id such as "com.example.hello-car": two or more labels ` +
      `joined by ".", each of lowercase letters, digits and "-" and starting with a letter${why}`
    );
  }
  if (field === 'version') {
    const [withoutBuild = ''] = value.split('+');
    const why = /^v/i.test(value)
      ? ': leave out the "v"'
      : /(^|[.-])0\d+(?=$|[.+])/.test(withoutBuild)
        ? ': leave out leading zeros'
        : /^\d+(\.\d+)?$/.test(value)
          ? ': it needs all three numbers'
          : '';
    return (
      `${show(value)} must be a semantic version MAJOR.MINOR.PATCH, such as "1.0.0" or ` +
      `"1.2.0-beta.1"${why}`
    );
  }
  if (/\p{Cc}/u.test(value)) {
    return `${show(value)} holds a control character (a tab, line break or invisible code): remove it`;
  }
  return `${show(value)} has the wrong form`;
}

/** In field order, each once: a field that is also a shared schema (`allOf`) can fail a rule twice. */
function inFieldOrder(problems: ManifestProblem[]): ManifestProblem[] {
  const rank = (problem: ManifestProblem): [number, number] => {
    if (problem.field === undefined) return [-1, 0];
    const match = /^([^[]+)(?:\[(\d+)\])?/.exec(problem.field);
    const top = manifestFields.indexOf(match?.[1] ?? '');
    return [top === -1 ? manifestFields.length : top, Number(match?.[2] ?? -1)];
  };
  return problems
    .map((problem, index) => ({ problem, index, rank: rank(problem) }))
    .sort((a, b) => a.rank[0] - b.rank[0] || a.rank[1] - b.rank[1] || a.index - b.index)
    .map(({ problem }) => problem)
    .filter(
      (problem, index, all) =>
        all.findIndex((p) => p.pointer === problem.pointer && p.message === problem.message) === index,
    );
}

function problemAt(path: readonly string[], message: string): ManifestProblem {
  const field = fieldName(path);
  const pointer = ['/manifest', ...path.map(pointerSegment)].join('/');
  return field === undefined ? { pointer, message } : { field, pointer, message };
}

/** `/network/1` as `["network", "1"]`. */
function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function pointerSegment(name: string): string {
  return name.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** `["network", "1"]` as `network[1]`; undefined for the manifest as a whole. */
function fieldName(path: readonly string[]): string | undefined {
  if (path.length === 0) return undefined;
  const [top = '', ...rest] = path;
  const head = /^[A-Za-z_$][\w$-]*$/.test(top) ? top : JSON.stringify(top);
  return head + rest.map((segment) => (/^\d+$/.test(segment) ? `[${segment}]` : `.${segment}`)).join('');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function article(type: string): string {
  if (type === 'array') return 'an array';
  if (type === 'object') return 'an object';
  return `a ${type}`;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') return `the number ${value}`;
  return article(typeof value);
}
